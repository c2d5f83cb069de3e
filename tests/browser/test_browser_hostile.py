"""The hostile tree of test_hostile.py in a real browser, served by `streamlit run app.py -- ROOT`
(the roots: the start directory): its pages show no secret value, nothing from outside the roots,
no traceback, no Streamlit exception box and no browser console error, and nothing the server sends
over its websocket (what the browser holds, shown or not) carries any of them. Run-provided HTML
(config values, model name, metric names) stays inert text."""
from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import expect

import rundash_core as rd

from helpers import NEW_METRICS, NEW_RUN, copy_run
from helpers.browser import serve_app
from helpers.hostile import hostile_tree

XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=1</script>'
XSS_RUN = "xss-run"
XSS_METRICS = [XSS, 'xss/<img src=x onerror="window.__xss=1">', "xss/<script>window.__xss=1</script>"]
LEAKS = ("SECRET-", "OUTSIDE-CONTENT", "Traceback")
HEADINGS = {"": re.compile(r"^Runs \(\d+\)"), "metrics": re.compile(r"^Metrics · "), "compare": re.compile(r"^Compare$"),
            "config": re.compile(r"^Config · ")}
EVERY_PAGE = {"secrets-and-links", "deep-json"}
TIMEOUT = 60_000  # ms: two cores shared with whatever else runs


def _xss_run(root: Path) -> None:
    """A run whose config value, model name and metric names are HTML that would run script if
    rendered as markup."""
    run = copy_run(NEW_RUN, root, name=XSS_RUN)
    orch = run / "configs" / "attempt_2" / "resolved" / "orchestrator.json"
    cfg = json.loads(orch.read_text())
    cfg["note"] = XSS
    cfg.setdefault("model", {})["name"] = XSS
    orch.write_text(json.dumps(cfg))
    with open(run / NEW_METRICS, "a") as fh:
        fh.write(json.dumps({"step": 8, "producer": "trainer", **{k: 1.0 + i for i, k in enumerate(XSS_METRICS)}}) + "\n")


@pytest.fixture(scope="module")
def hostile_served(tmp_path_factory):
    base = tmp_path_factory.mktemp("browser-hostile")
    root, outside = base / "root", base / "outside"
    root.mkdir()
    outside.mkdir()
    hostile_tree(root, outside)
    _xss_run(root)
    # RUNDASH_ROOTS empty: the allowed roots are the start directory
    proc, url = serve_app(root, {"RUNDASH_ROOTS": "", "RUNDASH_CACHE_DIR": str(base / "cache")})
    yield {"url": url, "root": root, "outside": outside}
    proc.terminate()
    proc.wait(10)


class Watched:
    """A fresh browser context whose console errors, page errors, dialogs and received websocket
    frames are recorded."""

    def __init__(self, browser):
        self.ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
        self.page = self.ctx.new_page()
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.frames: list[bytes] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("websocket", lambda ws: ws.on(
            "framereceived", lambda data: self.frames.append(data if isinstance(data, bytes) else data.encode())))

    def _console(self, msg) -> None:
        if msg.type == "error":  # none tolerated: a page opened at /<page> finds its server first (app.py's ASGI app)
            self.errors.append(f"console: {msg.text} ({msg.location.get('url')})")

    def open(self, url: str, heading: re.Pattern) -> None:
        """Open `url` and wait until its heading shows and the script has finished."""
        self.frames.clear()
        self.page.goto(url)
        expect(self.page.get_by_role("heading", name=heading).first).to_be_visible(timeout=TIMEOUT)
        self.page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=TIMEOUT)

    def assert_clean(self, where) -> None:
        html, text = self.page.content(), self.page.inner_text("body")
        sent = b"".join(self.frames)
        assert sent, (where, "no websocket frame recorded")
        for leak in LEAKS:
            assert leak not in html and leak not in text, (where, leak)
            assert leak.encode() not in sent, (where, leak, "sent over the websocket")
        assert self.page.locator('[data-testid="stException"]').count() == 0, where
        assert self.errors == [], (where, self.errors)
        assert self.dialogs == [], (where, self.dialogs)

    def settle(self, where) -> None:
        """No console error arrived late either."""
        self.page.wait_for_timeout(500)
        assert self.errors == [], (where, self.errors)

    def close(self) -> None:
        self.ctx.close()


def _runs(root: Path):
    from rundash_core.io import files

    files.set_roots([root])  # as the app does for its start directory
    return rd.discover([root])


def test_every_page_over_the_hostile_tree_in_a_browser(hostile_served, browser):
    """Every page of the runs that hold secrets, links out and a too-deep config (their Compare
    page's config diff also holds the other runs' configs); the run card, the runs list and the
    metrics of the others (their config is the sample run's; the AppTest proof covers each page of
    each run)."""
    runs = _runs(hostile_served["root"])
    assert "linked-run" not in set(runs["run_id"]) and len(runs) == 6
    for run_id in runs["run_id"]:
        if run_id == XSS_RUN:
            continue  # the next test opens its pages
        w = Watched(browser)
        try:
            for page in HEADINGS if run_id in EVERY_PAGE else ("", "metrics"):
                w.open(f"{hostile_served['url']}/{page}?run={quote(run_id, safe='')}", HEADINGS[page])
                w.assert_clean((run_id, page or "overview"))
                if (run_id, page) == ("secrets-and-links", "config"):  # the secrets' names (not values) show
                    expect(w.page.get_by_text("max_tokens").first).to_be_visible(timeout=TIMEOUT)
                    expect(w.page.get_by_text("wandbApiKey").first).to_be_visible(timeout=TIMEOUT)
                    assert b"wandbApiKey" in b"".join(w.frames)  # the websocket check reads what was sent
            w.settle(run_id)
        finally:
            w.close()


def test_html_in_config_values_and_metric_names_stays_inert(hostile_served, browser):
    base = hostile_served["url"]
    w = Watched(browser)
    try:
        w.open(f"{base}/config?run={XSS_RUN}", HEADINGS["config"])
        expect(w.page.get_by_text("window.__xss=1").first).to_be_visible(timeout=TIMEOUT)  # shown, as text
        assert w.page.evaluate("window.__xss") is None
        w.open(f"{base}/metrics?run={XSS_RUN}&view=all&filter={quote('xss|img|script', safe='')}", HEADINGS["metrics"])
        charts = w.page.get_by_test_id("stPlotlyChart")
        expect(charts.first.locator(".main-svg").first).to_be_visible(timeout=TIMEOUT)
        expect(w.page.get_by_text("onerror", exact=False).first).to_be_visible(timeout=TIMEOUT)
        w.page.wait_for_timeout(1000)
        assert w.page.evaluate("window.__xss") is None
        assert w.page.locator("img[src='x']").count() == 0
        w.assert_clean("xss metrics")
        w.open(f"{base}/?run={XSS_RUN}", HEADINGS[""])  # the model name on the run card and in the runs list
        assert w.page.evaluate("window.__xss") is None and w.page.locator("img[src='x']").count() == 0
        w.assert_clean("xss overview")
        w.settle("xss pages")
    finally:
        w.close()
