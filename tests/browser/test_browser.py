"""The whole app in a real browser: `streamlit run app.py -- DIR` (as `rundash` serves it)
driven by Playwright + Chromium."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, quote, urlparse

import pytest
from playwright.sync_api import expect

import rundash_core as rd

from helpers import DATA, NEW_RUN, copy_run
from helpers.browser import fresh_page, serve_app

XSS_NAME = "<img src=x onerror=alert(1)>--qwen3-0.6b--0badc0de"


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
    proc, url = serve_app(out, {"RUNDASH_ROOTS": str(base), "RUNDASH_CACHE_DIR": str(base / "cache")})
    yield {"url": url, "out": out, "other": other}
    proc.terminate()
    proc.wait(10)


def test_run_link_opens_the_same_run_in_a_fresh_browser(served, browser):
    runs = rd.discover([served["out"]]).set_index("run_id")
    for run_id in ["math-python+wiki-search--qwen3-4b--0b45f1ec", "reverse-text--qwen3-0.6b--a7be3ee1"]:
        ov = rd.open_run(runs.loc[run_id, "path"]).overview()
        ctx, page, _ = fresh_page(browser)
        page.goto(f"{served['url']}/?run={quote(run_id)}")
        expect(page.get_by_text(f"step {ov.step} of {ov.max_steps}")).to_be_visible(timeout=30000)
        expect(page.get_by_text(ov.model, exact=True).first).to_be_visible()
        assert parse_qs(urlparse(page.url).query)["run"] == [run_id]
        ctx.close()


def test_selecting_a_run_updates_the_url_and_survives_page_changes(served, browser):
    ctx, page, _ = fresh_page(browser)
    page.goto(served["url"] + "/?run=math-python%2Bwiki-search--qwen3-4b--0b45f1ec")
    expect(page.get_by_text("step 9 of 10")).to_be_visible(timeout=30000)
    page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").click()
    status = rd.discover([served["out"]]).set_index("run_id").loc["reverse-text--qwen3-0.6b--a7be3ee1", "status"]
    page.get_by_role("option", name=f"reverse-text--qwen3-0.6b--a7be3ee1 · {status}").click()
    expect(page.get_by_text("step 3 of 3")).to_be_visible(timeout=30000)
    page.wait_for_url("**run=reverse-text--qwen3-0.6b--a7be3ee1**", timeout=10000)
    page.get_by_test_id("stSidebarNav").get_by_text("Config").click()
    expect(page.get_by_text("orchestrator.json").first).to_be_visible(timeout=30000)
    page.wait_for_url("**/config?run=reverse-text--qwen3-0.6b--a7be3ee1**", timeout=10000)
    ctx.close()


def test_add_directory_checks_roots(served, browser):
    ctx, page, _ = fresh_page(browser)
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
    ctx, page, dialogs = fresh_page(browser)
    page.goto(f"{served['url']}/?run={quote(XSS_NAME, safe='')}")
    expect(page.get_by_text("step 3 of 3")).to_be_visible(timeout=30000)
    expect(page.get_by_text(XSS_NAME + " · prime-rl", exact=False).first).to_be_visible()
    page.wait_for_timeout(1000)
    assert dialogs == []
    assert page.locator("img[src='x']").count() == 0
    ctx.close()


def test_a_shortened_path_reads_whole_in_its_cell_overlay(served, browser):
    """The runs list shows long paths shortened in the middle, but the cell holds the whole path:
    opening the cell (Enter or double-click) shows all of it."""
    paths = [str(p) for p in rd.discover([served["out"]])["path"]]
    assert all(len(p) > 48 for p in paths)  # all shortened in the table
    ctx, page, _ = fresh_page(browser)
    page.goto(served["url"])
    canvas = page.get_by_test_id("stDataFrame").first.locator("canvas").first
    expect(canvas).to_be_visible(timeout=30000)
    box = canvas.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + 35 + 17)  # a cell of the first row
    for _ in range(12):
        page.keyboard.press("ArrowRight")  # ... to the path: the last column
    page.keyboard.press("Enter")
    portal = page.locator("#portal")
    expect(portal).to_contain_text(served["out"].name, timeout=10000)
    shown = portal.text_content()
    assert any(p in shown for p in paths), (shown, paths)
    ctx.close()


def test_metrics_view_lives_in_the_url(served, browser, tmp_path):
    # a fresh server whose very first request is a page link (Streamlit then runs pages/metrics.py
    # directly unless the page hands over to app.py's navigation)
    proc, url0 = serve_app(served["out"], {"RUNDASH_ROOTS": str(served["out"]), "RUNDASH_CACHE_DIR": str(tmp_path)})
    try:
        _metrics_link_round_trip(url0, browser)
    finally:
        proc.terminate()
        proc.wait(10)


def _metrics_link_round_trip(base: str, browser) -> None:
    run_id = "math-python+wiki-search--qwen3-4b--0b45f1ec"
    ctx, page, _ = fresh_page(browser)
    page.goto(f"{base}/metrics?run={quote(run_id)}&smooth=running_avg&amount_running_avg=5&view=sections")
    charts = page.get_by_test_id("stPlotlyChart")
    expect(charts.first).to_be_visible(timeout=30000)
    expect(charts.first.locator(".main-svg").first).to_be_visible(timeout=30000)
    expect(page.get_by_role("combobox", name="Smoothing")).to_have_value("Running average")
    page.get_by_text("Log y").click()
    page.wait_for_url("**logy=true**", timeout=10000)
    url = page.url
    ctx.close()

    ctx, page, _ = fresh_page(browser)  # a colleague opening the copied link sees the same view
    page.goto(url)
    expect(page.get_by_test_id("stPlotlyChart").first).to_be_visible(timeout=30000)
    expect(page.get_by_role("combobox", name="Smoothing")).to_have_value("Running average")
    expect(page.get_by_label("Log y")).to_be_checked()
    query = parse_qs(urlparse(page.url).query)
    assert query["run"] == [run_id] and query["smooth"] == ["running_avg"] and query["view"] == ["sections"]
    ctx.close()


def test_compare_overlays_the_runs_of_the_link(served, browser):
    ids = ["math-python+wiki-search--qwen3-4b--0b45f1ec", "reverse-text--qwen3-0.6b--a7be3ee1"]
    ctx, page, _ = fresh_page(browser)
    page.goto(f"{served['url']}/compare?run={quote(ids[0])}&runs={quote(ids[0])}&runs={quote(ids[1])}")
    chart = page.get_by_test_id("stPlotlyChart").first
    expect(chart).to_be_visible(timeout=30000)
    for run_id in ids:
        expect(chart.locator(".legendtext", has_text=run_id)).to_have_count(1, timeout=30000)
    ctx.close()


def test_live_charts_grow_until_paused(browser, tmp_path):
    """The built-in demo's live run keeps writing; its charts follow in the fragment until paused."""
    proc, url = _serve_demo(tmp_path)
    try:
        ctx, page, _ = fresh_page(browser)
        page.goto(url)
        expect(page.get_by_text("Runs (", exact=False)).to_be_visible(timeout=60000)
        live = rd.discover([tmp_path / "demo"])
        run_id = live[live["status"] == "running"]["run_id"].iloc[0]
        page.goto(f"{url}/metrics?run={quote(run_id)}")
        expect(page.get_by_test_id("stPlotlyChart").first.locator(".main-svg").first).to_be_visible(timeout=30000)
        points = ("() => Math.max(...Array.from(document.querySelectorAll('.js-plotly-plot'))"
                  ".map(d => Math.max(...d._fullData.map(t => (t.x && t.x.length) || 0))))")
        first = page.evaluate(points)
        page.wait_for_function(f"{points.replace('() =>', '() => (')}) > {first}", timeout=30000)
        page.get_by_text("Pause live refresh").click()
        page.wait_for_url("**paused=true**", timeout=10000)
        page.wait_for_timeout(1500)
        paused = page.evaluate(points)
        page.wait_for_timeout(8000)
        assert page.evaluate(points) == paused
        ctx.close()
    finally:
        proc.terminate()
        proc.wait(10)


def _serve_demo(tmp_path: Path) -> tuple[subprocess.Popen, str]:
    """The app with no directory: it writes the built-in demo (and its live writer) to the cache dir."""
    return serve_app(None, {"RUNDASH_CACHE_DIR": str(tmp_path)})


def test_the_sidebar_add_box_shows_a_refused_path_as_text_not_markdown(browser, tmp_path):
    """In a real browser (AppTest does not submit this form): a path typed in the box comes back
    in the refusal as text, never as a link or an image fetched from elsewhere."""
    copy_run(NEW_RUN, tmp_path / "outputs")
    proc, url = serve_app(tmp_path / "outputs", {"RUNDASH_ROOTS": str(tmp_path / "outputs"),
                                                 "RUNDASH_CACHE_DIR": str(tmp_path / "cache")})
    try:
        ctx, page, dialogs = fresh_page(browser)
        page.goto(url)
        sidebar = page.get_by_test_id("stSidebar")
        sidebar.get_by_text("Directories").click()
        sidebar.get_by_label("Add a directory").fill(
            "/elsewhere/[click me](http://evil.example/x) ![t](http://evil.example/t.png) **bold**")
        sidebar.get_by_role("button", name="Add").click()
        expect(sidebar.get_by_text("outside the allowed roots")).to_be_visible(timeout=30000)
        expect(sidebar.get_by_text("[click me](", exact=False)).to_be_visible()  # literally, as typed
        expect(sidebar.get_by_text("**bold**", exact=False)).to_be_visible()
        assert page.locator("a[href*='evil.example']").count() == 0
        assert page.locator("img[src*='evil.example']").count() == 0 and dialogs == []
        ctx.close()
    finally:
        proc.terminate()
        proc.wait(10)
