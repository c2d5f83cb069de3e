"""The Samples tab: pick a step (and split, and dataset/env when the samples name one), a sort, a
sample; read its episode and show the checked fields with the mask and highlighting applied.
`←`/`→` step through the samples, `/` searches the shown text (matches marked, counted). While the
run is running, `follow` lists new samples in place (the choices and the sample shown kept)."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Input, Label, Select, SelectionList, Static
from textual.widgets.selection_list import Selection

from rundash_core.safety.user_regex import UserPattern
from rundash_core.tui.highlight import Doc
from rundash_core.tui.richtext import to_text
from rundash_core.tui.views import FIELDS, failure, sample_doc, sample_label
from rundash_core.views import trajectory as tj

ALL = "all"
# the sorts the Relax viewer offers: by reward or response length, each way
SORTS = {"reward_desc": "reward ↓", "reward_asc": "reward ↑", "output_tokens_desc": "response length ↓",
         "output_tokens_asc": "response length ↑"}


class SampleScroll(VerticalScroll, inherit_bindings=False):
    """The sample's text: up/down/page keys scroll it; ←/→ are left to the pane (previous/next)."""

    BINDINGS = [Binding("up", "scroll_up", show=False), Binding("down", "scroll_down", show=False),
                Binding("pageup", "page_up", show=False), Binding("pagedown", "page_down", show=False),
                Binding("home", "scroll_home", show=False), Binding("end", "scroll_end", show=False)]


def _options(values, label) -> list[tuple]:
    return [(to_text(label(v)), v) for v in values]


def _no_samples_yet() -> Doc:
    return Doc().line("This run has no samples (yet).", "muted")


def _step_label(evals: set, name: str = "step"):
    return lambda s: f"all {name}s" if s == ALL else f"{name} {s}" + (" · eval" if s in evals else "")


def _split_label(s) -> str:
    return "all splits" if s == ALL else s


class SamplesPane(Horizontal):
    BINDINGS = [Binding("left", "previous_sample", "Prev sample"), Binding("right", "next_sample", "Next sample")]

    def __init__(self, run, *, mask: UserPattern | None):
        super().__init__(classes="pane")
        self.run, self.mask = run, mask
        self.samples = None
        self.view = None  # the filtered, sorted samples the picker lists
        self.index = 0
        self.episode = None
        self.error: Doc | None = None
        self.ready = False
        self.step_column, self.step_name = "step", "step"  # the step axis (`rollouts.step_axis`), as on the pages

    def _read(self, samples=None) -> tuple:
        """(samples, steps, eval steps, splits) of the run (`samples`: already read)."""
        samples = self.run.samples() if samples is None else samples
        self.step_column, self.step_name = tj.step_axis(samples)
        steps, evals = tj.step_options(tj.axis_steps(samples, self.step_column))
        return samples, steps, evals, sorted(s for s in samples["split"].dropna().unique())

    def _load(self) -> tuple[list, set, list]:
        """(steps, eval steps, splits) of the run's samples; `error` says why there are none."""
        if "samples" not in self.run.capabilities:
            self.error = Doc().line("This run has no samples: its trainer does not record rollouts rundash can read.", "muted")
            return [], set(), []
        try:
            self.samples, steps, evals, splits = self._read()
        except Exception as e:  # noqa: BLE001
            self.error = failure(f"the samples of {self.run.run_id}", e)
            return [], set(), []
        if self.samples.empty:
            self.error = _no_samples_yet()
        return steps, evals, splits

    def compose(self) -> ComposeResult:
        steps, evals, splits = self._load()
        with Vertical(id="sample-side"):
            yield Label(self.step_name.capitalize())
            yield Select(_options([ALL, *steps], _step_label(evals, self.step_name)),
                         value=steps[0] if steps else ALL, allow_blank=False, id="sample-step")
            yield Label("Split", id="sample-split-label", classes="" if len(splits) > 1 else "hidden")
            yield Select(_options([ALL, *splits], _split_label), value=ALL,
                         allow_blank=False, id="sample-split", classes="" if len(splits) > 1 else "hidden")
            yield Label("Dataset / env", id="sample-env-label")
            yield Select(_options([ALL], str), value=ALL, allow_blank=False, id="sample-env")
            yield Label("Sort")
            yield Select(_options([ALL, *SORTS], lambda s: "as logged" if s == ALL else SORTS[s]), value=ALL,
                         allow_blank=False, id="sample-sort")
            yield Label("Sample")
            yield Select([], prompt="no samples", id="sample-pick")
            yield Label("Show")
            yield SelectionList(*(Selection(to_text(title), key, True) for key, title in FIELDS.items()),
                                id="sample-fields")
            yield Static(id="sample-pos", markup=False)
            yield Static(id="sample-note", markup=False)
        with Vertical(id="sample-main"):
            yield Input(placeholder="search this sample (/)", id="sample-search")
            with SampleScroll(id="sample-scroll"):
                yield Static(id="sample-text", markup=False)

    def on_mount(self) -> None:
        self.refilter()
        self.focus_main()
        self.ready = True

    def follow(self) -> None:
        """New samples, steps and splits listed in place: the step/split/env/sort chosen, the
        sample shown and its scroll kept; what cannot be read is said and the list stays."""
        if "samples" not in self.run.capabilities:
            return
        note = self.query_one("#sample-note", Static)
        try:
            samples, old = self.run.samples(), self.samples
            if old is not None and (samples is old or samples["sample_id"].equals(old["sample_id"])):
                note.update("")
                return
            samples, steps, evals, splits = self._read(samples)
        except Exception as e:  # noqa: BLE001
            note.update(to_text(failure(f"new samples of {self.run.run_id}", e)))
            return
        note.update("")
        shown = str(self.view.iloc[self.index]["sample_id"]) if self.episode is not None else None
        self.samples = samples
        if self.episode is None:
            self.error = _no_samples_yet() if samples.empty else None
        self._set_options("step", [ALL, *steps], _step_label(evals, self.step_name))
        self._set_options("split", [ALL, *splits], _split_label)
        for box in self.query("#sample-split, #sample-split-label"):
            box.set_class(len(splits) <= 1, "hidden")
        self.refilter(keep=shown)

    def _set_options(self, name: str, values: list, label) -> None:
        """A picker's options replaced, its value kept (all, when the value is gone)."""
        box = self.query_one(f"#sample-{name}", Select)
        kept = box.value
        with box.prevent(Select.Changed):
            box.set_options(_options(values, label))
            box.value = kept if kept in values else ALL

    def _value(self, name: str):
        v = self.query_one(f"#sample-{name}", Select).value
        return None if v == ALL or v is Select.BLANK else v

    def refilter(self, *, keep: str | None = None) -> None:
        """The samples of the chosen step/split/env in the chosen order; the first one shown, or
        the sample `keep` (an id) left as it is when it is still listed."""
        if self.samples is None or self.samples.empty:
            self.view = None
            self.render_sample()
            return
        chosen = tj.filter_samples(self.samples, split=self._value("split"), step=self._value("step"),
                                   step_column=self.step_column)
        self.view = tj.sort_samples(tj.filter_samples(chosen, env=self.env_options(chosen)), self._value("sort"))
        ids = self.view["sample_id"].astype(str)
        kept = int(ids.index[ids.eq(keep)][0]) if keep is not None and ids.eq(keep).any() else None
        pick = self.query_one("#sample-pick", Select)
        with pick.prevent(Select.Changed):
            pick.set_options([(to_text(sample_label(r, i, len(self.view))), i)
                              for i, r in enumerate(self.view.itertuples(index=False))])
            if len(self.view):
                pick.value = kept or 0
        if kept is None:
            self.show(0)
        else:  # the same episode: not read again, its scroll stays
            self.index = kept
            self.render_sample()

    def env_options(self, chosen) -> str | None:
        """The dataset/env picker lists the envs of the chosen samples, shown only when they name
        one; the env kept (None: all)."""
        envs = sorted(e for e in chosen["env"].dropna().unique() if e)
        box = self.query_one("#sample-env", Select)
        env = self._value("env") if self._value("env") in envs else None
        with box.prevent(Select.Changed):
            box.set_options(_options([ALL, *envs], lambda e: "all" if e == ALL else e))
            box.value = ALL if env is None else env
        box.display = self.query_one("#sample-env-label").display = bool(envs)
        return env

    def show(self, index: int) -> None:
        """Open the `index`-th sample of the view (clamped) and show it."""
        if self.view is None or not len(self.view):
            self.episode = None
            self.render_sample()
            return
        self.index = min(max(index, 0), len(self.view) - 1)
        pick = self.query_one("#sample-pick", Select)
        if pick.value != self.index:
            with pick.prevent(Select.Changed):
                pick.value = self.index
        sid = str(self.view.iloc[self.index]["sample_id"])
        try:
            self.episode, self.error = self.run.episode(sid), None
        except Exception as e:  # noqa: BLE001 - KeyError (gone) or a bad record: said, not raised
            self.episode, self.error = None, failure(f"sample {sid} of {self.run.run_id}", e)
        self.render_sample()
        self.query_one("#sample-scroll", SampleScroll).scroll_home(animate=False)

    def render_sample(self) -> None:
        query = self.query_one("#sample-search", Input).value
        fields = set(self.query_one("#sample-fields", SelectionList).selected)
        pos = Doc()
        if self.episode is not None:
            doc = sample_doc(self.episode, fields=fields, mask=self.mask, query=query)
            pos.line(f"sample {self.index + 1} of {len(self.view)}")
            if query:
                pos.line(f"{doc.matches()} match{'es' * (doc.matches() != 1)}", "match" if doc.matches() else "muted")
        else:
            doc = self.error or Doc().line("No sample matches these choices.", "muted")
        self.query_one("#sample-text", Static).update(to_text(doc))
        self.query_one("#sample-pos", Static).update(to_text(pos))

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        if event.select.id == "sample-pick":
            if isinstance(event.value, int) and event.value != self.index:
                self.show(event.value)
        else:
            self.refilter()

    def on_selection_list_selected_changed(self, event: SelectionList.SelectedChanged) -> None:
        self.render_sample()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.render_sample()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.focus_main()

    def action_previous_sample(self) -> None:
        self.show(self.index - 1)

    def action_next_sample(self) -> None:
        self.show(self.index + 1)

    def focus_search(self) -> None:
        self.query_one("#sample-search").focus()

    def focus_main(self) -> None:
        self.query_one("#sample-scroll").focus()
