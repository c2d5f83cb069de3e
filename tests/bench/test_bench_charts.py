"""The charts benchmark at a tiny scale: it measures real figures of a generated run and its
report and checks follow the numbers."""
from __future__ import annotations

import json

from benchmarks import charts as bench
from benchmarks import metrics_data as md
from benchmarks.__main__ import main


def test_measure_builds_every_section_and_fifty_filtered_keys(tmp_path):
    spec = md.Spec(steps=2_500, keys=150, resume_back=0)
    gen = md.generate_run(str(tmp_path / "run"), spec)
    r = bench.measure("charts", str(tmp_path / "run"))
    assert r["rows"] > 100_000 and r["load"] > 0 and r["index"] > 0
    assert {"train", "stability", "performance"} <= set(r["sections"])
    assert all(s["figures"] >= 1 and s["points"] <= 1500 for s in r["sections"].values())
    a = r["all50"]
    assert a["keys"] == a["figures"] == 50 and a["longest_series"] == 2_500
    assert a["points"] == 1500  # 2,500 steps downsampled to the bucket limit
    text, checks = bench.build_report(gen, spec, r)
    assert checks["points_ok"] and checks["max_points"] == 1500
    assert checks["section_ok"] == (checks["worst_section_ratio"] <= 1.0)
    assert "floor: open_run().metrics()" in text and "PASS" in text


def test_report_fails_a_section_slower_than_the_load():
    gen = md.Generated("x", 1, 1, 1, 0.0, 1)
    r = {"load": 1.0, "index": 0.2, "rows": 10, "metrics": 3,
         "sections": {"train": {"seconds": 0.9, "figures": 2, "traces": 4, "points": 1700, "series": 2}},
         "all50": {"seconds": 0.1, "figures": 50, "traces": 50, "points": 10, "keys": 50, "series": 50,
                   "longest_series": 10}}
    _, checks = bench.build_report(gen, md.Spec(steps=10), r)
    assert not checks["section_ok"] and not checks["points_ok"] and checks["max_points"] == 1700


def test_command_line_runs_in_process(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["charts", "--steps", "400", "--keys", "40", "--in-process", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "all metrics filtered to" in printed and "max points per trace" in printed
    assert json.loads(out.read_text())["checks"]["points_ok"]
