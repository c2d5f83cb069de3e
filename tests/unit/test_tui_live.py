"""`rundash tui` following a running run: real run directories copied from tests/data that grow
while the app runs (metrics rows, log lines, samples appended between pauses), REFRESH_S made
small; the open tab shows what was added without `r`, in place (filter, choices, highlighted row,
selected sample and scroll kept), and a finished run's tabs are not re-read until `r`."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from benchmarks.common import counted_reads

from helpers import DATA, NEW_RUN, copy_run, set_all_mtimes, write_lines

textual = pytest.importorskip("textual")

from textual.containers import VerticalScroll  # noqa: E402
from textual.widgets import DataTable, Input, Select, SelectionList  # noqa: E402

from rundash_core.tui import app as tui_app  # noqa: E402
from rundash_core.tui import panes  # noqa: E402
from rundash_core.tui.app import RundashApp, RunScreen  # noqa: E402

from helpers.tui import open_tab  # noqa: E402
from helpers.tui import run_app as run_app_sized
from helpers.tui import shown as text_of

SIZE = (150, 50)


def run_app(app, script):
    run_app_sized(app, script, size=SIZE)
TICK = 0.15
METRICS = "monitors/file/metrics.jsonl"
ORCH_LOG = "logs/attempt_2/orchestrator.log"
TRACES = DATA / "prime-rl-traces" / "reverse-text--qwen3-0.6b--a7be3ee1"


@pytest.fixture(autouse=True)
def fast_refresh(monkeypatch):
    monkeypatch.setattr(tui_app, "REFRESH_S", TICK)


def last_time(run: Path) -> float:
    return max(json.loads(x).get("time") or 0 for x in (run / METRICS).read_text().splitlines())


@pytest.fixture
def live_run(tmp_path) -> Path:
    """The prime-rl sample run, written to just now: a trainer row of step 9 with a fresh time."""
    run = copy_run(NEW_RUN, tmp_path / "runs")
    write_lines(run / METRICS, [{"step": 9, "time": time.time(), "optim/lr": 1e-6, "producer": "trainer"}], "a")
    return run


@pytest.fixture
def finished_run(tmp_path) -> Path:
    """The prime-rl sample run as copied: its data days old, so stopped."""
    return copy_run(NEW_RUN, tmp_path / "runs")


async def until(pilot, check, timeout: float = 45.0) -> bool:
    """Pause until `check()` holds (the app's timers run meanwhile); False at the timeout."""
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            return False
        await pilot.pause(0.05)
    return True


async def settled(pilot, read, refreshes: int = 3, timeout: float = 45.0):
    """`read()` once it has stayed the same over `refreshes` refresh ticks (content still loading
    under load is waited for, not raced)."""
    end, last, same = time.monotonic() + timeout, read(), 0
    while same < refreshes and time.monotonic() < end:
        await pilot.pause(TICK)
        now = read()
        same, last = (same + 1, last) if now == last else (0, now)
    return last


def cell_row(table: DataTable, label: str) -> list[str] | None:
    for i in range(table.row_count):
        row = [str(c) for c in table.get_row_at(i)]
        if row[1] == label:
            return row
    return None


# Metrics -------------------------------------------------------------------------------------------
def test_metrics_of_a_running_run_follow_with_the_filter_and_highlighted_row_kept(live_run):
    async def script(app, pilot):
        assert isinstance(app.screen, RunScreen) and app.screen.run.overview().status == "running"
        await open_tab(app, pilot, "metrics")
        pane = app.screen.query_one("MetricsPane")
        table = app.screen.query_one("#metrics-table", DataTable)
        await pilot.press("slash", *"grad_norm|entropy|kl")
        await pilot.pause()
        labels = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
        grad = "entropy/all/mean"
        assert len(labels) == 4 and labels.index(grad) > 0  # not the first row: its label is what is kept
        await pilot.press("enter")  # back to the table
        table.move_cursor(row=labels.index(grad))
        await pilot.pause()
        before = cell_row(table, grad)
        assert before[4] == "step 8" and "0.777" not in before[3]
        points = pane.shown[labels.index(grad)].y
        write_lines(live_run / METRICS, [{"step": 9, "time": time.time(), grad: 0.777, "producer": "trainer"}], "a")
        assert await until(pilot, lambda: cell_row(table, grad)[4] == "step 9")  # no `r` pressed
        assert cell_row(table, grad)[3] == "0.777"
        assert app.screen.query_one("#metrics-search", Input).value == "grad_norm|entropy|kl"
        assert app.screen.query_one("MetricsPane") is pane  # in place, not rebuilt
        assert str(table.get_row_at(table.cursor_row)[1]) == grad
        plot = text_of(app, "#metrics-plot")
        assert plot.startswith(grad) and "last 0.777 (step 9)" in plot and f"{len(points) + 1:,} points" in plot

    run_app(RundashApp([str(live_run)]), script)


def test_a_new_metric_moves_rows_but_the_highlighted_label_stays(live_run):
    async def script(app, pilot):
        await open_tab(app, pilot, "metrics")
        table = app.screen.query_one("#metrics-table", DataTable)
        label = str(table.get_row_at(10)[1])
        table.move_cursor(row=10)
        await pilot.pause()
        rows = table.row_count
        new = "train/agg/all/agent/is_timeout/mean"  # a key of the train/agg section, listed before row 10
        assert cell_row(table, new) is None
        write_lines(live_run / METRICS, [{"step": 9, "time": time.time(), new: 0.5, "producer": "orch"}], "a")
        assert await until(pilot, lambda: table.row_count == rows + 1)
        assert cell_row(table, new) is not None
        assert table.cursor_row == 11 and str(table.get_row_at(table.cursor_row)[1]) == label
        assert text_of(app, "#metrics-plot").startswith(label)

    run_app(RundashApp([str(live_run)]), script)


# Logs ----------------------------------------------------------------------------------------------
def test_logs_of_a_running_run_follow_appended_lines_keeping_levels_regex_and_scroll(live_run):
    calls = []

    async def script(app, pilot):
        run = app.screen.run
        real = run.read_log

        def counted(paths, **kw):
            with counted_reads() as read:
                frame = real(paths, **kw)
            calls.append((kw, read.bytes))
            return frame

        run.read_log = counted
        await open_tab(app, pilot, "logs")
        levels = app.screen.query_one("#log-levels", SelectionList)
        assert "ERROR" in levels.selected and "CRITICAL" not in {o.value for o in levels.options}
        levels.deselect("ERROR")
        await pilot.press("slash", *"step 9")
        await pilot.pause()
        assert text_of(app, "#log-text").startswith("0 of ")  # nothing matches the regex yet
        log = live_run / ORCH_LOG
        with open(log, "a") as fh:
            fh.write("08:30:00 CRITICAL Step 9 | boom\n08:30:01 ERROR Step 9 | hidden error\n"
                     "08:30:02 INFO unrelated line\n")
        assert await until(pilot, lambda: "Step 9 | boom" in text_of(app, "#log-text"))  # no `r` pressed
        text = text_of(app, "#log-text")
        assert "hidden error" not in text and "unrelated" not in text  # ERROR still unchecked, regex kept
        assert "CRITICAL" in levels.selected and "ERROR" not in levels.selected  # a new level comes checked
        assert app.screen.query_one("#logs-search", Input).value == "step 9"
        follows = [(kw, n) for kw, n in calls if kw.get("after") is not None]
        assert follows and all(n < 4096 for _kw, n in follows)  # appended bytes only, not the tails again
        assert text.startswith("1 of ")

        # scrolled up: new lines are added but the view stays where the user is
        app.screen.query_one("#logs-search", Input).value = ""
        await pilot.pause()
        scroll = app.screen.query_one("#log-scroll", VerticalScroll)
        assert await until(pilot, lambda: scroll.scroll_y == scroll.max_scroll_y > 0)
        scroll.scroll_to(y=0, animate=False)
        await pilot.pause()
        with open(log, "a") as fh:
            fh.write("08:31:00 INFO Step 10 | while reading up\n")
        assert await until(pilot, lambda: "Step 10 | while reading up" in text_of(app, "#log-text"))
        await pilot.pause(3 * TICK)
        assert scroll.scroll_y == 0
        # back at the bottom: the view follows the new lines down
        scroll.scroll_end(animate=False)
        await pilot.pause()
        with open(log, "a") as fh:
            fh.write("".join(f"08:32:{i:02d} INFO Step 11 | line {i}\n" for i in range(20)))
        assert await until(pilot, lambda: "Step 11 | line 19" in text_of(app, "#log-text"))
        assert await until(pilot, lambda: scroll.scroll_y == scroll.max_scroll_y > 0)

    run_app(RundashApp([str(live_run)]), script)


def test_a_replaced_log_starts_again_from_its_tail(live_run):
    async def script(app, pilot):
        await open_tab(app, pilot, "logs")
        log = live_run / ORCH_LOG
        assert "Saving orchestrator checkpoint to checkpoints/step_8" in text_of(app, "#log-text")
        fresh = log.with_suffix(".new")
        fresh.write_text("08:40:00 INFO a new orchestrator after a restart\n")
        os.replace(fresh, log)
        assert await until(pilot, lambda: "a new orchestrator after a restart" in text_of(app, "#log-text"))
        assert "Saving orchestrator checkpoint to checkpoints/step_8" not in text_of(app, "#log-text")

    run_app(RundashApp([str(live_run)]), script)


# Samples -------------------------------------------------------------------------------------------
def test_new_samples_and_steps_appear_keeping_the_choices_and_the_sample_shown(tmp_path):
    run_dir = copy_run(TRACES, tmp_path / "runs")
    set_all_mtimes(run_dir, time.time())  # written just now: running
    step1 = run_dir / "rollouts" / "step_1" / "train" / "all" / "traces.jsonl"

    async def script(app, pilot):
        assert app.screen.run.overview().status == "running"
        await open_tab(app, pilot, "samples")
        pane = app.screen.query_one("SamplesPane")
        step = app.screen.query_one("#sample-step", Select)
        step.value = 1
        await pilot.pause()
        await pilot.press("right", "right")
        assert "sample 3 of 8" in text_of(app, "#sample-pos")
        shown_id, episode = pane.view.iloc[2]["sample_id"], pane.episode
        await pilot.press("slash", *"reverse")
        await pilot.pause()
        scroll = app.screen.query_one("#sample-scroll", VerticalScroll)
        scroll.scroll_to(y=3, animate=False)
        await pilot.pause()
        y = scroll.scroll_y
        lines = step1.read_text().splitlines()
        write_lines(step1, [lines[-1]], "a")
        step2 = run_dir / "rollouts" / "step_2" / "train" / "all" / "traces.jsonl"
        write_lines(step2, lines[:2])
        assert await until(pilot, lambda: "sample 3 of 9" in text_of(app, "#sample-pos"))  # no `r` pressed
        assert step.value == 1 and 2 in [v for _label, v in step._options]
        assert pane.view.iloc[pane.index]["sample_id"] == shown_id and pane.episode is episode  # not re-read
        assert app.screen.query_one("#sample-search", Input).value == "reverse"
        assert scroll.scroll_y == y
        step.value = 2
        await pilot.pause()
        assert "sample 1 of 2" in text_of(app, "#sample-pos")

        # a listing that cannot be read: said in the note, the sample shown stays
        run, text = app.screen.run, text_of(app, "#sample-text")
        real = run.samples

        def failing(*args, **kw):
            raise OSError("the rollouts folder went away")

        run.samples = failing
        assert await until(pilot, lambda: "OSError: the rollouts folder went away" in text_of(app, "#sample-note"))
        assert text_of(app, "#sample-text") == text and "sample 1 of 2" in text_of(app, "#sample-pos")
        run.samples = real
        assert await until(pilot, lambda: text_of(app, "#sample-note") == "")

    run_app(RundashApp([str(run_dir)]), script)


# A finished run ------------------------------------------------------------------------------------
def test_a_finished_run_is_not_re_read_until_r_which_refreshes_in_place(finished_run, monkeypatch):
    reads = []
    real = panes.series_index

    def counted(run):
        reads.append(run.run_id)
        return real(run)

    monkeypatch.setattr(panes, "series_index", counted)

    async def script(app, pilot):
        assert app.screen.run.overview().status != "running"
        await open_tab(app, pilot, "metrics")
        pane = app.screen.query_one("MetricsPane")
        table = app.screen.query_one("#metrics-table", DataTable)
        await pilot.press("slash", *"grad_norm", "enter")
        await pilot.pause()
        label = str(table.get_row_at(0)[1])
        assert len(reads) == 1
        write_lines(finished_run / METRICS, [{"step": 9, "time": last_time(finished_run) + 1,
                                              "optim/grad_norm": 0.777, "producer": "trainer"}], "a")
        await pilot.pause(8 * TICK)
        assert app.screen.run.overview().status != "running"  # the data is days old: a copy, not live
        assert len(reads) == 1 and cell_row(table, label)[4] == "step 8"  # no poll
        await pilot.press("r")
        await pilot.pause()
        assert len(reads) == 2 and cell_row(table, label)[4] == "step 9" and cell_row(table, label)[3] == "0.777"
        assert app.screen.query_one("MetricsPane") is pane  # in place
        assert app.screen.query_one("#metrics-search", Input).value == "grad_norm"

        await open_tab(app, pilot, "logs")
        with open(finished_run / ORCH_LOG, "a") as fh:
            fh.write("08:30:00 INFO appended after the end\n")
        await pilot.pause(8 * TICK)
        assert "appended after the end" not in text_of(app, "#log-text")
        await pilot.press("r")
        await pilot.pause()
        assert "appended after the end" in text_of(app, "#log-text")

    run_app(RundashApp([str(finished_run)]), script)


# Read failures -------------------------------------------------------------------------------------
def test_a_failed_refresh_is_said_in_the_note_and_the_content_stays(live_run):
    """Every step waits on its condition (`until`, `settled`), never on time: a loaded machine
    only makes it slower."""
    async def script(app, pilot):
        run = app.screen.run
        await open_tab(app, pilot, "metrics")
        table = app.screen.query_one("#metrics-table", DataTable)
        assert await until(pilot, lambda: table.row_count > 0)  # the table is filled
        rows = await settled(pilot, lambda: table.row_count)
        metrics = live_run / METRICS
        kept = metrics.read_bytes()
        metrics.write_bytes(b"")  # rewritten from scratch by the writer: empty for a while
        assert await until(pilot, lambda: "read empty now" in text_of(app, "#metrics-note"))
        assert table.row_count == rows
        metrics.write_bytes(kept)
        write_lines(metrics, [{"step": 9, "time": time.time(), "optim/grad_norm": 0.777, "producer": "trainer"}], "a")
        assert await until(pilot, lambda: "0.777" in str(cell_row(table, "optim/grad_norm")))
        assert await until(pilot, lambda: text_of(app, "#metrics-note") == "")

        await open_tab(app, pilot, "logs")
        assert await until(pilot, lambda: text_of(app, "#log-text").strip() != "")  # the logs are read
        shown = await settled(pilot, lambda: text_of(app, "#log-text"))
        real = run.read_log

        def failing(paths, **kw):
            raise OSError("the disk went away")

        run.read_log = failing
        assert await until(pilot, lambda: "OSError: the disk went away" in text_of(app, "#logs-note"))
        assert "new lines of the logs of" in text_of(app, "#logs-note") and text_of(app, "#log-text") == shown
        run.read_log = real
        with open(live_run / ORCH_LOG, "a") as fh:
            fh.write("08:30:00 INFO back again\n")
        assert await until(pilot, lambda: "back again" in text_of(app, "#log-text"))
        assert await until(pilot, lambda: text_of(app, "#logs-note") == "")

    run_app(RundashApp([str(live_run)]), script)
