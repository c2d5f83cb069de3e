"""The terminal app: the runs list, and one run's card, metrics, samples and logs in tabs.

Every text from a run goes through `richtext.to_text` (a `rich.text.Text`, never markup), so data
cannot style the screen or bind an action. A tab's content is built when it is first opened: a
run's metrics are not read to show its samples. While a run is running, the open tab follows it
in place every REFRESH_S (only what was appended is read; filters, choices, cursor and scroll
kept); a finished run's tabs are not re-read (`r` reads them again, in place, on demand).
"""
from __future__ import annotations

import time

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static, TabbedContent, TabPane

from rundash_core.discover import scan
from rundash_core.safety.user_regex import UserPattern
from rundash_core.sources import open_run
from rundash_core.tui.highlight import Doc
from rundash_core.tui.panes import LogsPane, MetricsPane
from rundash_core.tui.richtext import to_text
from rundash_core.tui.samples import SamplesPane
from rundash_core.tui.views import card_doc, failure, run_rows
from rundash_core.views.runs_table import filter_runs

REFRESH_S = 10.0  # the runs list, the open card and a running run's open tab are re-read this often
LAYOUT = """
.hidden { display: none; }
#runs-title, #run-title { background: $primary-background; color: $text; padding: 0 1; height: 1; }
#runs-note { height: auto; padding: 0 1; }
#runs-table { height: 1fr; }
#run-tabs { height: 1fr; }
TabPane { height: 1fr; padding: 0; }
.pane { height: 1fr; }
#metrics-table { height: 2fr; }
#metrics-plot { height: auto; min-height: 3; padding: 0 1; border-top: solid $primary; }
#sample-side { width: 36; height: 1fr; overflow-y: auto; padding: 0 1 0 0; }
#sample-side Select { margin: 0; }
#sample-side Label { margin: 1 0 0 1; color: $text-muted; }
#sample-fields { height: auto; max-height: 8; }
#sample-pos { height: auto; padding: 0 1; }
#sample-main { width: 1fr; height: 1fr; }
#sample-scroll, #log-scroll, #card-scroll { height: 1fr; padding: 0 1; }
#log-bar { height: auto; }
#log-levels { width: 30; height: auto; max-height: 9; }
#logs-note, #sample-note { height: auto; padding: 0 1; }
#logs-search, #metrics-search, #sample-search { width: 1fr; }
"""
TABS = (("overview", "Overview"), ("metrics", "Metrics"), ("samples", "Samples"), ("logs", "Logs"))


class RunsScreen(Screen):
    """Every run under the tracked directories: run, kind, status, step, updated; enter opens one."""

    BINDINGS = [Binding("/", "search", "Search"), Binding("r", "reload", "Refresh"),
                Binding("escape", "clear_search", "Clear", show=False)]

    def __init__(self, dirs: list[str], *, open_single: bool = True):
        super().__init__()
        self.dirs = dirs
        self.runs = None
        self.shown = None
        self.open_single = open_single  # a single run found at start opens directly

    def compose(self) -> ComposeResult:
        yield Static(to_text("rundash · runs"), id="runs-title", markup=False)
        yield Input(placeholder="filter runs by name (regex)", id="runs-search", classes="hidden")
        yield Static(id="runs-note", markup=False)
        yield DataTable(id="runs-table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#runs-table", DataTable).add_columns("run", "kind", "status", "step", "updated")
        self.reload()
        self.set_interval(REFRESH_S, self.reload)
        self.query_one("#runs-table").focus()
        if self.open_single and len(self.shown) == 1:
            self.open(0)

    def action_reload(self) -> None:
        self.reload()

    def reload(self) -> None:
        """Re-read the runs (a warm scan re-lists folders only) and show them, filter kept."""
        frame, errors = scan(self.dirs)
        self.runs = frame
        note = Doc()
        for e in errors:
            note.line(e, "error")
        if frame.empty:
            note.line(f"no runs found under {', '.join(self.dirs)}", "muted")
        self.query_one("#runs-note", Static).update(to_text(note))
        self.show()

    def show(self) -> None:
        table = self.query_one("#runs-table", DataTable)
        query = self.query_one("#runs-search", Input).value
        shown, error = filter_runs(self.runs, name_regex=query)
        if error:
            self.query_one("#runs-note", Static).update(to_text(Doc().line(error, "error")))
        row = table.cursor_row
        table.clear()
        for cells in run_rows(shown):
            table.add_row(*(to_text(c, no_wrap=True) for c in cells), key=cells[0])
        self.shown = shown
        if len(shown):
            table.move_cursor(row=min(row, len(shown) - 1))

    def on_input_changed(self, event: Input.Changed) -> None:
        self.show()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one("#runs-table").focus()

    def action_search(self) -> None:
        box = self.query_one("#runs-search", Input)
        box.remove_class("hidden")
        box.focus()

    def action_clear_search(self) -> None:
        box = self.query_one("#runs-search", Input)
        box.value = ""
        box.add_class("hidden")
        self.query_one("#runs-table").focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.open(event.cursor_row)

    def open(self, row: int) -> None:
        if self.shown is None or not 0 <= row < len(self.shown):
            return
        r = self.shown.iloc[row]
        self.app.push_screen(RunScreen(open_run(r["path"], run_id=r["run_id"]), mask=self.app.mask))


class RunScreen(Screen):
    """One run: Overview (the card), Metrics, Samples, Logs (`]`/`[` or 1-4 switch between them);
    escape goes back to the runs list."""

    BINDINGS = [Binding("escape", "back", "Runs"), Binding("/", "search", "Search"), Binding("r", "reload", "Refresh"),
                Binding("]", "next_tab(1)", "Next tab"), Binding("[", "next_tab(-1)", "Prev tab"),
                *(Binding(str(i + 1), f"open_tab({i})", "Tab", key_display="1-4", show=i == 0) for i in range(len(TABS)))]

    def __init__(self, run, *, mask: UserPattern | None):
        super().__init__()
        self.run, self.mask = run, mask
        self.filled: set[str] = set()
        self.status: str | None = None  # the run's status at the last look (the card's)

    def compose(self) -> ComposeResult:
        yield Static(to_text(f"{self.run.run_id} · {self.run.kind} · {self.run.path}", no_wrap=True),
                     id="run-title", markup=False)
        with TabbedContent(id="run-tabs"):
            for key, title in TABS:
                with TabPane(title, id=f"tab-{key}"):
                    if key == "overview":
                        with VerticalScroll(id="card-scroll"):
                            yield Static(id="card", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.show_card()
        self.set_interval(REFRESH_S, self.tick)

    def tick(self) -> None:
        """The card again; while the run is running, the open tab follows it (a finished run's
        tabs are not read)."""
        self.show_card()
        if self.status == "running":
            self.follow_open_tab()

    def show_card(self) -> None:
        try:
            card = self.run.overview(time.time())
            self.status = card.status
            doc = card_doc(card, self.run.problems())
        except Exception as e:  # noqa: BLE001 - the other tabs still work
            self.status = None
            doc = failure(f"the card of {self.run.run_id}", e)
        self.query_one("#card", Static).update(to_text(doc))

    def follow_open_tab(self) -> None:
        pane = self.active_pane()
        if pane is not None and pane.ready:
            pane.follow()

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        key = event.pane.id.removeprefix("tab-")
        if key not in self.filled and key != "overview":
            self.filled.add(key)
            event.pane.mount(self.make_pane(key))  # focuses its main widget once mounted
            return
        if self.status == "running":  # a tab opened again catches up with the run
            self.follow_open_tab()
        pane = self.active_pane()
        if pane is not None:  # keys go to the tab on screen, not to one left behind
            pane.focus_main()
        elif key == "overview":
            self.query_one("#card-scroll").focus()

    def action_next_tab(self, delta: int) -> None:
        """`]` / `[`: the next / previous tab, round the end."""
        ids = [f"tab-{key}" for key, _title in TABS]
        tabs = self.query_one("#run-tabs", TabbedContent)
        tabs.active = ids[(ids.index(tabs.active) + delta) % len(ids)]

    def action_open_tab(self, index: int) -> None:
        """`1`-`4`: Overview, Metrics, Samples, Logs."""
        self.query_one("#run-tabs", TabbedContent).active = f"tab-{TABS[index][0]}"

    def make_pane(self, key: str):
        if key == "metrics":
            return MetricsPane(self.run)
        if key == "samples":
            return SamplesPane(self.run, mask=self.mask)
        return LogsPane(self.run)

    def action_reload(self) -> None:
        """`r`: the card and the open tab read again now, in place (whatever the run's status)."""
        self.show_card()
        self.follow_open_tab()

    def active_pane(self):
        tab = self.query_one("#run-tabs", TabbedContent).active_pane
        found = tab.query(".pane") if tab is not None else None
        return found.first() if found else None

    def action_search(self) -> None:
        pane = self.active_pane()
        if pane is not None:
            pane.focus_search()

    def action_back(self) -> None:
        if isinstance(self.focused, Input):  # escape leaves the search box first
            pane = self.active_pane()
            if pane is not None:
                pane.focus_main()
            return
        self.app.pop_screen()


class RundashApp(App):
    """`rundash tui DIR...`: the runs under DIRs; a single run opens directly."""

    TITLE = "rundash"
    CSS = LAYOUT  # layout only; run text is styled by richtext.STYLE
    BINDINGS = [Binding("q", "quit", "Quit"), Binding("j", "move(1)", "Down", show=False),
                Binding("k", "move(-1)", "Up", show=False)]

    def __init__(self, dirs: list[str], *, mask: UserPattern | None = None):
        super().__init__()
        self.dirs, self.mask = dirs, mask

    def on_mount(self) -> None:
        self.push_screen(RunsScreen(self.dirs))

    def action_move(self, delta: int) -> None:
        """`j`/`k`: down/up in whatever is focused (a table, a list, a scrolled text)."""
        w = self.focused
        names = ("action_cursor_down", "action_scroll_down") if delta > 0 else ("action_cursor_up", "action_scroll_up")
        for name in names:
            if w is not None and hasattr(w, name):
                getattr(w, name)()
                return
