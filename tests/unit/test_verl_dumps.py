"""verl generation dumps (`rundash_core.sources.verl.dumps`, verl.md 11) as a run's samples: the
folders named by the launch overrides, a config print or the log's `Dumped generations to` lines."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

import rundash_core as rd
from rundash_core import frames
from rundash_core.io import files

from helpers import DATA, json_lines

DUMPS = DATA / "verl-dumps"


def test_rollout_and_validation_dirs_from_the_launch_overrides():
    run = rd.open_run(DUMPS / "grpo-dumps.log")
    samples = run.samples()  # (the listing: what `capabilities` learns from)
    assert {"samples", "episodes"} <= run.capabilities
    assert frames.check(samples, frames.SAMPLES) == []
    for split, folder in (("train", "rollout"), ("val", "val")):
        mine = samples[samples["split"] == split]
        for step, rows in mine.groupby("step"):
            dumped = json_lines(DUMPS / "generations" / folder / f"{step}.jsonl")
            assert len(rows) == len(dumped)  # the cut-off last line of rollout/2.jsonl is left out
            assert list(rows["reward"]) == [d["score"] for d in dumped]
            assert all(loc.startswith(str((DUMPS / "generations" / folder).resolve())) for loc in rows["locator"])
    assert set(samples.loc[samples["split"] == "train", "step"]) == {1, 2}
    assert set(samples.loc[samples["split"] == "val", "step"]) == {0, 2}
    train = samples[samples["split"] == "train"]
    assert (train["trainer_step"] == train["step"]).all()
    assert samples.loc[samples["split"] == "val", "trainer_step"].isna().all()
    # the n responses of one prompt share a group (the spec: group by input)
    first = json_lines(DUMPS / "generations" / "rollout" / "1.jsonl")
    by_input = {}
    for gid, rec in zip(samples[samples["sample_id"].str.startswith("t1-")]["group_id"], first):
        by_input.setdefault(rec["input"], set()).add(gid)
    assert len(by_input) == 2 and all(len(g) == 1 for g in by_input.values())
    assert len(set().union(*by_input.values())) == 2
    assert run.steps()["samples"].sum() == len(samples)
    assert samples["sample_id"].is_unique and all(frames.is_url_safe(s) for s in samples["sample_id"])
    with pytest.raises(ValueError):
        run.samples(split="bogus")
    assert set(run.samples(split="val", step=2)["sample_id"]) == {f"v2-{k}" for k in range(5)}


def test_episode_reads_its_one_line(monkeypatch):
    run = rd.open_run(DUMPS / "grpo-dumps.log")
    row = run.samples(step=1).iloc[0]
    path, offset, length = frames.parse_line_locator(row["locator"])
    record = json.loads(Path(path).read_bytes()[offset:offset + length])
    reads = []
    real = files.read_range  # (the one reader of located lines: io.jsonl.read_located_object)
    monkeypatch.setattr(files, "read_range", lambda p, a, b: reads.append((p, a, b)) or real(p, a, b))
    ep = run.episode(row["sample_id"])
    assert reads == [(path, offset, offset + length)]
    assert [m.role for m in ep.messages] == ["user", "assistant"]
    assert ep.messages[0].content == record["input"] and ep.messages[1].content == record["output"]
    assert "étape" in ep.messages[1].content and "Janet’s" in ep.messages[0].content  # raw UTF-8 kept
    assert ep.reward == record["score"] and ep.split == "train" and ep.step == 1
    assert ep.ids["gts"] == record["gts"] and ep.ids["pred"] == record["pred"]
    assert ep.metrics["acc"] == float(record["acc"])
    val = run.episode("v2-4")  # a row with gts null and markup in its texts: kept as text
    assert val.messages[0].content == "<script>alert(1)</script>" and "gts" not in val.ids
    assert val.metrics["reward"] == 0.0 and val.split == "val"
    with pytest.raises(KeyError):
        run.episode("t9-0")
    with pytest.raises(KeyError):
        run.episode("nonsense")


def test_a_cut_off_line_is_a_problem_naming_the_file():
    run = rd.open_run(DUMPS / "grpo-dumps.log")
    run.samples()
    bad = [p for p in run.problems() if p.path.endswith(os.path.join("rollout", "2.jsonl"))]
    assert len(bad) == 1 and bad[0].line == 5


def test_a_shared_dir_is_split_by_its_rows():
    """Both settings name one folder: a validation dump (every row has `reward`) is val."""
    run = rd.open_run(DUMPS / "shared-dumps.log")
    dirs, missing = run.dump_dirs()
    assert len(dirs) == 1 and dirs[0].split is None and not missing
    samples = run.samples()
    assert dict(samples.groupby("step")["split"].agg(set).map(lambda s: s.pop())) == {1: "train", 2: "val"}
    assert list(run.samples(split="val")["sample_id"]) == [f"v2-{k}" for k in range(4)]
    assert run.episode("v2-1").split == "val"


def test_a_missing_dump_dir_is_a_problem_not_an_error():
    run = rd.open_run(DUMPS / "missing-dumps.log")
    assert run.samples().empty and "samples" not in run.capabilities
    assert any(p.path == "/nonexistent/rollouts" and "missing" in p.what for p in run.problems())
    assert len(run.metrics())  # the run still shows


def _copy_run(tmp_path: Path) -> Path:
    folder = tmp_path / "root" / "runs"
    shutil.copytree(DUMPS, folder)
    return folder


def test_a_dump_dir_outside_the_allowed_roots_is_not_read(tmp_path):
    folder = _copy_run(tmp_path)
    outside = tmp_path / "elsewhere"
    shutil.move(folder / "generations", outside)
    (folder / "generations").symlink_to(outside, target_is_directory=True)
    files.set_roots([tmp_path / "root"])
    run = rd.open_run(folder / "grpo-dumps.log")
    assert run.samples().empty and "samples" not in run.capabilities
    assert {p.what.split(") ")[-1] for p in run.problems() if "generation dump" in p.what} == {
        f"{files.OUTSIDE_ROOTS}: its samples are not shown"}


def test_a_dir_known_only_from_the_log_and_a_dump_written_later(tmp_path):
    """No setting in the config: the `Dumped generations to` lines name the folder (relative to the
    run folder above `logs/`); a dump that lands later is listed on the next look."""
    work = tmp_path / "work"
    (work / "logs").mkdir(parents=True)
    shutil.copytree(DUMPS / "generations" / "val", work / "gen")
    log = work / "logs" / "exp.log"
    text = (DUMPS / "grpo-dumps.log").read_text(encoding="utf-8").split("\n", 1)[1]  # no launch overrides
    log.write_text(text.replace("generations/val/", "gen/").replace("generations/rollout/", "gen/"), encoding="utf-8")
    run = rd.open_run(log)
    assert set(run.samples()["sample_id"].str[:2]) == {"v0", "v2"}  # rollout files are not there
    row = {"input": "q", "output": "a", "gts": "1", "score": 0.5, "step": 3}
    (work / "gen" / "3.jsonl").write_text(json.dumps(row) + "\n")
    with open(log, "a", encoding="utf-8") as fh:
        fh.write("Dumped generations to gen/3.jsonl\n")
    later = rd.open_run(log).samples(step=3)
    assert list(later["sample_id"]) == ["t3-0"] and list(later["reward"]) == [0.5]  # no `reward` key: a rollout dump


def test_swe_lego_rl_samples_stay_its_trials(tmp_path):
    """A SWE-Lego-RL log (a verl subclass) keeps its Harbor trials as samples, dumps or not."""
    lego = shutil.copytree(DATA / "lego", tmp_path / "lego")
    log = lego / "logs" / "qwen3-8b-swegym-gspo-async-r1.log"
    shutil.copytree(DUMPS / "generations" / "val", lego / "logs" / "gen")
    with open(log, "a", encoding="utf-8") as fh:
        fh.write("Dumped generations to gen/2.jsonl\n")
    run = rd.open_run(log)
    assert run.kind == "swe-lego-rl"
    samples = run.samples()
    assert len(samples) and all(os.path.isdir(p) for p in samples["locator"])
    ep = run.episode(samples["sample_id"].iloc[0])
    assert ep.sample_id == samples["sample_id"].iloc[0] and not ep.sample_id.startswith(("t", "v"))


def test_the_demo_verl_run_dumps_its_validations(tmp_path):
    from rundash_core import demo
    from rundash_core.demo.runs import OTHER_RUNS

    folder = demo.ensure_demo(tmp_path / "demo")
    log = folder / OTHER_RUNS["verl"]
    run = rd.open_run(log)
    samples = run.samples()
    assert len(samples) and set(samples["split"]) == {"val"}
    text = log.read_text(encoding="utf-8")
    named = pd.Series(text.split("\n")).str.extract(r"Dumped generations to \S+/(\d+)\.jsonl")[0]
    dumped = {int(s) for s in named.dropna()}
    assert set(samples["step"]) == dumped
    tidy = run.metrics()
    val_steps = set(tidy.loc[tidy["metric"].astype(str).str.startswith("val-core/"), "step"].astype(int))
    assert dumped == val_steps
    ep = run.episode(samples["sample_id"].iloc[-1])
    assert ep.messages[1].content.endswith(ep.ids["pred"]) or ep.ids["pred"] in ep.messages[1].content
    assert ep.reward == (1.0 if ep.ids["pred"] == ep.ids["gts"] else 0.0)


def test_the_trajectory_page_opens_a_dumped_sample_and_keeps_markup_inert(monkeypatch, tmp_path):
    from helpers import open_page

    folder = _copy_run(tmp_path)
    run = rd.open_run(folder / "grpo-dumps.log")
    ep = run.episode("v2-4")  # input `<script>…`, output `<img onerror=…>`
    at = open_page(monkeypatch, folder, "pages/trajectory.py", {"run": "grpo-dumps", "sample": "v2-4"})
    codes = [c.value.strip() for c in at.code]
    assert ep.messages[0].content in codes and ep.messages[1].content in codes  # shown literally
    for md in at.markdown:
        assert "<img" not in md.value and "<script" not in md.value
    assert [m.value for m in at.metric if m.label == "Reward"] == [f"{ep.reward:.4g}"]
