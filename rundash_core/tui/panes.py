"""The Metrics and Logs tabs of a run (the Samples tab is `samples.py`). Each pane reads its frames
when first shown, catches what cannot be read (said on screen, never a traceback), and offers
`focus_search` (`/`) and `focus_main` (escape from the search box)."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Input, SelectionList, Static
from textual.widgets.selection_list import Selection

from .. import frames
from ..charts.series import series_index
from ..user_regex import compile_user_pattern
from .highlight import Doc
from .plots import column_plot, format_value, metric_rows, sparkline
from .richtext import to_text
from .views import failure, filter_log_lines, log_levels, logs_doc

TREND_WIDTH = 24
LOG_TAIL = 1000


class MetricsPane(Vertical):
    """Every key of the run's chart sections: section, metric, sparkline, last value, at which step;
    the highlighted key is drawn below as a line plot. `/` filters the keys (regex)."""

    def __init__(self, run):
        super().__init__(classes="pane")
        self.run = run
        self.rows = []
        self.shown = []

    def compose(self) -> ComposeResult:
        yield Input(placeholder="filter metrics (regex)", id="metrics-search")
        yield Static(id="metrics-note", markup=False)
        yield DataTable(id="metrics-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="metrics-plot", markup=False)

    def on_mount(self) -> None:
        self.query_one("#metrics-table", DataTable).add_columns("section", "metric", "trend", "last", "at")
        note = Doc()
        if "metrics" not in self.run.capabilities:
            note.line("This run has no metrics.", "muted")
        else:
            try:
                ov = self.run.overview()
                self.rows = metric_rows(series_index(self.run), kind=self.run.kind, flavor=ov.flavor,
                                        train_envs=ov.train_envs, eval_envs=ov.eval_envs)
            except Exception as e:  # noqa: BLE001
                note = failure(f"the metrics of {self.run.run_id}", e)
            else:
                if not self.rows:
                    note.line("No chart section matches this run's metrics (yet).", "muted")
        self.query_one("#metrics-note", Static).update(to_text(note))
        self.show()
        self.focus_main()

    def show(self) -> None:
        pattern, error = compile_user_pattern(self.query_one("#metrics-search", Input).value, ignore_case=True)
        if error:
            self.query_one("#metrics-note", Static).update(to_text(Doc().line(error, "error")))
        self.shown = [r for r in self.rows if pattern is None or pattern.search(r.label)]
        table = self.query_one("#metrics-table", DataTable)
        table.clear()
        for i, r in enumerate(self.shown):
            table.add_row(*(to_text(c, no_wrap=True) for c in
                            (r.section, r.label, sparkline(r.y, TREND_WIDTH), format_value(r.last), r.last_x)),
                          key=str(i))
        self.plot(0)

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
    ones) and by a regex (`/`); "no logs" when the run has none."""

    def __init__(self, run):
        super().__init__(classes="pane")
        self.run = run
        self.lines = frames.empty(frames.LOG_LINES)

    def compose(self) -> ComposeResult:
        with Horizontal(id="log-bar"):
            yield SelectionList(id="log-levels")
            yield Input(placeholder="filter lines (regex)", id="logs-search")
        with VerticalScroll(id="log-scroll"):
            yield Static(id="log-text", markup=False)

    def on_mount(self) -> None:
        try:
            logs = self.run.logs()
            lines = self.run.read_log(list(logs["path"]), tail=LOG_TAIL) if len(logs) else frames.empty(frames.LOG_LINES)
        except Exception as e:  # noqa: BLE001
            self.query_one("#log-text", Static).update(to_text(failure(f"the logs of {self.run.run_id}", e)))
            return
        self.show_lines(lines)
        self.focus_main()

    def show_lines(self, lines) -> None:
        """Show a `frames.LOG_LINES` frame: its levels become the level filter, all checked."""
        self.lines = lines
        levels = self.query_one("#log-levels", SelectionList)
        levels.clear_options()
        levels.add_options([Selection(to_text(lv), lv, True) for lv in log_levels(lines)])
        levels.display = levels.option_count > 0
        self.refilter()

    def refilter(self) -> None:
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
