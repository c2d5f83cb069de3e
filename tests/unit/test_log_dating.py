"""One dating of log lines for every view (split panes, the merged pane, the terminal view), and
times estimated for lines without a stamp of their own, on the real prime-rl and SWE-Lego runs."""
from __future__ import annotations

import math
import os
import re
import shutil
import time

import pandas as pd
import pytest

from rundash_core import frames
from rundash_core.logs import view as logview
from rundash_core.logs.merge import estimate_times
from rundash_core.sources import open_run
from rundash_core.tui.views import logs_doc

from helpers import DATA

PRIME = DATA / "prime-rl" / "math-python+wiki-search--qwen3-4b--0b45f1ec"
LEGO_LOG = DATA / "lego" / "logs" / "qwen3-8b-swegym-gspo-async-r1.log"
NAN = float("nan")


def _split_and_merged(run, attempt):
    files = logview.for_attempt(run.logs(), attempt)
    entries = logview.groups(files)
    merged = run.read_log(logview.merged_paths(entries, logview.default_groups(list(entries))))
    splits = {g: run.read_log(paths if g == logview.ENV_GROUP else paths[:1]) for g, paths in entries.items()
              if g in logview.default_groups(list(entries))}
    return merged, splits


@pytest.mark.parametrize("attempt", [1, 2])
def test_a_split_pane_and_the_merged_pane_show_each_line_of_the_real_prime_rl_run_at_one_time(attempt):
    run = open_run(PRIME)
    merged, splits = _split_and_merged(run, attempt)
    assert {"trainer", "orchestrator", "inference", logview.ENV_GROUP} <= set(splits)
    merged_labels = dict(zip(zip(merged["path"], merged["offset"]), logview.time_labels(merged)))
    for group, split in splits.items():
        assert len(split), group
        both = split.merge(merged, on=["path", "offset"], suffixes=("_split", "_merged"))
        assert len(both) == len(split), group  # every line of the split pane is in the merged one
        assert (both["time_split"] == both["time_merged"]).all(), group
        labels = logview.time_labels(split)
        assert labels == [merged_labels[k] for k in zip(split["path"], split["offset"])], group
        assert logs_doc(split).text.splitlines()[0].startswith(labels[0] + " ")  # the terminal view too
    # loguru's time-of-day lines are dated by the run's dated lines (vLLM, env servers: 09-24), not by
    # the copy's mtime (the checkout day)
    for group in ("trainer", "orchestrator"):
        assert set(splits[group]["time"].dt.strftime("%Y-%m-%d")) == {"2026-09-24"}, group
    assert splits["trainer"]["time"].iloc[0] <= splits["inference"]["time"].iloc[0]


def test_a_time_of_day_log_is_dated_alike_read_alone_or_with_its_dated_neighbours(tmp_path):
    """A run copied long after it ran: a trainer log read alone is dated by the inference log it is
    not read with."""
    root = shutil.copytree(PRIME, tmp_path / "run")
    later = time.time() + 3 * 86400
    for f in root.rglob("*.log"):
        os.utime(f, (later, later))
    run = open_run(root)
    trainer = [p for p, c, a in zip(run.logs()["path"], run.logs()["component"], run.logs()["attempt"])
               if c == "trainer" and a == 1]
    alone = run.read_log(trainer)
    together = run.read_log(trainer + [p.replace("trainer.log", "inference.log") for p in trainer])
    assert alone["time"].dt.strftime("%Y-%m-%d").unique().tolist() == ["2026-09-24"]
    mine = together[together["path"] == trainer[0]]
    assert alone["time"].tolist() == mine["time"].tolist()


def test_the_merged_pane_interleaves_the_real_swe_lego_console_with_its_vllm_lines_by_time():
    run = open_run(LEGO_LOG)
    merged = run.read_log(list(run.logs()["path"]))
    components = merged["component"].tolist()
    assert set(components) == {"console", "inference"}
    console = merged[merged["component"] == "console"]
    vllm = merged[merged["component"] == "inference"]
    assert len(console) == 77 and len(vllm) == 14
    # not every console line first: vLLM lines come between them
    first_vllm = components.index("inference")
    assert first_vllm < len(console)
    steps = console[console["text"].str.contains(r"step:\d+ - training/global_step", regex=True)]
    assert len(steps) == 3
    for i in steps.index:
        assert "console" in components[i + 1:] and "inference" in components[:i]
    # step:1's line is placed by its step time from the console's one stamp (the Ray connect line)
    start = console["time"].iloc[0]
    assert not console["estimated"].iloc[0]
    assert abs((steps["time"].iloc[0] - start).total_seconds() - 1809.3115200901277) < 1
    assert abs((steps["time"].iloc[1] - steps["time"].iloc[0]).total_seconds() - 2519.3613808408127) < 1
    assert vllm["time"].iloc[3] < steps["time"].iloc[0] < vllm["time"].iloc[4]  # 03:59:50 < step:1 < 04:07:22
    # the console keeps its own order; only the lines without a stamp are estimated
    assert console["offset"].is_monotonic_increasing
    assert console["estimated"].sum() == 75 and not vllm["estimated"].any()
    # a copied run: the console's last line (after its last step) ends with the run's newest dated line
    assert console["time"].iloc[-1] == vllm["time"].iloc[-1] and console["estimated"].iloc[-1]
    relayed = console[console["text"].str.contains("WARNING 08-12 03:14:02")]
    assert len(relayed) == 1 and not relayed["estimated"].iloc[0]  # its own (older) stamp, shown as it is


def test_the_panes_mark_estimated_times_with_a_legend_and_escape_the_text():
    run = open_run(LEGO_LOG)
    merged = run.read_log(list(run.logs()["path"]))
    labels = logview.time_labels(merged)
    marked = [lab for lab, e in zip(labels, merged["estimated"]) if e]
    assert marked and all(lab.startswith(logview.ESTIMATED_MARK) for lab in marked)
    assert not any(lab.startswith(logview.ESTIMATED_MARK) for lab, e in zip(labels, merged["estimated"]) if not e)
    html = logview.pane_html(merged, show_component=True)
    assert ">~08-12 04:01:5" in html and ">08-12 03:32:43<" in html
    assert logview.ESTIMATED_LEGEND.split(";")[0] in html
    assert "<|im_start|>" not in html and "&lt;|im_start|&gt;" in html
    text = logs_doc(merged).text
    assert "~08-12 04:01:5" in text and text.rstrip().endswith(logview.ESTIMATED_LEGEND)
    stamped = merged[~merged["estimated"]]
    assert logview.ESTIMATED_LEGEND not in logview.pane_html(stamped, show_component=True)
    assert logview.ESTIMATED_LEGEND not in logs_doc(stamped).text


def test_lines_appended_without_a_stamp_to_a_live_log_are_dated_by_its_last_write(tmp_path):
    log = tmp_path / "logs" / "qwen3-8b-swegym-gspo-async-r1.log"
    shutil.copytree(LEGO_LOG.parent.parent, tmp_path, dirs_exist_ok=True)
    (log.parent / "qwen3-8b-swegym-gspo-async-r1_vllm.log").unlink()  # (its old stamps would say: a copy)
    now = time.time()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now - 120))
    log.write_text(f"{stamp},000\tINFO worker.py:1843 -- Connected to Ray cluster.\n(TaskRunner pid=1) hello\n")
    run = open_run(log)
    first = run.read_log([str(log)])
    assert first["estimated"].tolist() == [False, True]
    with log.open("a") as fh:
        fh.write("(TaskRunner pid=1) step:0 - val-core/unknown/reward/mean@1:0.1\n")
    os.utime(log, (now, now))
    new = run.read_log([str(log)], after=first.attrs["ends"], seen=first.attrs["versions"])
    assert len(new) == 1 and new["estimated"].tolist() == [True]
    assert abs(new["time"].iloc[0].timestamp() - now) < 2


def _estimated(*args, **kwargs):
    times, estimated = estimate_times(*args, **kwargs)
    return times.tolist(), estimated.tolist()


def test_estimated_times_interpolate_between_stamps_and_follow_the_step_clock():
    # stamps at 0 and 100 with three lines between: evenly placed
    times, est = _estimated([0.0, NAN, NAN, NAN, 100.0], {}, [])
    assert times == [0.0, 25.0, 50.0, 75.0, 100.0] and est == [False, True, True, True, False]
    # a traceback's lines (tied) take their record's time
    times, est = _estimated([0.0, NAN, NAN, 90.0], {}, [1, 2])
    assert times == [0.0, 0.0, 0.0, 90.0] and est == [False, False, False, False]
    # one stamp, then step lines: each advances the clock by its step time; lines between follow
    times, est = _estimated([10.0, NAN, NAN, NAN, NAN], {2: 60.0, 4: 30.0}, [])
    assert times == [10.0, 40.0, 70.0, 85.0, 100.0] and all(est[1:])
    # a step clock never passes the next stamp; a relayed older stamp is shown, not followed
    times, _ = _estimated([0.0, NAN, 50.0, -500.0, NAN, 80.0], {1: 600.0}, [])
    assert times == [0.0, 50.0, 50.0, -500.0, 70.0, 80.0]
    # before the first stamp, step lines step back; after the last point, the file's last write
    times, _ = _estimated([NAN, NAN, 100.0, NAN, NAN], {0: 20.0, 1: 30.0}, [], end=160.0)
    assert times == [70.0, 100.0, 100.0, 130.0, 160.0]
    # nothing to go by: unknown, not estimated
    times, est = _estimated([NAN, NAN], {}, [])
    assert all(math.isnan(t) for t in times) and est == [False, False]


def test_the_log_lines_frame_says_which_times_are_estimated():
    run = open_run(LEGO_LOG)
    frame = run.read_log(list(run.logs()["path"]), tail=20)
    assert frames.check(frame, frames.LOG_LINES) == []
    assert str(frame["estimated"].dtype) == "boolean" and frame["estimated"].notna().all()
    assert frames.check(frames.empty(frames.LOG_LINES), frames.LOG_LINES) == []
    assert isinstance(frame["time"].iloc[-1], pd.Timestamp)


def test_followed_lines_interleave_by_time_keeping_a_relayed_older_stamp_where_its_file_put_it():
    run = open_run(LEGO_LOG)
    paths = list(run.logs()["path"])
    whole = run.read_log(paths)
    console = whole["component"] == "console"
    cut = int(whole.index[console & whole["text"].str.contains("test_gen_batch")][1])  # (after the relayed line)
    shown, new = whole.iloc[:cut], whole.iloc[cut:]
    followed = logview.append_lines(shown, new, keep=1000)
    assert followed["offset"].tolist() == whole["offset"].tolist()
    assert followed[followed["component"] == "console"]["offset"].is_monotonic_increasing


def test_the_logs_page_merges_the_real_swe_lego_run_by_time_and_marks_estimated_times(tmp_path, monkeypatch):
    from helpers import open_page

    shutil.copytree(LEGO_LOG.parent.parent, tmp_path / "lego")
    run_id = open_run(tmp_path / "lego" / "logs" / LEGO_LOG.name).run_id
    at = open_page(monkeypatch, tmp_path, "pages/logs.py", {"run": run_id})
    [body] = [h.proto.body for h in at.get("html") if "overflow:auto" in h.proto.body]
    assert logview.ESTIMATED_LEGEND.split(";")[0] in body
    shown = [re.sub(r"<[^>]+>", "", row) for row in re.findall(r'<div style="white-space:pre-wrap[^"]*">(.*?)</div>', body)]
    comps = [("inference" if "vLLMHttpServer" in row else "console") for row in shown]
    assert comps[0] == "console" and "inference" in comps[-2:] and comps.index("inference") < comps.count("console")
    step1 = next(i for i, row in enumerate(shown) if "step:1 - training/global_step" in row)
    assert shown[step1].startswith("▍~08-12 04:01:5")
    assert "inference" in comps[:step1] and "inference" in comps[step1:] and "console" in comps[step1 + 1:]
