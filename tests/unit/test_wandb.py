"""W&B runs read against an independent reading of the same records: the samples (a verl-style run
resumed once: two folders, one id, overlapping steps; a TRL-style run with its own step metric; a
copy of it torn mid-write) and a run this module writes with `wandb.init` itself (offline, once).

The reference below is written from the format notes (wandb spec 2-5), not from rundash's code:
the file read the way wandb's old Python `DataStore.scan_data` read it (header, 7-byte chunk
headers, CRC-32 of type + data, FULL / FIRST / MIDDLE / LAST, zero padding under 7 bytes), each
record through `Record.FromString`, each item's JSON through `json.loads`, one dict per (step,
key), the newest attempt (by the run record's start time) written last."""
from __future__ import annotations

import fnmatch
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

import rundash_core as rd
from rundash_core import cache

pb = pytest.importorskip("wandb.proto.wandb_internal_pb2")

DATA = Path(__file__).resolve().parents[1] / "data" / "wandb" / "wandb"
GRPO = sorted(DATA.glob("*-grpo0a1b"))
TRL = DATA / "offline-run-20261202_051905-trl0c2d3"
CUT = DATA / "offline-run-20261202_051905-cut0e4f5"


# The reference -------------------------------------------------------------------------------------
def scan(path: Path) -> list:
    """The Records of a .wandb file, as DataStore.scan_data read them; stops at a torn tail."""
    out = []
    with open(path, "rb") as f:
        assert f.read(7) == b":W&B" + struct.pack("<HB", 0xBEE1, 0)
        index, data = 7, None
        while True:
            left = 32768 - index % 32768
            if left < 7:
                pad = f.read(left)
                index += left
                if len(pad) < left:
                    return out
                assert pad == b"\0" * left
            header = f.read(7)
            if len(header) < 7:
                return out
            crc, length, kind = struct.unpack("<IHB", header)
            chunk = f.read(length)
            if len(chunk) < length:
                return out
            index += 7 + length
            assert crc == zlib.crc32(chunk, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF
            if kind == 1:
                out.append(pb.Record.FromString(chunk))
            elif kind == 2:
                data = chunk
            elif kind == 3:
                data += chunk
            else:
                assert kind == 4
                out.append(pb.Record.FromString(data + chunk))


def reference(files: list[Path]) -> dict:
    """(step, key) -> (value, _timestamp): every numeric history value (not bools, not NaN), keys
    joined with "." as W&B shows them, media values left out, stepped by `_step` or the step metric
    defined for the key (spec 4.1: exact name, else the last matching glob; a step metric by
    itself; a row without it takes its last value); attempts by start time, the newest last."""
    attempts = []
    for f in files:
        recs = scan(f)
        start = next(r.run.start_time.ToNanoseconds() for r in recs if r.WhichOneof("record_type") == "run")
        attempts.append((start, recs))
    attempts.sort(key=lambda a: a[0])
    defs = [r.metric for _s, recs in attempts for r in recs if r.WhichOneof("record_type") == "metric"]
    steppers = {m.step_metric for m in defs if m.step_metric}

    def axis(key):
        if key in steppers:
            return key
        named = [m.step_metric for m in defs if m.name == key and m.step_metric]
        globbed = [m.step_metric for m in defs if m.glob_name and m.step_metric and fnmatch.fnmatchcase(key, m.glob_name)]
        return (named or globbed or ["_step"])[-1]

    out, last = {}, {}
    for _start, recs in attempts:
        for r in recs:
            if r.WhichOneof("record_type") != "history":
                continue
            items = [(tuple(i.nested_key) or (i.key,), json.loads(i.value_json)) for i in r.history.item]
            media = {p[:-1] for p, _v in items if p[-1] == "_type"}
            row = {".".join(p): v for p, v in items if not any(p[:j] in media for j in range(1, len(p)))}
            for key, value in row.items():
                if key.startswith("_") or type(value) not in (int, float) or (type(value) is float and math.isnan(value)):
                    continue
                a = axis(key)
                step = row.get(a) if type(row.get(a)) in (int, float) else last.get(a)
                if step is None:
                    continue
                out[(int(step), key)] = (float(value), row["_timestamp"])
            for a in steppers:
                if type(row.get(a)) in (int, float):
                    last[a] = row[a]
    return out


def frame_dict(run) -> dict:
    m = run.metrics()
    assert m["step"].notna().all() and set(m["producer"].astype(str)) == {"trainer"}
    got = {(int(s), str(k)): (v, t) for s, k, v, t in zip(m["step"], m["metric"], m["value"], m["time"])}
    assert len(got) == len(m), "a (step, metric) twice"
    return got


def wandb_files(folders) -> list[Path]:
    return [next(Path(f).glob("run-*.wandb")) for f in folders]


# The samples ---------------------------------------------------------------------------------------
def test_resumed_run_is_one_run_whose_newest_attempt_wins():
    want = reference(wandb_files(GRPO))
    for folder in GRPO:  # either folder opens the whole run
        cache.shared.clear()
        run = rd.open_run(folder)
        assert frame_dict(run) == want
        ov = run.overview()
        assert ov.attempts == 2 and run.attempts() == [1, 2]
        assert ov.name == "qwen2.5-0.5b-grpo" and ov.project == "verl-gsm8k"
        assert ov.model == "Qwen/Qwen2.5-0.5B-Instruct"
    first = [r for r in scan(wandb_files(GRPO)[1]) if r.WhichOneof("record_type") == "history"]
    resumed_at = int(json.loads(next(i.value_json for i in first[0].history.item if tuple(i.nested_key) == ("_step",))))
    assert run.resume_steps() == [resumed_at] and ov.resumed_from == [resumed_at - 1]
    old = {k: v for k, v in reference(wandb_files(GRPO[:1])).items() if k[0] >= resumed_at}
    assert any(want[k] != v for k, v in old.items() if k in want), "the overlap differs: the test would not see who wins"
    last_step = max(s for s, _k in want)
    assert ov.step == last_step and ov.status == "completed"  # steps count from 1; the newest attempt exited 0
    assert ov.updated.timestamp() == pytest.approx(max(t for _v, t in want.values()))
    assert run.problems() == []  # the first attempt's crash is history: the run finished


def test_step_metric_steps_the_keys_it_covers():
    run = rd.open_run(TRL)
    got = frame_dict(run)
    assert got == reference(wandb_files([TRL]))
    steps = sorted({s for s, k in got if k == "train/reward"})
    gs = sorted(int(v) for (s, k), (v, _t) in got.items() if k == "train/global_step")
    assert steps == gs and steps[0] == 1  # train/global_step, not _step (which counts from 0)
    ov = run.overview()
    assert ov.step == steps[-1] and ov.status == "completed" and ov.model == "Qwen/Qwen3-1.7B"
    config = run.config()
    assert config["model_name_or_path"] == "Qwen/Qwen3-1.7B" and "_wandb" not in config


def test_torn_copy_keeps_everything_before_the_cut(tmp_path):
    copy = tmp_path / "wandb" / CUT.name
    shutil.copytree(CUT, copy)  # fresh file times: a copy, not a live run
    run = rd.open_run(copy)
    assert frame_dict(run) == reference(wandb_files([copy]))
    assert run.overview().status != "running"
    problems = run.problems()
    assert len(problems) == 1 and "torn last record" in problems[0].what
    size = (copy / "run-cut0e4f5.wandb").stat().st_size
    assert problems[0].path.endswith("run-cut0e4f5.wandb") and f"{size - 16374:,} bytes" in problems[0].what


# A run written by wandb itself ----------------------------------------------------------------------
SCRIPT = """
import math, wandb, numpy as np
run = wandb.init(project="rd-test", name="nested-and-media", id="rdtest01", config={"a": {"b": 1}, "model_name_or_path": "tiny"})
run.define_metric("gs")
run.define_metric("train/*", step_metric="gs")
for i in range(6):
    run.log({"train/loss": 1.0 / (i + 1), "gs": 10 * (i + 1), "nested": {"x": i, "y": {"z": i * 0.5}},
             "s": "text", "flag": i % 2 == 0, "h": wandb.Histogram(np.arange(10 + i)), "nan": float("nan"),
             "inf": float("inf"), "plain": i * 1.5, "lst": [1, 2]})
run.log({"late": 5}, step=9)
run.finish(exit_code=3)
"""


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("wandb-real")
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_DIR": str(root), "WANDB_SILENT": "true",
           "WANDB_CONFIG_DIR": str(root / ".config"), "WANDB_CACHE_DIR": str(root / ".cache")}
    subprocess.run([sys.executable, "-c", SCRIPT], env=env, check=True, timeout=120, capture_output=True)
    return next((root / "wandb").glob("offline-run-*-rdtest01"))


def test_a_run_wandb_wrote_reads_as_the_reference(written):
    run = rd.open_run(written)
    got = frame_dict(run)
    assert got == reference(wandb_files([written]))
    keys = {k for _s, k in got}
    assert {"nested.x", "nested.y.z", "plain", "inf", "train/loss", "gs", "late"} <= keys  # nested as the UI names them
    assert not keys & {"s", "flag", "lst", "nan", "h", "_runtime", "_step", "_timestamp"}
    assert not any(k.startswith("h.") for k in keys)  # a histogram's parts are no metrics
    assert {s for s, k in got if k == "train/loss"} == {10, 20, 30, 40, 50, 60}
    problems = run.problems()
    assert [p.what for p in problems if "exited with code 3" in p.what], problems
    ov = run.overview()
    assert ov.status == "stopped" and ov.name == "nested-and-media" and ov.model == "tiny"
    assert run.config() == {"a": {"b": 1}, "model_name_or_path": "tiny"}
    summary = run.summary()
    assert summary["train/loss"] == pytest.approx(1 / 6) and summary["late"] == 5


def test_discovery_lists_one_row_per_run_id(tmp_path):
    wandb_dir = tmp_path / "proj" / "wandb"
    for folder in [*GRPO, TRL]:
        shutil.copytree(folder, wandb_dir / folder.name)
    os.symlink(GRPO[-1].name, wandb_dir / "latest-run")
    (wandb_dir / "debug.log").write_text("2026-12-02 05:19:04,000 INFO    MainThread:1 [wandb_setup.py:_flush():81] x\n")
    (wandb_dir / GRPO[-1].name / "logs").mkdir()
    (wandb_dir / GRPO[-1].name / "logs" / "debug.log").write_text("x\n")
    frame = rd.discover([str(tmp_path)])
    assert sorted(frame["name"]) == ["qwen2.5-0.5b-grpo", "qwen3-1.7b-math-grpo"], frame[["path", "kind"]]
    assert set(frame["kind"]) == {"wandb"}
    row = frame[frame["name"] == "qwen2.5-0.5b-grpo"].iloc[0]
    assert row["attempts"] == 2 and row["path"].endswith(GRPO[-1].name)
    linked = rd.open_run(wandb_dir / "latest-run")  # opened by hand, the link opens the run it names
    assert linked.overview().attempts == 2 and frame_dict(linked) == reference(wandb_files(GRPO))
