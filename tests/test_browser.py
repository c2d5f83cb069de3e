"""The whole app in a real browser: `streamlit run app.py -- DIR` driven by Playwright + Chromium."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, quote, urlparse

import pytest
from playwright.sync_api import expect, sync_playwright

import rundash_core as rd

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
XSS_NAME = "<img src=x onerror=alert(1)>--qwen3-0.6b--0badc0de"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A real Streamlit server over a copy of the sample runs (plus one with a hostile name)."""
    base = tmp_path_factory.mktemp("browser")
    out = base / "outputs"
    for sub in ("prime-rl", "prime-rl-old"):
        for run in (DATA / sub).iterdir():
            shutil.copytree(run, out / run.name, symlinks=True)
    shutil.copytree(DATA / "prime-rl-old" / "reverse-text--qwen3-0.6b--a7be3ee1", out / XSS_NAME, symlinks=True)
    other = base / "more"
    shutil.copytree(DATA / "prime-rl-old" / "reverse-text--qwen3-0.6b--a7be3ee1",
                    other / "added-run--qwen3-0.6b--0000beef", symlinks=True)
    port = _free_port()
    env = {**os.environ, "RUNDASH_ROOTS": str(base), "RUNDASH_CACHE_DIR": str(base / "cache")}
    env.pop("RUNDASH_DIRS", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true", "--", str(out)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=1).read() == b"ok":
                break
        except OSError:
            time.sleep(0.3)
    else:
        proc.kill()
        raise RuntimeError("streamlit did not start: " + proc.stdout.read().decode(errors="replace"))
    yield {"url": url, "out": out, "other": other}
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def _page(browser):
    """A fresh browser context: no cookies, no session, like a colleague opening a link."""
    ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
    page = ctx.new_page()
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    return ctx, page, dialogs


def test_run_link_opens_the_same_run_in_a_fresh_browser(served, browser):
    runs = rd.discover([served["out"]]).set_index("run_id")
    for run_id in ["math-python+wiki-search--qwen3-4b--0b45f1ec", "reverse-text--qwen3-0.6b--a7be3ee1"]:
        ov = rd.open_run(runs.loc[run_id, "path"]).overview()
        ctx, page, _ = _page(browser)
        page.goto(f"{served['url']}/?run={quote(run_id)}")
        expect(page.get_by_text(f"step {ov.step} of {ov.max_steps}")).to_be_visible(timeout=30000)
        expect(page.get_by_text(ov.model, exact=True).first).to_be_visible()
        assert parse_qs(urlparse(page.url).query)["run"] == [run_id]
        ctx.close()


def test_selecting_a_run_updates_the_url_and_survives_page_changes(served, browser):
    ctx, page, _ = _page(browser)
    page.goto(served["url"] + "/?run=math-python%2Bwiki-search--qwen3-4b--0b45f1ec")
    expect(page.get_by_text("step 8 of 10")).to_be_visible(timeout=30000)
    page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").click()
    status = rd.discover([served["out"]]).set_index("run_id").loc["reverse-text--qwen3-0.6b--a7be3ee1", "status"]
    page.get_by_role("option", name=f"reverse-text--qwen3-0.6b--a7be3ee1 · {status}").click()
    expect(page.get_by_text("step 2 of 3")).to_be_visible(timeout=30000)
    page.wait_for_url("**run=reverse-text--qwen3-0.6b--a7be3ee1**", timeout=10000)
    page.get_by_test_id("stSidebarNav").get_by_text("Config").click()
    expect(page.get_by_text("orchestrator.json").first).to_be_visible(timeout=30000)
    page.wait_for_url("**/config?run=reverse-text--qwen3-0.6b--a7be3ee1**", timeout=10000)
    ctx.close()


def test_add_directory_checks_roots(served, browser):
    ctx, page, _ = _page(browser)
    page.goto(served["url"])
    expect(page.get_by_text("Runs (3)")).to_be_visible(timeout=30000)
    sidebar = page.get_by_test_id("stSidebar")
    sidebar.get_by_text("Directories").click()
    box = sidebar.get_by_label("Add a directory")
    box.fill("/etc")
    sidebar.get_by_role("button", name="Add").click()
    expect(sidebar.get_by_text("outside the allowed roots")).to_be_visible(timeout=10000)
    box.fill(str(served["other"]))
    sidebar.get_by_role("button", name="Add").click()
    expect(page.get_by_text("Runs (4)")).to_be_visible(timeout=30000)
    ctx.close()


def test_hostile_run_name_is_inert_text(served, browser):
    ctx, page, dialogs = _page(browser)
    page.goto(f"{served['url']}/?run={quote(XSS_NAME, safe='')}")
    expect(page.get_by_text("step 2 of 3")).to_be_visible(timeout=30000)
    expect(page.get_by_text(XSS_NAME + " · prime-rl", exact=False).first).to_be_visible()
    page.wait_for_timeout(1000)
    assert dialogs == []
    assert page.locator("img[src='x']").count() == 0
    ctx.close()
