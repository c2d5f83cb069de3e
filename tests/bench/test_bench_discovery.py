"""The discovery benchmark at a small scale: generated logs, contenders, the correctness check and
the report."""
from __future__ import annotations

import json
import os
import re

from benchmarks import discovery as bench
from benchmarks.__main__ import main


def test_generated_logs_and_contenders(tmp_path):
    gen = bench.build_logs(str(tmp_path / "logs"), 20, 0.2)
    names = os.listdir(tmp_path / "logs")
    assert gen.logs == 20 and len(names) == 20 + gen.skipped and gen.skipped >= 2
    assert any(n.endswith("_vllm.log") for n in names) and any(n.startswith("launch_") for n in names)
    assert len(bench.log_paths(str(tmp_path / "logs"))) == 20
    assert bench.floor(str(tmp_path / "logs")) == len(names)
    assert bench.read_ends(str(tmp_path / "logs")) == 20  # the logs only, no sidecar, no launch wrapper
    scan = bench.whole_file_scan(str(tmp_path / "logs"))
    assert len(scan) == 20 and all(isinstance(s, int) for s in scan.values())
    result = bench.verify(str(tmp_path / "logs"), sample=20)
    assert result["ok"] and result["checked"] == 20 and result["off"] == 0 and result["listed"] == 20


def test_verify_catches_a_wrong_step(tmp_path, monkeypatch):
    bench.build_logs(str(tmp_path / "logs"), 4, 0.2)
    import dataclasses

    from rundash_core.sources.verl.run import VerlRun

    real = VerlRun.overview  # what discovery builds a verl row from
    monkeypatch.setattr(VerlRun, "overview", lambda self, now=None: dataclasses.replace(
        real(self, now), step=(real(self, now).step or 0) + 1))
    result = bench.verify(str(tmp_path / "logs"), sample=4)
    assert not result["ok"] and result["off"] == 4


def test_report_has_every_row(tmp_path, capsys):
    out_json = tmp_path / "r.json"
    rc = main(["discovery", "--logs", "20", "--mb", "0.3", "--repeat", "1", "--in-process", "--dir", str(tmp_path),
               "--json", str(out_json)])
    out = capsys.readouterr().out
    assert rc == 0, out
    for label in ("floor: os.scandir + stat", "reading alone: 16 KiB at each end", "rundash cold: rd.discover",
                  "rundash warm: rd.discover again", "whole-file scan: read each log"):
        assert label in out, label
    cold = next(x for x in out.splitlines() if x.startswith("| rundash cold"))
    assert re.search(r"user \d+\.\d\d s, sys \d+\.\d\d s, [\d,]+ page faults", cold), cold
    for check in ("whole-file scan / cold", "warm / floor"):
        line = next(x for x in out.splitlines() if x.startswith(f"| {check}"))
        assert line.rstrip(" |").endswith(("PASS", "MISS")), line
    # cold reads each verl log once (resumes, step timings), so against the ends alone it is a ratio to read, not a target
    line = next(x for x in out.splitlines() if x.startswith("| cold / reading alone"))
    assert re.search(r"\d+\.\d× .* info$", line.rstrip(" |")), line
    for check in ("discover step/status = full parse", "only the logs listed"):
        line = next(x for x in out.splitlines() if x.startswith(f"| {check}"))
        assert line.rstrip(" |").endswith("PASS"), line
    saved = json.loads(out_json.read_text())
    assert saved["results"]["cold"]["rows"] == saved["results"]["warm"]["rows"] == saved["results"]["ends"]["rows"] == 20
    assert saved["results"]["warm"]["same_as_cold"] and saved["checks"]["verify_ok"]
