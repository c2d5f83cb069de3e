"""Every page opened by a deep link (/<page>?run=<id>, a link a colleague pastes) loads with no
browser console error, no failed request and no 4xx/5xx response, at the server root of a server
started by `rundash` itself (the same walk under `--base-path`, offline, is in
test_browser_offline.py). Streamlit's frontend alone probes
/<page>/_stcore/health and /<page>/_stcore/host-config first (two 404s); `app.py` (its ASGI app) tells it where
the server is (`rundash_core.serve.deep_links`)."""
from __future__ import annotations

import shutil
from urllib.parse import quote, urlparse

import pytest
from playwright.sync_api import expect

from rundash_core.serve import deep_links

from helpers import DATA, nav_pages
from helpers.serving import launched_rundash

RUN_ID = "math-python+wiki-search--qwen3-4b--0b45f1ec"
TIMEOUT = 60_000  # ms: two cores shared with whatever else runs




@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    base = tmp_path_factory.mktemp("deeplinks")
    shutil.copytree(DATA / "prime-rl" / RUN_ID, base / "outputs" / RUN_ID, symlinks=True)
    return base


@pytest.fixture(scope="module")
def served(runs_dir):
    """`rundash OUT --port P` (default host: 127.0.0.1); yields the app's URL."""
    with launched_rundash(runs_dir, [str(runs_dir / "outputs")]) as (port, _log):
        yield f"http://127.0.0.1:{port}"


def _open_and_collect(browser, url: str) -> tuple[list[str], str]:
    """Open `url` in a fresh context (no cookies, no session); every console error, page error,
    failed request and 4xx/5xx response until the script has run, and the path it settled on."""
    ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
    page = ctx.new_page()
    problems: list[str] = []
    page.on("console", lambda m: m.type == "error" and problems.append(f"console: {m.text} ({m.location.get('url')})"))
    page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"failed: {r.url} ({r.failure})"))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"{r.status}: {r.url}"))
    try:
        page.goto(url)
        expect(page.get_by_test_id("stSidebar").get_by_text("rundash", exact=True)).to_be_visible(timeout=TIMEOUT)
        page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=TIMEOUT)
        page.wait_for_timeout(500)  # a late error counts too
        return problems, urlparse(page.url).path
    finally:
        ctx.close()


def test_every_page_opened_by_a_deep_link_logs_no_error(served, browser):
    for stem, title, default in nav_pages():
        path = "/" + ("" if default else stem)
        problems, landed = _open_and_collect(browser, f"{served}{path}?run={quote(RUN_ID, safe='')}")
        assert problems == [], (title, problems)
        assert landed == path, (title, landed)  # the page itself, not the main page instead


def test_the_page_html_says_where_the_server_is():
    """What the middleware puts in, and where: a page path only, by its depth under the base."""
    assert deep_links.page_depth("/metrics", "") == 1 and deep_links.page_depth("/rundash/metrics", "rundash") == 1
    for own in ("/", "/rundash", "/rundash/", "/_stcore/health", "/static/js/index.js", "/media/x.png",
                "/rundash/_stcore/stream", "/favicon.png"):
        assert deep_links.page_depth(own, "rundash" if own.startswith("/rundash") else "") == 0, own
    html = b'<!DOCTYPE html><html><head><meta charset="UTF-8" /><script type="module" src="./x.js"></script>'
    out = deep_links.with_base_script(html, 1)
    assert out.index(b"window.__streamlit") < out.index(b'type="module"')  # set before the bundle reads it
    assert deep_links.with_base_script(html, 0) == html and deep_links.with_base_script(b"<p>x</p>", 1) == b"<p>x</p>"
