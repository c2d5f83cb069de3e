"""verl console logs: metric lines of every era against an independent reading, merging, resumes,
the config print, discovery, the file-logger JSONL, incremental reads and bad input.

The reference (`helpers/verl.py`) is written from the format notes (verl.md sections 3, 4, 6), not from
rundash's code: decode each line, split tqdm `\\r` redraws, strip ANSI codes, the Ray dedup suffix
and Ray prefixes, search the metric-line regex, split the pairs at their last colon (gluing pieces
that are not `key:value`), merge per step with the last value winning.
"""
from __future__ import annotations

import gc
import math
import os
import shutil
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

import rundash_core as rd
from rundash_core import cache
from rundash_core.sources import detect
from rundash_core.sources.verl import block_parse
from rundash_core.sources.verl import run as verl
from rundash_core.sources.verl.metric_log import VerlLogTail

from helpers import MONTH_AGO, set_all_mtimes, write_file
from helpers.verl import DQ, EH, SFT, VERL, ref_lines, ref_merged, tidy_map

LEGO = VERL / "lego" / "logs" / "qwen3-8b-swegym-gspo-async-r1.log"


@pytest.fixture
def logs(tmp_path) -> Path:
    """Writable copies of the sample logs, last modified a month ago."""
    dest = tmp_path / "logs"
    shutil.copytree(VERL, dest)
    for p in dest.rglob("*"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    set_all_mtimes(dest, MONTH_AGO)
    return dest


# The sample logs ----------------------------------------------------------------------------------
SPEC_TABLE = {  # verl.md section 12: metric lines, distinct steps, steps on >1 line, keys, keys at step 0 and 1
    DQ: (211, 211, 0, 57, 2, 53), EH: (435, 435, 0, 42, 40, 40),
    SFT: (60, 59, 1, 3, 2, 2),  # the notes say 29 steps on >1 line; the data has one: step 29 (val, then train)
}


@pytest.mark.parametrize("path", [DQ, EH, SFT, LEGO], ids=lambda p: p.name[:8])
def test_every_metric_line_matches_the_log(path):
    lines = ref_lines(path.read_bytes())
    got = tidy_map(rd.open_run(path))
    # era S1 (eh_Qwen): the initial and final validation pprints add step-0 and last-step values
    from_pprint = {(0, "val/test_score/openai/gsm8k"), (434, "val/test_score/openai/gsm8k")} if path == EH else set()
    assert set(got) >= from_pprint
    assert {k: v for k, v in got.items() if k not in from_pprint} == ref_merged(lines)
    for no, step, pairs in lines:  # line by line: each value is the line's, or a later line's for its step
        for key, value in pairs.items():
            later = [p[key] for n, s, p in lines if s == step and n > no and key in p]
            assert got[(step, key)] == (later[-1] if later else value), (path.name, no, key)
    if path in SPEC_TABLE:
        per_step = Counter(s for _n, s, _p in lines)
        keys = {(s, k) for _n, s, p in lines for k in p}
        assert (len(lines), len(per_step), sum(c > 1 for c in per_step.values()), len({k for _s, k in keys}),
                len([k for s, k in keys if s == 0]), len([k for s, k in keys if s == 1])) == SPEC_TABLE[path]


def test_spot_values_from_the_notes():
    dq, eh, sft = (tidy_map(rd.open_run(p)) for p in (DQ, EH, SFT))
    assert dq[(0, "val-core/openai/gsm8k/reward/mean@1")] == 0.221
    assert dq[(0, "val-core/DigitalLearningGmbH/MATH-lighteval/reward/mean@1")] == 0.514
    assert len([k for k in dq if k[0] == 0]) == 2  # the initial validation has its own step-0 line
    assert (dq[(1, "actor/pg_loss")], dq[(1, "critic/score/mean")], dq[(1, "perf/throughput")], dq[(1, "actor/lr")]) == (
        -0.034, 0.433, 1036.956, 0.0)
    assert (dq[(210, "critic/score/mean")], dq[(210, "training/epoch")]) == (0.937, 14.0)
    assert sorted(s for s, k in dq if k == "timing_s/testing") == list(range(5, 211, 5))  # validation steps
    assert sorted(s for s, k in dq if k.startswith("val-core/openai")) == list(range(0, 211, 5))
    assert (eh[(0, "critic/kl")], eh[(0, "actor/lr(1e-4)")], eh[(0, "critic/lr(1e-4)")]) == (0.0, 0.01, 0.1)
    assert (eh[(9, "val/test_score/openai/gsm8k")], eh[(429, "val/test_score/openai/gsm8k")]) == (0.013, 0.543)
    assert eh[(434, "critic/score/mean")] == 0.707
    val_steps = sorted(s for s, k in eh if k == "val/test_score/openai/gsm8k")
    assert val_steps == [0, *range(9, 430, 10), 434]  # 43 from lines, plus the two pprints
    # era S1: the initial and final validation exist only as pprints (spec 7)
    assert eh[(0, "val/test_score/openai/gsm8k")] == 0.0007621951219512195
    assert eh[(434, "val/test_score/openai/gsm8k")] == 0.5685975609756098
    assert (sft[(0, "train/loss")], sft[(0, "train/lr(1e-3)")], sft[(58, "val/loss")]) == (0.046, 0.002, 0.411)
    assert {k: v for (s, k), v in sft.items() if s == 29} == {"val/loss": 0.42, "train/loss": 0.01,
                                                              "train/lr(1e-3)": 0.005}


def test_config_model_and_run_card(logs):
    runs = {p.name[:7]: rd.open_run(p) for p in (logs / DQ.name, logs / EH.name, logs / SFT.name)}
    dq = runs["dq_math"].config()
    assert (dq["trainer"]["experiment_name"], dq["trainer"]["total_epochs"], dq["trainer"]["test_freq"],
            dq["algorithm"]["adv_estimator"], dq["actor_rollout_ref"]["rollout"]["n"]) == (
        "qwen2_7b_function_rm", 15, 5, "gpg", 5)
    eh = runs["eh_Qwen"].config()
    assert (eh["trainer"]["experiment_name"], eh["trainer"]["total_epochs"], eh["trainer"]["test_freq"],
            eh["algorithm"]["adv_estimator"]) == ("gemma2b_function_rm", 15, 10, "gae")
    sft = runs["eh_gemm"].config()
    assert (sft["trainer"]["experiment_name"], sft["trainer"]["total_epochs"]) == ("gsm8k-sft-gemma-2-2b-it", 2)
    assert runs["dq_math"].configs() == {"config (from log)": dq}
    cards = {k: r.overview() for k, r in runs.items()}
    assert [(c.experiment, c.status, c.step, c.max_steps, c.model, c.flavor) for c in cards.values()] == [
        ("qwen2_7b_function_rm", "completed", 210, 210, "Qwen/Qwen2-7B-Instruct", "rl"),  # tqdm total; final pprint
        ("gemma2b_function_rm", "completed", 435, None, "Qwen/Qwen2.5-0.5B-Instruct", "rl"),  # final pprint; 0..434
        ("gsm8k-sft-gemma-2-2b-it", "completed", 58, 58, "google/gemma-2-2b-it", "sft"),  # 58 steps of 58
    ]
    assert cards["dq_math"].eval_envs == ["openai/gsm8k", "DigitalLearningGmbH/MATH-lighteval"]
    assert [c.run_id for c in cards.values()] == [c.name for c in cards.values()] == [
        p.name.rsplit(".", 1)[0] for p in (DQ, EH, SFT)]  # the name is the log's, as the runs list lists it
    lego = rd.open_run(logs / "lego" / "logs" / LEGO.name)
    ov = lego.overview()
    assert (ov.max_steps, ov.model, ov.name) == (12, "Qwen3-8B", "qwen3-8b-swegym-gspo-async-r1")
    assert all(r.problems() == [] for r in runs.values())


def test_discovery_reads_only_ends_and_agrees_with_the_full_card(logs, tmp_path, monkeypatch):
    full = {p: rd.open_run(p).overview() for p in (logs / DQ.name, logs / EH.name, logs / SFT.name)}
    cache.shared.clear()
    monkeypatch.setattr(VerlLogTail, "poll", lambda self: pytest.fail("discovery parsed a whole log"))
    frame = rd.discover([logs]).set_index("path")
    for path, ov in full.items():
        row = frame.loc[str(path)]
        assert (row["kind"], row["status"], row["step"], row["model"]) == ("verl", ov.status, ov.step, ov.model)
        assert (pd_na(row["max_steps"]), row["name"], row["run_id"]) == (ov.max_steps, ov.name, ov.run_id)


def test_logs_are_found_one_level_deep_and_in_logs_folders(tmp_path):
    work = tmp_path / "work"
    for name in ("a.log", "b.out", "launch_a.log", "a_vllm.log", "a_train_gpu_wandb.log", "dash_server.out",
                 ".hidden.log", "notes.txt", "logs/c.log", "logs/c_vllm.log", "deeper/d.log", "logs/x/e.log"):
        write_file(work / name, "step:1 - a:1.0\n")
    found = verl.find_runs(sorted(os.scandir(work), key=lambda e: e.name))
    assert sorted(os.path.relpath(p, work) for p in found) == ["a.log", "b.out"]  # the walk goes below
    frame = rd.discover([work])  # the tracked folder is a workdir with logs/, not a run itself
    assert sorted(zip(frame["run_id"], frame["kind"])) == [("a", "verl"), ("b", "verl"), ("c", "verl"),
                                                           ("d", "verl"), ("e", "verl")]
    assert detect(str(work / "a_vllm.log")) is None and detect(str(work / "b.out")) is verl.VerlRun


def pd_na(x):
    return None if pd.isna(x) else int(x)


def test_a_log_without_metric_lines_is_a_run(tmp_path):
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")  # a run starting now (an old stamp would be a copy)
    noise = f"{stamp},706\tINFO worker.py:1843 -- Connected to Ray cluster.\n(TaskRunner pid=7) hello\n"
    fresh = write_file(tmp_path / "starting.log", noise, mtime=None)
    old = write_file(tmp_path / "crashed.log", noise)
    frame = rd.discover([tmp_path]).set_index("run_id")
    assert frame.loc["starting", "status"] == "running" and frame.loc["crashed", "status"] == "stopped"
    assert frame["error"].isna().all() and frame["step"].isna().all()
    for p in (fresh, old):
        run = rd.open_run(p)
        assert run.metrics().empty and run.overview().step is None and run.attempts() == [1]
        assert [x.what for x in run.problems()] == ["no metric lines yet"]


# Every era, from the grammar ----------------------------------------------------------------------
ERAS = "".join([
    "\x1b[36m(TaskRunner pid=247607)\x1b[0m step:1 - global_seqlen/min:159906 - actor/entropy:0.09767807275056839"
    " - actor/pg_loss:-0.0036091046008680547 - actor/lr:1e-06 - actor/kl:-8.163164312320433e-06"
    " - training/global_step:1 - critic/score/mean:0.0888671875\n",
    "\x1b[36m(TaskRunner pid=1234)\x1b[0m step:2 - critic/vf_loss:np.float64(0.007003280876688223)"
    " - actor/lr:np.float64(1e-06) - num_turns/max:np.int64(16) - val-core/openai/gsm8k/reward/mean@1:np.float64(0.4943)"
    " - actor/flag:True - actor/off:False - x/nan:nan - x/inf:-inf - x/npnan:np.float64(nan)\n",
    "(main_task pid=54569) step:3 - val-core/Hothan/OlympiadBench:OE_MM_maths_en_COMP/acc/mean@1:0.5 - a/b:1.000\n",
    "(WorkerDict pid=1, ip=10.0.0.1) step:4 - val-core/ds - with dash/reward/mean@1:0.25 - a/b:2.000\n",
    "Training Progress:  86%|████████▌ | 180/210 [20:08:54<4:04:26, 488.90s/it]step:5 - a/b:5.0\n",
    "\x1b[36m(TaskRunner pid=1)\x1b[0m Training Progress: 1%|\rstep:6 - a/b:6.0\rTraining Progress: 2%|\n",
    "\x1b[36m(TaskRunner pid=1)\x1b[0m step:7 - a/b:7.0\x1b[32m [repeated 2x across cluster]\x1b[0m\n",
    "\x1b[0mstep:8 - a/b:8.0\n",
    "(wiQkzJWorkerDict_0:0 WorkerDict pid=9) step:9 - a/b:9.0 \r\n",
    "(pid=3) step:10 - a/b:10.0 - c/d:+.5 - e/f:5.\n",
    "(TaskRunner pid=1) [response] I'll check it. step:11 - not a metric line\n",
    "(TaskRunner pid=1) [response] The answer step:12 - total: 5\n",
    "(TaskRunner pid=1) global_step:13 - a/b:1.0 and training/global_step:14 - a/b:1.0\n",
    "(TaskRunner pid=1) step:15 - a/b:3.0 - a/b:4.0 - \"q\":1 - k[0]:2\n",
    "step:16 - a/b:1.0\x00\x00 - c/d:2.0\n",
])


def test_every_era_and_noise_case(tmp_path):
    path = write_file(tmp_path / "eras.log", ERAS)
    got = tidy_map(rd.open_run(path))
    assert got == ref_merged(ref_lines(path.read_bytes()))
    assert got[(1, "actor/pg_loss")] == -0.0036091046008680547 and got[(1, "actor/lr")] == 1e-06
    assert got[(1, "actor/kl")] == -8.163164312320433e-06 and got[(1, "global_seqlen/min")] == 159906
    assert (got[(2, "critic/vf_loss")], got[(2, "num_turns/max")], got[(2, "actor/flag")], got[(2, "actor/off")]) == (
        0.007003280876688223, 16, 1.0, 0.0)
    assert got[(2, "x/inf")] == -math.inf and (2, "x/nan") not in got and (2, "x/npnan") not in got  # NaN: a gap
    assert got[(3, "val-core/Hothan/OlympiadBench:OE_MM_maths_en_COMP/acc/mean@1")] == 0.5  # last-colon rule
    assert got[(4, "val-core/ds - with dash/reward/mean@1")] == 0.25  # glue rule
    assert {s for s, _k in got} == {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 16}
    assert (got[(10, "c/d")], got[(10, "e/f")], got[(15, "a/b")], got[(15, 'k[0]')]) == (0.5, 5.0, 4.0, 2.0)
    assert got[(15, '"q"')] == 1.0
    problems = rd.open_run(path).problems()
    assert [(p.what, p.count, p.line) for p in problems] == [("NUL bytes (removed)", 1, 15)]


def test_steps_merge_and_resumes_open_attempts(tmp_path):
    path = write_file(tmp_path / "resumed.log", "".join([
        "step:0 - val/x:0.1\n", "step:1 - a:1.0 - b:1.0\n", "step:1 - c:1.0\n", "step:2 - a:2.0\n", "step:3 - a:3.0\n",
        "step:2 - val/x:0.2\n",  # resumed from the step-2 checkpoint: steps go back, a second attempt
        "step:3 - a:33.0\n", "step:4 - a:4.0\n",
    ]))
    run = rd.open_run(path)
    got = tidy_map(run)
    assert got == ref_merged(ref_lines(path.read_bytes()))
    assert (got[(3, "a")], got[(1, "c")], got[(1, "b")], got[(2, "val/x")]) == (33.0, 1.0, 1.0, 0.2)
    assert run.attempts() == [1, 2] and run.latest_attempt() == 2
    # the one summary reads the log's pass (appended bytes only): a launch appended mid-file is in it
    assert run.overview().attempts == run.overview().attempts == 2 and run.resume_steps() == [2]
    assert run.overview().resumed_from == []  # no resume print: from which checkpoint is not said
    wide = run.metrics_wide()
    assert list(wide["step"]) == [0, 1, 2, 3, 4] and list(wide["a"].fillna(-1)) == [-1, 1.0, 2.0, 33.0, 4.0]


def test_a_numpy2_log_in_bulk_matches_the_grammar(tmp_path, monkeypatch):
    """Era F3 on every line (wrapped values, nan, True): the reader switches to bulk unwrapping
    after the first such line; values still equal the line-by-line reading."""
    lines = [f"\x1b[36m(TaskRunner pid=1)\x1b[0m step:{s} - actor/pg_loss:np.float64({-s / 7!r})"
             f" - num_turns/max:np.int64({s}) - critic/score/mean:{s / 3!r} - flag:True"
             + (" - gap:np.float64(nan) - top:inf" if s % 50 == 0 else "") + f" - timing_s/step:{s * 1.5}\n"
             for s in range(1, 400)]
    path = write_file(tmp_path / "f3.log", "".join(lines))
    tail = VerlLogTail(path)
    calls = []
    one = block_parse._one
    monkeypatch.setattr(block_parse, "_one", lambda found, *a: (calls.append(found), one(found, *a))[1])
    rows = tail.poll().rows
    assert 7 < len(calls) < 20  # the first line and the nan/inf lines go one by one, the rest in bulk
    got = tidy_map(rd.open_run(path))
    assert got == ref_merged(ref_lines(path.read_bytes())) and len(rows) == 399
    assert len(got) == 399 * 5 + 7 and got[(7, "actor/pg_loss")] == -1.0 and got[(399, "flag")] == 1.0
    assert got[(50, "top")] == math.inf and (50, "gap") not in got


def test_each_launch_of_an_appended_log_has_its_config(tmp_path):
    def launch(name: str, steps) -> str:
        return (f"(TaskRunner pid=1) {{'actor_rollout_ref': {{'model': {{'path': 'org/{name}'}}}},\n"
                f"(TaskRunner pid=1)  'trainer': {{'experiment_name': '{name}', 'total_training_steps': 9}}}}\n"
                + "".join(f"(TaskRunner pid=1) step:{s} - a:{s}.5\n" for s in steps))
    path = write_file(tmp_path / "tee.log", launch("first", range(1, 6)) + launch("second", range(4, 10)))
    run = rd.open_run(path)
    assert run.attempts() == [1, 2]
    assert run.config()["trainer"]["experiment_name"] == "second"
    assert run.configs(attempt=1)["config (from log)"]["trainer"]["experiment_name"] == "first"
    assert run.configs(attempt=2) == run.configs() == {"config (from log)": run.config()}
    ov = run.overview()  # the log's ends: the first launch's config print, the last step; its pass: the relaunch
    assert (ov.step, ov.max_steps, ov.attempts, ov.name, ov.experiment, ov.model) == (
        9, 9, 2, "tee", "first", "org/first")


# Incremental reading ------------------------------------------------------------------------------
def test_refresh_reads_only_appended_bytes_and_holds_partial_lines(tmp_path, monkeypatch):
    path = write_file(tmp_path / "live.log", "step:1 - a:1.0\nnoise\nstep:2 - a:2.0\nstep:3 - a:3.", mtime=None)
    run = rd.open_run(path)
    assert sorted(tidy_map(run)) == [(1, "a"), (2, "a")]  # the half-written line waits for its newline
    assert any("incomplete" in p.what for p in run.problems())
    reads = []
    from rundash_core.io import bytetail
    real = bytetail.read_range
    monkeypatch.setattr(bytetail, "read_range", lambda p, s, e=None: (reads.append((s, e)), real(p, s, e))[1])
    size = path.stat().st_size
    with open(path, "ab") as fh:
        fh.write(b"5\nstep:4 - a:4.0\n")
    got = tidy_map(run)
    assert got[(3, "a")] == 3.5 and got[(4, "a")] == 4.0 and len(got) == 4
    appended = (size, size + len(b"5\nstep:4 - a:4.0\n"))  # the held-back line is kept, not read again
    assert appended in reads and all(e - s <= 64 for s, e in reads if (s, e) != appended)  # (64: the checkpoint)
    assert not any("incomplete" in p.what for p in run.problems())
    path.write_text("step:9 - z:9.0\n")  # replaced by a shorter file: read again from the start
    assert tidy_map(run) == {(9, "z"): 9.0}


def test_blocks_give_the_same_rows_as_one_read(tmp_path):
    long_line = "step:2 - " + " - ".join(f"k{i}:{i}.5" for i in range(3000)) + "\n"
    path = write_file(tmp_path / "big.log", DQ.read_text(errors="replace") + long_line + ERAS)
    whole, small = VerlLogTail(path, block_bytes=1 << 30).poll(), VerlLogTail(path, block_bytes=4096).poll()
    def comparable(rows):  # NaN != NaN: compare their text
        return [{k: repr(v) for k, v in r.items()} for r in rows]
    assert comparable(whole.rows) == comparable(small.rows) and len(whole.rows) > 220


def test_a_poll_leaves_the_garbage_collector_on(tmp_path, monkeypatch):
    """The app parses in every user's session: a poll may not switch the collector (or any other
    process-wide setting) off, not even for a while."""
    def refuse(*_args):
        raise AssertionError("the garbage collector is process-wide: leave it alone")

    for name in ("disable", "freeze", "set_threshold"):
        monkeypatch.setattr(gc, name, refuse)
    path = tmp_path / "all.log"
    path.write_bytes(b"".join(p.read_bytes() for p in (DQ, EH, SFT, LEGO)) + b"step:999999 - a:0.")
    seen = []
    scan = VerlLogTail._scan
    monkeypatch.setattr(VerlLogTail, "_scan", lambda self, *a: seen.append(gc.isenabled()) or scan(self, *a))
    assert gc.isenabled()
    tail = VerlLogTail(path, block_bytes=64 << 10)
    rows = tail.poll().rows
    assert len(rows) > 400 and len(seen) >= 10 and all(seen)  # on in every block of the poll
    with open(path, "ab") as f:
        f.write(b"5\nstep:1000000 - a:1.0\n")
    assert [r["a"] for r in tail.poll().rows] == [0.5, 1.0]
    assert gc.isenabled() and all(seen)
    assert not any(gc.is_tracked(r) for r in rows)  # why it may stay on: rows hold no containers


# The file logger ----------------------------------------------------------------------------------
def test_file_logger_jsonl_next_to_the_log_is_preferred(tmp_path):
    log = write_file(tmp_path / "exp.log", "step:1 - a:0.123\nstep:2 - a:0.457\n")
    write_file(tmp_path / "exp.jsonl", '{"step": 1, "data": {"a": 0.12345, "s": "text", "n": null}}\n'
                                  '{"step": 2, "data": {"a": 0.4567, "b": 7}}\n[1, 2]\n')
    run = rd.open_run(log)
    assert tidy_map(run) == {(1, "a"): 0.12345, (2, "a"): 0.4567, (2, "b"): 7.0}  # full precision; NaN is a gap
    assert [(p.what, p.line) for p in run.problems()] == [("not a JSON object", 3)]
    assert verl.find_runs(list(os.scandir(tmp_path))) == [str(log)]  # listed once, as the log
    alone = write_file(tmp_path / "other" / "run.jsonl", '{"step": 0, "data": {"x": 1.5}}\n')
    assert detect(str(alone)) is verl.VerlRun and verl.find_runs(list(os.scandir(alone.parent))) == [str(alone)]
    assert tidy_map(rd.open_run(alone)) == {(0, "x"): 1.5} and rd.open_run(alone).run_id == "run"


# Bad input ----------------------------------------------------------------------------------------
def test_binary_junk_bad_utf8_and_noise_are_shown_not_raised(tmp_path):
    junk = bytes(range(256)) * 8
    path = write_file(tmp_path / "junk.log", b"step:1 - a:1.0\n" + junk + b"\nstep:2 - a:2.0 - k\xff:3.0\n"
                 + b"step:3 - a:3.0\n")
    run = rd.open_run(path)
    got = tidy_map(run)
    assert got == ref_merged(ref_lines(path.read_bytes())) and got[(2, "k\ufffd")] == 3.0
    whats = {p.what: (p.count, p.line) for p in run.problems()}
    data = path.read_bytes()
    assert whats["NUL bytes (removed)"] == (8, 2)  # one NUL in each of 8 junk lines, the first on line 2
    assert whats["invalid UTF-8 in a metric line (replaced)"] == (1, data[: data.index(b"k\xff")].count(b"\n") + 1)
    frame = rd.discover([tmp_path])
    assert frame["error"].isna().all() and list(frame["step"]) == [3]
    for p in (write_file(tmp_path / "empty.log", b""), write_file(tmp_path / "bin.out", junk)):
        run = rd.open_run(p)
        assert run.metrics().empty and run.overview().status == "stopped" and run.config() == {}
        assert "no metric lines yet" in [x.what for x in run.problems()]


def test_unreadable_and_cut_config_prints_are_problems(tmp_path):
    cut = write_file(tmp_path / "cut.log", "(TaskRunner pid=1) {'actor_rollout_ref': {'model': {'path': 'x'},\n"
                                      "(TaskRunner pid=1)  'trainer': {'total_epochs': 2}\nstep:1 - a:1.0\n")
    run = rd.open_run(cut)
    assert run.config() == {} and any("cut off" in p.what for p in run.problems())
    ok = write_file(tmp_path / "ok.log", "(TaskRunner pid=1) {'actor_rollout_ref': {'model': {'path': 'org/m'}},\n"
                                    "(WorkerDict pid=2) interleaved\n"
                                    "(TaskRunner pid=1)  'trainer': {'total_training_steps': 4, 'lr': inf}}\n"
                                    "step:1 - a:1.0\n")
    run = rd.open_run(ok)
    assert run.config() == {"actor_rollout_ref": {"model": {"path": "org/m"}},
                            "trainer": {"total_training_steps": 4, "lr": math.inf}}
    assert (run.overview().model, run.overview().max_steps, run.problems()) == ("org/m", 4, [])


def test_a_last_line_without_newline_is_read_once_the_file_is_still(tmp_path):
    """A finished log whose last metric line has no newline: read once the file has not changed for
    a few seconds (the metric store and the run card); if the file grows again, the line is read
    again whole."""
    from rundash_core.io.bytetail import SETTLE_S

    log = tmp_path / "done.log"
    log.write_bytes(b"step:1 - a:1.0\nstep:2 - a:2.0\nstep:3 - a:3")
    run = rd.open_run(log)
    assert sorted(tidy_map(run)) == [(1, "a"), (2, "a")] and run.overview().last_step == 2  # being written
    old = time.time() - SETTLE_S - 1
    os.utime(log, (old, old))
    got = tidy_map(run)
    assert got[(3, "a")] == 3.0 and run.overview().last_step == 3  # still: it is the last line
    with open(log, "ab") as fh:  # the writer was only slow: the line goes on
        fh.write(b".5 - b:7.0\nstep:4 - a:4.0\n")
    got = tidy_map(run)
    assert got[(3, "a")] == 3.5 and got[(3, "b")] == 7.0 and got[(4, "a")] == 4.0
    with open(log, "ab") as fh:
        fh.write(b"step:5 - a:5.0")
    os.utime(log, (old, old))
    assert tidy_map(run)[(5, "a")] == 5.0
    with open(log, "ab") as fh:  # its newline arrives late: nothing read twice, nothing lost
        fh.write(b"\nstep:6 - a:6.0\n")
    got = tidy_map(run)
    assert (got[(5, "a")], got[(6, "a")]) == (5.0, 6.0) and list(run.store().tail.problems.items()) == []


def test_the_card_of_a_log_without_stamps_times_it_by_its_steps(tmp_path):
    """A verl console log has no timestamps on its metric lines: the summary's duration is the sum
    of its per-step `timing_s/step` plus validation time outside a step, the same for a copy made
    today; the runs list shows that same summary."""
    import shutil

    lines = ["step:0 - val-core/x/reward/mean@1:0.1 - timing_s/testing:30.0\n"]
    lines += [f"step:{s} - actor/pg_loss:0.1 - timing_s/step:100.0\n" for s in range(1, 6)]
    lines += ["step:5 - timing_s/step:110.0\n"]  # a step written again was run again: its time counts too
    log = write_file(tmp_path / "a" / "run.log", "".join(lines))
    card = rd.open_run(log).overview()
    assert card.duration_s == pytest.approx(30.0 + 5 * 100.0 + 110.0)
    assert rd.open_run(log).overview().duration_s == card.duration_s
    assert rd.discover([tmp_path / "a"])["duration_s"].iloc[0] == pytest.approx(card.duration_s)
    copy = tmp_path / "b" / "run.log"
    copy.parent.mkdir()
    shutil.copy(log, copy)
    assert rd.open_run(copy).overview().duration_s == card.duration_s


def test_a_log_begun_by_torchrun_glog_lines_starts_there(tmp_path):
    """The real SFT log's first full `YYYY-MM-DD` stamp comes after its training (a checkpoint's
    DeepSpeed lines, 07:27:33-07:27:42); torchrun's glog launch lines say 12-17 07:20:03 without a
    year: the run started then (the year from the later stamp), not 9 s before it ended."""
    o = rd.open_run(SFT).overview()
    local = time.mktime((2024, 12, 17, 7, 20, 3, 0, 0, -1))  # log stamps are the machine's local wall time
    assert o.started == pd.Timestamp(local, unit="s", tz="UTC")
    assert o.duration_s == pytest.approx(459.0)
    log = write_file(tmp_path / "newyear.log", "W1231 23:59:00.000001 1 torch/distributed/run.py:779] launch\n"
                "step:1 - a:1.0\n[2025-01-01 00:00:30,000] [INFO] saved\n")
    assert rd.open_run(log).overview().started.year == 2024  # Dec 31 before a Jan 1 stamp: the year before
