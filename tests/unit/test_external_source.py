"""A source defined here, outside the package, and registered from this test (`sources.register`,
undone after): with no core file edited it is discovered, opened, charted with its own sections (the
Metrics page too), lined up in Compare beside a prime-rl run through its aliases, and health-checked
through its concepts. The format is tiny: a folder holding `mytrainer.jsonl`, one
{"step", "loss", "reward"} row per step."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import rundash_core as rd
from rundash_core import sources
from rundash_core.charts.aliases import canonical_frame, literal_keys
from rundash_core.charts.sections import covered_keys, panel, sections_for
from rundash_core.overview import Overview, utc
from rundash_core.run import Run

from helpers import NEW_RUN, REPO, copy_run, open_page
from helpers.pages import charts_by_title, figures, legend_lines, plotly_values, section_labels

KIND = "mytrainer"
FILE = "mytrainer.jsonl"
STEPS = 60
SPIKE_AT = 40  # the loss spikes here (a loss_spike finding) and the reward drops after it


def is_run_dir(path: str) -> bool:
    return os.path.isfile(os.path.join(path, FILE))


class MyTrainerRun(Run):
    """The contract on one JSONL file: metrics, an overview, no config, no problems."""

    kind = KIND

    def metrics(self) -> pd.DataFrame:
        with open(os.path.join(self.path, FILE)) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        tidy = pd.DataFrame([{"step": r["step"], "time": np.nan, "metric": k, "value": float(r[k]), "producer": KIND}
                             for r in rows for k in ("loss", "reward")],
                            columns=["step", "time", "metric", "value", "producer"])
        return tidy.astype({"step": "Int64", "time": "float64", "metric": "category", "value": "float64",
                            "producer": "category"})

    def metrics_version(self) -> tuple:
        st = os.stat(os.path.join(self.path, FILE))
        return (st.st_size, st.st_mtime_ns)

    def overview(self, now: float | None = None) -> Overview:
        steps = self.metrics()["step"].dropna()
        last = int(steps.max()) if len(steps) else None
        return Overview(run_id=self.run_id, name=self.name, kind=self.kind, path=self.path, step=last,
                        max_steps=STEPS, last_step=last, finished=last == STEPS,
                        touched=utc(os.path.getmtime(os.path.join(self.path, FILE)))).at(now)

    def problems(self) -> list:
        return []

    def read_config(self) -> dict:
        return {}

    def read_configs(self, attempt: int | None = None) -> dict:
        return {}


SOURCE = sources.Source(
    KIND, MyTrainerRun, is_run_dir, sources.child_dirs(is_run_dir), "mytrainer runs hold mytrainer.jsonl",
    sections=[("Training", [panel("reward", "reward"), panel("loss", "loss")])],
    aliases={"reward": literal_keys("reward")}, concepts={"loss": literal_keys("loss")})

LOSS = 1.0 + 0.01 * np.sin(np.arange(1, STEPS + 1))
LOSS[SPIKE_AT - 1] = 5.0
REWARD = np.r_[np.linspace(0.1, 0.8, SPIKE_AT), np.linspace(0.8, 0.3, STEPS - SPIKE_AT)]


def write_run(folder: Path, name: str = "my-run") -> Path:
    run = folder / name
    run.mkdir(parents=True)
    (run / FILE).write_text("".join(json.dumps({"step": s, "loss": float(loss), "reward": float(reward)}) + "\n"
                                    for s, loss, reward in zip(range(1, STEPS + 1), LOSS, REWARD)))
    return run


@pytest.fixture
def registered():
    sources.register(SOURCE)
    try:
        yield SOURCE
    finally:
        sources.unregister(KIND)


@pytest.fixture
def folder(tmp_path) -> Path:
    """My run beside a prime-rl run."""
    write_run(tmp_path / "runs")
    copy_run(NEW_RUN, tmp_path / "runs")
    return tmp_path / "runs"


def test_no_core_file_knows_the_kind():
    hits = [str(p) for p in (REPO / "rundash_core").rglob("*.py") if KIND in p.read_text(encoding="utf-8")]
    assert not hits


def test_discovered_and_opened_only_while_registered(registered, folder):
    runs = rd.discover([folder]).set_index("run_id")
    assert runs.loc["my-run", "kind"] == KIND and runs.loc["my-run", "step"] == STEPS
    assert runs.loc[NEW_RUN.name, "kind"] == "prime-rl"
    assert KIND in rd.KINDS
    run = rd.open_run(folder / "my-run")
    assert isinstance(run, MyTrainerRun) and set(run.metrics()["metric"]) == {"loss", "reward"}
    sources.unregister(KIND)
    try:
        assert "my-run" not in set(rd.discover([folder])["run_id"]) and KIND not in rd.KINDS
        with pytest.raises(rd.RunError, match="not a run directory"):
            rd.open_run(folder / "my-run")
    finally:
        sources.register(SOURCE)


def test_charted_with_its_sections(registered, folder, monkeypatch):
    run = rd.open_run(folder / "my-run")
    secs = sections_for(KIND, "rl", run.metrics()["metric"].unique())
    assert [(s.title, [p.title for p in s.panels]) for s in secs] == [("Training", ["reward", "loss"])]
    assert covered_keys(secs) == {"loss", "reward"}
    at = open_page(monkeypatch, folder, "pages/metrics.py", {"run": "my-run"})
    assert section_labels(at) == ["Training"]
    drawn = {f["layout"]["title"]["text"]: f for f in figures(at)}
    assert set(drawn) == {"reward", "loss"}
    reward = [t for t in drawn["reward"]["data"] if t.get("showlegend", True) is not False][0]
    assert np.allclose(plotly_values(reward["y"]), REWARD)


def test_lined_up_in_compare_through_its_aliases(registered, folder, monkeypatch):
    cf = canonical_frame(KIND, rd.open_run(folder / "my-run").metrics(), ["reward"])
    assert cf["value"].tolist() == pytest.approx(REWARD.tolist()) and set(cf["source_key"]) == {"reward"}
    at = open_page(monkeypatch, folder, "pages/compare.py", {"run": "my-run", "runs": ["my-run", NEW_RUN.name]})
    reward = legend_lines(charts_by_title(at)["reward"])
    assert {"my-run", NEW_RUN.name} <= set(reward)
    assert np.allclose(plotly_values(reward["my-run"]["y"]), REWARD)
    aliases = at.dataframe[0].value
    assert "reward" in set(aliases[aliases["kind"] == KIND]["candidates"])


def test_health_checked_through_its_concepts(registered, folder):
    found = {f.rule: f for f in rd.open_run(folder / "my-run").health()}
    assert found["loss_spike"].metric == "loss" and found["loss_spike"].evidence["worst_step"] == SPIKE_AT
    assert found["reward_drop"].metric == "reward"


@pytest.fixture
def bare():
    """The same kind registered without tables: no sections, aliases or concepts."""
    sources.register(sources.Source(KIND, MyTrainerRun, is_run_dir, sources.child_dirs(is_run_dir)))
    try:
        yield
    finally:
        sources.unregister(KIND)


def test_without_its_tables_it_still_opens_but_is_neither_charted_compared_nor_checked(bare, folder, monkeypatch):
    rules = {f.rule for f in rd.open_run(folder / "my-run").health()}
    assert "loss_spike" not in rules and "reward_drop" not in rules
    assert canonical_frame(KIND, rd.open_run(folder / "my-run").metrics()).empty
    at = open_page(monkeypatch, folder, "pages/metrics.py", {"run": "my-run"})  # no traceback
    assert section_labels(at) == [] and any("No section matches" in i.value for i in at.info)


def test_a_built_in_source_carries_its_demo_writer(tmp_path):
    """`Source.demo` writes a run its own kind then reads, in a fresh interpreter (the writer is
    imported on the first call, where an import cycle would show)."""
    code = ("import sys, time; from pathlib import Path; from rundash_core import sources; "
            "print(sources.source_for('relax').demo(Path(sys.argv[1]), 'demo-relax', time.time()))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert rd.open_run(tmp_path / "demo-relax").kind == "relax"
