"""The launched app in an air-gapped browser, behind a base path: `rundash --base-path /rd` on the
demo, Chromium with every request not to 127.0.0.1 aborted (and recorded). Every page of the
navigation renders under /rd/ with no exception and no outside request; a bundle uploaded on the
Import page becomes a run of the session, a hostile one is refused."""
from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest
from playwright.sync_api import expect, sync_playwright

from helpers import OLD_RUN, REPO

ROOT = REPO
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
BASE = "/rd"


def nav_pages() -> list[tuple[str, str, bool]]:
    """(url path, title, default) of every page in the navigation list (`pages/_ui.py`), in order."""
    pages = re.findall(r'st\.Page\("pages/(\w+)\.py",\s*title="([^"]+)"([^)]*)\)', (ROOT / "pages" / "_ui.py").read_text())
    assert pages, "no st.Page in pages/_ui.py"
    return [(stem, title, "default=True" in rest) for stem, title, rest in pages]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def launched_rundash(base: Path, args: list[str], *, cwd: Path | None = None):
    """`rundash ARGS` (the launcher, its own process group, caches under `base`) until it says it is
    serving; yields (port, log path); stopped with Ctrl-C on the group (SIGKILL after 20 s)."""
    port = _free_port()
    env = {**os.environ, "RUNDASH_CACHE_DIR": str(base / "cache")}
    for k in ("RUNDASH_DIRS", "RUNDASH_ROOTS"):
        env.pop(k, None)
    log_path = base / f"launcher-{port}.log"
    log = log_path.open("w+")
    proc = subprocess.Popen([sys.executable, "-m", "rundash_core.serve.cli", *args, "--port", str(port)], cwd=cwd, env=env,
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 90
        while "rundash is serving at" not in log_path.read_text():
            assert proc.poll() is None and time.time() < deadline, log_path.read_text()
            time.sleep(0.3)
        yield port, log_path
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`rundash --yes --base-path /rd` started from an empty folder: the guided start finds no runs
    and serves the demo."""
    base = tmp_path_factory.mktemp("offline")
    (base / "work").mkdir()
    with launched_rundash(base, ["--yes", "--host", "127.0.0.1", "--base-path", BASE], cwd=base / "work") as (port, log):
        yield {"url": f"http://127.0.0.1:{port}{BASE}/", "port": port, "log": log}


@pytest.fixture(scope="module")
def offline_page(server):
    """One browser, one context, every outside request aborted and recorded."""
    outside: list[str] = []

    def route(r):
        if urlparse(r.request.url).hostname == "127.0.0.1":
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
        ctx.route("**/*", route)
        page = ctx.new_page()
        yield page, outside
        browser.close()


def _settled(page) -> None:
    """The script run is over: Streamlit's running indicator gone."""
    page.wait_for_timeout(500)
    expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=60000)


def test_the_server_answers_under_the_base_path(server):
    assert urllib.request.urlopen(server["url"] + "_stcore/health", timeout=5).read() == b"ok"
    with pytest.raises(OSError):  # the prefix is the only way in
        urllib.request.urlopen(f"http://127.0.0.1:{server['port']}/_stcore/health", timeout=5)
    assert f"ssh -N -L {server['port']}:127.0.0.1:{server['port']} " in server["log"].read_text()


def test_every_page_renders_offline_under_the_base_path(server, offline_page):
    page, outside = offline_page
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    for stem, title, default in nav_pages():
        page.goto(server["url"] + ("" if default else stem))
        expect(page.get_by_test_id("stSidebar").get_by_text("rundash", exact=True)).to_be_visible(timeout=60000)
        _settled(page)
        assert page.get_by_test_id("stException").count() == 0, title
        assert page.get_by_text("could not be shown").count() == 0, title
        assert urlparse(page.url).path.startswith(BASE + "/"), page.url
        if default:
            expect(page.get_by_text("Runs (", exact=False)).to_be_visible(timeout=30000)
    assert outside == [], f"requests to outside hosts: {outside}"
    assert errors == []


def _bundle(name: str, hostile: bool = False) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        if hostile:
            info = tarfile.TarInfo("../evil")
            info.size = 4
            tar.addfile(info, io.BytesIO(b"boom"))
        else:
            tar.add(OLD_RUN, arcname=name)
    return buf.getvalue()


def test_an_uploaded_bundle_becomes_a_run_of_the_session(server, offline_page):
    page, outside = offline_page
    page.goto(server["url"] + "import_run")
    uploader = page.get_by_test_id("stFileUploaderDropzoneInput")
    uploader.set_input_files({"name": "evil.tar.gz", "mimeType": "application/gzip", "buffer": _bundle("x", True)})
    expect(page.get_by_text("Not imported")).to_be_visible(timeout=30000)
    expect(page.get_by_text("escapes the bundle")).to_be_visible()
    page.goto(server["url"] + "import_run")
    uploader = page.get_by_test_id("stFileUploaderDropzoneInput")
    uploader.set_input_files({"name": "run.tar.gz", "mimeType": "application/gzip",
                              "buffer": _bundle("imported-run--qwen3-0.6b--0000cafe")})
    expect(page.get_by_text("its runs are in the sidebar")).to_be_visible(timeout=30000)
    page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").click()
    expect(page.get_by_role("option", name=re.compile("imported-run--qwen3-0.6b--0000cafe"))).to_be_visible()
    page.get_by_role("option", name=re.compile("imported-run--qwen3-0.6b--0000cafe")).click()
    expect(page.get_by_text("step 3 of 3").first).to_be_visible(timeout=30000)
    assert outside == []
