"""The pages benchmark: a real server on the demo and Chromium, at the smallest scale (one visit of
Metrics and Overview next to the floor), plus its report and exit status on made-up visits."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from benchmarks import pages as bench
from benchmarks.__main__ import main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium")
def test_command_line_times_pages_against_the_floor_in_chromium(tmp_path, capsys):
    out = tmp_path / "pages.json"
    code = main(["pages", "--pages", "metrics,overview", "--repeat", "1", "--settle", "0", "--timeout", "50",
                 "--floor-points", "700", "--floor-traces", "3", "--dir", str(tmp_path / "work"),
                 "--json", str(out)])
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    checks, results = data["checks"], data["results"]
    assert code == 0, printed
    # the floor drew its own chart: the traces and points the floor script was asked for
    assert checks["floor_first_chart"] == {"traces": 3, "points": 2100, "max_points": 700}
    floor = checks["floor_s"]
    assert 0.1 < floor < 50
    for name in ("metrics", "overview"):
        c = checks[name]
        assert 0.1 < c["seconds"] < 50 and c["floor_s"] == floor
        assert c["ratio"] == pytest.approx(c["seconds"] / floor)
        assert c["ok"] == (c["ratio"] <= bench.TARGETS[name])
        visit = results["visits"][name][0]
        assert visit["ws_messages"] > 0 and visit["first_ws_s"] < visit["seconds"]
    m = results["visits"]["metrics"][0]
    assert m["first_chart"]["traces"] >= 1 and m["first_chart"]["points"] > 0 and m["drawn_then"] >= 1
    assert m["first_fig_ws_s"] is not None and m["first_ws_s"] <= m["first_fig_ws_s"] < m["seconds"]
    assert results["visits"]["overview"][0]["first_chart"] is None  # Overview waits for its table
    assert parse_qs(urlparse(results["urls"]["metrics"]).query)["run"] == [results["live_run"]]
    assert "compare" not in checks and "compare" not in results["visits"]
    for row in ("floor (bare page, one plotly chart)", "metrics /metrics?run=", "overview /"):
        assert row in printed
    assert ("PASS" in printed or "MISS" in printed) and "FAIL" not in printed


def test_compare_link_holds_the_live_run_and_four_others(demo_runs):
    _, runs = demo_runs
    urls, chosen = bench.page_urls(runs)
    live = runs[runs["status"] == "running"]
    assert chosen["live_run"] == live["run_id"].iloc[0] and live["kind"].iloc[0] == "prime-rl"
    q = parse_qs(urlparse(urls["compare"]).query)
    assert q["runs"] == chosen["compare_runs"] and len(set(q["runs"])) == 5  # repeated, as the multiselect reads it
    assert q["runs"][0] == chosen["live_run"] and set(q["runs"]) <= set(runs["run_id"])
    assert urls["overview"] == "/"


def _visit(seconds, **kw):
    return {"url": "x", "seconds": seconds, "ws_messages": 3, "ws_bytes": 2048, "first_ws_s": 0.5,
            "first_fig_ws_s": 0.8, "html_s": 0.01, "charts_then": 1, "drawn_then": 1,
            "first_chart": {"traces": 2, "points": 20, "max_points": 10}, **kw}


def _results(visits):
    return {"urls": {"overview": "/", "metrics": "/metrics?run=a", "compare": "/compare?runs=a"}, "live_run": "a",
            "compare_runs": ["a", "b"], "demo": "/d", "repeat": 2, "floor": {"points": 10, "traces": 2},
            "visits": visits}


def test_report_takes_the_best_visit_and_misses_over_target():
    r = _results({"floor": [_visit(2.0), _visit(1.0)], "metrics": [_visit(2.5), _visit(2.1)],
                  "compare": [_visit(2.9), _visit(3.5)], "overview": [{"url": "x", "error": "nothing drawn"},
                                                                      _visit(1.5, first_chart=None)]})
    text, checks = bench.build_report(r)
    assert checks["floor_s"] == 1.0 and checks["drew"]
    assert checks["metrics"]["ratio"] == pytest.approx(2.1) and not checks["metrics"]["ok"]
    assert checks["compare"]["ratio"] == pytest.approx(2.9) and checks["compare"]["ok"]
    assert checks["overview"]["seconds"] == 1.5 and checks["overview"]["first_s"] is None and checks["overview"]["ok"]
    assert "MISS" in text and "PASS" in text and "overview: nothing drawn" in text


def test_a_page_that_never_drew_fails_the_command(monkeypatch, tmp_path, capsys):
    r = _results({"floor": [_visit(1.0)], "metrics": [{"url": "x", "error": "nothing drawn within 1 s"}]})
    monkeypatch.setattr(bench, "measure", lambda root, **kw: r)
    out = tmp_path / "r.json"
    assert main(["pages", "--pages", "metrics", "--json", str(out)]) == 1
    assert "FAIL (never drew)" in capsys.readouterr().out
    assert json.loads(out.read_text())["checks"]["drew"] is False
    monkeypatch.setattr(bench, "measure", lambda root, **kw: _results({"floor": [_visit(1.0)],
                                                                       "metrics": [_visit(1.5)]}))
    assert main(["pages", "--pages", "metrics"]) == 0
    assert main(["pages", "--pages", "nosuchpage"]) == 2
