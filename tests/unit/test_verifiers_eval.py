"""The other prime-rl trace layouts (`rundash_core.sources.prime_rl.variants`, prime-rl.md 5.8): a
verifiers eval run's bare `traces.jsonl` and the pre-Jul-9 `rollouts/step_N/{train,eval}_rollouts*.jsonl`."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import rundash_core as rd
from rundash_core import frames
from rundash_core.sources.prime_rl import traces as prime_rl_traces

from helpers import DATA, json_lines

EVAL_RUN = DATA / "verifiers-eval" / "gsm8k--qwen3-4b--eval-5e1f0a2b"
LEGACY_RUN = DATA / "prime-rl-legacy" / "reverse-text--qwen3-0.6b--0a1b2c3d"


def test_an_eval_run_dir_is_found_and_lists_its_traces_by_byte_offset():
    runs = rd.discover([EVAL_RUN.parent])
    assert list(runs["kind"]) == ["prime-rl"] and Path(runs["path"][0]) == EVAL_RUN
    run = rd.open_run(EVAL_RUN)
    assert run.overview().flavor == "eval"
    samples = run.samples()
    assert frames.check(samples, frames.SAMPLES) == []
    records = json_lines(EVAL_RUN / "traces.jsonl")  # the torn last line does not parse: left out
    assert len(samples) == len(records) == 5
    assert set(samples["split"]) == {"eval"} and set(samples["step"]) == {0}
    assert list(samples["env"]) == [r["env"]["name"] for r in records]
    assert list(samples["ok"]) == [r["ok"] for r in records]
    data = (EVAL_RUN / "traces.jsonl").read_bytes()
    for loc, rec in zip(samples["locator"], records):
        path, offset, length = frames.parse_line_locator(loc)
        assert path == str(EVAL_RUN / "traces.jsonl") and json.loads(data[offset:offset + length])["id"] == rec["id"]
    assert run.samples(split="eval", step=0).equals(samples) and run.samples(split="train").empty


def test_an_eval_episode_is_mapped_like_a_stream_record():
    run = rd.open_run(EVAL_RUN)
    records = json_lines(EVAL_RUN / "traces.jsonl")
    ep = run.episode("eval-1")
    rec = records[1]
    assert ep.ids["episode"] == rec["id"] and ep.env == "gsm8k" and ep.split == "eval" and ep.step == 0
    nodes = rec["traces"][0]["nodes"]
    assert [m.role for m in ep.messages] == [n["message"]["role"] for n in nodes]
    assert ep.rewards == {k: v["score"] for k, v in rec["traces"][0]["rewards"].items()}
    failed = run.episode("eval-4")
    assert failed.messages == [] and failed.error and not records[4]["ok"]
    with pytest.raises(KeyError):
        run.episode("eval-5")  # the torn line is no sample


def test_an_appended_trace_is_listed_on_the_next_look(tmp_path):
    run_dir = shutil.copytree(EVAL_RUN, tmp_path / EVAL_RUN.name)
    traces = run_dir / "traces.jsonl"
    data = traces.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    first = complete.split(b"\n", 1)[0]
    traces.write_bytes(complete + first + b"\n")  # the torn record lands whole
    samples = rd.open_run(run_dir).samples()
    assert len(samples) == 6
    assert rd.open_run(run_dir).episode("eval-5").ids["episode"] == json.loads(first)["id"]


def test_legacy_rollout_files_list_step_split_and_the_scalars_their_keys_hold():
    run = rd.open_run(LEGACY_RUN)
    samples = run.samples()
    assert frames.check(samples, frames.SAMPLES) == []
    files = sorted(LEGACY_RUN.glob("rollouts/step_*/*_rollouts*.jsonl"))
    records = {f: json_lines(f) for f in files}
    assert len(samples) == sum(len(r) for r in records.values())  # the garbage line is left out
    for f, recs in records.items():
        step, split = int(f.parent.name.split("_")[1]), f.name.split("_")[0]
        mine = samples[samples["locator"].str.startswith(str(f) + ":")]
        assert set(mine["step"]) == {step} and set(mine["split"]) == {split}
        assert list(mine["reward"]) == [r["reward"] for r in recs]
        assert list(mine["advantage"].fillna(-99)) == [r.get("advantage", -99) for r in recs]
        assert list(mine["group_id"]) == [str(r["example_id"]) for r in recs]
    assert set(run.samples(step=1)["split"]) == {"train"} and len(run.samples(split="eval")) == 2
    steps = run.steps()
    assert list(steps["step"]) == [0, 1] and list(steps["eval"]) == [True, False]


def test_a_legacy_episode_is_the_raw_record(monkeypatch):
    run = rd.open_run(LEGACY_RUN)
    row = run.samples(step=1).iloc[-1]
    path, offset, length = frames.parse_line_locator(row["locator"])
    record = json.loads(Path(path).read_bytes()[offset:offset + length])
    ep = run.episode(row["sample_id"])
    assert ep.raw == record
    assert [(m.role, m.content) for m in ep.messages] == [
        (m["role"], m["content"]) for m in record["prompt"] + record["completion"]]
    assert ep.reward == record["reward"] and ep.step == 1 and ep.split == "train"
    assert ep.metrics == record["metrics"]


def test_the_newest_layout_still_wins():
    """With a stream index, the variants are not listed (spec 9: newest layout first)."""
    run_dir = next((DATA / "prime-rl-traces").glob("math-python*"))
    assert prime_rl_traces.samples(str(run_dir))["locator"].str.contains("stream").all()


def test_an_eval_file_finished_without_a_final_newline_lists_and_opens_its_last_episode(tmp_path):
    """A finished `traces.jsonl` whose last record has no newline (a writer that never wrote one):
    once the file is still, that record is listed and opens; while the file is fresh it waits."""
    import os
    import time

    run_dir = tmp_path / EVAL_RUN.name
    shutil.copytree(EVAL_RUN, run_dir)
    records = json_lines(EVAL_RUN / "traces.jsonl")
    data = b"\n".join(json.dumps(r).encode() for r in records)  # whole records, no final newline
    (run_dir / "traces.jsonl").write_bytes(data)
    fresh = rd.open_run(run_dir).samples()
    assert len(fresh) == len(records) - 1  # still being written, for all anyone knows
    old = time.time() - 3600
    os.utime(run_dir / "traces.jsonl", (old, old))
    run = rd.open_run(run_dir)
    samples = run.samples()
    assert len(samples) == len(records)
    last = run.episode(samples["sample_id"].iloc[-1])
    assert last.sample_id == samples["sample_id"].iloc[-1] and last.raw["id"] == records[-1]["id"]
    assert samples["env"].iloc[-1] == records[-1]["env"]["name"]
    assert not [p for p in run.problems() if "traces.jsonl" in p.path]
