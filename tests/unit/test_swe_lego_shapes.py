"""SWE-Lego-RL runs and their Harbor trial dirs in every shape the formats allow: trials still
being written, odd JSON (NaN, bad UTF-8, NUL bytes, huge ints, wrong types), entries that are no
trial dir, links outside the allowed roots, thousands of trials, validation dumps with missing or
duplicated tasks, and log markers cut, joined or repeated. Each run is a copy of a real one in
tests/data, changed in tmp_path and read through the public API only; expected values come from
the files (json.loads of what the test wrote), and each bad input must be a Problem naming it.
"""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import pandas as pd
import pytest

import rundash_core as rd
from rundash_core import frames
from rundash_core.io import bytetail, files
from rundash_core.sources.swe_lego_rl import harbor
from rundash_core.sources.swe_lego_rl import marks as lego_marks
from rundash_core.sources.swe_lego_rl import run as swe_lego_rl

from helpers import DATA, copy_run

EXP = "qwen3-8b-swegym-gspo-async-r1"


def exp_of(work: Path) -> Path:
    return work / "harbor_trials" / "swe_lego_rl" / EXP


def log_of(work: Path) -> Path:
    return work / "logs" / f"{EXP}.log"


@pytest.fixture
def work(tmp_path) -> Path:
    return copy_run(DATA / "lego", tmp_path, "work")


@pytest.fixture
def val_work(tmp_path) -> Path:
    return copy_run(DATA / "lego-val", tmp_path, "val")


def trials_of(work: Path, step: str = "step_0001") -> list[Path]:
    return sorted(p for p in (exp_of(work) / step).iterdir() if p.is_dir())


def row(samples: pd.DataFrame, trial: Path) -> pd.Series:
    return samples.set_index("locator").loc[str(trial)]


def whats(run) -> str:
    return "\n".join(str(p) for p in run.problems())


def all_views(run) -> None:
    """Every view of the run answers in its schema (a traceback fails the test); every fifth
    sample and each with a problem opens as an episode."""
    samples = run.samples()
    assert frames.check(samples, frames.SAMPLES) == []
    assert frames.check(run.validation(), frames.VALIDATION) == []
    assert frames.check(run.val_cot(), frames.VAL_COT) == []
    assert frames.check(run.failure_modes(), frames.FAILURE_MODES) == []
    run.overview(), run.overview(), run.metrics(), run.problems(), run.folders()
    for sid in samples["sample_id"][::5]:
        assert run.episode(sid).sample_id == sid


# result.json and reward.txt ------------------------------------------------------------------------
def test_nan_and_bad_bytes_in_result_json_lose_no_trial(work):
    """Python's json writes NaN/Infinity, agent output brings bad UTF-8 and NUL bytes: orjson
    refuses all three, which lost the whole trial (ok, tokens, error) as "not valid JSON"."""
    nan_trial, bytes_trial, text_trial = trials_of(work)[:3]
    data = json.loads((nan_trial / "result.json").read_text())
    data["agent_result"]["cost_usd"] = math.nan
    data["verifier_result"]["rewards"]["reward"] = math.inf
    (nan_trial / "result.json").write_text(json.dumps(data))
    (nan_trial / "verifier" / "reward.txt").unlink()
    bytes_data = json.loads((bytes_trial / "result.json").read_text())
    bytes_data["exception_info"] = {"exception_type": "AgentError", "exception_message": "MARK"}
    raw = json.dumps(bytes_data).encode().replace(b"MARK", b"bad \xff\xfe and \x00 nul")
    (bytes_trial / "result.json").write_bytes(raw)
    data = json.loads((text_trial / "result.json").read_text())
    data["exception_info"] = None  # (then exception.txt says why; NUL bytes are no text)
    (text_trial / "result.json").write_text(json.dumps(data))
    (text_trial / "exception.txt").write_bytes(b"Traceback:\nharbor.E\x00rr: bad \xff\x00 exit\n\x00\n")
    run = rd.open_run(log_of(work))
    samples = run.samples()
    assert row(samples, text_trial)["error"] == "Err: bad \ufffd exit"
    nan_row, bytes_row = row(samples, nan_trial), row(samples, bytes_trial)
    want = json.loads((nan_trial / "result.json").read_text())["agent_result"]
    assert (nan_row["input_tokens"], nan_row["output_tokens"]) == (want["n_input_tokens"], want["n_output_tokens"])
    assert nan_row["ok"] == True and pd.isna(nan_row["reward"])  # noqa: E712  (Infinity is no reward)
    assert bytes_row["ok"] == False and bytes_row["status"] == "error"  # noqa: E712
    assert bytes_row["error"] == "AgentError: bad \ufffd\ufffd and \x00 nul"
    assert bytes_row["output_tokens"] == bytes_data["agent_result"]["n_output_tokens"]
    assert "result.json is not strict JSON" in whats(run)
    all_views(run)


def test_huge_and_wrong_typed_numbers_are_empty_cells_with_a_problem(work):
    """A 2**63 token count broke the Int64 frame (OverflowError: samples, validation, every
    view); a 400-digit reward overflowed float(); "now" read as today's time."""
    big, typed = trials_of(work)[2:4]
    data = json.loads((big / "result.json").read_text())
    data["agent_result"].update(n_input_tokens=2 ** 63, n_output_tokens=10 ** 30, model_usage=None)
    data["verifier_result"]["rewards"]["reward"] = 10 ** 400
    (big / "result.json").write_text(json.dumps(data))
    (big / "verifier" / "reward.txt").unlink()
    data = json.loads((typed / "result.json").read_text())
    data.update(started_at="now", finished_at=["x"], agent_result="oops")
    data["verifier_result"] = {"rewards": {"reward": "1.0"}}
    (typed / "result.json").write_text(json.dumps(data))
    run = rd.open_run(log_of(work))
    samples = run.samples()
    b, t = row(samples, big), row(samples, typed)
    assert pd.isna(b["input_tokens"]) and pd.isna(b["output_tokens"]) and pd.isna(b["reward"])
    assert pd.isna(t["duration_s"]) and pd.isna(t["input_tokens"])
    assert t["reward"] == float((typed / "verifier" / "reward.txt").read_text())
    problems = whats(run)
    assert "result.json is not strict JSON" in problems  # (stdlib json wrote the 400-digit int)
    assert "verifier_result.rewards.reward is '1.0', started_at is 'now', finished_at is \"['x']\"" in problems
    all_views(run)


@pytest.mark.parametrize("text", ["inf", "-Infinity", "nan"])
def test_a_non_finite_reward_txt_falls_back_to_result_json(work, text):
    trial = trials_of(work)[4]
    (trial / "verifier" / "reward.txt").write_text(text)
    run = rd.open_run(log_of(work))
    want = json.loads((trial / "result.json").read_text())["verifier_result"]["rewards"]["reward"]
    assert row(run.samples(), trial)["reward"] == want
    assert f"verifier/reward.txt is {text!r}" in whats(run)


def test_a_trial_being_written_then_done(work):
    trial = trials_of(work)[5]
    final = (trial / "result.json").read_bytes()
    (trial / "result.json").unlink()
    run = rd.open_run(log_of(work))
    assert pd.isna(row(run.samples(), trial)["ok"]) and "no result.json" in whats(run)
    (trial / "result.json").write_bytes(final[: len(final) // 2])  # half-written
    assert pd.isna(row(run.samples(), trial)["ok"]) and "not valid JSON" in whats(run)
    (trial / "result.json").write_bytes(b"")
    assert "result.json is empty" in whats(run)
    (trial / "result.json").write_bytes(final)
    (trial / "config.json").write_bytes(b"\x00garbage{")  # (not read: the row does not need it)
    done = row(run.samples(), trial)
    assert done["ok"] == (json.loads(final)["exception_info"] is None)
    assert done["output_tokens"] == json.loads(final)["agent_result"]["n_output_tokens"]
    assert str(trial) not in whats(run) and "not valid JSON" not in whats(run)
    fifo = trials_of(work)[6]  # a FIFO named result.json: a problem, never a hang
    (fifo / "result.json").unlink()
    os.mkfifo(fifo / "result.json")
    assert pd.isna(row(run.samples(), fifo)["ok"]) and "result.json is not a readable file" in whats(run)


# Entries that are no trial or step folder ----------------------------------------------------------
def test_entries_that_are_not_trial_dirs_are_named(work, tmp_path):
    """A broken symlink, a file and a link outside the roots in a step folder were dropped
    without a word; a step folder past 18 digits broke every frame."""
    folder = exp_of(work) / "step_0001"
    (folder / "gone__g-1-deadbeef").symlink_to(work / "nowhere")
    (folder / "file__f-1-cafebabe").write_text("x")
    outside = copy_run(trials_of(work)[0], tmp_path / "elsewhere")
    (folder / "out__o-1-0badf00d").symlink_to(outside)
    (exp_of(work) / "step_99999999999999999999").mkdir()
    (exp_of(work) / "step_99999999999999999999" / "t-1-12345678").mkdir()
    files.set_roots([work])
    run = rd.open_run(log_of(work))
    samples = run.samples()
    assert len(samples) == sum(1 for t in exp_of(work).glob("step_0*/*") if not t.is_symlink() and t.is_dir())
    assert not samples["locator"].str.contains("out__o|gone__g|file__f|9999999").any()
    by_path = {p.path: p.what for p in run.problems()}
    assert by_path[str(folder / "gone__g-1-deadbeef")] == "not a trial dir: broken symlink"
    assert by_path[str(folder / "file__f-1-cafebabe")] == "not a trial dir: a file"
    assert by_path[str(folder / "out__o-1-0badf00d")] == f"not a trial dir: {files.OUTSIDE_ROOTS}"
    assert "not a step_<number> folder" in by_path[str(exp_of(work) / "step_99999999999999999999")]
    all_views(run)


def test_step_folders_and_exp_dirs_linking_outside_the_roots_are_not_listed(work, tmp_path):
    elsewhere = copy_run(exp_of(work) / "step_0002", tmp_path / "elsewhere")
    (exp_of(work) / "step_0007").symlink_to(elsewhere)
    other = copy_run(exp_of(work), tmp_path / "elsewhere", "exp")
    (work / "harbor_trials" / "linked").mkdir()
    (work / "harbor_trials" / "linked" / EXP).symlink_to(other)  # a second project's exp dir
    files.set_roots([work])
    run = rd.open_run(log_of(work))
    assert not run.samples()["locator"].str.contains("step_0007|linked").any()
    by_path = {p.path: p.what for p in run.problems()}
    assert by_path[str(exp_of(work) / "step_0007")] == f"step folder {files.OUTSIDE_ROOTS}"
    assert by_path[str(work / "harbor_trials" / "linked" / EXP)] == f"trial dir {files.OUTSIDE_ROOTS}"


def test_log_naming_trial_dirs_missing_outside_the_roots_or_a_file(work, tmp_path):
    (work / "harbor_trials" / "p").mkdir()
    (work / "harbor_trials" / "p" / "afile").write_text("x")
    names = [f"{work}/harbor_trials/p/afile", f"{tmp_path}/other/harbor_trials/p/e", f"{work}/gone/harbor_trials/q/e"]
    with open(log_of(work), "a") as fh:
        fh.writelines(f"(AgentLoopWorker pid=1) trial at {n}/step_0003/x-12345678\n" for n in names)
    files.set_roots([work])
    run = rd.open_run(log_of(work))
    by_path = {p.path: p.what for p in run.problems()}
    assert by_path[names[0]] == "trial dir named in the log is not a folder"
    assert by_path[names[1]] == f"trial dir named in the log {files.OUTSIDE_ROOTS}"
    assert "not on disk" in by_path[names[2]]
    assert len(run.samples()) == len(list(exp_of(work).glob("step_*/*")))


# Transcripts and proxy trajectories ----------------------------------------------------------------
def test_odd_trajectories_open_as_episodes(work):
    """A 2**64 tool argument made orjson.dumps raise, a huge reward broke float(), a list of
    content parts showed as JSON, a list `source` was used as a dict key."""
    trial = next(t.parent.parent for t in exp_of(work).rglob("agent/trajectory.json"))
    path = trial / "agent" / "trajectory.json"
    good = path.read_bytes()
    run = rd.open_run(log_of(work))
    sid = row(run.samples(), trial)["sample_id"]
    want = len(run.episode(sid).messages)
    path.write_bytes(good[: len(good) // 2])  # still being written
    ep = run.episode(sid)
    assert ep.messages == [] and any("trajectory.json is not valid JSON" in p for p in ep.raw["problems"])
    steps = [{"source": "agent", "message": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
              "reasoning_content": {"x": 1}, "tool_calls": [{"function_name": "f", "arguments": {"n": 2 ** 64},
                                                             "tool_call_id": 7}],
              "observation": {"results": [{"content": "out MARK", "source_call_id": 7}]}},
             {"source": ["odd"], "message": None, "tool_calls": {"not": "a list"}, "observation": {"results": 5}}]
    raw = json.dumps({"steps": steps}).encode().replace(b"MARK", b"\xff\x00")
    path.write_bytes(raw)
    result = json.loads((trial / "result.json").read_text())
    result["verifier_result"]["rewards"].update(reward=10 ** 400, extra=math.nan, ok=0.5)
    (trial / "result.json").write_text(json.dumps(result))
    ep = run.episode(sid)
    assert [(m.role, m.content) for m in ep.messages] == [("assistant", "ab"), ("tool", "out \ufffd\x00"),
                                                           ('["odd"]', "")]
    assert ep.messages[0].tool_calls[0].arguments == json.dumps({"n": 2 ** 64})
    assert ep.messages[0].tool_calls[0].id == "7" and ep.messages[0].reasoning == '{"x":1}'
    assert ep.rewards == {"ok": 0.5}
    path.write_bytes(good)  # written out: the whole transcript
    assert len(run.episode(sid).messages) == want


def test_proxy_snapshots_with_wrong_types_do_not_break_validation(val_work):
    """A number where a message's content or tool calls belong made val_cot() and
    failure_modes() raise TypeError."""
    run = rd.open_run(log_of(val_work))
    before = run.val_cot()
    event = before["event"].iloc[-1]
    modes = run.failure_modes(event).set_index("task_id")
    cohort_tasks = set(modes.index)
    trial = next(Path(p) for p, t in zip(run.samples()["locator"], run.samples()["task_id"])
                 if t in cohort_tasks and f"/{event}/" in p)
    (trial / "proxy_trajectory.json").write_text(json.dumps({"messages_snapshot": [
        {"role": "assistant", "content": 5, "tool_calls": 7},
        {"role": "assistant", "content": "think</think>done", "tool_calls": [{"function": {"arguments": "abc"}}]}]}))
    cot = run.val_cot().set_index("event")
    assert frames.check(run.val_cot(), frames.VAL_COT) == [] and set(cot.index) == set(before["event"])
    after = run.failure_modes(event).set_index("task_id")
    assert list(after.index) == list(modes.index)


# Log markers ---------------------------------------------------------------------------------------
def _marks(log: Path) -> swe_lego_rl.LogMarks:
    return swe_lego_rl.LogMarks(str(log)).refresh()


def test_a_held_marker_line_counts_once_its_bare_newline_comes(tmp_path, monkeypatch):
    """A last line written without its newline and completed by a bare newline was never scanned."""
    monkeypatch.setattr(bytetail, "SETTLE_S", 0.0)
    log = tmp_path / "exp.log"
    log.write_text("step:1 - a:1\nval_map: step_12 -> train_step 15")
    os.utime(log, (time.time() - 10,) * 2)
    marks = _marks(log)
    assert marks.train_step(12) is None  # (it may still go on)
    with open(log, "a") as fh:
        fh.write("\n")
    assert marks.refresh().train_step(12) == 15
    with open(log, "a") as fh:
        fh.write("val_map: step_13 -> train_step 2")
    os.utime(log, (time.time() - 10,) * 2)
    marks.refresh()
    with open(log, "a") as fh:
        fh.write("0\nval_map: step_14 -> train_step 21\n")
    assert (marks.refresh().train_step(13), marks.train_step(14)) == (20, 21)


def test_markers_joined_split_repeated_and_huge(tmp_path, monkeypatch):
    """Two val_maps on one CR-redrawn line (the second was lost); 24-digit numbers (broke the
    Int64 frames); lines across read blocks; a validation repeated after a resume (first wins)."""
    monkeypatch.setattr(lego_marks, "CHUNK_BYTES", 64)
    start = "(TaskRunner pid=1) test_gen_batch meta info: {'pad': 0, 'validate': True, 'global_steps': %s}\n"
    end = "(TaskRunner pid=1) step:%d - val-core/unknown/reward/mean@1:0.5 - rollouter/validate_time:%d.5\n"
    lines = ["x" * 200 + "\n",
             "[stitch] val_map: step_0070 -> train_step 3\r[stitch] val_map: step_0080 -> train_step 4\n",
             start % 66, "(TaskRunner pid=1) step:1 - actor/loss:0.1\n", end % (2, 2),
             start % "123456789012345678901234", end % (5, 5),
             "val_map: step_99999999999999999999999 -> train_step 1\n",
             "resumed\n", start % 66, end % (9, 9), start % 90, end % (9, 9)]
    log = tmp_path / "exp.log"
    log.write_text("".join(lines))
    marks = _marks(log)
    assert [marks.train_step(f) for f in (70, 80, 66, 90)] == [3, 4, 2, 9]
    assert marks.starts.keys() == {66, 90} and all(k < 2 ** 63 for k in (*marks.explicit, *marks.pairs))


def test_a_long_slashy_token_on_a_trials_line_reads_in_linear_time(work):
    """The spec's lazy path regex is cubic on a long run of `/`-separated text (a base64 blob):
    a 64 KB one on a line naming a trial dir took 30 s per read of the log."""
    blob = "/Ab" * 20000
    with open(log_of(work), "a") as fh:
        fh.write(f"(AgentLoopWorker pid=1) img={blob} trial {exp_of(work)}/step_0002/x-12345678 {blob}/harbor_trials/x\n")
    t0 = time.process_time()  # CPU seconds: a busy machine (xdist, other users) does not make them grow
    run = rd.open_run(log_of(work))
    assert list(run.marks().named) == [str(exp_of(work))] and len(run.samples()) > 0
    assert list(rd.discover([work])["run_id"]) == [EXP]
    assert time.process_time() - t0 < 3


# Validation dumps ------------------------------------------------------------------------------------
def reward_of(trial: Path) -> float:
    """Spec 4: reward.txt, else result.json's verifier reward, else none (-1: not solved)."""
    try:
        return float((trial / "verifier" / "reward.txt").read_text())
    except (OSError, ValueError):
        result = json.loads((trial / "result.json").read_text())
        reward = ((result.get("verifier_result") or {}).get("rewards") or {}).get("reward")
        return -1.0 if reward is None else float(reward)


def test_validation_with_missing_tasks_and_duplicated_copies(val_work):
    """Per event, pass@1 over the fixed cohort on the first copy (smallest path) of each task: a
    task missing from the last dump lowers its coverage, a re-sent copy on a second node is not
    scored, and the trials count holds every dir."""
    exp = exp_of(val_work)
    node2 = exp.parent / f"{EXP}-20260812-031000"
    first = sorted((exp / "step_0066").iterdir())[0]
    copy_run(first, node2 / "step_0066", first.name[:-8] + "ffffffff")  # a later copy, other reward
    (node2 / "step_0066" / (first.name[:-8] + "ffffffff") / "verifier" / "reward.txt").write_text(
        "1" if reward_of(first) <= 0 else "0")
    gone = sorted((exp / "step_0196").iterdir())[0]
    copy_run(gone, val_work / "moved")
    import shutil
    shutil.rmtree(gone)
    copy_run(exp / "step_0131", node2)  # a copied dump: the same trial dir names twice
    run = rd.open_run(log_of(val_work))
    samples = run.samples()
    assert samples["sample_id"].is_unique
    twice = samples[samples["locator"].str.startswith(str(node2 / "step_0131"))].iloc[0]
    assert run.episode(twice["sample_id"]).ids["trial_dir"] == twice["locator"]
    modes = run.failure_modes("step_0131")
    for sid, task in zip(modes["sample_id"], modes["task_id"]):  # each links to the copy it scored
        first_copy = min((p for p in [*exp.glob("step_0131/*"), *node2.glob("step_0131/*")]
                          if harbor.task_id_of(p.name) == task), key=str)
        assert run.episode(sid).ids["trial_dir"] == str(first_copy)
    val = run.validation()
    trials = val[(val["source"] == "trials")].pivot_table(index="event", columns="statistic", values="value")
    tasks_per_event = {}
    for event in trials.index:
        dirs = sorted([*exp.glob(f"{event}/*"), *node2.glob(f"{event}/*")], key=str)
        firsts = {}
        for d in dirs:
            firsts.setdefault(harbor.task_id_of(d.name), d)
        tasks_per_event[event] = firsts
        assert trials.loc[event, "trials"] == len(dirs)
    appeared = pd.Series([t for f in tasks_per_event.values() for t in f]).value_counts()
    cohort = set(appeared[appeared * 2 >= len(tasks_per_event)].index)
    for event, firsts in tasks_per_event.items():
        mine = [d for t, d in firsts.items() if t in cohort]
        solved = sum(reward_of(d) > 0 for d in mine)
        assert trials.loc[event, "val_score"] == pytest.approx(solved / len(mine))
        assert trials.loc[event, "coverage"] == pytest.approx(len(mine) / len(cohort))
    all_views(run)


# Scale -----------------------------------------------------------------------------------------------
def test_thousands_of_trials_list_without_reading_them(work, monkeypatch):
    body = trials_of(work)[0].joinpath("result.json").read_bytes()
    for k in range(40):
        for j in range(50):
            d = exp_of(work) / f"step_{1000 + k:04d}" / f"task__t-{j}-{k:04x}{j:04x}"
            (d / "verifier").mkdir(parents=True)
            (d / "result.json").write_bytes(body)
    reads = []
    real = harbor.read_trial
    monkeypatch.setattr(harbor, "read_trial", lambda d, *a: (reads.append(d), real(d, *a))[1])
    t0 = time.process_time()  # CPU seconds: a busy machine (xdist, other users) does not make them grow
    assert list(rd.discover([work])["run_id"]) == [EXP]
    run = rd.open_run(log_of(work))
    run.overview(), run.overview()
    folders = run.folders()
    assert len(reads) <= 50  # only the newest folder's trials date the run
    assert folders.set_index("step").loc[1010, "trials"] == 50 and len(folders) == 43
    reads.clear()
    assert run.episode("1010-task__t-7-000a0007").ids["Harbor step folder"] == "step_1010"
    assert len(reads) == 50  # opening one trial reads its folder's trials only
    assert time.process_time() - t0 < 10
