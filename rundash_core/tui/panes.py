"""The Metrics and Logs tabs of a run (the Samples tab is `samples.py`). Each pane reads its frames
when first shown, catches what cannot be read (said on screen, never a traceback), and offers
`follow` (read what the run added and show it in place: the timer of a running run, and `r`),
`focus_search` (`/`) and `focus_main` (escape from the search box)."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Input, SelectionList, Static
from textual.widgets.selection_list import Selection

from rundash_core import frames
from rundash_core.charts.series import series_index
from rundash_core.logs.view import follow_lines
from rundash_core.safety.user_regex import compile_user_pattern
from rundash_core.tui.highlight import Doc
from rundash_core.tui.plots import column_plot, format_value, metric_rows, sparkline
from rundash_core.tui.richtext import to_text
from rundash_core.tui.views import failure, filter_log_lines, log_levels, logs_doc

TREND_WIDTH = 24
LOG_TAIL = 1000


def _problems(lines) -> Doc:
    """The logs a read could not read (`attrs["problems"]`), one line each."""
    doc = Doc()
    for p in lines.attrs.get("problems", []):
        doc.line(str(p), "error")
    return doc


def _key(row) -> tuple[str, str]:
    """A metrics row's identity across reads (its position may change as keys appear)."""
    return row.section, row.label


def _cells(row) -> tuple:
    return tuple(to_text(c, no_wrap=True) for c in
                 (row.section, row.label, sparkline(row.y, TREND_WIDTH), format_value(row.last), row.last_x))


class MetricsPane(Vertical):
    """Every key of the run's chart sections: section, metric, sparkline, last value, at which step;
    the highlighted key is drawn below as a line plot. `/` filters the keys (regex)."""

    def __init__(self, run):
        super().__init__(classes="pane")
        self.run = run
        self.rows = []
        self.shown = []
        self.index = None  # the series index the rows were made from (a follow skips an unchanged one)
        self.columns = ()
        self.ready = False

    def compose(self) -> ComposeResult:
        yield Input(placeholder="filter metrics (regex)", id="metrics-search")
        yield Static(id="metrics-note", markup=False)
        yield DataTable(id="metrics-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="metrics-plot", markup=False)

    def on_mount(self) -> None:
        table = self.query_one("#metrics-table", DataTable)
        self.columns = table.add_columns("section", "metric", "trend", "last", "at")
        self.read()
        self.show()
        self.focus_main()
        self.ready = True

    def read(self) -> None:
        """The rows from the run's series index (re-read only when its metrics grew); what cannot
        be read is said in the note and the rows shown stay."""
        note = Doc()
        if "metrics" not in self.run.capabilities:
            note.line("This run has no metrics.", "muted")
        else:
            try:
                index = series_index(self.run)
                if index is not self.index:
                    ov = self.run.overview()
                    rows = metric_rows(index, kind=self.run.kind, flavor=ov.flavor,
                                       train_envs=ov.train_envs, eval_envs=ov.eval_envs)
                    if rows or not self.rows:
                        self.rows, self.index = rows, index
                    else:  # (index not kept: asked again next time)
                        note.line("The run's metrics read empty now (removed or rewritten?): the rows shown "
                                  "are the last ones read.", "error")
            except Exception as e:  # noqa: BLE001
                note = failure(f"the metrics of {self.run.run_id}", e)
            else:
                if not self.rows:
                    note.line("No chart section matches this run's metrics (yet).", "muted")
        self.query_one("#metrics-note", Static).update(to_text(note))

    def follow(self) -> None:
        """New steps shown in place: the filter, the highlighted key and its plot kept."""
        if "metrics" in self.run.capabilities:
            self.read()
            self.show()

    def show(self) -> None:
        """The rows the filter keeps; the highlighted key stays highlighted when still shown (the
        cells are updated in place when the same keys are shown, so the scroll stays too)."""
        pattern, error = compile_user_pattern(self.query_one("#metrics-search", Input).value, ignore_case=True)
        if error:
            self.query_one("#metrics-note", Static).update(to_text(Doc().line(error, "error")))
        table = self.query_one("#metrics-table", DataTable)
        current = _key(self.shown[table.cursor_row]) if 0 <= table.cursor_row < len(self.shown) else None
        shown = [r for r in self.rows if pattern is None or pattern.search(r.label)]
        same = table.row_count == len(shown) and list(map(_key, shown)) == list(map(_key, self.shown))
        self.shown = shown
        if same:
            for i, r in enumerate(shown):
                for column, cell in zip(self.columns, _cells(r)):
                    table.update_cell(str(i), column, cell, update_width=True)
        else:
            table.clear()
            for i, r in enumerate(shown):
                table.add_row(*_cells(r), key=str(i))
            table.move_cursor(row=next((i for i, r in enumerate(shown) if _key(r) == current), 0))
        self.plot(table.cursor_row)

    def plot(self, i: int) -> None:
        box = self.query_one("#metrics-plot", Static)
        if not 0 <= i < len(self.shown):
            box.update("")
            return
        r = self.shown[i]
        width = max((self.size.width or 80) - 14, 20)
        lines = column_plot(r.y, width=width, height=8)
        doc = Doc().add(r.label, "heading").line(f"  · {r.panel} · last {format_value(r.last)} ({r.last_x})")
        if lines:
            finite = [v for v in r.y if v == v]
            hi, lo = format_value(max(finite)), format_value(min(finite))
            for k, line in enumerate(lines):
                doc.add(f"{(hi if k == 0 else lo if k == len(lines) - 1 else ''):>11} ", "muted").line(line)
            doc.line(f"{'':>11} {len(r.y):,} points, x: {r.x_kind}", "muted")
        box.update(to_text(doc))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.plot(event.cursor_row)

    def on_input_changed(self, event: Input.Changed) -> None:
        self.show()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.focus_main()

    def focus_search(self) -> None:
        self.query_one("#metrics-search").focus()

    def focus_main(self) -> None:
        self.query_one("#metrics-table").focus()


class LogsPane(Vertical):
    """The tail of the run's logs (`run.logs()` / `run.read_log()`), filtered by level (the checked
    ones) and by a regex (`/`); "no logs" when the run has none. Following reads only the bytes
    appended since (`after`/`seen`), and keeps the last LOG_TAIL lines."""

    def __init__(self, run):
        super().__init__(classes="pane")
        self.run = run
        self.lines = frames.empty(frames.LOG_LINES)
        self.paths: list[str] | None = None  # the logs read (None: not read yet, or the read failed)
        self.ends: dict = {}
        self.versions: dict = {}
        self.ready = False

    def compose(self) -> ComposeResult:
        with Horizontal(id="log-bar"):
            yield SelectionList(id="log-levels")
            yield Input(placeholder="filter lines (regex)", id="logs-search")
        yield Static(id="logs-note", markup=False)
        with VerticalScroll(id="log-scroll"):
            yield Static(id="log-text", markup=False)

    def on_mount(self) -> None:
        # anchored: stays at the bottom as lines come, until the user scrolls up (and again once
        # they scroll back down to the bottom)
        self.query_one("#log-scroll", VerticalScroll).anchor()
        self.read_tail()
        self.focus_main()
        self.ready = True

    def read_tail(self) -> None:
        """The last LOG_TAIL lines of every log of the run, all their levels checked."""
        try:
            paths = list(self.run.logs()["path"])
            lines = self.run.read_log(paths, tail=LOG_TAIL) if paths else frames.empty(frames.LOG_LINES)
        except Exception as e:  # noqa: BLE001
            self.say(failure(f"the logs of {self.run.run_id}", e))
            return
        self.paths, self.ends, self.versions = paths, lines.attrs.get("ends", {}), lines.attrs.get("versions", {})
        self.say(_problems(lines))
        self.show_lines(lines)

    def follow(self) -> None:
        """Lines appended since the last read added below those shown (a truncated or replaced
        file: its tail read again); new levels come checked, the choices and the regex are kept,
        and the view stays at the bottom only if it was there."""
        if self.paths is None:
            self.read_tail()
            return
        try:
            paths = list(self.run.logs()["path"])  # a new log (a resumed attempt) is read from its tail
            lines, new = self.lines, frames.empty(frames.LOG_LINES)
            if paths:
                lines, new, _reset = follow_lines(lambda ps, **kw: self.run.read_log(ps, tail=LOG_TAIL, **kw), paths,
                                                  self.lines, ends=self.ends, seen=self.versions, keep=LOG_TAIL)
        except Exception as e:  # noqa: BLE001 - the lines shown stay
            self.say(failure(f"new lines of the logs of {self.run.run_id}", e))
            return
        self.paths, self.ends, self.versions = paths, new.attrs.get("ends", {}), new.attrs.get("versions", {})
        self.say(_problems(new))
        if lines is self.lines:
            return
        self.lines = lines
        levels = self.query_one("#log-levels", SelectionList)
        known = {option.value for option in levels.options}
        with levels.prevent(SelectionList.SelectedChanged):
            for lv in log_levels(lines):
                if lv not in known:
                    levels.add_option(Selection(to_text(lv), lv, True))
        levels.display = levels.option_count > 0
        self.refilter(to_end=False)  # the anchor keeps a view at the bottom there, not one scrolled up

    def say(self, doc: Doc) -> None:
        self.query_one("#logs-note", Static).update(to_text(doc))

    def show_lines(self, lines) -> None:
        """Show a `frames.LOG_LINES` frame: its levels become the level filter, all checked."""
        self.lines = lines
        levels = self.query_one("#log-levels", SelectionList)
        levels.clear_options()
        levels.add_options([Selection(to_text(lv), lv, True) for lv in log_levels(lines)])
        levels.display = levels.option_count > 0
        self.refilter()

    def refilter(self, *, to_end: bool = True) -> None:
        levels = self.query_one("#log-levels", SelectionList)
        chosen = set(levels.selected) if levels.option_count else None
        shown, error = filter_log_lines(self.lines, levels=chosen, query=self.query_one("#logs-search", Input).value)
        doc = Doc().line(error, "error") if error else Doc()
        if self.lines.empty:
            doc.line("no logs", "muted")
        else:
            doc.line(f"{len(shown):,} of {len(self.lines):,} lines", "muted")
            doc.append(logs_doc(shown) if len(shown) else Doc().line("no line matches the filter", "muted"))
        self.query_one("#log-text", Static).update(to_text(doc))
        if to_end:
            self.query_one("#log-scroll", VerticalScroll).scroll_end(animate=False)

    def on_selection_list_selected_changed(self, event: SelectionList.SelectedChanged) -> None:
        self.refilter()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.refilter()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.focus_main()

    def focus_search(self) -> None:
        self.query_one("#logs-search").focus()

    def focus_main(self) -> None:
        self.query_one("#log-scroll").focus()
