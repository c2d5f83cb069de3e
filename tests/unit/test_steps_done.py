"""The step a run card and the runs list show (steps done): (1) a last metrics row of NaNs (or of
non-numbers) is no step done (`metrics/steps_done.py`), for every kind; (2) a verl log ending in
MiBs of other output still lists its last step (`sources/verl/steps_before_tail.py`), searching
only what was appended since its last look, and within a bound."""
from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import rundash_core as rd
from rundash_core import cache
from rundash_core.metrics.store import MetricStore
from rundash_core.sources.verl import steps_before_tail

from helpers import DATA, MONTH_AGO, listed_step, make_rl_run, set_all_mtimes, write_file, write_lines
from helpers.shapes import append

T0 = 1_760_000_000.0


def finite_steps(run) -> set[int]:
    tidy = run.metrics()
    tidy = tidy[tidy["step"].notna() & tidy["value"].map(math.isfinite)]
    return {int(s) for s in tidy["step"]}


# 1. A last row of NaNs is no step done ----------------------------------------------------------
def test_prime_rl_last_rows_of_nan_or_text_do_not_set_the_step(tmp_path):
    rows = [{"step": s, "loss/mean": 0.1 * s, "time": T0 + s} for s in range(1, 6)]
    rows += [{"step": 6, "loss/mean": float("nan"), "entropy/mean": float("nan"), "time": T0 + 6},
             {"step": 7, "note": "checkpoint saved", "time": T0 + 7}]  # a step logging only text
    run_dir = make_rl_run(tmp_path / "out", "nan-tail", rows=rows)
    run = rd.open_run(run_dir)
    assert (run.overview().step, run.overview().last_step, run.overview().step) == (5, 5, 5)
    assert listed_step(tmp_path / "out", run.run_id) == 5 and max(finite_steps(run)) == 5


def test_prime_rl_a_tail_of_nan_rows_past_the_window_asks_the_store(tmp_path):
    """More than 1 MiB of NaN rows at the end: the tail holds no step done, the store (whole file)
    says the last one."""
    rows = [{"step": s, "loss/mean": 0.5, "time": T0 + s} for s in range(1, 5)]
    nan_rows = [{"step": s, "loss/mean": float("nan"), "time": T0 + s} for s in range(5, 30_000)]
    run_dir = make_rl_run(tmp_path / "out", "nan-mib", rows=rows + nan_rows)
    assert (run_dir / "monitors" / "file" / "metrics.jsonl").stat().st_size > 1 << 20
    run = rd.open_run(run_dir)
    assert run.overview().step == 4 and listed_step(tmp_path / "out", run.run_id) == 4


def test_metric_store_last_step_logging_a_number(tmp_path):
    path = tmp_path / "m.jsonl"
    write_lines(path, [{"step": 1, "a": 1.0}, {"step": 3, "a": 2.0, "b": float("inf")}, {"step": 4, "b": float("inf")},
                       {"step": 5, "a": float("nan")}, {"step": 6, "s": "text"}, {"step": 7}])
    store = MetricStore(str(path))
    store.refresh()
    assert (store.max_step(), store.last_step_logging_a_number()) == (7, 3)  # inf is no finite value either


def test_verl_log_whose_last_lines_are_nan(tmp_path):
    log = write_file(tmp_path / "logs" / "nan.log", "".join(
        [f"(TaskRunner pid=1) step:{s} - actor/pg_loss:{0.1 * s} - timing_s/step:2.0\n" for s in range(1, 5)]
        + ["(TaskRunner pid=1) step:5 - actor/pg_loss:nan - timing_s/step:np.float64(nan)\n",
           "(TaskRunner pid=1) step:6 - actor/pg_loss:-nan\n", "noise after the run\n"]))
    run = rd.open_run(log)
    assert (run.overview().step, run.overview().step, listed_step(tmp_path, "nan")) == (4, 4, 4)
    assert max(finite_steps(run)) == 4


def test_verl_file_logger_alone_whose_last_rows_are_nan(tmp_path):
    jsonl = write_file(tmp_path / "exp.jsonl", "".join(
        [json.dumps({"step": s, "data": {"a": s * 0.5}}) + "\n" for s in range(1, 4)]
        + ['{"step": 4, "data": {"a": NaN, "s": "text"}}\n', '{"step": 5, "data": {}}\n']))
    run = rd.open_run(jsonl)
    assert (run.overview().step, listed_step(tmp_path, "exp")) == (3, 3)


def test_swe_lego_rl_log_with_a_nan_line_appended(tmp_path):
    folder = tmp_path / "lego"
    shutil.copytree(DATA / "lego", folder)
    set_all_mtimes(folder, MONTH_AGO)
    log = next((folder / "logs").glob("*-r1.log"))
    run = rd.open_run(log)
    before = run.overview().step
    assert run.kind == "swe-lego-rl" and before is not None
    append(log, f"(FullyAsyncTrainer pid=7) step:{before + 1} - actor/pg_loss:nan - critic/score/mean:nan\n".encode())
    os.utime(log, (MONTH_AGO + 10, MONTH_AGO + 10))
    assert rd.open_run(log).overview().step == before
    assert listed_step(folder, rd.open_run(log).run_id) == before


def test_relax_steps_are_files_that_always_log_a_count(tmp_path):
    """Relax's step is its highest train file: even an empty one or one of NaN rewards logs its
    sample count, so the card's step is a step with a finite value (nothing to fix there)."""
    folder = tmp_path / "relax-run"
    shutil.copytree(DATA / "relax" / "relax-run", folder)
    train = folder / "rollout_result" / "train"
    top = max(int(p.stem) for p in train.glob("*.jsonl"))
    (train / f"{top + 1}.jsonl").write_text('{"reward": NaN, "response_length": null}\n')
    (train / f"{top + 2}.jsonl").write_bytes(b"")
    run = rd.open_run(folder)
    assert run.overview().step == top + 2 == max(finite_steps(run))


# 2. The runs list finds the last step before MiBs of other output -------------------------------
SPAM = b"(vLLMHttpServer pid=5) INFO 12-01 10:00:00 [loggers.py:118] Engine 000: Avg prompt throughput: 0.0 tokens/s\n"


def spam_log(path: Path, last: int, spam_bytes: int, spam: bytes = SPAM) -> Path:
    head = b"".join(f"(TaskRunner pid=1) step:{s} - actor/pg_loss:{s / 10} - timing_s/step:3.0\n".encode()
                    for s in range(1, last + 1))
    return write_file(path, head + spam * (spam_bytes // len(spam) + 1))


def test_runs_list_step_of_a_log_ending_in_mibs_of_other_output(tmp_path):
    log = spam_log(tmp_path / "spam.log", 12, 3 << 20)
    run = rd.open_run(log)
    assert (listed_step(tmp_path, "spam"), run.overview().step, run.overview().step) == (12, 12, 12)


def test_a_growing_log_searches_only_its_appended_bytes(tmp_path, monkeypatch):
    log = spam_log(tmp_path / "grow.log", 12, 3 << 20)
    reads: list[tuple[int, int]] = []
    real = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, at: (reads.append((at, at + n)), real(fd, n, at))[1])

    def read_between(lo: int, hi: int) -> int:
        return sum(max(0, min(e, hi) - max(s, lo)) for s, e in reads)

    old_window = log.stat().st_size - steps_before_tail.TAIL_STEPS[-1]
    assert listed_step(tmp_path, "grow") == 12
    middle = (512 << 10, old_window - steps_before_tail.CHECK_BYTES)  # spam only: neither head nor tail window
    assert read_between(*middle) >= middle[1] - middle[0]  # the first look searched it
    reads.clear()
    append(log, SPAM * ((2 << 20) // len(SPAM)))
    os.utime(log, (MONTH_AGO + 10, MONTH_AGO + 10))
    assert listed_step(tmp_path, "grow") == 12
    assert read_between(*middle) == 0  # the next look: only what was appended since
    assert read_between(old_window, log.stat().st_size) > 0

    log.write_bytes(b"")  # rewritten in place (same inode): what was remembered does not count
    with open(log, "ab") as fh:
        fh.write(spam_log(tmp_path / "other" / "new.log", 7, 6 << 20, spam=b"other writer\n").read_bytes())
    os.utime(log, (MONTH_AGO + 20, MONTH_AGO + 20))
    assert listed_step(tmp_path, "grow") == 7


def test_the_search_before_the_window_is_bounded(tmp_path, monkeypatch):
    """More other output than FAR_BYTES after the last step: the runs list and the card (the one
    summary) give up (no step); the metrics (a full parse) still have it."""
    monkeypatch.setattr(steps_before_tail, "FAR_BYTES", 1 << 20)
    log = spam_log(tmp_path / "far.log", 5, 3 << 20)
    assert listed_step(tmp_path, "far") is None and rd.open_run(log).overview().step is None
    assert rd.open_run(log).metrics()["step"].max() == 5
    cache.shared.clear()
    monkeypatch.setattr(steps_before_tail, "FAR_BYTES", 8 << 20)
    assert listed_step(tmp_path, "far") == 5
