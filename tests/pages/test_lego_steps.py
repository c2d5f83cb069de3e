"""One step numbering for SWE-Lego-RL / Harbor trials (issue 23, swe-lego-rl.md 2.1–2.3): a trial's
trainer step is `step` wherever it is known, its `step_NNNN` folder number is `step_folder`; the
Rollouts and Trajectory pages count by trainer steps, else say "Harbor step folder" (never a guessed
step), and a missing step is a gap in their lines."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

import rundash_core as rd
from rundash_core.sources.swe_lego_rl import harbor_steps
from rundash_core.views import rollouts as ro
from rundash_core.views import trajectory as tj

from helpers import DATA, copy_run, open_page
from helpers.pages import charts_by_title, plotly_values

EXP = "qwen3-8b-swegym-gspo-async-r1"
ROLLOUTS, TRAJECTORY = "pages/rollouts.py", "pages/trajectory.py"


def lego_copy(tmp_path: Path, edit=None, src: Path = DATA / "lego") -> Path:
    """A copy of a real Lego-RL workdir, its console log edited by `edit(text) -> text`; the log's path."""
    work = copy_run(src, tmp_path, "work")
    log = work / "logs" / f"{EXP}.log"
    if edit is not None:
        log.write_text(edit(log.read_text()))
    return log


def as_sync(text: str) -> str:
    """The real log as a synchronous trainer prints it: no fully-async recipe section in the config,
    no rollouter metrics (rollout.mode stays 'async': vLLM's server mode, sync runs use it too)."""
    text = "".join(line for line in text.splitlines(keepends=True) if "'async_training'" not in line)
    return re.sub(r" - rollouter/validate_time:[\d.]+", "", text)


def by_folder(run) -> dict[int, set]:
    """folder number -> the `step` values of its samples (None: not known)."""
    s = run.samples()
    assert (s["step"].isna() == s["trainer_step"].isna()).all() and (s["step"].dropna() == s["trainer_step"].dropna()).all()
    return {int(f): {None if pd.isna(v) else int(v) for v in rows["step"]} for f, rows in s.groupby("step_folder")}


def lego_of(runs):
    row = runs[runs["kind"] == "swe-lego-rl"].iloc[0]
    return row["run_id"], rd.open_run(row["path"])


# The map ------------------------------------------------------------------------------------------
def test_a_fully_async_run_maps_its_paired_validation_folders_and_no_training_folder():
    """The real sample: validations start at folders 1, 66, 131, 196 and the log pairs the first three
    with trainer steps 0, 1, 2; training folder 2 is a rollouter sample counter: no step."""
    run = rd.open_run(DATA / "lego-full" / "logs" / f"{EXP}.log")
    assert run.training_flavor() == harbor_steps.ASYNC
    assert by_folder(run) == {1: {0}, 66: {1}, 131: {2}, 196: {None}}  # 196: never paired, shown by its folder
    run = rd.open_run(DATA / "lego" / "logs" / f"{EXP}.log")
    assert by_folder(run) == {1: {0}, 2: {None}, 196: {None}}
    assert set(run.samples(step=0)["step_folder"]) == {1}  # samples(step=) is the trainer step
    assert ro.step_axis(run.samples()) == ("step_folder", "Harbor step folder")
    assert ro.step_axis(run.samples(split="val").query("step_folder == 1")) == ("step", "step")


def test_explicit_val_map_lines_win_over_the_pairing(tmp_path):
    log = lego_copy(tmp_path, lambda t: t + "[stitch] val_map: step_0196 -> train_step 3\n"
                                              "[stitch] val_map: step_0001 -> train_step 7\n")
    run = rd.open_run(log)
    assert by_folder(run) == {1: {7}, 2: {None}, 196: {3}}
    assert set(run.samples(step=3)["step_folder"]) == {196}


def test_a_synchronous_run_s_folders_are_its_trainer_steps(tmp_path):
    log = lego_copy(tmp_path, as_sync)
    assert "'mode': 'async'" in log.read_text()
    run = rd.open_run(log)
    assert run.training_flavor() == harbor_steps.SYNC
    assert by_folder(run) == {1: {1}, 2: {2}, 196: {196}}
    assert ro.step_axis(run.samples()) == ("step", "step")
    ep = run.episode(run.samples().query("step_folder == 2")["sample_id"].iloc[0])
    assert ep.step == 2 and ep.ids["Harbor step folder"] == "step_0002"


def test_without_a_config_or_rollouter_line_only_the_log_s_mappings_count(tmp_path):
    log = lego_copy(tmp_path, lambda t: as_sync(t).replace("{'actor_rollout_ref'", "{'no_config_here'")
                    + "[stitch] val_map: step_0001 -> train_step 4\n")
    run = rd.open_run(log)
    assert run.read_config() == {} and run.training_flavor() is None
    assert by_folder(run) == {1: {4}, 2: {None}, 196: {None}}


def test_an_unmapped_trial_opens_with_no_step_and_its_folder_named():
    run = rd.open_run(DATA / "lego" / "logs" / f"{EXP}.log")
    row = run.samples().query("step_folder == 2").iloc[0]
    ep = run.episode(row["sample_id"])
    assert ep.step is None and ep.ids["Harbor step folder"] == "step_0002"


# Gaps ---------------------------------------------------------------------------------------------
def test_a_missing_step_is_a_gap():
    per_step = pd.DataFrame({"step": pd.array([11, 12, 13, 39, 40, 45], dtype="Int64"), "v": [1.0, 2, 3, 4, 5, 6]})
    gapped = ro.with_gaps(per_step)
    assert gapped["step"].tolist() == [11, 12, 13, 14, 39, 40, 41, 45]
    assert gapped.set_index("step")["v"].isna().to_dict() == {11: False, 12: False, 13: False, 14: True, 39: False,
                                                              40: False, 41: True, 45: False}
    assert ro.with_gaps(per_step.iloc[:3]).equals(per_step.iloc[:3])  # consecutive: nothing added


def test_the_demo_counts_by_folder_with_a_gap_and_agrees_with_the_card(demo_runs):
    """The demo is fully-async: its card says step 12 of 12; its validation dumps are trainer steps
    0, 6 and 12; its training folders (2–13, 39–50) are Harbor step folders, with a gap between."""
    _, run = lego_of(demo_runs[1])
    card = run.overview()
    assert (card.step, card.max_steps) == (12, 12)
    s = run.samples()
    assert sorted(s["step"].dropna().unique()) == [0, 6, 12] and s["step"].max() == card.step
    assert s.loc[s["split"] == "train", "step"].isna().all()
    column, label = ro.step_axis(s)
    assert (column, label) == ("step_folder", "Harbor step folder")
    signal = ro.with_gaps(ro.signal_by_step(ro.groups(ro.on_axis(s, column)))).set_index("step")
    assert 13 in signal.index and 39 in signal.index and signal.loc[14].isna().all()
    assert not set(range(15, 39)) & set(signal.index)  # one empty row breaks the line, no filler


# Pages --------------------------------------------------------------------------------------------
def _x_title(spec: dict) -> str:
    return spec["layout"]["xaxis"]["title"]["text"]


def test_rollouts_page_says_harbor_step_folder_and_breaks_lines_at_gaps(monkeypatch, demo_runs):
    folder, runs = demo_runs
    run_id, _ = lego_of(runs)
    shown = charts_by_title(open_page(monkeypatch, folder, ROLLOUTS, {"run": run_id}))
    assert _x_title(shown["Signal per step"]) == _x_title(shown["How rollouts ended"]) == "Harbor step folder"
    assert all("Harbor step folder %{x}" in t["hovertemplate"] for t in shown["How rollouts ended"]["data"])
    line = shown["Signal per step"]["data"][0]
    x, y = plotly_values(line["x"]).astype(int).tolist(), plotly_values(line["y"])
    assert x[x.index(13) + 1] == 14 and x[x.index(14) + 1] == 39 and pd.isna(y[x.index(14)])  # 13 ⟶ gap ⟶ 39
    at = open_page(monkeypatch, folder, ROLLOUTS, {"run": run_id, "panel": "episodes"})
    assert _x_title(charts_by_title(at)["Lengths"]) == "Harbor step folder"
    assert "Harbor step folder" in at.dataframe[0].value.columns and "step" not in at.dataframe[0].value.columns
    at = open_page(monkeypatch, folder, ROLLOUTS, {"run": run_id, "panel": "tasks"})
    assert _x_title(charts_by_title(at)["Task grid"]) == "Harbor step folder"
    grid = charts_by_title(at)["Task grid"]["data"][0]
    x, z = list(grid["x"]), grid["z"]
    z = (plotly_values(z).reshape([int(n) for n in str(z["shape"]).split(",")]) if isinstance(z, dict)
         else np.array(z, dtype=float))  # (plotly's typed array: shape "rows, columns")
    assert x[x.index("13") + 1] == "14" and x[x.index("14") + 1] == "39"  # an empty column: the gap
    assert np.isnan(z[:, x.index("14")]).all() and not np.isnan(z[:, x.index("13")]).all()


def test_trajectory_step_picker_is_by_harbor_step_folder_on_an_async_run(monkeypatch, demo_runs):
    folder, runs = demo_runs
    run_id, run = lego_of(runs)
    at = open_page(monkeypatch, folder, TRAJECTORY, {"run": run_id, "step": "39"})
    picker = at.selectbox(key="step")
    assert picker.label == "Harbor step folder" and picker.value == 39
    assert picker.format_func(51) == "Harbor step folder 51 · eval" and picker.format_func(None) == "all Harbor step folders"
    s = run.samples()
    assert len(at.dataframe[0].value) == int((s["step_folder"] == 39).sum()) == 4  # the folder's trials


def test_pages_of_a_synchronous_run_say_step(monkeypatch, tmp_path):
    log = lego_copy(tmp_path, as_sync)
    folder = log.parent.parent
    run_id = rd.discover([folder])["run_id"].iloc[0]
    shown = charts_by_title(open_page(monkeypatch, folder, ROLLOUTS, {"run": run_id}))
    assert _x_title(shown["How rollouts ended"]) == "step"
    at = open_page(monkeypatch, folder, TRAJECTORY, {"run": run_id, "step": "2"})
    assert at.selectbox(key="step").label == "Step" and at.selectbox(key="step").value == 2
    assert tj.step_axis(rd.open_run(log).samples()) == ("step", "step")


def test_the_terminal_view_picks_samples_on_the_same_axis():
    """The TUI's Samples tab: the fully-async sample is picked by Harbor step folder, as on the pages."""
    import pytest

    pytest.importorskip("textual")
    from textual.widgets import Select

    from rundash_core.tui.app import RundashApp

    from helpers.tui import open_tab, run_app

    async def script(app, pilot):
        await open_tab(app, pilot, "samples")
        step = app.screen.query_one("#sample-step", Select)
        labels = {v: str(label) for label, v in step._options}
        assert labels[2] == "Harbor step folder 2" and labels[1] == "Harbor step folder 1 · eval"
        step.value = 2
        await pilot.pause()
        pane = app.screen.query_one("SamplesPane")
        assert len(pane.view) == 8 and set(pane.view["step_folder"]) == {2}  # the training folder's 8 trials

    run_app(RundashApp([str(DATA / "lego" / "logs" / f"{EXP}.log")], mask=None), script)


def test_an_unmapped_trial_s_side_panel_names_its_harbor_step_folder(monkeypatch):
    """The episode side panel says 'Harbor step folder 2' (its `step_folder`) where no trainer
    step is known, never 'step n/a'; a mapped trial says its trainer step."""
    log = DATA / "lego" / "logs" / f"{EXP}.log"
    folder = log.parent.parent
    run_id = rd.discover([folder])["run_id"].iloc[0]
    s = rd.open_run(log).samples()
    unmapped = s.query("step_folder == 2")["sample_id"].iloc[0]
    at = open_page(monkeypatch, folder, TRAJECTORY, {"run": run_id, "sample": unmapped})
    captions = [c.value for c in at.caption]
    assert any("· Harbor step folder 2" in c for c in captions), captions
    assert not any("step n/a" in c for c in captions)
    mapped = s.query("step_folder == 1")["sample_id"].iloc[0]  # paired with trainer step 0
    at = open_page(monkeypatch, folder, TRAJECTORY, {"run": run_id, "sample": mapped})
    assert any("· step 0" in c.value for c in at.caption)
