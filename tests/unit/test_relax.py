"""Relax runs: derived metrics against an independent reading, both ways of pointing at a run,
discovery, incremental re-reads, bad input, samples, and no writes into the run.

The reference below is written from the format notes (relax.md sections 2, 4, 5), not from
rundash's code: json.loads per line, plain Python statistics per file.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import statistics
from collections import Counter, defaultdict
from pathlib import Path

import pandas as pd
import pytest

import rundash_core as rd
from rundash_core import cache
from rundash_core.metrics.block import TidyLog
from rundash_core.sources.relax import rollout_file as relax_file
from rundash_core.sources.relax import run as relax

from helpers import DATA, NEW_RUN, OLD_RUN, copy_run, parse_row_bytes, set_all_mtimes, snapshot, write_lines

RELAX_NAME = "relax-run"
RELAX_RUN = DATA / "relax" / RELAX_NAME
STATUS_NAMES = ("completed", "truncated", "aborted", "failed", "pending", "unknown")


# Reference ----------------------------------------------------------------------------------------
def ref_rows(path: Path) -> list[dict]:
    """Every line that parses to a JSON object (NUL bytes dropped, bad UTF-8 replaced)."""
    return [r for raw in Path(path).read_bytes().split(b"\n") if (r := parse_row_bytes(raw)) is not None]


def ref_reward(value):
    if isinstance(value, dict):
        value = value.get("score")
    if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
        return float(value)
    return None


def ref_int(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def ref_step_metrics(rows: list[dict], prefix: str) -> dict[str, float]:
    out = {f"{prefix}/samples": float(len(rows))}
    rewards = [r for row in rows if (r := ref_reward(row.get("reward"))) is not None]
    out[f"{prefix}/reward/count"] = float(len(rewards))
    if rewards:
        out[f"{prefix}/reward/mean"] = statistics.fmean(rewards)
        out[f"{prefix}/reward/std"] = statistics.pstdev(rewards)
        out[f"{prefix}/reward/min"] = min(rewards)
        out[f"{prefix}/reward/max"] = max(rewards)
    for key in ("response_length", "total_length"):
        values = [v for row in rows if (v := ref_int(row.get(key))) is not None]
        if values:
            out[f"{prefix}/{key}/mean"] = statistics.fmean(values)
            out[f"{prefix}/{key}/max"] = float(max(values))
    if rows:
        counts = Counter(row.get("status") if row.get("status") in STATUS_NAMES[:5] else "unknown" for row in rows)
        for s in STATUS_NAMES:
            out[f"{prefix}/status/{s}"] = counts[s] / len(rows)
    return out


def ref_file_metrics(path: Path, split: str) -> dict[str, float]:
    rows = ref_rows(path)
    if split == "train":
        out = ref_step_metrics(rows, "rollout")
        groups = defaultdict(list)
        for row in rows:
            r = ref_reward(row.get("reward"))
            if ref_int(row.get("group_index")) is not None and r is not None:
                groups[row["group_index"]].append(r)
        scored = [g for g in groups.values() if len(g) >= 2]
        if scored:
            out["rollout/groups/zero_variance"] = sum(len(set(g)) == 1 for g in scored) / len(scored)
        return out
    out = ref_step_metrics(rows, "eval")
    by_dataset = defaultdict(list)
    for row in rows:
        by_dataset[row.get("dataset") or "default"].append(row)
    for dataset, drows in by_dataset.items():
        full = ref_step_metrics(drows, f"eval/{dataset}")
        for name in ("samples", "reward/mean", "reward/std", "reward/count", "response_length/mean"):
            if f"eval/{dataset}/{name}" in full:
                out[f"eval/{dataset}/{name}"] = full[f"eval/{dataset}/{name}"]
    return out


def ref_run_metrics(save: Path) -> dict[tuple[str, int, str], tuple[float, float]]:
    """(producer, step, metric) -> (value, time) for every rollout file under `save`."""
    out = {}
    for split, producer in (("train", "rollout"), ("eval", "eval")):
        folder = save / "rollout_result" / split
        seen = set()
        for f in sorted(folder.glob("*.jsonl"), key=lambda f: (len(f.name), f.name)) if folder.is_dir() else []:
            if not f.stem.isdigit() or int(f.stem) in seen or not f.is_file():
                continue  # a zero-padded duplicate of a step gives way to Relax's own name
            seen.add(int(f.stem))
            t = os.stat(f).st_mtime
            for metric, value in ref_file_metrics(f, split).items():
                out[(producer, int(f.stem), metric)] = (value, t)
    return out


def got_metrics(frame: pd.DataFrame) -> dict[tuple[str, int, str], tuple[float, float]]:
    out = {}
    for step, t, metric, value, producer in zip(frame["step"], frame["time"], frame["metric"], frame["value"],
                                                frame["producer"]):
        key = (str(producer), int(step), str(metric))
        assert key not in out, f"duplicate row {key}"
        out[key] = (float(value), float(t))
    return out


def assert_metrics_match(run, save: Path) -> dict:
    got, want = got_metrics(run.metrics()), ref_run_metrics(save)
    assert set(got) == set(want), f"missing {sorted(set(want) - set(got))[:5]} extra {sorted(set(got) - set(want))[:5]}"
    for key, (value, t) in want.items():
        assert got[key][0] == pytest.approx(value, rel=1e-12, abs=1e-12), key
        assert got[key][1] == pytest.approx(t, abs=1e-6), key
    return want


def problems_of(run) -> dict[tuple[str, str], tuple[int, int | None]]:
    """(file name relative to rollout_result, what) -> (count, first line)."""
    out = {}
    for p in run.problems():
        rel = os.path.relpath(p.path, run.result_dir)
        out[(rel, p.what)] = (p.count, p.line)
    return out


def row(step: int, index: int, **kw) -> dict:
    base = {"rollout_id": step, "sample_index": index, "prompt": "p", "response": "r", "reward": 1.0,
            "response_length": 10 + index, "total_length": 30 + index, "status": "completed", "group_index": index // 2}
    return {**base, **kw}


@pytest.fixture
def save(tmp_path) -> Path:
    """A writable copy of the sample Relax run (`<save>` with rollout_result/ inside)."""
    run = copy_run(RELAX_RUN, tmp_path / "out")
    set_all_mtimes(run, 1_800_000_000.0)
    return run


# Metrics ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["save", "rollout_result"])
def test_metrics_equal_independent_computation(save, form):
    run = rd.open_run(save if form == "save" else save / "rollout_result")
    assert isinstance(run, relax.RelaxRun) and run.kind == "relax"
    assert (run.name, run.run_id) == (RELAX_NAME, RELAX_NAME)
    want = assert_metrics_match(run, save)
    steps = {(p, s) for p, s, _m in want}
    assert steps == {("rollout", s) for s in range(5)} | {("eval", s) for s in (0, 2, 4)}
    # the sample exercises every rule: null rewards, dict rewards, all statuses, several datasets
    assert want[("rollout", 1, "rollout/reward/count")][0] == 10.0
    assert want[("rollout", 1, "rollout/status/pending")][0] == pytest.approx(2 / 12)
    assert want[("rollout", 4, "rollout/status/failed")][0] > 0 and want[("rollout", 0, "rollout/status/aborted")][0] > 0
    assert ("eval", 0, "eval/gpqa_diamond/reward/mean") in want and ("eval", 0, "eval/aime24/reward/mean") in want


def test_metrics_dtypes_match_the_tidy_frame(save):
    frame = rd.open_run(save).metrics()
    empty = TidyLog().frame()
    assert list(frame.columns) == list(empty.columns)
    assert [str(t) for t in frame.dtypes] == [str(t) for t in empty.dtypes] == [
        "Int64", "float64", "category", "float64", "category"]
    assert all(isinstance(m, str) for m in frame["metric"].unique())
    assert set(map(str, frame["producer"].unique())) == {"rollout", "eval"}
    assert not frame.duplicated(["producer", "step", "metric"]).any()


def test_dict_reward_uses_score(save):
    rows = [json.loads(line) for line in (save / "rollout_result/eval/2.jsonl").read_text().splitlines()]
    gpqa = [r["reward"]["score"] for r in rows if r["dataset"] == "gpqa_diamond"]
    assert all(isinstance(r["reward"], dict) for r in rows if r["dataset"] == "gpqa_diamond")
    wide = rd.open_run(save).metrics_wide(producer="eval").set_index("step")
    assert wide.at[2, "eval/gpqa_diamond/reward/mean"] == pytest.approx(sum(gpqa) / len(gpqa))
    assert wide.at[2, "eval/gpqa_diamond/reward/count"] == len(gpqa)


def test_metrics_wide(save):
    run = rd.open_run(save)
    tidy = run.metrics()
    wide = run.metrics_wide()
    assert list(wide.columns[:2]) == ["step", "time"] and wide["step"].dtype == "Int64"
    assert list(wide["step"]) == [0, 1, 2, 3, 4]
    assert set(wide.columns[2:]) == set(map(str, tidy["metric"].unique()))
    for step, _t, metric, value in zip(tidy["step"], tidy["time"], tidy["metric"], tidy["value"]):
        assert wide.loc[wide["step"] == step, str(metric)].item() == value
    eval_only = run.metrics_wide(producer="eval")
    assert list(eval_only["step"]) == [0, 2, 4] and all(c.startswith("eval/") for c in eval_only.columns[2:])
    picked = run.metrics_wide(metrics=["rollout/reward/mean"])
    assert list(picked.columns) == ["step", "time", "rollout/reward/mean"] and len(picked) == 5
    with pytest.raises(ValueError, match="rollout, eval"):
        run.metrics_wide(producer="nobody")


# Overview, config ---------------------------------------------------------------------------------
def test_overview_times_are_none_and_status_from_mtimes(save):
    """Relax rows carry no times: created, updated and the duration are unknown (a copy would read
    differently from the original); the files' times only say whether it is still being written."""
    files = sorted((save / "rollout_result").glob("*/*.jsonl"))
    t0 = 1_800_000_000.0
    for i, f in enumerate(files):
        os.utime(f, (t0 + 10 * i, t0 + 10 * i))
    t_last = t0 + 10 * (len(files) - 1)
    run = rd.open_run(save)
    ov = run.overview(now=t_last + 10_000)
    assert (ov.kind, ov.name, ov.run_id, ov.flavor, ov.attempts) == ("relax", RELAX_NAME, RELAX_NAME, "rl", 1)
    assert ov.step == 4 and ov.max_steps is None and ov.model is None
    assert ov.status == "stopped"
    assert (ov.created, ov.started, ov.updated, ov.duration_s) == (None, None, None, None)
    assert ov.touched == pd.Timestamp(t_last, unit="s", tz="UTC")
    assert ov.eval_envs == ["aime24", "gpqa_diamond"]
    assert run.overview(now=t_last + 5).status == "running"


def test_a_copy_that_reset_every_file_time_reads_as_the_original(save):
    """`save` has every file at one time (a plain `cp -r`): the files' times say nothing of how long
    the run took, so the card says n/a rather than 0 s, as it does for the original."""
    ov = rd.open_run(save).overview(now=1_800_000_000.0 + 10_000)
    assert ov.duration_s is None and ov.started is None and ov.created is None and ov.updated is None
    assert ov.touched == pd.Timestamp(1_800_000_000.0, unit="s", tz="UTC") and ov.status == "stopped"


def test_model_from_rows_when_present(tmp_path):
    save = tmp_path / "s"
    write_lines(save / "rollout_result/train/0.jsonl", [row(0, 0, model="Qwen/Qwen3-4B"), row(0, 1)])
    assert rd.open_run(save).overview().model == "Qwen/Qwen3-4B"


def test_relax_leaves_no_config(save):
    run = rd.open_run(save)
    assert run.config() == {} and run.configs() == {} and run.configs(attempt=1) == {}
    assert run.attempts() == [1]


# Finding runs -------------------------------------------------------------------------------------
def test_discovery_in_a_folder_with_other_runs(tmp_path):
    out = tmp_path / "outputs"
    copy_run(RELAX_RUN, out)
    copy_run(RELAX_RUN, out, ".hidden-relax")
    copy_run(NEW_RUN, out)
    copy_run(OLD_RUN, out)
    write_lines(out / "dataset" / "train" / "data.jsonl", [{"text": "not a run"}])  # train/ alone is no run
    write_lines(out / "custom-results" / "eval" / "3.jsonl", [row(3, 0, dataset="aime24")])
    df = rd.discover([out]).set_index("run_id")
    assert df["error"].isna().all(), df["error"].tolist()
    assert dict(df["kind"]) == {RELAX_NAME: "relax", "custom-results": "relax", NEW_RUN.name: "prime-rl",
                                OLD_RUN.name: "prime-rl"}
    assert df.at[RELAX_NAME, "step"] == 4 and df.at[RELAX_NAME, "path"] == str(out / RELAX_NAME)
    assert pd.isna(df.at["custom-results", "step"])  # eval files only: no train step


@pytest.mark.parametrize("form", ["save", "rollout_result"])
def test_tracking_the_run_itself(save, form):
    tracked = save if form == "save" else save / "rollout_result"
    df = rd.discover([tracked])
    assert list(df["kind"]) == ["relax"] and list(df["run_id"]) == [RELAX_NAME]
    assert list(df["path"]) == [str(tracked)]


def test_not_runs(tmp_path):
    (tmp_path / "empty").mkdir()
    write_lines(tmp_path / "flat" / "0.jsonl", [row(0, 0)])  # a flat bucket is not claimed
    write_lines(tmp_path / "data" / "train" / "0.json", [row(0, 0)])
    for name in ("empty", "flat", "data"):
        assert not relax.is_run_dir(str(tmp_path / name))
        with pytest.raises(rd.RunError):
            rd.open_run(tmp_path / name)
    assert not relax.is_run_dir(str(RELAX_RUN / "rollout_result" / "train" / "0.jsonl"))


# Incremental re-reads -----------------------------------------------------------------------------
@pytest.fixture
def parse_spy(monkeypatch):
    calls: list[str] = []
    real = relax.parse_step_file

    def spy(path, *args, **kw):
        calls.append(os.path.relpath(path, os.path.dirname(os.path.dirname(path))))
        return real(path, *args, **kw)

    monkeypatch.setattr(relax, "parse_step_file", spy)
    return calls


def test_only_new_or_changed_files_are_parsed(save, parse_spy):
    run = rd.open_run(save)
    assert_metrics_match(run, save)
    assert sorted(parse_spy) == sorted(f"{s}/{f.name}" for s in ("train", "eval")
                                       for f in (save / "rollout_result" / s).glob("*.jsonl"))
    parse_spy.clear()
    run.metrics(), run.overview(), run.problems(), run.samples()
    assert parse_spy == []
    rd.open_run(save / "rollout_result").metrics()  # another Run object: the parsed files are shared
    assert parse_spy == []

    new = save / "rollout_result/train/5.jsonl"
    write_lines(new, [row(5, i, reward=float(i % 2)) for i in range(6)])
    misses = cache.shared.misses
    assert_metrics_match(run, save)
    assert parse_spy == ["train/5.jsonl"] and cache.shared.misses == misses + 1
    assert run.overview().step == 5

    parse_spy.clear()
    changed = save / "rollout_result/train/2.jsonl"
    write_lines(changed, [row(2, i, reward=0.25 * i, status="truncated") for i in range(3)])
    os.utime(changed, (1_800_000_100.0, 1_800_000_100.0))
    assert_metrics_match(run, save)
    assert parse_spy == ["train/2.jsonl"]
    assert run.metrics_wide().set_index("step").at[2, "rollout/status/truncated"] == 1.0

    parse_spy.clear()
    os.remove(save / "rollout_result/train/3.jsonl")
    assert_metrics_match(run, save)
    assert parse_spy == [] and 3 not in set(run.metrics_wide()["step"])


def test_cache_is_keyed_by_path_and_file_id(save):
    run = rd.open_run(save)
    run.metrics()
    keys = [k for k in cache.shared._items if k[0] == "relax"]
    assert len(keys) == 8
    assert {k[1] for k in keys} == {os.path.realpath(p) for p in (save / "rollout_result").glob("*/*.jsonl")}
    assert all(isinstance(k[2], relax.FileId) for k in keys)


# Bad input ----------------------------------------------------------------------------------------
def test_null_rewards_are_counted_not_averaged(save):
    run = rd.open_run(save)
    wide = run.metrics_wide().set_index("step")
    rows = ref_rows(save / "rollout_result/train/1.jsonl")
    scored = [r["reward"] for r in rows if r["reward"] is not None]
    assert len(scored) < len(rows)
    assert wide.at[1, "rollout/reward/mean"] == pytest.approx(sum(scored) / len(scored))
    assert wide.at[1, "rollout/status/pending"] == pytest.approx(sum(r["status"] == "pending" for r in rows) / len(rows))
    assert not [p for p in run.problems() if "null" in p.what]  # data (counted by status), not a file problem
    samples = run.samples(split="train", step=1)
    assert samples["reward"].isna().sum() == len(rows) - len(scored)
    assert set(samples[samples["reward"].isna()]["status"]) <= {"aborted", "pending"}


def test_garbage_and_truncated_lines(tmp_path):
    save = tmp_path / "s"
    path = save / "rollout_result/train/0.jsonl"
    write_lines(path, [row(0, 0), b"not json at all", row(0, 1, reward=0.0), b'{"rollout_id": 0, "sample_ind',
                       b"[1, 2]", b"", row(0, 2, reward={"acc": True}), row(0, 3, reward="high"),
                       b'{"rollout_id": 0, "sample_index": 4, "reward": NaN, "response_length": 1, '
                       b'"total_length": 2, "status": "completed", "group_index": 9}',
                       row(0, 5, status="exploded"), row(0, 6, response_length=None), row(9, 7),
                       b'{"rollout_id": 0, "sample_index": 8, "reward": 1.0, "status": "completed", "total_length": '
                       b'3, "response_length": 2, "prompt": "\xff\x00ok"}'])
    run = rd.open_run(save)
    assert_metrics_match(run, save)
    problems = problems_of(run)
    assert problems[("train/0.jsonl", "not JSON")] == (1, 2)
    assert problems[("train/0.jsonl", "truncated JSON line")] == (1, 4)
    assert problems[("train/0.jsonl", "not a JSON object")] == (1, 5)
    assert problems[("train/0.jsonl", "object reward without a numeric 'score': left out of reward stats")] == (1, 7)
    assert problems[("train/0.jsonl", "reward not a number: left out of reward stats")] == (2, 8)
    assert problems[("train/0.jsonl", "status missing or not a Relax status (counted as 'unknown')")] == (1, 10)
    assert problems[("train/0.jsonl", "response_length missing or not an integer: left out of length stats")] == (1, 11)
    assert problems[("train/0.jsonl", "rollout_id differs from the file name (the file name's step is used)")] == (1, 12)
    assert problems[("train/0.jsonl", "invalid UTF-8 (replaced)")][1] == 13
    wide = run.metrics_wide().set_index("step")
    assert wide.at[0, "rollout/samples"] == 9 and wide.at[0, "rollout/status/unknown"] == pytest.approx(1 / 9)
    assert len(run.samples()) == 9


def test_half_written_last_line_of_the_newest_file(save, parse_spy):
    path = save / "rollout_result/train/4.jsonl"
    full = path.read_bytes()
    lines = full.split(b"\n")
    path.write_bytes(b"\n".join(lines[:-2]) + b"\n" + lines[-2][: len(lines[-2]) // 2])
    run = rd.open_run(save)
    assert_metrics_match(run, save)
    assert run.metrics_wide().set_index("step").at[4, "rollout/samples"] == len(lines) - 2
    assert problems_of(run)[("train/4.jsonl", "incomplete last line (still being written, or the writer stopped)")] == (
        1, len(lines) - 1)
    parse_spy.clear()
    path.write_bytes(full)  # the writer finished
    assert_metrics_match(run, save)
    assert parse_spy == ["train/4.jsonl"]
    assert not [p for p in run.problems() if "incomplete" in p.what]
    assert run.metrics_wide().set_index("step").at[4, "rollout/samples"] == len(lines) - 1


def test_lines_split_across_read_chunks(save, monkeypatch):
    whole = rd.open_run(save)
    want_problems, want_samples = whole.problems(), whole.samples()
    cache.shared.clear()
    monkeypatch.setattr(relax_file, "CHUNK_BYTES", 97)  # far shorter than a line
    run = rd.open_run(save)
    assert_metrics_match(run, save)
    assert run.problems() == want_problems
    pd.testing.assert_frame_equal(run.samples(), want_samples)


def test_last_line_without_newline_is_read(tmp_path):
    save = tmp_path / "s"
    path = save / "rollout_result/train/0.jsonl"
    write_lines(path, [row(0, 0), row(0, 1, reward=0.0)])
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    run = rd.open_run(save)
    assert run.metrics_wide().at[0, "rollout/reward/mean"] == 0.5
    assert run.problems() == []


def test_empty_and_odd_files(save):
    results = save / "rollout_result"
    (results / "train/5.jsonl").write_bytes(b"")
    (results / "train/6.jsonl").mkdir()  # a directory where a file is expected
    os.symlink("nowhere.jsonl", results / "train/7.jsonl")
    shutil.copy(results / "train/1.jsonl", results / "train/01.jsonl")  # step 1 named twice
    (results / "train/notes.txt").write_text("ignored")
    run = rd.open_run(save)
    want = assert_metrics_match(run, save)
    assert {k[2]: v for k, (v, _t) in want.items() if k[1] == 5} == {"rollout/samples": 0, "rollout/reward/count": 0}
    problems = problems_of(run)
    assert problems[("train/5.jsonl", "empty file: no samples")] == (1, None)
    assert problems[("train/6.jsonl", "not a regular file")] == (1, None)
    assert problems[("train/7.jsonl", "broken symlink")] == (1, None)
    assert problems[("train/01.jsonl", "same step as 1.jsonl (ignored)")] == (1, None)
    assert run.overview().step == 7  # the highest train file name, even if it cannot be read
    df = rd.discover([save.parent])
    assert list(df["kind"]) == ["relax"] and df["error"].isna().all()


def test_a_run_with_no_files_yet(tmp_path):
    save = tmp_path / "s"
    (save / "rollout_result" / "train").mkdir(parents=True)
    run = rd.open_run(save)
    assert run.metrics().empty and dict(run.metrics().dtypes) == dict(TidyLog().frame().dtypes)
    assert list(run.metrics_wide().columns) == ["step", "time"]
    assert run.samples().empty and list(run.samples().columns) == list(relax.SAMPLE_COLUMNS)
    ov = run.overview()
    assert (ov.step, ov.status, ov.started) == (None, "unknown", None)
    assert [p.what for p in run.problems()] == ["no rollout files yet (train/ and eval/ hold no {rollout_id}.jsonl)"]


def test_eval_row_without_dataset(tmp_path):
    save = tmp_path / "s"
    write_lines(save / "rollout_result/eval/0.jsonl", [row(0, 0, dataset="aime24"), row(0, 1, reward=0.0)])
    run = rd.open_run(save)
    assert_metrics_match(run, save)
    assert problems_of(run)[("eval/0.jsonl", "eval row without 'dataset' (grouped as 'default')")] == (1, 2)
    assert set(run.samples()["env"]) == {"aime24", "default"}


def test_unreadable_file(save, monkeypatch):
    path = save / "rollout_result/train/3.jsonl"

    real = relax_file.open_file

    def refuse(p, *args, **kw):
        if os.fspath(p) == str(path):
            raise PermissionError(13, "Permission denied", str(p))
        return real(p, *args, **kw)

    monkeypatch.setattr(relax_file, "open_file", refuse)  # as if chmod 000 (tests may run as root)
    run = rd.open_run(save)
    assert 3 not in set(run.metrics_wide()["step"])  # no metrics, rather than a step of zero samples
    assert problems_of(run)[("train/3.jsonl", "cannot be read (permission denied)")] == (1, None)
    assert run.overview().step == 4 and len(run.samples(step=3)) == 0
    monkeypatch.undo()
    run.metrics()  # the failure was not cached: the next look reads the file
    assert 3 in set(run.metrics_wide()["step"]) and not [p for p in run.problems() if "cannot" in p.what]
    assert_metrics_match(run, save)


# Samples ------------------------------------------------------------------------------------------
def test_samples_one_row_per_sample(save):
    run = rd.open_run(save)
    samples = run.samples()
    assert list(samples.columns) == list(relax.SAMPLE_COLUMNS)
    files = sorted((save / "rollout_result").glob("*/*.jsonl"))
    assert len(samples) == sum(len(ref_rows(f)) for f in files)
    assert samples["sample_id"].is_unique
    for rec in samples.itertuples():
        path, offset, length = rec.locator.rsplit(":", 2)
        raw = json.loads(Path(path).read_bytes()[int(offset):int(offset) + int(length)])
        assert (raw["rollout_id"], raw["status"]) == (rec.step, rec.status)
        index = [json.loads(line)["sample_index"] for line in Path(path).read_text().splitlines() if line.strip()]
        line_no = Path(path).read_bytes()[:int(offset)].count(b"\n") + 1
        assert rec.sample_id == (f"{rec.split}-{rec.step}-{raw['sample_index']}" if index.count(raw["sample_index"]) == 1
                                 else f"{rec.split}-{rec.step}-L{line_no}")  # an index repeated in the file: its line
        assert Path(path).parent.name == rec.split and str(raw["group_index"]) == rec.group_id
        assert (raw["total_length"] - raw["response_length"], raw["response_length"]) == (rec.input_tokens, rec.output_tokens)
        assert rec.truncated == (raw["status"] == "truncated") and rec.ok == (raw["status"] != "failed")
        want = ref_reward(raw["reward"])
        assert (pd.isna(rec.reward) and want is None) or rec.reward == want
        assert (rec.env if rec.split == "eval" else None) == raw.get("dataset")
    assert set(run.samples(split="eval")["split"]) == {"eval"} and len(run.samples(split="eval")) == 21
    assert len(run.samples(split="train", step=3)) == 12 and run.samples(step=1)["split"].tolist() == ["train"] * 12
    with pytest.raises(ValueError):
        run.samples(split="validation")


# Read-only ----------------------------------------------------------------------------------------
def test_never_writes_inside_the_run(save):
    before = snapshot(save)
    for target in (save, save / "rollout_result"):
        run = rd.open_run(target)
        run.metrics(), run.metrics_wide(), run.overview(), run.problems()
        run.samples(), run.config(), run.configs()
        rd.discover([target]), rd.discover([save.parent])
    assert snapshot(save) == before
