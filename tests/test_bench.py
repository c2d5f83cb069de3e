"""The metrics benchmark at a tiny scale: generator, measurements, report and correctness checks."""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pytest  # noqa: E402

import rundash_core as rd  # noqa: E402
from rundash_core import bench, cache  # noqa: E402


def _pure_python_merge(path: str) -> dict:
    """(producer, step, metric) -> value for step rows (last wins), plus one entry per time-keyed value."""
    merged: dict = {}
    timed = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            producer, step = row.pop("producer"), row.pop("step")
            row.pop("time")
            if step is None:
                timed += len(row)
                continue
            for key, value in row.items():
                merged[(producer, step, key)] = float(value)
    return {"stepped": merged, "timed": timed}


def test_metrics_bench_tiny(tmp_path, capsys):
    rc = bench.main(["metrics", "--steps", "50", "--keys", "20", "--in-process", "--dir", str(tmp_path),
                     "--refresh-repeat", "2"])
    out = capsys.readouterr().out
    assert rc == 0, out
    for label in ("rundash cold load", "pandas.read_json(lines=True)", "pyarrow.json.read_json (raw parse)",
                  "rundash refresh after +10 rows", "store.refresh() alone", "store.tidy() rebuild alone",
                  "pandas / rundash", "rundash / pyarrow", "refresh / cold", "tidy rows = independent merge",
                  "rundash cold-load phases", "total cold load", "tidy build"):
        assert label in out, label
    for check in ("tidy rows = independent merge", "per-(producer, step) counts", "time-keyed values per producer",
                  "refresh adds the appended values"):
        line = next(x for x in out.splitlines() if check in x)
        assert line.rstrip(" |").endswith("PASS"), line

    # The run is kept (--dir); the refresh measurement appended rows, so compare against the file now.
    run_dir = tmp_path / "bench-run"
    path = run_dir / "monitors" / "file" / "metrics.jsonl"
    assert (run_dir / "configs").is_dir() and path.is_file()
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    producers = {r["producer"] for r in rows}
    assert producers == {"trainer", "orch"}
    assert any(r["step"] is None for r in rows)
    assert all(list(r)[0] == "step" and list(r)[-1] == "producer" for r in rows)
    trainer_rows_per_step = {}
    for r in rows:
        if r["producer"] == "trainer":
            trainer_rows_per_step[r["step"]] = trainer_rows_per_step.get(r["step"], 0) + 1
    assert 5 in trainer_rows_per_step.values()  # perf, optim, tensor, time, system
    assert 10 in trainer_rows_per_step.values()  # a step written twice (the resume)

    cache.shared.clear()
    tidy = rd.open_run(str(run_dir)).metrics()
    expected = _pure_python_merge(str(path))
    assert len(tidy) == len(expected["stepped"]) + expected["timed"]
    stepped = tidy[tidy["step"].notna()]
    got = {(p, int(s), m): v for p, s, m, v in zip(stepped["producer"].astype(str), stepped["step"],
                                                    stepped["metric"].astype(str), stepped["value"])}
    assert got == expected["stepped"]
    assert int(tidy["step"].isna().sum()) == expected["timed"]


def test_generator_shape():
    spec = bench.Spec(steps=30, keys=300)
    kinds = {k.name: k for k in bench.row_kinds(spec)}
    trainer = sum(len(kinds[f"trainer-{n}"].keys) for n in ("perf", "optim", "tensor", "time", "system"))
    assert trainer == 300 and len(kinds["orch"].keys) == 300
    assert len(set(kinds["orch"].keys)) == 300
    assert any(k.startswith("train/agg/") for k in kinds["orch"].keys)
    assert any(k.startswith("train/reverse-text/") for k in kinds["orch"].keys)
    assert all(k.startswith("inference/") for k in kinds["inference"].keys)
    assert spec.step_sequence().count(20) == 2  # resume at 2/3 rewrites a few steps


def test_one_contender_in_subprocess(tmp_path):
    gen = bench.generate_run(str(tmp_path / "bench-run"), bench.Spec(steps=20, keys=20))
    result = bench.run_one_subprocess("pyarrow", gen.path)
    assert result["rows"] == gen.lines and result["seconds"] > 0 and result["peak_rss_mb"] > 0


def test_format_table_aligns():
    text = bench.format_table(["a", "num"], [["x", "1.0"], ["longer", "10.25"]], right={1})
    lines = text.splitlines()
    assert len({len(x) for x in lines}) == 1
    assert lines[1] == "|--------|------:|"
    assert lines[3].endswith("| 10.25 |")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
