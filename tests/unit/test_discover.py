"""rd.discover: one row per run across tracked directories."""
from __future__ import annotations

import json
import os
import shutil
import time

import pandas as pd
import pytest

import rundash_core as rd

from helpers import (
    DATA,
    NEW_METRICS,
    NEW_NAME,
    NEW_RUN,
    OLD_METRICS,
    OLD_NAME,
    OLD_RUN,
    copy_run,
    make_rl_run,
    reference_file,
    set_all_mtimes,
)

COLUMNS = ["run_id", "name", "kind", "path", "status", "step", "max_steps", "created", "updated", "model", "attempts"]


def test_several_dirs_both_samples(tmp_path):
    a = copy_run(NEW_RUN, tmp_path / "a")
    b = copy_run(OLD_RUN, tmp_path / "b")
    df = rd.discover([tmp_path / "a", str(tmp_path / "b")])
    assert set(COLUMNS) <= set(df.columns)
    assert len(df) == 2
    by = df.set_index("run_id")
    assert set(by.index) == {NEW_NAME, OLD_NAME}
    assert by.at[NEW_NAME, "path"] == str(a) and by.at[OLD_NAME, "path"] == str(b)
    assert (by["kind"] == "prime-rl").all()
    assert by.at[NEW_NAME, "step"] == reference_file(a / NEW_METRICS).max_step() + 1  # steps done, from 0
    assert by.at[OLD_NAME, "step"] == reference_file(b / OLD_METRICS).max_step() + 1
    assert (by.at[NEW_NAME, "max_steps"], by.at[OLD_NAME, "max_steps"]) == (10, 3)
    assert (by.at[NEW_NAME, "model"], by.at[OLD_NAME, "model"]) == ("Qwen/Qwen3-4B", "Qwen/Qwen3-0.6B")
    assert (by.at[NEW_NAME, "attempts"], by.at[OLD_NAME, "attempts"]) == (2, 1)
    assert df["step"].dtype == "Int64" and df["max_steps"].dtype == "Int64"
    assert set(df["status"]) <= {"running", "completed", "stopped", "unknown"}
    assert df["error"].isna().all()


def test_discover_agrees_with_open_run_overview(tmp_path):
    a = copy_run(NEW_RUN, tmp_path / "a")
    b = copy_run(OLD_RUN, tmp_path / "a")
    t = 1_790_300_000.0  # the new run's data ends just before: a live run
    set_all_mtimes(a, t)
    set_all_mtimes(b, t - 100_000)
    now = t + 60
    df = rd.discover([tmp_path / "a"], now=now).set_index("run_id")
    for run_dir in (a, b):
        ov = rd.open_run(run_dir).overview(now=now)
        row = df.loc[run_dir.name]
        assert (row["status"], row["step"], row["max_steps"], row["model"], row["attempts"]) == (
            ov.status, ov.step, ov.max_steps, ov.model, ov.attempts)
        assert row["updated"] == ov.updated and row["created"] == ov.created
    assert df.at[NEW_NAME, "status"] == "running"
    assert df.at[OLD_NAME, "status"] == "completed"  # steps 0..2 of max_steps 3: all done


def test_timestamps_are_utc_and_from_the_data(tmp_path):
    run = copy_run(NEW_RUN, tmp_path / "a")
    set_all_mtimes(run, 1_800_000_000.5)
    df = rd.discover(tmp_path / "a")
    for col in ("created", "updated"):
        assert isinstance(df.dtypes[col], pd.DatetimeTZDtype) and str(df.dtypes[col].tz) == "UTC"
    times = [r["time"] for r in map(json.loads, (run / NEW_METRICS).read_text().splitlines()) if "time" in r]
    assert df.at[0, "updated"] == pd.Timestamp(max(times), unit="s", tz="UTC")  # not the files' 2027
    assert df.at[0, "created"] == pd.Timestamp(reference_file(run / NEW_METRICS).first_row_time, unit="s", tz="UTC")


def test_dir_that_is_itself_a_run(tmp_path):
    run = copy_run(NEW_RUN, tmp_path / "a")
    df = rd.discover([run])
    assert list(df["run_id"]) == [NEW_NAME]
    assert df.at[0, "path"] == str(run)


def test_hidden_and_non_run_dirs_skipped(tmp_path):
    root = tmp_path / "out"
    copy_run(NEW_RUN, root)
    copy_run(OLD_RUN, root, name=".hidden-run")
    (root / "not-a-run" / "stuff").mkdir(parents=True)
    (root / "file.txt").write_text("x")
    (root / "checkpoints-only" / "checkpoints").mkdir(parents=True)
    df = rd.discover([root])
    assert list(df["name"]) == [NEW_NAME]


def test_hidden_tracked_run_dir_not_listed_as_run(tmp_path):
    hidden = copy_run(OLD_RUN, tmp_path, name=".scratch")
    df = rd.discover([hidden])
    assert len(df) == 0


def test_name_collisions_get_parent_prefix(tmp_path):
    copy_run(NEW_RUN, tmp_path / "alpha")
    copy_run(NEW_RUN, tmp_path / "beta")
    copy_run(OLD_RUN, tmp_path / "beta")
    df = rd.discover([tmp_path / "alpha", tmp_path / "beta"])
    assert set(df["run_id"]) == {f"alpha:{NEW_NAME}", f"beta:{NEW_NAME}", OLD_NAME}
    assert list(df["name"]).count(NEW_NAME) == 2
    assert df["run_id"].is_unique


def test_ids_unique_even_when_parents_share_a_name(tmp_path):
    copy_run(NEW_RUN, tmp_path / "x" / "outputs")
    copy_run(NEW_RUN, tmp_path / "y" / "outputs")
    df = rd.discover([tmp_path / "x" / "outputs", tmp_path / "y" / "outputs"])
    assert len(df) == 2
    assert df["run_id"].is_unique
    assert all(i.startswith(f"outputs:{NEW_NAME}") for i in df["run_id"])
    # and stable: the same dirs give the same ids
    again = rd.discover([tmp_path / "x" / "outputs", tmp_path / "y" / "outputs"])
    assert dict(zip(df["path"], df["run_id"])) == dict(zip(again["path"], again["run_id"]))


def test_same_run_through_two_tracked_dirs_listed_once(tmp_path):
    run = copy_run(NEW_RUN, tmp_path / "real")
    (tmp_path / "links").mkdir()
    os.symlink(run, tmp_path / "links" / NEW_NAME)
    df = rd.discover([tmp_path / "real", tmp_path / "links"])
    assert list(df["run_id"]) == [NEW_NAME]


def test_newest_first(tmp_path):
    root = tmp_path / "out"
    runs = [make_rl_run(root, f"env--m--0000000{i}", rows=[]) for i in range(4)]
    order = [2, 0, 3, 1]  # mtime rank: larger = newer
    for rank, i in enumerate(order):
        set_all_mtimes(runs[i], 1_700_000_000 + rank * 100)  # the run's files: its last activity
    df = rd.discover([root])
    assert list(df["name"]) == [runs[i].name for i in reversed(order)]


def test_missing_dir_is_said_not_silently_empty(tmp_path):
    from rundash_core.discover import scan

    copy_run(OLD_RUN, tmp_path / "ok")
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(rd.RunError, match="missing: no such directory.*a-file: not a directory"):
        rd.discover([tmp_path / "missing", tmp_path / "a-file", tmp_path / "ok"])
    df, errors = scan([tmp_path / "missing", tmp_path / "a-file", tmp_path / "ok"])  # what the app shows
    assert list(df["run_id"]) == [OLD_NAME] and len(errors) == 2
    locked = tmp_path / "locked"
    locked.mkdir()
    os.chmod(locked, 0)
    try:
        if not os.access(locked, os.R_OK):  # root reads anything: then there is nothing to say
            with pytest.raises(rd.RunError, match="cannot list directory"):
                rd.discover([locked])
    finally:
        os.chmod(locked, 0o755)
    runs, errors = rd.list_runs([tmp_path / "missing", tmp_path / "a-file"])
    assert runs == [] and len(errors) == 2
    assert any("no such directory" in e for e in errors) and any("not a directory" in e for e in errors)


def test_no_runs_gives_empty_frame_with_columns(tmp_path):
    (tmp_path / "empty").mkdir()
    df = rd.discover([tmp_path / "empty"])
    assert len(df) == 0 and set(COLUMNS) <= set(df.columns)
    df = rd.discover([])
    assert len(df) == 0 and set(COLUMNS) <= set(df.columns)


def test_status_rule_in_discover(tmp_path):
    root = tmp_path / "out"
    done = make_rl_run(root, "a--m--00000001", max_steps=3,
                       rows=[{"step": s, "time": 1.8e9 + s, "perf/mfu": 1.0, "producer": "trainer"} for s in range(4)])
    partial = make_rl_run(root, "b--m--00000002", max_steps=3,
                          rows=[{"step": s, "time": 1.8e9 + s, "perf/mfu": 1.0, "producer": "trainer"} for s in range(2)])
    t = 1_800_000_010.0
    set_all_mtimes(done, t)
    set_all_mtimes(partial, t)
    by = rd.discover([root], now=t + 30).set_index("name")["status"]
    assert by.to_dict() == {done.name: "running", partial.name: "running"}
    by = rd.discover([root], now=t + 3600).set_index("name")["status"]
    assert by.to_dict() == {done.name: "completed", partial.name: "stopped"}


def test_discover_step_after_resume_in_tail(tmp_path):
    """The tail of the file holds lower steps than earlier (resume): step is still the max."""
    root = tmp_path / "out"
    rows = [{"step": s, "time": float(s), "perf/mfu": 1.0, "producer": "trainer"} for s in range(8)]
    rows += [{"step": s, "time": 100.0 + s, "perf/mfu": 2.0, "producer": "trainer"} for s in range(5, 7)]
    run = make_rl_run(root, "a--m--00000003", rows=rows)
    df = rd.discover([root])
    assert df.at[0, "step"] == rd.open_run(run).overview().step == 8  # steps 0..7 done


def test_odd_entries_in_a_tracked_dir(tmp_path):
    root = tmp_path / "out"
    copy_run(OLD_RUN, root)
    os.symlink("loop-b", root / "loop-a")
    os.symlink("loop-a", root / "loop-b")
    os.symlink("/nonexistent/run", root / "broken-link")
    os.mkfifo(root / "a-fifo")
    df = rd.discover([root])
    assert list(df["run_id"]) == [OLD_NAME]


# Many verl logs: cheap cold, warm by fingerprint ------------------------------------------------------
VERL_LOG = DATA / "verl" / "dq_math.log"


def _logs(folder, n, t=1_800_000_000.0):
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        p = folder / f"run-{i}.log"
        shutil.copyfile(VERL_LOG, p)
        os.utime(p, (t, t))
        paths.append(p)
    return paths


def _no_reads(monkeypatch):
    from rundash_core.sources.verl import config_text as verl_text
    from rundash_core.sources.verl import overview as verl_overview

    def fail(*a, **k):
        raise AssertionError("discover read a log")

    monkeypatch.setattr(verl_overview, "read_overview_inputs", fail)
    monkeypatch.setattr(verl_overview, "read_range", fail)
    monkeypatch.setattr(verl_text, "read_range", fail)


def test_warm_discover_reads_no_log(tmp_path, monkeypatch):
    _logs(tmp_path / "out", 5)
    first = rd.discover([tmp_path / "out"], now=1_800_000_030.0)
    assert list(first["step"]) == [210] * 5 and first["error"].isna().all()
    _no_reads(monkeypatch)
    again = rd.discover([tmp_path / "out"], now=1_800_000_030.0)
    pd.testing.assert_frame_equal(first, again)


def test_appended_log_is_read_again(tmp_path):
    (path,) = _logs(tmp_path / "out", 1)
    t = 1_800_000_000.0
    before = rd.discover([tmp_path / "out"], now=t + 7200).iloc[0]
    with open(path, "ab") as fh:
        fh.write(b"(TaskRunner pid=1) step:211 - actor/pg_loss:0.5\n")
    os.utime(path, (t + 100, t + 100))
    after = rd.discover([tmp_path / "out"], now=t + 7200).iloc[0]
    assert (before["step"], after["step"]) == (210, 211)
    assert after["updated"] == before["updated"]  # the log's last stamp: the new line printed none


def test_status_turns_stopped_with_now_without_reading(tmp_path, monkeypatch):
    (path,) = _logs(tmp_path / "out", 1)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S").encode()  # a live log prints current times
    path.write_bytes(VERL_LOG.read_bytes().split(b"Final validation metrics")[0].rsplit(b"\n", 3)[0] + b"\n"
                     + b"(TaskRunner pid=1) " + stamp + b" INFO saving checkpoint\n")
    t = time.time()
    os.utime(path, (t, t))
    assert rd.discover([tmp_path / "out"], now=t + 30).at[0, "status"] == "running"
    _no_reads(monkeypatch)
    assert rd.discover([tmp_path / "out"], now=t + 3600).at[0, "status"] == "stopped"
    assert rd.discover([tmp_path / "out"], now=t + 60).at[0, "status"] == "running"


def test_same_stem_in_many_dirs_gets_unique_ids(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "x" / "outputs", tmp_path / "y" / "outputs"]
    for d in dirs:
        d.mkdir(parents=True)
        shutil.copyfile(VERL_LOG, d / "train.log")
    df = rd.discover(dirs)
    assert len(df) == 4 and df["run_id"].is_unique
    assert {"a:train", "b:train"} <= set(df["run_id"])
    assert sorted(df["path"]) == sorted(str(d / "train.log") for d in dirs)


@pytest.mark.parametrize("folder", ["verl", "lego"])
def test_discover_row_matches_full_parse_on_sample_logs(tmp_path, folder):
    data = DATA / folder
    shutil.copytree(data, tmp_path / folder)
    tracked = [tmp_path / folder]
    now = 2e9
    df = rd.discover(tracked, now=now)
    logs = [p for p in df["path"] if p.endswith((".log", ".out"))]
    assert logs
    for path in logs:
        row = df.set_index("path").loc[path]
        run = rd.open_run(path)
        ov = run.overview(now=now)
        got = tuple(None if pd.isna(v) else v for v in (row["model"], row["max_steps"], row["step"], row["status"]))
        assert got == (ov.model, ov.max_steps, ov.step, ov.status), path  # the run card is the row
        assert row["model"] is not None and ov.last_step == run.store().tail.last_step  # = the full parse


def test_warm_discover_reuses_rows_until_an_entry_changes(tmp_path, monkeypatch):
    data = DATA / "verl"
    shutil.copy(data / "eh_gemma-2-2b-it-sft-0.411.log", tmp_path / "a.log")
    first = rd.discover([tmp_path], now=2e9)
    import importlib
    disc = importlib.import_module("rundash_core.discover")
    calls = []
    real = disc._row
    monkeypatch.setattr(disc, "_row", lambda *a: calls.append(a) or real(*a))  # a row summarised again
    again = rd.discover([tmp_path], now=2e9)
    assert calls == [] and again.equals(first)
    with open(tmp_path / "a.log", "ab") as fh:
        fh.write(b"step:59 - train/loss:0.01\n")
    assert rd.discover([tmp_path], now=2e9).at[0, "step"] == 60 and len(calls) == 1  # re-read: 0..59 done


def test_head_fields_searches_the_config_print_and_falls_back():
    from rundash_core.sources.verl.ends import config_start, head_fields

    cfg = (b"{'actor_rollout_ref': {'model': {'path': 'org/actor'}},\n 'critic': {'model': {'path': 'org/critic'}},\n"
           b" 'trainer': {'experiment_name': 'exp-a', 'total_training_steps': 12}}\n")
    later = b"noise 'critic': {'model': {'path': 'org/other'}}\n"
    head = head_fields(b"x\n" + cfg + later)
    assert head == head_fields(b"x\n" + cfg)
    assert (head.experiment, head.total_steps, head.models, head.flavor) == ("exp-a", 12, ("org/actor", "org/critic"), "rl")
    no_critic = cfg.replace(b" 'critic': {'model': {'path': 'org/critic'}},\n", b"")
    assert head_fields(no_critic + later).models == ("org/actor", None)  # a critic after the print is not its
    # {'data' before {'actor_rollout_ref': the earlier start wins (an SFT config)
    sft = b"{'data': {}, 'model': {'partial_pretrain': 'org/p'}, 'trainer': {'experiment_name': 's'}}\n"
    assert config_start(sft + cfg) == 0 and head_fields(sft + cfg).flavor == "sft"
    # no line end after the trainer section (a cut print): the whole head is searched, as before
    cut = cfg.rstrip(b"}\n") + b", 'x': 1"
    assert head_fields(cut).experiment == "exp-a"


def test_overview_inputs_reads_on_only_where_a_field_is_not_in_the_first_bytes(tmp_path):
    """16 KiB of each end first; the last step further up, a config print behind many `{` and
    past 64 KiB, and a file logger the config names are still found (by reading on)."""
    from rundash_core.sources.verl.overview import read_overview_inputs

    noise = b"(WorkerDict pid=2) {'not': 'the config'} " + b"x" * 60 + b"\n"
    cfg = (b"(TaskRunner pid=1) {'actor_rollout_ref': {'model': {'path': 'org/actor'}},\n"
           b"(TaskRunner pid=1)  'trainer': {'experiment_name': 'deep', 'logger': ['console', 'file'],\n"
           b"(TaskRunner pid=1)              'total_training_steps': 40}}\n")
    log = tmp_path / "deep.log"
    log.write_bytes(b"2025-06-18 16:49:37,706\tINFO start\n" + noise * 800 + cfg
                    + b"(TaskRunner pid=1) Creating file logger at out/deep.jsonl\n"
                    + b"(TaskRunner pid=1) step:7 - a:1.0\n" + b"(WorkerDict pid=2) tail noise\n" * 2000)
    d = read_overview_inputs(str(log))
    assert (d.tail.last_step, d.head.experiment, d.max_steps, d.model, d.file_logger) == (7, "deep", 40, "org/actor",
                                                                                        "out/deep.jsonl")
    assert d.started == time.mktime((2025, 6, 18, 16, 49, 37, 0, 0, -1))
    no_file = log.read_bytes().replace(b"['console', 'file']", b"['console']")
    log.write_bytes(no_file)
    assert read_overview_inputs(str(log)).file_logger is None  # the config says there is no file logger


def test_overview_inputs_without_a_config_total_reads_the_head_window(tmp_path):
    """max_steps: the config's total, else the tail's tqdm total, else the head's (searched in the
    first 64 KiB), else the SFT step count; the tail's final-validation print."""
    from rundash_core.sources.verl.overview import read_overview_inputs

    bar = b"Training Progress:   0%|          | 0/210 [00:00<?, ?it/s]\n"
    filler = b"(TaskRunner pid=1) step:%d - a:1.0\n"
    log = tmp_path / "bar.log"
    log.write_bytes(b"x\n" * 100 + bar + b"".join(filler % i for i in range(1, 3000)))
    assert read_overview_inputs(str(log)).max_steps == 210
    log.write_bytes(b"x\n" * 40000 + bar + b"".join(filler % i for i in range(1, 3000)))  # bar past 64 KiB
    assert read_overview_inputs(str(log)).max_steps is None
    log.write_bytes(b"".join(filler % i for i in range(1, 3000)) + b"(TaskRunner pid=1) Final validation metrics: {}\n")
    d = read_overview_inputs(str(log))
    assert d.tail.final_validation and d.tail.last_step == 2999


def test_final_validation_found_around_the_last_step_line(tmp_path):
    """The final-validation print after the last step line, behind more than 16 KiB of wandb
    summary (the tail widens for the step line), and printed just before a last validation-only
    line whose start sits near the 16 KiB window's start (early-2025 order): each is found, as
    the full parse finds it; a print far before the last step line (a later resume) is not."""
    from rundash_core.sources.verl.overview import read_overview_inputs

    steps = b"".join(b"(TaskRunner pid=1) step:%d - actor/pg_loss:0.1 - critic/score/mean:0.5\n" % i
                     for i in range(1, 2000))
    final = b"(TaskRunner pid=1) Final validation metrics: {'val-core/gsm8k/reward/mean@1': 0.5}\n"
    wandb = b"".join(b"wandb:   timing_s/agent_loop/harbor_total/max_%04d \xe2\x96\x81\xe2\x96\x82 0.123\n" % i
                     for i in range(400))
    log = tmp_path / "final.log"
    log.write_bytes(steps + final + wandb)
    assert len(wandb) > 16 << 10
    d = read_overview_inputs(str(log))
    assert d.tail.final_validation and d.tail.last_step == 1999
    noise = b"(TaskRunner pid=1) shutdown noise " + b"y" * 60 + b"\n"
    last = b"(TaskRunner pid=1) step:2000 - val-core/gsm8k/reward/mean@1:0.5\n"
    fill = noise * ((16384 - len(last) - 20) // len(noise))  # the last step line starts just inside 16 KiB
    log.write_bytes(steps + final + last + fill)  # ... and the final print just before it, outside
    d = read_overview_inputs(str(log))
    assert d.tail.final_validation and d.tail.last_step == 2000
    log.write_bytes(steps + final + noise * 200 + steps[-30000:] + noise * 10)  # resumed long after
    assert not read_overview_inputs(str(log)).tail.final_validation


def test_recursive_discovery_finds_every_framework_layout_under_one_root(tmp_path, monkeypatch):
    """outputs/<framework>/<run> layouts, a Lego workdir's logs/<exp>.log and a Relax <save>, all
    under one root; never inside a run, nor in virtualenvs, node_modules, checkpoints or hidden
    folders; no deeper than RUNDASH_DEPTH."""
    data = DATA
    root = tmp_path / "outputs"
    copy_run(NEW_RUN, root / "prime-rl")
    copy_run(OLD_RUN, root / "prime-rl-old")
    shutil.copytree(data / "lego", root / "lego" / "workdir")
    shutil.copytree(data / "relax" / "relax-run", root / "relax" / "relax-run")
    for junk in (".hidden", "venv-x", "node_modules", "__pycache__", "checkpoints", "global_step_40"):
        (root / junk).mkdir()
        shutil.copy(VERL_LOG, root / junk / "train.log")
    (root / "venv-x" / "pyvenv.cfg").write_text("home = /usr\n")
    df = rd.discover([root])
    assert dict(zip(df["run_id"], df["kind"])) == {
        NEW_NAME: "prime-rl", OLD_NAME: "prime-rl", "qwen3-8b-swegym-gspo-async-r1": "swe-lego-rl", "relax-run": "relax"}
    assert len(rd.open_run(df.set_index("kind").at["swe-lego-rl", "path"]).samples())  # its trials were linked
    deep = root / "a" / "b" / "c" / "d"
    deep.mkdir(parents=True)
    shutil.copy(VERL_LOG, deep / "deep.log")  # listed at depth 4 (root: 0)
    assert "deep" in set(rd.discover([root])["run_id"])
    assert "deep" not in set(rd.discover([root], depth=3)["run_id"])
    monkeypatch.setenv("RUNDASH_DEPTH", "2")
    assert "deep" not in set(rd.discover([root])["run_id"])


def test_a_folder_of_100k_entries_is_listed_in_part_and_said_so(tmp_path, monkeypatch):
    """A folder with more entries than discovery lists (MAX_ENTRIES) is cut, bounded in time; the
    cut is a note of `scan()` (the sidebar shows it), not an error `rd.discover` raises for."""
    import importlib

    disc = importlib.import_module("rundash_core.discover")  # (rundash_core.discover is the function)
    big = tmp_path / "big"
    big.mkdir()
    n = disc.MAX_ENTRIES + 5_000
    for i in range(n):
        os.close(os.open(big / f"f{i:06d}", os.O_CREAT | os.O_WRONLY, 0o644))
    shutil.copyfile(VERL_LOG, big / "aaa-run.log")  # a log: the warm path (re-list, no re-read) applies
    entries, sig, cut = disc._listing(str(big))
    assert cut and len(entries) == disc.MAX_ENTRIES and sig[-1][:2] == ("\0cut", disc.MAX_ENTRIES)
    listed = "aaa-run.log" in {e.name for e in entries}  # which entries: the file system's order decides
    t = time.perf_counter()
    frame, notes = disc.scan([big])
    assert time.perf_counter() - t < 30
    assert len(notes) == 1 and str(big) in notes[0] and f"more than {disc.MAX_ENTRIES:,} entries" in notes[0]
    assert list(frame["run_id"]) == (["aaa-run"] if listed else [])
    df = rd.discover([big])  # no RunError for a folder listed in part
    assert list(df["run_id"]) == list(frame["run_id"])
    calls, real = [], disc._row
    monkeypatch.setattr(disc, "_row", lambda *a: calls.append(a) or real(*a))
    assert disc.scan([big])[1] == notes and calls == []  # said again on a warm call (nothing re-read)
    os.close(os.open(big / "zzz-new", os.O_CREAT | os.O_WRONLY, 0o644))  # an entry past the cut changes the folder
    assert not disc._unchanged(((str(big), sig),))
    small = tmp_path / "small"
    copy_run(OLD_RUN, small)
    assert disc.scan([small])[1] == []
