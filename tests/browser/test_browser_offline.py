"""The launched app in an air-gapped browser, behind a base path: `rundash --base-path /rd` on the
demo, Chromium with every request not to 127.0.0.1 aborted (and recorded). Every page of the
navigation, opened by a deep link (/rd/<page>?run=<id>, in a fresh context: a link a colleague
pastes) renders under /rd/ with no exception, no browser console error, no failed request, no
4xx/5xx response and no outside request (the same walk at the server root is
test_browser_deep_links.py); a bundle uploaded on the Import page becomes a run of the session, a
hostile one is refused."""
from __future__ import annotations

import io
import re
import tarfile
import urllib.request
from urllib.parse import quote, urlparse

import pytest
from playwright.sync_api import expect, sync_playwright

import rundash_core as rd
from rundash_core.demo import ensure_demo

from helpers import OLD_RUN, nav_pages
from helpers.browser import CHROMIUM, CHROMIUM_ARGS
from helpers.serving import launched_rundash

BASE = "/rd"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`rundash --yes --base-path /rd` started from an empty folder: the guided start finds no runs
    and serves the demo."""
    base = tmp_path_factory.mktemp("offline")
    (base / "work").mkdir()
    with launched_rundash(base, ["--yes", "--host", "127.0.0.1", "--base-path", BASE], cwd=base / "work") as (port, log):
        yield {"url": f"http://127.0.0.1:{port}{BASE}/", "port": port, "log": log, "demo": base / "cache" / "demo"}


def _outside_aborted(outside: list[str]):
    """A route handler: requests to 127.0.0.1 go on, every other is aborted and recorded."""
    def route(r):
        if urlparse(r.request.url).hostname == "127.0.0.1":
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()
    return route


@pytest.fixture(scope="module")
def offline_browser():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def offline_page(offline_browser):
    """One context, every outside request aborted and recorded."""
    outside: list[str] = []
    ctx = offline_browser.new_context(viewport={"width": 1600, "height": 1000})
    ctx.route("**/*", _outside_aborted(outside))
    yield ctx.new_page(), outside
    ctx.close()


def _settled(page) -> None:
    """The script run is over: Streamlit's running indicator gone."""
    page.wait_for_timeout(500)
    expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=60000)


def test_the_server_answers_under_the_base_path(server):
    assert urllib.request.urlopen(server["url"] + "_stcore/health", timeout=5).read() == b"ok"
    with pytest.raises(OSError):  # the prefix is the only way in
        urllib.request.urlopen(f"http://127.0.0.1:{server['port']}/_stcore/health", timeout=5)
    assert f"ssh -N -L {server['port']}:127.0.0.1:{server['port']} " in server["log"].read_text()


def _deep_link_problems(browser, url: str) -> tuple[list[str], list[str], str]:
    """Open `url` in a fresh context (no cookies, no session, outside requests aborted): every
    console error, page error, failed request, 4xx/5xx response and Streamlit exception until the
    script has run, the outside requests, and the path it settled on."""
    outside: list[str] = []
    ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
    ctx.route("**/*", _outside_aborted(outside))
    page = ctx.new_page()
    problems: list[str] = []
    page.on("console", lambda m: m.type == "error" and problems.append(f"console: {m.text} ({m.location.get('url')})"))
    page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
    page.on("requestfailed", lambda r: urlparse(r.url).hostname == "127.0.0.1"
            and problems.append(f"failed: {r.url} ({r.failure})"))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"{r.status}: {r.url}"))
    try:
        page.goto(url)
        expect(page.get_by_test_id("stSidebar").get_by_text("rundash", exact=True)).to_be_visible(timeout=60000)
        _settled(page)
        if page.get_by_test_id("stException").count():
            problems.append("a Streamlit exception box")
        if page.get_by_text("could not be shown").count():
            problems.append("a part that could not be shown")
        return problems, outside, urlparse(page.url).path
    finally:
        ctx.close()


def test_every_page_opened_by_a_deep_link_renders_offline_under_the_base_path(server, offline_browser):
    demo = rd.discover([ensure_demo(server["demo"])])  # (what the app writes on its first page: written now)
    run_id = demo[demo["kind"] == "prime-rl"]["run_id"].iloc[0]
    for stem, title, default in nav_pages():
        path = f"{BASE}/" + ("" if default else stem)
        problems, outside, landed = _deep_link_problems(
            offline_browser, f"http://127.0.0.1:{server['port']}{path}?run={quote(run_id, safe='')}")
        assert problems == [], (title, problems)
        assert outside == [], (title, f"requests to outside hosts: {outside}")
        assert landed == path, (title, landed)  # the page itself, not the main page instead


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
