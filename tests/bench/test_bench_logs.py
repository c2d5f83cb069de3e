"""The logs benchmark at a small scale: real (not sparse) logs, each contender's result checked,
and the report with every row."""
from __future__ import annotations

import json
import os

from benchmarks import logs as bench
from benchmarks.__main__ import main
from rundash_core.logs import line as logtext


def test_written_logs_are_real_lines(tmp_path):
    paths = bench.build(str(tmp_path), big_mb=3, small_mb=0.5)
    big = paths["inference"]
    size = os.path.getsize(big)
    assert abs(size - 3 * (1 << 20)) < 200_000
    assert os.stat(big).st_blocks * 512 >= size  # written, not a sparse file
    with open(big, "rb") as fh:
        lines = fh.read(200_000).split(b"\n")[:-1]
    parsed = [logtext.parse(line) for line in lines]
    hits = sum(bench.FILTER in p.text for p in parsed)
    assert all(p.actor == "APIServer" for p in parsed) and abs(hits * 10 - len(parsed)) < 10  # one line in ten
    assert {p.level for p in parsed} >= {"INFO", "WARNING"}
    trainer = logtext.parse(open(paths["trainer"], "rb").readline())
    assert trainer.level in ("INFO", "WARNING") and trainer.stamp.time_of_day is not None


def test_contenders_read_ranges_and_check_their_results(tmp_path):
    paths = bench.build(str(tmp_path), big_mb=8, small_mb=1)
    results = {c: bench.measure(c, paths=paths) for c in bench.CONTENDERS}
    big = os.path.getsize(paths["inference"])
    for c in ("tail", "merged", "filter", "older"):
        assert results[c]["ok"] and results[c]["lines"] == bench.LINES_WANTED, c
        assert 0 < results[c]["bytes_read"] < big / 4, c
    assert results["merged"]["components"] == 4
    assert results["filter"]["bytes_read"] > results["tail"]["bytes_read"]  # about ten times the lines scanned
    assert results["floor"]["bytes_read"] == 1 << 20 and results["tail_cmd"]["lines"] == bench.LINES_WANTED


def test_report_has_every_row(tmp_path, capsys):
    out = tmp_path / "r.json"
    code = main(["logs", "--size-mb", "12", "--small-mb", "1", "--repeat", "1", "--in-process",
                 "--dir", str(tmp_path / "w"), "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 0
    for label in bench.LABELS.values():
        assert label in text
    assert "tail ≤ 5× floor" in text and "peak RSS growth < 200 MB" in text
    payload = json.loads(out.read_text())
    assert payload["checks"]["all_ok"] and payload["checks"]["ranges_only"]
    assert set(payload["results"]) == set(bench.CONTENDERS)
