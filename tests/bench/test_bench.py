"""The metrics benchmark at a tiny scale: report, generator, verification and refresh measurement."""
from __future__ import annotations

import json
import os
import sys
from collections import Counter
from dataclasses import asdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import rundash_core as rd  # noqa: E402
from benchmarks import metrics  # noqa: E402
from benchmarks import metrics_data as md
from benchmarks.__main__ import main  # noqa: E402
from benchmarks.common import cpu_note, format_table, run_one, timed  # noqa: E402
from rundash_core import cache  # noqa: E402

TINY = md.Spec(steps=40, keys=80, mix_steps=5)  # keys=80: the trainer has per-env keys


def _generate(tmp_path, spec: md.Spec = TINY) -> md.Generated:
    return md.generate_run(str(tmp_path / "bench-run"), spec)


def _cold_tidy(gen: md.Generated):
    cache.shared.clear()
    return rd.open_run(os.path.dirname(os.path.dirname(os.path.dirname(gen.path)))).metrics()


def _expected(path: str) -> tuple[dict, Counter]:
    """From json.loads and the spec's rule: (producer, step, key) -> (value, time of the line that
    wrote it, last write wins); time-keyed values as a multiset of (producer, time, key, value)."""
    stepped, timed = {}, Counter()
    with open(path, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            producer, step, t = row.pop("producer"), row.pop("step"), row.pop("time")
            for key, value in row.items():
                if step is None:
                    timed[(producer, t, key, float(value))] += 1
                else:
                    stepped[(producer, step, key)] = (float(value), t)
    return stepped, timed


def _actual(tidy) -> tuple[dict, Counter]:
    """The same two views of rundash's tidy frame."""
    stepped, timed = {}, Counter()
    for producer, step, metric, value, t in zip(tidy["producer"].astype(str), tidy["step"].astype(object),
                                                tidy["metric"].astype(str), tidy["value"].tolist(), tidy["time"].tolist()):
        if step is pd.NA:
            timed[(producer, t, metric, value)] += 1
        else:
            assert (producer, step, metric) not in stepped, "duplicate tidy row"
            stepped[(producer, step, metric)] = (value, t)
    return stepped, timed


def test_report_has_every_row(tmp_path, capsys):
    out_json = tmp_path / "result.json"
    rc = main(["metrics", "--steps", "40", "--keys", "20", "--in-process", "--dir", str(tmp_path),
               "--refresh-repeat", "2", "--json", str(out_json)])
    out = capsys.readouterr().out
    assert rc == 0, out
    for label in ("rundash cold load: open_run().metrics() → tidy", "pandas.read_json(lines=True)",
                  "pyarrow.json.read_json (raw parse)", "rundash refresh +10 rows: run.metrics()",
                  "store.refresh() alone", "pandas / rundash", "rundash / pyarrow", "refresh / cold (run.metrics())",
                  "read bytes (io.files.read_range)", "parse (io.jsonl.parse_jsonl_bytes, orjson)",
                  "ingest (MetricStore._ingest: merge into blocks)", "tidy view (store.tidy())", "sum of the phases"):
        assert label in out, label
    for check in ("tidy rows = independent merge", "step-keyed values and times", "time-keyed values and times",
                  "refresh adds the appended values"):
        line = next(x for x in out.splitlines() if x.startswith(f"| {check}"))
        assert line.rstrip(" |").endswith("PASS"), line
    saved = json.loads(out_json.read_text())
    assert saved["results"]["verify"]["ok"] and saved["checks"]["refresh_rows_ok"]
    assert set(saved["results"]) >= {"rundash", "pandas", "pyarrow", "verify", "phases", "refresh"}


def test_tidy_frame_matches_independent_merge(tmp_path):
    gen = _generate(tmp_path)
    want_stepped, want_timed = _expected(gen.path)
    rows = [json.loads(x) for x in open(gen.path)]
    assert {r["producer"] for r in rows} == {"trainer", "orch"}
    assert Counter((r["producer"], r["step"]) for r in rows)[("trainer", 25)] == 10  # 5 rows, twice: the resume
    assert len({frozenset(r) for r in rows if "loss/mean" in r}) > 1  # per-env keys follow the env mix
    got_stepped, got_timed = _actual(_cold_tidy(gen))
    assert got_stepped == want_stepped  # values, and the time of the line that wrote each (last write wins)
    assert got_timed == want_timed and sum(want_timed.values()) > 0
    assert len(want_stepped) + sum(want_timed.values()) == md.independent_merge(open(gen.path, "rb")).tidy_rows


def test_verification_catches_a_wrong_tidy_frame(tmp_path):
    gen = _generate(tmp_path)
    tidy = _cold_tidy(gen)
    merged = md.independent_merge(open(gen.path, "rb"))
    assert metrics.compare_tidy(tidy, merged)["ok"]
    stepped = tidy.index[tidy["step"].notna()]
    bad = tidy.copy()
    bad.loc[stepped[0], "value"] += 1.0
    bad.loc[stepped[1], "time"] += 1.0
    bad = bad.drop(index=stepped[2])
    result = metrics.compare_tidy(bad, merged)
    assert not result["ok"]
    assert (result["stepped"]["value_off"], result["stepped"]["time_off"], result["stepped"]["missing"]) == (1, 1, 1)


def test_refresh_appends_new_steps(tmp_path):
    gen = _generate(tmp_path)
    lines_before = gen.lines
    result = metrics.measure("refresh", gen.path, spec=asdict(TINY), refresh_repeat=2)
    rows = [json.loads(x) for x in open(gen.path)]
    appended = rows[lines_before:]
    assert len(appended) == 2 * 2 * metrics.ROWS_PER_ROUND
    new_steps = {r["step"] for r in appended if r["step"] is not None}
    assert min(new_steps) == TINY.steps + 1 and result["steps"] == [TINY.steps, max(new_steps)]
    assert {r["producer"] for r in appended if r["step"] is None} == {"orch"}  # time-keyed rows too
    values = sum(len(r) - 3 for r in appended)
    assert result["appended_values"] == values and result["rows_added"] == values
    assert len(_cold_tidy(gen)) == result["rows"] + values
    assert 0 < result["metrics_s"] and 0 < result["store_refresh_s"] and result["same_store"]


def test_default_spec_is_about_200_mb():
    spec = md.Spec()
    kinds = md.row_kinds(spec)
    by_producer = Counter()
    for kind in kinds:
        by_producer[kind.producer] += 0 if kind.name in ("inference", "periodic", "eval") else len(kind.keys)
    assert by_producer == {"trainer": 300, "orch": 300}
    seq = spec.step_sequence()
    sample = [(pos, seq[pos]) for pos in range(0, len(seq), 25)]
    lines = md.lines_for(spec, kinds, np.random.default_rng(0), sample)
    estimate = sum(len(x.encode()) for x in lines) * len(seq) / len(sample)
    assert 170e6 <= estimate <= 230e6, estimate / 1e6
    assert sum(x.startswith('{"step": null') for x in lines) > 0
    trainer_rows = Counter(json.loads(x)["step"] for x in lines if '"producer": "trainer"' in x)
    assert set(trainer_rows.values()) == {5}


def test_one_contender_in_fresh_process(tmp_path):
    gen = _generate(tmp_path, md.Spec(steps=20, keys=20))
    result = run_one("metrics", "pyarrow", {"path": gen.path})
    assert result["rows"] == gen.lines and result["seconds"] > 0 and result["peak_rss_mb"] > 50


def test_timed_counts_the_page_faults_of_new_memory():
    """64 MiB written for the first time is at least 16,384 fresh 4 KiB pages (fewer with huge
    pages, never zero); the CPU times are the process's own."""
    block, cost = timed(lambda: bytearray(64 << 20))
    assert len(block) == 64 << 20 and cost["seconds"] > 0
    assert cost["minor_faults"] > 0 and cost["user_s"] >= 0 and cost["sys_s"] >= 0
    small, cost_small = timed(lambda: sum(range(1000)))
    assert small == 499500 and cost_small["minor_faults"] < cost["minor_faults"]
    note = cpu_note({**cost, "minor_faults": 43281})
    assert note.startswith("user ") and note.endswith(", 43,281 page faults") and cpu_note({"seconds": 1}) == ""


def test_table_columns_align():
    text = format_table(["a", "num"], [["x", "1.0"], ["longer", "10.25"]], right={1})
    lines = text.splitlines()
    assert len({len(x) for x in lines}) == 1
    assert lines[1] == "|--------|------:|" and lines[3].endswith("| 10.25 |")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
