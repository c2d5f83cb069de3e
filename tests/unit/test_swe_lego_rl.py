"""SWE-Lego-RL runs: detection against plain verl, linking a log to its trial dirs, samples()
against an independent reading, validation pairing and scores, bad input, incremental re-reads,
and no writes into the run.

Samples are asserted in the run contract's schema (`frames.SAMPLES`: sample_id `<step>-<trial dir>`,
env = capability, group_id = task_id, error "Type: message", status from ok, input/output tokens);
the per-trial details that schema has no column for (capability, exception_type, exception,
n_cache_tokens, started, problem) are asserted on the Harbor trial rows (`harbor.TRIAL_COLUMNS`)
of the run's step folders. Validation is `frames.VALIDATION` (event, step = the paired trainer step,
source, statistic, value, n, core).

The reference below is written from the format notes (swe-lego-rl.md sections 1.3, 2.3, 3.3, 4,
6), not from rundash's code: json.load of result.json, float() of verifier/reward.txt, the
validation pairing by a line-by-line regex scan of the log.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

import rundash_core as rd
from rundash_core import cache, frames
from rundash_core.discover import walk
from rundash_core.sources import SOURCES, detect, runs_among
from rundash_core.sources.swe_lego_rl import harbor
from rundash_core.sources.swe_lego_rl import run as swe_lego_rl
from rundash_core.sources.swe_lego_rl.run import SweLegoRLRun

from helpers import DATA, copy_run, snapshot

EXP = "qwen3-8b-swegym-gspo-async-r1"
PROJECT = "swe_lego_rl"
LEGO = DATA / "lego"
LOG = LEGO / "logs" / f"{EXP}.log"
TRIALS = LEGO / "harbor_trials" / PROJECT / EXP
FULL_LOG = DATA / "lego-full" / "logs" / f"{EXP}.log"  # the generated sample's log and its four val dumps


# Reference ----------------------------------------------------------------------------------------
def ref_trial(trial: Path) -> dict:
    """One trial as the notes describe it (section 4), read with json.load and float()."""
    try:
        result = json.loads((trial / "result.json").read_text())
        result = result if isinstance(result, dict) else None
    except (OSError, ValueError):
        result = None
    reward = None
    try:
        reward = float((trial / "verifier" / "reward.txt").read_text().strip())
    except (OSError, ValueError):
        pass
    if reward is None and result and isinstance(result.get("verifier_result"), dict):
        v = (result["verifier_result"].get("rewards") or {}).get("reward")
        reward = float(v) if isinstance(v, (int, float)) else None
    exc_type = exc_msg = None
    if result and result.get("exception_info"):
        exc_type = result["exception_info"]["exception_type"]
        exc_msg = result["exception_info"]["exception_message"]
    elif (trial / "exception.txt").exists():
        last = [ln for ln in (trial / "exception.txt").read_text().splitlines() if ln.strip()][-1]
        name, _, msg = last.partition(":")
        exc_type, exc_msg = name.split(".")[-1], msg.strip()
    agent = (result or {}).get("agent_result") or {}
    task = re.sub(r"-[0-9a-f]{6,}$", "", trial.name)
    started = finished = None
    if result and result.get("started_at"):
        started = pd.Timestamp(result["started_at"])
    if result and result.get("finished_at"):
        finished = pd.Timestamp(result["finished_at"])
    return {"started": started, "duration_s": (finished - started).total_seconds() if started and finished else None,
            "task_id": task, "capability": re.sub(r"-\d+$", "", task), "reward": reward,
            "ok": None if result is None and exc_type is None else exc_type is None,
            "exception_type": exc_type, "exception": exc_msg,
            "n_input_tokens": agent.get("n_input_tokens"), "n_output_tokens": agent.get("n_output_tokens"),
            "n_cache_tokens": agent.get("n_cache_tokens")}


def ref_sample(trial: Path) -> dict:
    """The trial's samples() row (run contract, `frames.SAMPLES`) derived from `ref_trial`."""
    ref, step = ref_trial(trial), int(trial.parent.name.split("_")[1])
    error = ref["exception_type"]
    if error is not None and ref["exception"]:
        error = f"{error}: {ref['exception']}"
    return {"sample_id": f"{step}-{trial.name}", "step_folder": step, "group_id": ref["task_id"],
            "task_id": ref["task_id"], "env": ref["capability"], "reward": ref["reward"], "advantage": None,
            "ok": ref["ok"], "error": error,
            "status": None if ref["ok"] is None else "completed" if ref["ok"] else "error",
            "truncated": None, "input_tokens": ref["n_input_tokens"], "output_tokens": ref["n_output_tokens"],
            "turns": None, "duration_s": ref["duration_s"], "locator": str(trial)}


def at_folder(run, folder: int) -> pd.DataFrame:
    """The samples of one `step_NNNN` folder."""
    samples = run.samples()
    return samples[samples["step_folder"] == folder]


def ref_pairing(log: Path) -> tuple[dict[int, int], set[int]]:
    """Spec 2.3: folder number -> trainer step, and every folder a validation started for."""
    pairs, starts, pending = {}, set(), None
    for line in log.read_text(errors="replace").splitlines():
        m = re.search(r"val_map:\s*step_(\d+)\s*->\s*train_step\s*(\d+)", line)
        if m:
            pairs[int(m.group(1))] = int(m.group(2))
            starts.add(int(m.group(1)))
            continue
        m = re.search(r"test_gen_batch meta info:.*'validate':\s*True.*'global_steps':\s*(\d+)", line)
        if m:
            pending = int(m.group(1))
            starts.add(pending)
            continue
        m = re.search(r"step:(\d+)\s*-.*rollouter/validate_time", line)
        if m and pending is not None:
            pairs.setdefault(pending, int(m.group(1)))
            pending = None
    return pairs, starts


def ref_log_value(log: Path, step: int, key: str) -> float:
    """The last value of `key` on `step:<step>` lines (np.float64(...) unwrapped)."""
    value = None
    for line in log.read_text(errors="replace").splitlines():
        if re.search(rf"(?:^|\s|m)step:{step} - ", line):
            for part in line.split(" - "):
                name, _, raw = part.rpartition(":")
                if name.endswith(key):
                    value = float(re.sub(r"^np\.\w+\((.*)\)$", r"\1", raw.strip()))
    return value


def trial_dirs(exp_dir: Path) -> list[Path]:
    return sorted(t for s in exp_dir.glob("step_*") for t in s.iterdir() if t.is_dir())


def _na(v):
    return None if v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and math.isnan(v)) else v


def trial_rows(run: SweLegoRLRun) -> pd.DataFrame:
    """The Harbor trial rows (`harbor.TRIAL_COLUMNS`) of every step folder of the run, in samples() order."""
    return harbor.read_folders([f for g in run._groups() for f in g[6]])


# Fixtures -----------------------------------------------------------------------------------------
@pytest.fixture
def work(tmp_path) -> Path:
    """A writable copy of the sample workdir (logs/ + harbor_trials/)."""
    return copy_run(LEGO, tmp_path, "work")


def log_of(work: Path) -> Path:
    return work / "logs" / f"{EXP}.log"


def exp_of(work: Path) -> Path:
    return work / "harbor_trials" / PROJECT / EXP


def make_trial(folder: Path, name: str, reward: float | None = 1.0, *, exception: str | None = None) -> Path:
    t = folder / name
    (t / "verifier").mkdir(parents=True)
    info = {"exception_type": exception, "exception_message": "boom", "exception_traceback": "",
            "occurred_at": None} if exception else None
    (t / "result.json").write_text(json.dumps({
        "trial_name": name, "agent_result": {"n_input_tokens": 10, "n_output_tokens": 3, "n_cache_tokens": 0},
        "verifier_result": {"rewards": {"reward": reward}} if reward is not None else None,
        "exception_info": info, "started_at": "2026-08-12T03:00:00Z", "finished_at": "2026-08-12T03:00:30Z"}))
    if reward is not None:
        (t / "verifier" / "reward.txt").write_text(str(int(reward)))
    return t


# Detection and discovery --------------------------------------------------------------------------
def test_registered_before_verl():
    kinds = [s.kind for s in SOURCES]
    assert "swe-lego-rl" in kinds and "verl" in kinds
    assert kinds.index("swe-lego-rl") < kinds.index("verl")


def test_log_with_trials_is_lego_without_is_plain_verl(tmp_path):
    assert detect(str(LOG)) is SweLegoRLRun
    run = rd.open_run(LOG)
    assert run.kind == "swe-lego-rl" and isinstance(run, SweLegoRLRun)
    alone = tmp_path / "logs" / LOG.name
    alone.parent.mkdir()
    shutil.copy(LOG, alone)  # the same log, no harbor_trials/ next to it and no paths in it
    cls = detect(str(alone))
    assert cls is not SweLegoRLRun and cls is not None and cls.kind == "verl"
    assert rd.open_run(alone).kind == "verl"


def test_sidecar_logs_are_skipped_and_found_once(work):
    frame = rd.discover([work / "logs"])
    lego = frame[frame["kind"] == "swe-lego-rl"]
    assert list(lego["run_id"]) == [EXP] and list(lego["path"]) == [str(log_of(work))]
    for name in (f"{EXP}_vllm.log", f"{EXP}_train_gpu_wandb.log", f"{EXP}_server.out", f"launch_{EXP}.log"):
        shutil.copy(log_of(work), work / "logs" / name)
        assert not swe_lego_rl.is_run_file(str(work / "logs" / name)), name
    entries = list(os.scandir(work / "logs"))
    found = runs_among(entries)
    assert [p for p, cls in found.items() if cls is SweLegoRLRun] == [str(log_of(work))]
    assert swe_lego_rl.find_runs(entries) == [str(log_of(work))]
    walked = walk([str(work / "logs")], 4).runs
    assert [p for p, cls in walked if cls is SweLegoRLRun] == [str(log_of(work))]


def test_tracking_the_workdir_finds_the_log_in_logs(work):
    frame = rd.discover([work])
    assert list(frame["kind"]) == ["swe-lego-rl"] and list(frame["path"]) == [str(log_of(work))]
    assert swe_lego_rl.find_runs(list(os.scandir(work))) == []  # the recursive walk looks into logs/
    assert walk([str(work)], 4).runs == [(str(log_of(work)), SweLegoRLRun)]
    assert walk([str(work)], 0).runs == []  # logs/ is one level down


def test_detection_reads_only_head_and_tail(tmp_path):
    """Named paths in the head or the tail are enough; one only in the middle of a big log is not
    looked for (detection must stay cheap)."""
    exp = tmp_path / "cluster" / "harbor_trials" / "p" / "e"
    (exp / "step_0001").mkdir(parents=True)
    named = f"(AgentLoopWorker pid=1) trials_dir={exp}/step_0001\n".encode()
    filler = b"(TaskRunner pid=1) step:1 - actor/entropy:0.5\n" * 20000  # ~1 MB
    for i, data in enumerate((named + filler, filler + named, filler + named + filler)):
        log = tmp_path / f"run{i}.log"
        log.write_bytes(data)
        assert swe_lego_rl.is_run_file(str(log)) is (i < 2)


# Linking (spec 1.3) -------------------------------------------------------------------------------
def test_sibling_folder_links_exact_exp_names_only(tmp_path):
    work = tmp_path / "w"
    (work / "logs").mkdir(parents=True)
    (work / "logs" / "r-1.log").write_text("(TaskRunner pid=1) step:1 - x:1\n")
    for name in ("r-1", "r-10", "r-1-20260812-031400", "r-1-extra"):
        make_trial(work / "harbor_trials" / "p" / name / "step_0001", "t__t-1-abcdef12")
    run = rd.open_run(work / "logs" / "r-1.log")
    assert run.kind == "swe-lego-rl"
    got = sorted(os.path.basename(d) for d in run.exp_dirs())
    assert got == ["r-1", "r-1-20260812-031400"]
    assert sorted(Path(p).parent.parent.name for p in run.samples()["locator"]) == got


def test_named_paths_and_sibling_expansion(tmp_path):
    """The log names only the head node's dir; the other nodes' dirs (same stem, stamp within
    600 s, with a step folder) are added; a step folder split across nodes counts as one."""
    parent = tmp_path / "mnt" / "harbor_trials" / "proj"
    head = parent / "exp-20260812-031400"
    make_trial(head / "step_0003", "a__a-1-aaaaaaaa", 1.0)
    make_trial(parent / "exp-20260812-031900" / "step_0003", "a__a-1-bbbbbbbb", 0.0)  # +300 s: a node
    make_trial(parent / "exp-20260812-040000" / "step_0003", "a__a-1-cccccccc")  # +2760 s: another run
    (parent / "exp-20260812-031500" / "nothing").mkdir(parents=True)  # no step_* child
    make_trial(parent / "other-20260812-031400" / "step_0003", "a__a-1-dddddddd")  # other stem
    log = tmp_path / "elsewhere" / "exp.log"
    log.parent.mkdir()
    log.write_text(f"(AgentLoopWorker pid=7, ip=10.0.0.1) trial dir {head}/step_0003/a__a-1-aaaaaaaa done\n"
                   "(TaskRunner pid=1) step:1 - actor/entropy:0.5\n")
    run = rd.open_run(log)
    assert run.kind == "swe-lego-rl"
    assert [os.path.basename(d) for d in run.exp_dirs()] == ["exp-20260812-031400", "exp-20260812-031900"]
    samples = run.samples()
    assert sorted(samples["sample_id"]) == ["3-a__a-1-aaaaaaaa", "3-a__a-1-bbbbbbbb"]
    assert set(samples["step_folder"]) == {3} and list(samples["split"]) == ["train", "train"]
    assert samples["step"].isna().all()  # no config, no rollouter line: sync or async unknown, no step guessed
    folders = run.folders()
    assert list(folders["trials"]) == [2] and list(folders["exp_dirs"]) == [2]


def test_named_dirs_from_another_mount_and_missing_ones(work):
    """A path under another machine's mount is found at the same <project>/<exp> under the
    log's workdir; a named dir found nowhere is a problem, not a crash."""
    shutil.move(exp_of(work), work / "harbor_trials" / PROJECT / "moved")
    with open(log_of(work), "a") as fh:
        fh.write(f"(AgentLoopWorker pid=1) /mnt/shared/lego-rl/harbor_trials/{PROJECT}/moved/step_0002/x-12345678\n")
        fh.write("(AgentLoopWorker pid=1) /mnt/shared/lego-rl/harbor_trials/gone/exp/step_0009/x-12345678\n")
    run = rd.open_run(log_of(work))
    assert run.kind == "swe-lego-rl"
    assert run.exp_dirs() == [str(work / "harbor_trials" / PROJECT / "moved")]
    assert len(run.samples()) == len(trial_dirs(work / "harbor_trials" / PROJECT / "moved"))
    missing = [p for p in run.problems() if "not on disk" in p.what]
    assert [p.path for p in missing] == ["/mnt/shared/lego-rl/harbor_trials/gone/exp"]


# samples() ----------------------------------------------------------------------------------------
def test_samples_match_an_independent_reading():
    run = rd.open_run(LOG)
    samples = run.samples()
    dirs = trial_dirs(TRIALS)
    assert len(samples) == len(dirs) == 42
    assert frames.check(samples, frames.SAMPLES) == [] and list(samples.columns) == list(frames.SAMPLES)
    assert samples["sample_id"].is_unique and all(frames.is_url_safe(s) for s in samples["sample_id"])
    trials = trial_rows(run)
    assert list(trials.columns) == list(harbor.TRIAL_COLUMNS)
    assert list(trials["sample_id"]) == list(samples["sample_id"])
    assert list(trials["locator"]) == list(samples["locator"])
    by_locator, trial_by_locator = samples.set_index("locator"), trials.set_index("locator")
    for trial in dirs:
        row, want_row = by_locator.loc[str(trial)], ref_sample(trial)
        for key, want in want_row.items():
            got = str(trial) if key == "locator" else _na(row[key])
            if key == "duration_s" and want is not None:
                assert got == pytest.approx(want, abs=1e-6), trial.name
            else:
                assert got == want, (trial.name, key, row[key], want)
        row, ref = trial_by_locator.loc[str(trial)], ref_trial(trial)  # the details samples() has no column for
        assert row["sample_id"] == want_row["sample_id"] and row["step"] == want_row["step_folder"]
        for key, want in ref.items():
            got = _na(row[key])
            if key == "duration_s" and want is not None:
                assert got == pytest.approx(want, abs=1e-6), trial.name
            else:
                assert got == want, (trial.name, key, row[key], want)
    assert samples["ok"].eq(False).sum() == 3  # the env-start failures of the sample
    assert list(samples["status"].value_counts().sort_index().items()) == [("completed", 39), ("error", 3)]
    assert (trials["exception_type"].dropna() == "EnvironmentStartTimeoutError").all()
    assert trials["exception_type"].notna().sum() == 3
    failure = "EnvironmentStartTimeoutError: Environment failed to start within 600.0 seconds"
    assert (samples["error"].dropna() == failure).all()
    assert samples["error"].notna().sum() == 3
    for text in TRIALS.glob("step_*/*/exception.txt"):  # the fallback agrees with result.json
        info = json.loads((text.parent / "result.json").read_text())["exception_info"]
        assert harbor._exception_txt(str(text)) == (info["exception_type"], info["exception_message"])


def test_splits_steps_and_trainer_steps():
    run = rd.open_run(LOG)
    pairs, starts = ref_pairing(LOG)
    assert pairs == {1: 0, 66: 1, 131: 2} and starts == {1, 66, 131, 196}
    samples = run.samples()
    for folder, rows in samples.groupby("step_folder"):
        want_split = "val" if folder in starts else "train"
        assert set(rows["split"]) == {want_split}
        want = pairs.get(folder)  # a fully-async run: a training folder has no trainer step
        assert [_na(v) for v in rows["trainer_step"].unique()] == [want] == [_na(v) for v in rows["step"].unique()]
    assert set(samples["step_folder"]) == {1, 2, 196}
    assert len(run.samples(split="val")) == 34 and len(run.samples(split="train")) == 8
    assert list(at_folder(run, 196)["task_id"]) == sorted(
        re.sub(r"-[0-9a-f]{6,}$", "", p.name) for p in (TRIALS / "step_0196").iterdir())
    assert list(run.samples(step=0)["step_folder"].unique()) == [1]  # `step` filters by trainer step
    assert run.samples(split="train", step=0).empty
    with pytest.raises(ValueError):
        run.samples(split="eval")


def test_count_rule_without_log_markers(tmp_path):
    """No validation word in the log: more than 3·n trials, mostly one per task, is a dump; n
    trials per task (a synchronous step folder) is training however many there are."""
    work = tmp_path / "w"
    (work / "logs").mkdir(parents=True)
    (work / "logs" / "e.log").write_text("(TaskRunner pid=1) step:1 - x:1\n")
    exp = work / "harbor_trials" / "p" / "e"
    for i in range(30):
        make_trial(exp / "step_0005", f"t__t-{i}-{i:08x}")
    for i in range(8):
        for k in range(8):
            make_trial(exp / "step_0006", f"u__u-{i}-{i:04x}{k:04x}")
    run = rd.open_run(work / "logs" / "e.log")
    splits = dict(zip(run.folders()["step"], run.folders()["split"]))
    assert splits == {5: "val", 6: "train"}


# validation() -------------------------------------------------------------------------------------
def test_validation_scores_and_pairing():
    run = rd.open_run(LOG)
    v = run.validation()
    assert list(v.columns) == ["event", "step", "source", "statistic", "value", "n", "core"]
    assert frames.check(v, frames.VALIDATION) == []
    trials = v[v["source"] == "trials"].pivot(index="event", columns="statistic", values="value")
    assert list(dict.fromkeys(v["event"])) == ["step_0001", "step_0196"]  # paired first, unpaired last
    # independent: first copy per task, reward > 0, cohort = tasks in >= half the events
    events = {n: {} for n in ("step_0001", "step_0196")}
    for n in events:
        for t in sorted((TRIALS / n).iterdir()):
            events[n].setdefault(ref_trial(t)["task_id"], ref_trial(t)["reward"])
    counts = {}
    for tasks in events.values():
        for t in tasks:
            counts[t] = counts.get(t, 0) + 1
    cohort = {t for t, c in counts.items() if 2 * c >= len(events)}
    for n, tasks in events.items():
        present = [t for t in tasks if t in cohort]
        solved = sum(1 for t in present if (tasks[t] or 0) > 0)
        assert trials.loc[n, "val_score"] == pytest.approx(solved / len(present))
        assert trials.loc[n, "coverage"] == pytest.approx(len(present) / len(cohort))
        assert trials.loc[n, "cohort_size"] == len(cohort) == 30
        assert trials.loc[n, "solved"] == solved and trials.loc[n, "tasks"] == len(present)
        assert trials.loc[n, "trials"] == len(list((TRIALS / n).iterdir()))
        mine = v[(v["event"] == n) & (v["source"] == "trials")].set_index("statistic")
        assert mine.loc["val_score", "n"] == len(present) and mine["n"].drop("val_score").isna().all()
        assert list(mine.index[mine["core"]]) == ["val_score"]
    assert trials.loc["step_0196", "low_coverage"] == 1.0 and trials.loc["step_0001", "low_coverage"] == 0.0
    # the dump on disk agrees with the score the log printed at the paired trainer step
    log_score = ref_log_value(LOG, 0, "val-core/unknown/reward/mean@1")
    assert log_score == pytest.approx(0.1)
    assert trials.loc["step_0001", "val_score"] == pytest.approx(log_score)
    log_rows = v[(v["source"] == "log") & (v["event"] == "step_0001")].set_index("statistic")
    logged = log_rows["value"]
    assert logged["val-core/unknown/reward/mean@1"] == pytest.approx(log_score)
    assert logged["rollouter/validate_time"] == pytest.approx(ref_log_value(LOG, 0, "rollouter/validate_time"))
    assert list(log_rows["core"]) == [s.startswith("val-core/") for s in log_rows.index]
    assert log_rows["n"].isna().all()
    assert set(v[v["source"] == "log"]["event"]) == {"step_0001"}
    assert list(v[v["event"] == "step_0001"]["step"].unique()) == [ref_pairing(LOG)[0][1]] == [0]  # the trainer step
    assert v[v["event"] == "step_0196"]["step"].isna().all()
    assert not (v[v["event"] == "step_0196"]["source"] == "log").any()


def test_explicit_val_map_wins_and_log_is_read_incrementally(work, monkeypatch):
    run = rd.open_run(log_of(work))
    assert at_folder(run, 196)["trainer_step"].isna().all()
    marks = run.marks()
    offset = marks.offset
    scanned = []
    real = swe_lego_rl.LogMarks._scan
    monkeypatch.setattr(swe_lego_rl.LogMarks, "_scan", lambda self, data: (scanned.append(len(data)), real(self, data)))
    line = "[stitch] val_map: step_0196 -> train_step 3\n[stitch] val_map: step_0001 -> train_step 7\n"
    with open(log_of(work), "a") as fh:
        fh.write(line)
    assert set(at_folder(run, 196)["trainer_step"]) == {3}
    assert set(at_folder(run, 1)["trainer_step"]) == {7}  # explicit mappings always win
    assert scanned == [len(line)] and run.marks().offset == offset + len(line)


def test_pairing_rules(tmp_path):
    """Spec 2.3 on a synthetic log: an end line pairs the latest started validation only; an end
    line with nothing started is ignored; a folder keeps its first pairing; val_map always wins."""
    work = tmp_path / "w"
    exp = work / "harbor_trials" / "p" / "e"
    lines = [
        "{'validate': True, 'global_steps': 5}",
        "step:3 - val-core/unknown/reward/mean@1:0.5 - rollouter/validate_time:9",
        "step:4 - val-core/unknown/reward/mean@1:0.5 - rollouter/validate_time:9",  # nothing started
        "{'validate': True, 'global_steps': 9}",  # never ends
        "{'validate': True, 'global_steps': 12}", "step:6 - rollouter/validate_time:9",
        "{'validate': True, 'global_steps': 5}", "step:8 - rollouter/validate_time:9",  # 5 keeps step 3
        "[stitch] val_map: step_0040 -> train_step 2", "{'validate': True, 'global_steps': 40}",
        "step:11 - rollouter/validate_time:9",
    ]
    log = work / "logs" / "e.log"
    log.parent.mkdir(parents=True)
    log.write_text("".join(f"(TaskRunner pid=1) test_gen_batch meta info: {{'do_sample': True, {ln[1:]}\n"
                           if ln.startswith("{") else f"(TaskRunner pid=1) {ln}\n" for ln in lines))
    for n in (5, 9, 12, 40, 41):
        make_trial(exp / f"step_{n:04d}", f"t__t-1-{n:08x}")
    run = rd.open_run(log)
    pairs, starts = ref_pairing(log)
    assert pairs == {5: 3, 12: 6, 40: 2} and starts == {5, 9, 12, 40}
    folders = run.folders().set_index("step")
    assert {s: _na(t) for s, t in folders["trainer_step"].items()} == {5: 3, 9: None, 12: 6, 40: 2, 41: None}
    assert dict(folders["split"]) == {5: "val", 9: "val", 12: "val", 40: "val", 41: "train"}


def test_first_copy_only_for_resent_tasks(work):
    """Async validation re-sends tasks; pass@1 scores the first copy (smallest path), never best-of."""
    run = rd.open_run(log_of(work))
    before = run.validation().query("source == 'trials' and event == 'step_0001'").set_index("statistic")["value"]
    samples = at_folder(run, 1)
    unsolved = samples[samples["reward"] == 0].iloc[0]
    make_trial(exp_of(work) / "step_0001", f"{unsolved['task_id']}-ffffffff", 1.0)  # a later, solved copy
    after = run.validation().query("source == 'trials' and event == 'step_0001'").set_index("statistic")["value"]
    assert after["val_score"] == before["val_score"] and after["tasks"] == before["tasks"] == 30
    assert after["trials"] == before["trials"] + 1 == 31
    make_trial(exp_of(work) / "step_0001", f"{unsolved['task_id']}-00000000", 1.0)  # now the first copy
    again = run.validation().query("source == 'trials' and event == 'step_0001'").set_index("statistic")["value"]
    assert again["solved"] == before["solved"] + 1 and again["val_score"] == pytest.approx((before["solved"] + 1) / 30)


# Bad input ----------------------------------------------------------------------------------------
def test_bad_trials_are_rows_and_problems_never_crashes(work):
    exp = exp_of(work)
    step2 = sorted((exp / "step_0002").iterdir())
    (step2[0] / "result.json").unlink()  # still running: reward.txt only
    (step2[1] / "result.json").write_text("{not json")
    (step2[2] / "result.json").write_text("[1, 2]")
    (step2[3] / "verifier" / "reward.txt").write_text("n/a")  # falls back to verifier_result
    (step2[4] / "result.json").unlink()
    (step2[4] / "result.json").mkdir()
    (step2[5] / "verifier" / "reward.txt").write_text("0.5\n")  # reward.txt wins over result.json
    data = json.loads((step2[6] / "result.json").read_text())  # totals missing: summed model_usage
    data["agent_result"] = {"n_input_tokens": None, "n_output_tokens": None, "n_cache_tokens": 4, "model_usage": {
        "a": {"n_input_tokens": 100, "n_output_tokens": 7, "n_cache_tokens": 1},
        "b": {"n_input_tokens": 20, "n_output_tokens": 5, "n_cache_tokens": 2}}}
    (step2[6] / "result.json").write_text(json.dumps(data))
    (exp / "step_0003").mkdir()  # a step folder with no trials
    nores = exp / "step_0002" / "t__t-1-0badc0de"
    nores.mkdir()
    (nores / "exception.txt").write_text("Traceback (most recent call last):\n  File \"x\"\n"
                                         "harbor.errors.AgentTimeoutError: Agent timed out after 3600 s\n")
    run = rd.open_run(log_of(work))
    samples = run.samples()
    assert len(samples) == len(trial_dirs(exp)) == 43
    assert frames.check(samples, frames.SAMPLES) == []
    rows = samples.set_index("locator")
    trials = trial_rows(run).set_index("locator")  # the problem per trial, the exception's parts, cache tokens
    assert list(trials.index) == list(rows.index)
    assert pd.isna(rows.loc[str(step2[0]), "ok"]) and rows.loc[str(step2[0]), "reward"] == ref_trial(step2[0])["reward"]
    assert pd.isna(rows.loc[str(step2[0]), "status"]) and pd.isna(rows.loc[str(step2[0]), "error"])
    assert pd.isna(trials.loc[str(step2[0]), "ok"])
    assert trials.loc[str(step2[0]), "reward"] == ref_trial(step2[0])["reward"]
    assert "no result.json" in trials.loc[str(step2[0]), "problem"]
    assert "not valid JSON" in trials.loc[str(step2[1]), "problem"]
    assert "not a JSON object" in trials.loc[str(step2[2]), "problem"]
    for bad in step2[:3]:
        assert pd.isna(rows.loc[str(bad), "ok"]) and pd.isna(rows.loc[str(bad), "status"])
    assert rows.loc[str(step2[3]), "reward"] == ref_trial(step2[3])["reward"] is not None
    assert "not a number" in trials.loc[str(step2[3]), "problem"]
    assert "not a readable file" in trials.loc[str(step2[4]), "problem"]
    assert rows.loc[str(step2[5]), "reward"] == ref_trial(step2[5])["reward"] == 0.5
    assert pd.isna(trials.loc[str(step2[5]), "problem"])
    tokens = ("n_input_tokens", "n_output_tokens", "n_cache_tokens")
    assert [trials.loc[str(step2[6]), k] for k in tokens] == [120, 12, 4]
    assert [rows.loc[str(step2[6]), k] for k in ("input_tokens", "output_tokens")] == [120, 12]
    assert rows.loc[str(nores), "ok"] == False  # noqa: E712
    assert trials.loc[str(nores), "ok"] == False  # noqa: E712
    assert (trials.loc[str(nores), "exception_type"], trials.loc[str(nores), "exception"]) == (
        "AgentTimeoutError", "Agent timed out after 3600 s")
    assert rows.loc[str(nores), "error"] == "AgentTimeoutError: Agent timed out after 3600 s"
    assert rows.loc[str(nores), "status"] == "error" and rows.loc[str(nores), "sample_id"] == "2-t__t-1-0badc0de"
    assert "no result.json" in trials.loc[str(nores), "problem"]
    problems = run.problems()
    by_what = {(p.path, p.what): p.count for p in problems}
    folder = str(exp / "step_0002")
    assert by_what[(folder, "trial dirs: no result.json (trial still running, or it died)")] == 2
    assert by_what[(folder, "trial dirs: result.json is not valid JSON")] == 1
    assert (str(exp / "step_0003"), "step folder holds no trial dirs") in by_what
    assert sum(p.count for p in problems if p.path == folder) == 6
    assert frames.check(run.validation(), frames.VALIDATION) == []
    run.overview()
    run.metrics()
    for sid in samples["sample_id"]:  # every trial, however broken, opens as an episode
        assert run.episode(sid).sample_id == sid


def test_all_trial_dirs_gone(work):
    shutil.rmtree(exp_of(work))
    with open(log_of(work), "a") as fh:
        fh.write(f"(AgentLoopWorker pid=1) {work}/harbor_trials/{PROJECT}/{EXP}/step_0002/x-12345678\n")
    run = rd.open_run(log_of(work))
    assert run.kind == "swe-lego-rl"  # the log names its trial dirs: still a Lego run
    assert run.samples().empty
    assert list(run.samples().columns) == list(swe_lego_rl.SAMPLE_COLUMNS) == list(frames.SAMPLES)
    assert frames.check(run.samples(), frames.SAMPLES) == []
    assert run.validation().empty and frames.check(run.validation(), frames.VALIDATION) == []
    whats = " | ".join(p.what for p in run.problems())
    assert "not on disk" in whats and "no harbor trial dirs found" in whats


# Caching and refresh ------------------------------------------------------------------------------
def test_refresh_reads_only_new_or_changed_trials(work, monkeypatch):
    run = rd.open_run(log_of(work))
    calls = []
    real = harbor.read_trial
    monkeypatch.setattr(harbor, "read_trial", lambda d, *a: (calls.append(d), real(d, *a))[1])
    first = run.samples()
    assert len(calls) == len(first)
    calls.clear()
    assert run.samples().equals(first) and calls == []
    new = make_trial(exp_of(work) / "step_0002", "pytest-dev__pytest-14655-0000beef", 1.0)
    changed = sorted((exp_of(work) / "step_0002").iterdir())[1]
    data = json.loads((changed / "result.json").read_text())
    data["agent_result"]["n_output_tokens"] = 123456
    (changed / "result.json").write_text(json.dumps(data))
    again = run.samples()
    assert sorted(calls) == sorted([str(new), str(changed)])
    assert len(again) == len(first) + 1
    assert again.set_index("locator").loc[str(changed), "output_tokens"] == 123456
    assert ("harbor-exp", os.path.realpath(exp_of(work))) in cache.shared


# Read-only ----------------------------------------------------------------------------------------
def test_nothing_is_written_into_the_run(work):
    before = snapshot(work)
    run = rd.open_run(log_of(work))
    run.samples(), run.validation(), run.problems(), run.overview(), run.metrics(), run.config()
    rd.discover([work / "logs"])
    assert snapshot(work) == before


def test_names_from_the_notes():
    assert harbor.task_id_of("django__django-16100-3fa2c1d9") == "django__django-16100"
    assert harbor.capability_of("django__django-16100") == "django__django"
    assert harbor.task_id_of("pytest-dev__pytest-14655-07b4c762") == "pytest-dev__pytest-14655"
    assert harbor.task_id_of("django__django-16100-00002a") == "django__django-16100"  # snapshot <idx:06x>
    assert harbor.trial_sample_id(3, "a__a-1-aaaaaaaa") == "3-a__a-1-aaaaaaaa"
    assert [harbor.step_number(n) for n in ("step_0042", "step_10000", "step_x", "_dropped")] == [42, 10000, None, None]
    data = (b"x /a/b/harbor_trials/p/e-20260101-000000/step_0001/t-1 y '/c/harbor_trials/q/f/step_12' "
            b"/a/b/harbor_trials/p/e-20260101-000000/step_2")
    assert harbor.named_exp_dirs(data) == ["/a/b/harbor_trials/p/e-20260101-000000", "/c/harbor_trials/q/f"]


def test_full_sample_dumps_agree_with_the_logged_val_scores():
    """Every paired dump of the full sample scores (first copy, pass@1) what the log printed.

    tests/data/lego-full holds the generated sample's log and its validation dumps (step_0001,
    0066, 0131, 0196: result.json, verifier/reward.txt, exception.txt of every trial)."""
    run = rd.open_run(FULL_LOG)
    assert run.kind == "swe-lego-rl"
    v = run.validation()
    assert frames.check(v, frames.VALIDATION) == []
    pairs, starts = ref_pairing(FULL_LOG)
    assert pairs == {1: 0, 66: 1, 131: 2} and starts == {1, 66, 131, 196}
    assert set(v["event"]) == {f"step_{n:04d}" for n in starts}
    assert list(dict.fromkeys(v["event"])) == [f"step_{n:04d}" for n in sorted(pairs, key=pairs.get)] + [
        f"step_{n:04d}" for n in sorted(starts - set(pairs))]  # by trainer step, unpaired last
    trials = v[v["source"] == "trials"]
    for folder, step in pairs.items():
        got = trials[(trials["event"] == f"step_{folder:04d}") & (trials["statistic"] == "val_score")]["value"]
        assert list(got) == [pytest.approx(ref_log_value(FULL_LOG, step, "val-core/unknown/reward/mean@1"))]
        assert list(v[v["event"] == f"step_{folder:04d}"]["step"].unique()) == [step]
    assert v[v["event"] == "step_0196"]["step"].isna().all()
    low = trials[trials["statistic"] == "low_coverage"].set_index("event")["value"]
    assert dict(low) == {f"step_{n:04d}": float(n not in pairs) for n in starts}


# episode() ----------------------------------------------------------------------------------------
def ref_messages(trajectory: dict) -> list[tuple]:
    """ATIF steps as messages (swe-lego-rl.md section 3): system/user as they are, agent steps as
    assistant messages with their tool calls, each observation result a tool message after its step."""
    roles = {"system": "system", "user": "user", "agent": "assistant"}
    out = []
    for step in trajectory["steps"]:
        calls = [(c["function_name"], c["arguments"], c["tool_call_id"]) for c in step.get("tool_calls") or []]
        out.append((roles[step["source"]], step.get("message") or "", step.get("reasoning_content"), calls, None,
                    (step.get("metrics") or {}).get("completion_tokens")))
        for r in (step.get("observation") or {}).get("results") or []:
            out.append(("tool", r["content"], None, [], r["source_call_id"], None))
    return out


def _messages(episode) -> list[tuple]:
    return [(m.role, m.content, m.reasoning, [(c.name, json.loads(c.arguments), c.id) for c in m.tool_calls],
             m.tool_call_id, m.tokens) for m in episode.messages]


def test_episode_has_the_trajectory_messages_and_tool_calls_and_ids_are_url_safe():
    run = rd.open_run(LOG)
    samples = run.samples()
    assert all(frames.is_url_safe(s) for s in samples["sample_id"])
    assert not any("/" in s for s in samples["sample_id"])
    [path] = list(TRIALS.glob("step_*/*/agent/trajectory.json"))
    trial = path.parent.parent
    sid = f"{int(trial.parent.name.split('_')[1])}-{trial.name}"
    row = samples.set_index("sample_id").loc[sid]
    assert row["locator"] == str(trial)
    ep = run.episode(sid)
    trajectory = json.loads(path.read_text())
    result = json.loads((trial / "result.json").read_text())
    ref = ref_trial(trial)
    want = ref_messages(trajectory)
    assert _messages(ep) == want
    calls = [c for m in want for c in m[3]]
    answers = [m for m in want if m[0] == "tool"]
    assert len(calls) == 5 and len(answers) == 4 and {a[4] for a in answers} <= {c[2] for c in calls}
    assert [m.role for m in ep.messages][:3] == ["system", "user", "assistant"]
    assert ep.messages[2].tool_calls[0].name == "execute_bash" and ep.messages[2].reasoning
    assert (ep.sample_id, ep.run_id, ep.split, ep.step) == (sid, run.run_id, row["split"], _na(row["step"]))
    assert (ep.task_id, ep.env, ep.reward, ep.error) == (ref["task_id"], ref["capability"], ref["reward"], None)
    assert ep.rewards == {k: float(v) for k, v in result["verifier_result"]["rewards"].items()}
    phases = ("environment_setup", "agent_setup", "agent_execution", "verifier")
    seconds = {p: (pd.Timestamp(result[p]["finished_at"]) - pd.Timestamp(result[p]["started_at"])).total_seconds()
               for p in phases}
    assert ep.timing == pytest.approx(seconds)
    assert ep.ids["trial"] == trial.name and ep.ids["trial_dir"] == str(trial) and ep.ids["id"] == result["id"]
    assert ep.raw["problems"] == []

    failed = samples[samples["ok"].eq(False)].iloc[0]  # no transcript: no messages, the error, a note
    ep = run.episode(failed["sample_id"])
    assert ep.messages == [] and ep.error == failed["error"] and ep.error.startswith("EnvironmentStartTimeoutError: ")
    assert any("trajectory.json" in p for p in ep.raw["problems"])
    for bad in ("no-such-sample", f"step_0002/{trial.name}", f"1-{trial.name}", f"2-{trial.name}x", "2-", ""):
        with pytest.raises(KeyError):
            run.episode(bad)


def test_a_log_without_a_closing_stamp_is_dated_by_its_newest_trials(tmp_path):
    """The Lego log prints no wall-clock time at its end: its last logged time is the last
    `finished_at` of the newest step folder's trials, the same for a copy made today."""
    import json
    import shutil

    src = DATA / "lego"
    newest = max((src / "harbor_trials").rglob("step_*"), key=lambda p: int(p.name.split("_")[1]))
    ends = [pd.Timestamp(json.loads(r.read_text())["finished_at"]) for r in newest.glob("*/result.json")]
    want = max(ends).tz_convert("UTC") if max(ends).tzinfo else max(ends).tz_localize("UTC")
    ov = rd.open_run(src / "logs" / f"{EXP}.log").overview()
    assert abs(ov.updated - want) < pd.Timedelta(milliseconds=1)
    assert ov.duration_s == pytest.approx((want - ov.started).total_seconds(), abs=1e-3)
    copy = shutil.copytree(src, tmp_path / "lego")
    assert rd.open_run(copy / "logs" / f"{EXP}.log").overview().updated == ov.updated


def test_a_marker_line_cut_by_a_still_writer_counts_once_whole(tmp_path, monkeypatch):
    """stdout to a file is block-buffered: a `val_map:` line can sit cut for longer than the settle
    time. Its cut head (`train_step 1`) must not stick as the folder's step: the line counts once,
    whole (`NewLines.complete`)."""
    import time

    from rundash_core.io import bytetail
    from rundash_core.sources.swe_lego_rl import run as swe_lego_rl

    monkeypatch.setattr(bytetail, "SETTLE_S", 0.0)
    log = tmp_path / "exp.log"
    log.write_text("step:1 - a:1\nval_map: step_12 -> train_step 1")
    os.utime(log, (time.time() - 10,) * 2)
    marks = swe_lego_rl.LogMarks(str(log)).refresh()
    assert marks.train_step(12) is None
    with open(log, "a") as fh:
        fh.write("5\nval_map: step_13 -> train_step 20\n")
    marks.refresh()
    assert (marks.train_step(12), marks.train_step(13)) == (15, 20)
