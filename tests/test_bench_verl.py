"""The verl benchmark at a tiny scale: the generated log, the baseline, the verification and the
report."""
from __future__ import annotations

import json
import re

import pytest

from conftest import DATA
from rundash_core.bench import verl as bench
from rundash_core.bench.__main__ import build_parser, main
from rundash_core.io.verl_log import VerlLogTail

SAMPLES = DATA / "verl"


def test_generated_log_repeats_the_samples_with_growing_steps(tmp_path):
    samples = bench.sample_logs(SAMPLES)
    assert len(samples) == 4  # three real logs and the generated Lego one
    gen = bench.build_log(str(tmp_path / "b.log"), 3, samples)
    data = (tmp_path / "b.log").read_bytes()
    assert gen.bytes == len(data) >= 3e6 and gen.lines == data.count(b"\n") and gen.copies % 4 == 0
    step_of = re.compile(rb"(?<![\w/])step:(\d+) - ")
    steps = [int(m) for m in step_of.findall(data)]
    per_copy = step_of.findall(b"".join(samples))
    assert len(steps) == len(per_copy) * gen.copies // 4
    copies = [steps[i: i + len(per_copy)] for i in range(0, len(steps), len(per_copy))]
    assert all(min(b) > max(a) for a, b in zip(copies, copies[1:]))  # one long run, no restarts
    assert b"\x1b[36m(TaskRunner pid=" in data and b"np.float64(" in data and b"Training Progress" in data


def test_baseline_and_rundash_read_the_same_values(tmp_path):
    path = str(tmp_path / "b.log")
    bench.build_log(path, 2, bench.sample_logs(SAMPLES))
    base = bench.baseline_rows(path)
    assert base and all(isinstance(r["step"], int) for r in base)
    result = bench.verify(path)
    assert result["ok"] and result["off"] == 0 and result["checked"] == len(bench.merged(base)) > 10_000
    assert result["extra"] == result["extra_from_pprint"] > 0  # era-S1 validation pprints, read only by rundash
    rows = VerlLogTail(path).poll().rows
    assert len(rows) == len(base) + sum(1 for r in rows if set(r) - {"producer", "step", "time"} <= {
        "val/test_score/openai/gsm8k"})


def test_report_has_every_row(tmp_path, capsys):
    out_json = tmp_path / "r.json"
    rc = main(["verl", "--mb", "2", "--repeat", "1", "--in-process", "--dir", str(tmp_path), "--json", str(out_json)])
    out = capsys.readouterr().out
    assert rc == 0, out
    for label in ("rundash parse: VerlLogTail.poll() → rows", "baseline: per line decode, ANSI regex, step: regex",
                  "floor: read the lines, no parsing", "rundash cold load: open_run().metrics()",
                  "rundash parse / baseline"):
        assert label in out, label
    for check in ("rundash values = baseline values", "rundash-only cells", "refresh +10 lines: run.metrics()"):
        line = next(x for x in out.splitlines() if x.startswith(f"| {check}"))
        assert line.rstrip(" |").endswith("PASS"), line
    parse = next(x for x in out.splitlines() if x.startswith("| rundash parse: VerlLogTail"))
    assert re.search(r"user \d+\.\d\d s, sys \d+\.\d\d s, [\d,]+ page faults \|$", parse), parse
    saved = json.loads(out_json.read_text())
    assert set(saved["results"]) >= {"rundash", "baseline", "floor", "cold", "verify", "refresh"}
    assert all(saved["results"][k]["minor_faults"] >= 0 for k in ("rundash", "baseline", "floor", "cold"))
    assert saved["results"]["baseline"]["user_s"] + saved["results"]["baseline"]["sys_s"] > 0
    assert saved["results"]["floor"]["rows"] == saved["generated"]["lines"]
    assert saved["checks"]["speedup"] == pytest.approx(
        saved["results"]["baseline"]["seconds"] / saved["results"]["rundash"]["seconds"])


def test_cli_defaults():
    args = build_parser().parse_args(["verl"])
    assert (args.mb, args.repeat, args.in_process) == (100.0, 3, False)
