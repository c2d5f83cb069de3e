"""The sessions benchmark: a real server on the demo and two Chromium sessions (the smallest
scale of the issue's 20), its /proc readings, and its verdicts on made-up measurements."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from benchmarks import sessions as bench
from benchmarks.__main__ import main

CHROMIUM = "/usr/bin/chromium"


def test_proc_readings_of_a_process():
    cpu0 = bench.server_cpu_s(os.getpid())
    t = time.process_time()
    while time.process_time() - t < 0.3:
        pass
    assert bench.server_cpu_s(os.getpid()) - cpu0 >= 0.2
    rss, peak = bench.server_rss_mb(os.getpid())
    assert 10 < rss <= peak


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium")
def test_two_sessions_on_the_live_run(tmp_path, capsys):
    out = tmp_path / "sessions.json"
    code = main(["sessions", "--sessions", "2", "--window", "11", "--timeout", "240", "--chromium", CHROMIUM,
                 "--dir", str(tmp_path / "work"), "--json", str(out)])
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    r, c = data["results"], data["checks"]
    assert code == 0, printed
    one, many = r["one"], r["many"]
    assert one["drew"] == 1 and many["sessions"] == 2 and many["drew"] == 2
    assert all(0 < s < 240 for s in one["first_s"] + many["first_s"])
    for m in (one, many):
        assert m["window_s"] >= 11 and m["cpu_s"] > 0
        assert m["cpu_per_period_s"] == pytest.approx(m["cpu_s"] / (m["window_s"] / bench.PERIOD_S))
        assert m["advanced"] == sum(a is not None and a <= 2 * bench.PERIOD_S + 1 for a in m["advance_s"])
        assert 0 < m["rss_mb"] <= m["peak_rss_mb"]
        assert m["browser_cpu_per_period_s"] > 0  # drawing charts costs the browsers CPU too
    assert c["cpu_ratio"] == pytest.approx(many["cpu_per_period_s"] / one["cpu_per_period_s"])
    assert c["cpu_ok"] == (c["cpu_ratio"] <= bench.CPU_TARGET)
    assert r["url"] == "/metrics?run=" + quote(r["live_run"], safe="")
    assert r["hostile"]["health_s"] is not None  # the server answered while a session ran the regex
    assert r["overview_base_s"] is not None and r["overview_base_s"] > 0
    for row in ("sessions that drew a chart", "server CPU per refresh period", "browsers' CPU per refresh period",
                "server RSS", "health check after"):
        assert row in printed
    assert ("PASS" in printed or "MISS" in printed)


def _made_up(cpu_one: float, cpu_many: float, peak: float, health: float | None) -> dict:
    def obs(n, cpu):
        return {"sessions": n, "drew": n, "advanced": n, "advance_s": [1.0] * n, "first_s": [2.0] * n, "errors": [],
                "cpu_s": cpu * 3, "window_s": 15.0, "cpu_per_period_s": cpu, "browser_cpu_per_period_s": 1.0,
                "rss_mb": peak, "peak_rss_mb": peak}
    return {"sessions": 20, "url": "/metrics?run=x", "live_run": "x", "period_s": 5.0, "cache_cap_mb": 100.0,
            "one": obs(1, cpu_one) | {"peak_rss_mb": 50.0, "rss_mb": 50.0}, "many": obs(20, cpu_many),
            "open_all_s": 30.0, "overview_base_s": 1.0, "hostile": {"health_s": health, "overview_s": 2.5}}


def test_verdicts():
    text, c = bench.build_report(_made_up(0.5, 1.9, 140.0, 0.2))
    assert c["cpu_ok"] and c["rss_ok"] and c["health_ok"] and c["overview_ok"] and c["all_advanced"]
    assert "3.80× PASS" in text and "20/20" in text
    _, c = bench.build_report(_made_up(0.5, 2.1, 151.0, None))  # 4.2×; over cap + one; no health answer
    assert not c["cpu_ok"] and not c["rss_ok"] and not c["health_ok"]


def test_the_crowd_browser_runs_at_the_lowest_priority(tmp_path):
    """The N sessions' browser is launched through a wrapper that execs it niced: what it runs
    (here `sh -c`) gets niceness 19 and every argument unchanged."""
    launcher = bench.niced("/bin/sh", tmp_path)
    import subprocess

    out = subprocess.run([launcher, "-c", 'echo "$1"; cut -d" " -f19 /proc/self/stat', "sh", "a b"],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "a b" and int(out[1]) == 19
