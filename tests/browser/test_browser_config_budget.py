"""A 1.2 MB one-line config under a matching search, in a real browser served by `rundash`: the
page shows the cut text and says so, and answers a click within seconds (sent whole and
highlighted, it hung the tab for minutes)."""
from __future__ import annotations

import re
import time

from playwright.sync_api import expect

from helpers import NEW_RUN, copy_run
from helpers.hostile import BIG_LINE
from helpers.serving import launched_rundash

TIMEOUT = 90_000  # ms: two cores shared with whatever else runs
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'


def test_a_search_on_a_huge_one_line_config_leaves_the_page_responsive(tmp_path, browser):  # noqa: F811
    run = copy_run(NEW_RUN, tmp_path / "outputs")
    (run / "configs" / "attempt_2" / "command.txt").write_text(BIG_LINE)
    with launched_rundash(tmp_path, [str(tmp_path / "outputs"), "--host", "127.0.0.1"]) as (port, _log):
        ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
        page = ctx.new_page()
        try:
            page.goto(f"http://127.0.0.1:{port}/config?run={run.name}")
            expect(page.get_by_role("heading", name=re.compile(r"^Config · ")).first).to_be_visible(timeout=TIMEOUT)
            page.wait_for_selector(IDLE, timeout=TIMEOUT)
            search = page.get_by_label("Search (regex on keys and values)")
            search.fill("qwen")
            search.press("Enter")
            expect(page.get_by_text(re.compile(r"showing 200 of [\d,]+\+ matches")).first).to_be_visible(timeout=TIMEOUT)
            page.wait_for_selector(IDLE, timeout=TIMEOUT)
            t0 = time.monotonic()
            page.get_by_text("command.txt").first.click(timeout=10_000)  # fold the file's expander
            assert page.evaluate("() => document.querySelectorAll('code').length") >= 1  # the tab's thread answers
            answered = time.monotonic() - t0
            assert answered < 5, f"the page took {answered:.1f} s to answer a click"
            shown = page.evaluate("() => Array.from(document.querySelectorAll('code'), c => c.textContent.length)")
            assert max(shown) < 300_000, shown
            assert page.locator('[data-testid="stException"]').count() == 0
        finally:
            ctx.close()
