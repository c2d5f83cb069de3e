"""Charts and tables that keep every series visible (issue 23): a gap is a gap on every step
chart, identical validation series stay apart, percent ticks that differ, eval blocks counted from
what the data shows, Compare across lengths and frameworks, and tables whose values come first.

Real files: the shipped prime-rl sample run (steps dropped from its metrics.jsonl) and the demo
runs of every kind; the numbers are checked against the files read with json.loads."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import rundash_core as rd
from rundash_core.charts.downsample import MAX_POINTS
from rundash_core.charts.figures import ChartOptions
from rundash_core.charts.series import X_STEP, X_TIME, SeriesIndex, series_index
from rundash_core.charts.view import band_chart, compare_chart, compare_indexes, panel_chart
from rundash_core.compare import group_band
from rundash_core.views import eval_pane as ep
from rundash_core.views import validation as val
from rundash_core.views import validation_charts as vc

from helpers import NEW_METRICS, NEW_RUN, copy_run, open_page
from helpers.pages import plotly_values


def _spec(fig) -> dict:
    """The figure as the browser gets it, with plotly's typed arrays ({dtype, bdata}) decoded to
    lists (NaN, plotly's gap, as None)."""
    return _decoded(json.loads(fig.to_json()))


def _decoded(v):
    if isinstance(v, dict) and "bdata" in v and "dtype" in v:
        arr = plotly_values(v).astype("float64")
        return [None if np.isnan(a) else float(a) for a in arr]
    if isinstance(v, dict):
        return {k: _decoded(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_decoded(x) for x in v]
    return v


def _line(spec: dict, name: str) -> dict:
    return next(t for t in spec["data"] if t.get("name") == name and t.get("showlegend", True) is not False)


def _runs(folder, kind: str, flavor: str | None = None):
    runs = rd.discover([folder])
    rows = runs[(runs["kind"] == kind) & ((runs["flavor"] == flavor) if flavor else True)]
    return {r: rd.open_run(p, run_id=r) for r, p in zip(rows["run_id"], rows["path"])}


def _tidy(steps, values, times=None) -> pd.DataFrame:
    n = len(steps)
    return pd.DataFrame({"step": pd.array(steps, dtype="Int64"),
                         "time": np.asarray(times if times is not None else np.arange(n, dtype=float) + 1e9),
                         "metric": pd.Categorical(["m"] * n), "value": np.asarray(values, dtype=float),
                         "producer": pd.Categorical(["trainer"] * n)})


# Gaps ------------------------------------------------------------------------------------------

def test_missing_steps_of_a_real_run_break_the_line(tmp_path):
    """Steps 4-6 cut out of the sample run's metrics.jsonl (steps 0-8): the line stops at 3 and
    starts again at 7."""
    run_dir = copy_run(NEW_RUN, tmp_path)
    path = run_dir / NEW_METRICS
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows if r.get("step") not in (4, 5, 6)))
    kept = [r for r in rows if r.get("step") is not None and r.get("step") not in (4, 5, 6)]
    steps_of: dict[str, set] = {}
    for r in kept:
        for k in r:
            steps_of.setdefault(k, set()).add(r["step"])
    key = next(k for k, v in steps_of.items() if k.startswith("train/") and len(v) == 6)
    want = sorted({r["step"] for r in kept if key in r})
    assert want == [0, 1, 2, 3, 7, 8]
    chart = panel_chart(series_index(rd.open_run(run_dir)), key, [key], X_STEP, ChartOptions())
    line = _line(_spec(chart.figure), key)
    x = line["x"]
    assert line["connectgaps"] is False
    gap = x.index(None)  # plotly JSON writes NaN as null
    assert x[gap - 1] == 3 and x[gap + 1] == 7 and line["y"][gap] is None
    assert [v for v in x if v is not None] == want  # every logged step still drawn
    assert chart.csv().decode().count("\n") == len(want) + 1  # the CSV holds the data, no break rows


def test_a_regular_series_has_no_break_and_a_lone_point_gets_a_dot():
    steady = panel_chart(SeriesIndex(_tidy(range(20), np.arange(20.0))), "m", ["m"], X_STEP, ChartOptions())
    assert None not in _line(_spec(steady.figure), "m")["x"]
    lone = panel_chart(SeriesIndex(_tidy([*range(10), 30, *range(50, 60)], np.arange(21.0))), "m", ["m"], X_STEP,
                       ChartOptions())
    line = _line(_spec(lone.figure), "m")
    assert line["x"].count(None) == 2  # before 30 and before 50
    at = line["x"].index(30)
    assert line["mode"] == "lines+markers" and line["marker"]["size"][at] > 0 and line["marker"]["size"][0] == 0


def test_a_downsampled_gap_keeps_its_band_and_its_spike():
    steps = [*range(0, 4000), *range(6000, 10000)]
    y = np.sin(np.arange(len(steps)) / 50.0)
    y[7000] = 40.0
    chart = panel_chart(SeriesIndex(_tidy(steps, y)), "m", ["m"], X_STEP, ChartOptions(smoothing="ema", amount=0.9))
    spec = _spec(chart.figure)
    line = _line(spec, "m")
    gap = line["x"].index(None)
    assert line["x"][gap - 1] < 4000 < 6000 <= line["x"][gap + 1]
    assert line["x"].count(None) == 1 and chart.points <= MAX_POINTS
    top = next(t for t in spec["data"] if t.get("name") == "m max")
    low = next(t for t in spec["data"] if t.get("fill") == "tonexty")
    assert max(top["y"]) == 40.0  # the spike survives in the band
    assert all(len(t["x"]) <= MAX_POINTS for t in spec["data"])  # breaks included
    # across the gap the band's top edge runs along its bottom edge: nothing is filled there
    cross = next(i for i in range(1, len(top["x"])) if top["x"][i - 1] < 4000 and top["x"][i] >= 6000)
    j = next(i for i in range(1, len(low["x"])) if low["x"][i - 1] < 4000 and low["x"][i] >= 6000)
    assert (top["x"][cross - 1], top["y"][cross - 1]) == (low["x"][j - 1], low["y"][j - 1])
    assert (top["x"][cross], top["y"][cross]) == (low["x"][j], low["y"][j])


def test_many_gaps_still_fit_the_point_budget():
    steps = [s for s in range(30_000) if (s // 7) % 2 == 0]  # 7 steps on, 7 off: ~2,100 gaps
    chart = panel_chart(SeriesIndex(_tidy(steps, np.cos(np.arange(len(steps)) / 9.0))), "m", ["m"], X_STEP,
                        ChartOptions())
    spec = _spec(chart.figure)
    assert chart.points <= MAX_POINTS and all(len(t["x"]) <= MAX_POINTS for t in spec["data"])
    assert _line(spec, "m")["x"].count(None) > 100  # the gaps still show, at a coarser resolution


def test_a_group_band_breaks_where_its_runs_skip_steps():
    """Two runs of one group logging steps 0-9 and 30-39: the mean line and its ± std band stop
    at 9 and start again at 30."""
    runs = {r: pd.DataFrame({"x": [*range(10), *range(30, 40)], "value": np.arange(20.0) + k})
            for k, r in enumerate(("a", "b"))}
    spec = _spec(band_chart("reward", group_band(runs, {"a": "g", "b": "g"}), "step", {}))
    mean = next(t for t in spec["data"] if t.get("showlegend", True) is not False)
    gap = mean["x"].index(None)
    assert mean["x"][gap - 1] == 9 and mean["x"][gap + 1] == 30 and mean["connectgaps"] is False
    top = next(t for t in spec["data"] if t.get("name", "").endswith(" max"))
    low = next(t for t in spec["data"] if t.get("fill") == "tonexty")
    i = top["x"].index(30)  # the top edge reaches 30 on the bottom edge's value first
    assert top["y"][i] == low["y"][low["x"].index(30)] < top["y"][i + 1]


def test_a_resume_pause_breaks_the_line_on_a_time_axis(demo_runs):
    """The demo's resumed prime-rl run (a crash at step 70, resumed from 60 after a pause): on
    relative wall time its reward line does not cross the pause."""
    folder, _runs_list = demo_runs
    runs = _runs(folder, "prime-rl")
    label, run = next((r, x) for r, x in runs.items() if x.resume_steps())
    indexes, _frames = compare_indexes({label: run})
    s = indexes[label].series("reward", x=X_TIME)[0]
    pause = int(np.argmax(np.diff(s.x))) + 1
    assert np.diff(s.x)[pause - 1] > 10 * np.median(np.diff(s.x))
    chart = compare_chart("reward", indexes, "reward", X_TIME, ChartOptions(), {})
    spec = _spec(chart.figure)
    line = _line(spec, label)
    scale = {"s": 1, "m": 60, "h": 3600, "d": 86400}[spec["layout"]["xaxis"]["ticksuffix"]]
    spans = [(line["x"][i + 1] - line["x"][i - 1]) * scale for i, v in enumerate(line["y"]) if v is None]
    assert line["connectgaps"] is False
    assert any(sp == pytest.approx(s.x[pause] - s.x[pause - 1]) for sp in spans)  # the pause is not drawn


# Validation ------------------------------------------------------------------------------------

def test_identical_validation_series_stay_visible(demo_runs):
    folder, _ = demo_runs
    run = next(r for r in _runs(folder, "prime-rl").values() if "reverse-text" in r.run_id)
    frame = run.validation()
    names = val.series_names(frame)
    by = {n: tuple(frame[names == n]["value"]) for n in dict.fromkeys(names)}
    twins = [a for a in by for b in by if a < b and by[a] == by[b]]
    assert twins  # avg@2 is all/reward/mean, value for value
    a = twins[0]
    b = next(n for n in by if n != a and by[n] == by[a])
    spec = _spec(vc.score_figure(frame, [a, b]))
    first, second = spec["data"]
    assert (first["line"]["dash"], first["marker"]["symbol"][0]) != (second["line"]["dash"], second["marker"]["symbol"][0])
    assert first["marker"]["size"][0] > second["marker"]["size"][0]  # the one below shows around the one on top


def test_a_skipped_validation_is_a_gap(demo_runs):
    folder, _ = demo_runs
    run = next(r for r in _runs(folder, "prime-rl").values() if "reverse-text" in r.run_id)
    frame = run.validation()
    steps = sorted(frame["step"].dropna().astype(int).unique())
    skipped = steps[2]
    cut = frame[frame["step"] != skipped]
    name = val.series_names(cut).iloc[0]
    trace = _spec(vc.score_figure(cut, [name]))["data"][0]
    at = trace["y"].index(None)
    assert trace["x"][at] == trace["x"][at + 1] == f"step {steps[3]}"  # the break sits before the next event
    assert trace["connectgaps"] is False and len([v for v in trace["y"] if v is not None]) == len(steps) - 1


def test_cot_ticks_have_the_digits_to_differ():
    values = [0.2461, 0.2462, 0.2463, 0.2464]
    fmt = vc.percent_tickformat(values)
    digits = int(fmt[1:-1])
    ticks = np.linspace(min(values), max(values), 6)
    labels = [f"{t:.{digits}%}" for t in ticks]
    assert len(set(labels)) == len(labels)  # "24.6%" six times before
    assert vc.percent_tickformat([0.1, 0.5, 0.9]) == ".0%" and vc.percent_tickformat([0.3, 0.3]) == ".1%"


# Eval pane -------------------------------------------------------------------------------------

def test_eval_blocks_count_what_the_data_shows(monkeypatch, demo_runs):
    """The demo's live prime-rl run plans 81 blocks to step 2000 and is at step 150: the blocks of
    the plotted eval steps are complete (their results are logged, only a few episodes were kept),
    the blocks after step 150 are not reached, and none of them is listed as 0/160."""
    folder, _ = demo_runs
    run = next(r for r in _runs(folder, "prime-rl").values() if len(r.eval_plan()) > 40)
    plan, last = run.eval_plan(), run.overview().last_step
    blocks = ep.progress(plan, run.samples(), run.validation(), last_step=last)
    v = run.validation()
    logged = set(zip(v["source"], v["step"].astype(int)))
    done = blocks[blocks["state"] == ep.COMPLETE]
    assert len(done) and set(zip(done["env"], done["step"])) == {k for k in zip(plan["env"], plan["step"]) if k in logged}
    assert (done["done"] == done["expected"]).all()
    ahead = blocks[blocks["state"] == ep.NOT_REACHED]
    assert (ahead["step"] > last).all() and len(done) + len(ahead) == len(plan)
    at = open_page(monkeypatch, folder, "pages/validation.py", {"run": run.run_id})
    bars = [p.proto.text for p in at.get("progress")]
    assert f"{len(done)} of {len(plan)} complete" in bars[0]
    assert len(bars) == 1 + len(done) and not any(": 0/" in b for b in bars[1:])
    assert any(f"{len(ahead)} planned block(s) after the run's last step" in c.value for c in at.caption)


# Compare ---------------------------------------------------------------------------------------

def test_fraction_of_run_and_log_x_put_short_and_long_runs_side_by_side(monkeypatch, demo_runs):
    folder, runs = demo_runs
    ids = list(runs["run_id"])
    at = open_page(monkeypatch, folder, "pages/compare.py",
                   {"run": ids[0], "runs": ids, "align": "fraction", "metrics": ["reward"]})
    spec = next(_decoded(json.loads(c.proto.spec)) for c in at.get("plotly_chart")
                if json.loads(c.proto.spec)["layout"]["title"]["text"] == "reward")
    lines = {t["name"]: t for t in spec["data"] if t.get("showlegend", True) is not False}
    assert len(lines) >= 5
    for name, t in lines.items():
        xs = [x for x in t["x"] if x is not None]
        assert 0.8 <= max(xs) <= 1.0 and min(xs) >= 0, name  # 12 steps or 300: the width of the chart
    assert spec["layout"]["xaxis"]["tickformat"] == ".0%"
    at = open_page(monkeypatch, folder, "pages/compare.py",
                   {"run": ids[0], "runs": ids, "logx": "true", "metrics": ["reward"]})
    spec = next(_decoded(json.loads(c.proto.spec)) for c in at.get("plotly_chart")
                if json.loads(c.proto.spec)["layout"]["title"]["text"] == "reward")
    assert spec["layout"]["xaxis"]["type"] == "log" and at.query_params["logx"] in ("true", ["true"])


def test_runs_without_timestamps_get_an_estimated_wall_time(monkeypatch, demo_runs):
    """verl and SWE-Lego console logs carry no per-row times: on relative wall time each step sits
    at the sum of the logged timing_s/step up to it, and the page says these runs are estimated."""
    folder, runs = demo_runs
    verl = runs[runs["kind"] == "verl"].iloc[0]
    lego = runs[runs["kind"] == "swe-lego-rl"].iloc[0]
    prime = runs[runs["kind"] == "prime-rl"].iloc[0]
    run = rd.open_run(verl["path"])
    m = run.metrics()
    dur = m[m["metric"] == "timing_s/step"].drop_duplicates("step", keep="last").sort_values("step")
    score = m[m["metric"] == "critic/score/mean"].drop_duplicates("step", keep="last").sort_values("step")
    last = int(score["step"].iloc[-1])
    want = float(dur[dur["step"] <= last]["value"].sum())
    at = open_page(monkeypatch, folder, "pages/compare.py",
                   {"run": prime["run_id"], "runs": [prime["run_id"], verl["run_id"], lego["run_id"]],
                    "align": "time", "metrics": ["reward"]})
    spec = next(_decoded(json.loads(c.proto.spec)) for c in at.get("plotly_chart")
                if json.loads(c.proto.spec)["layout"]["title"]["text"] == "reward")
    lines = {t["name"]: t for t in spec["data"] if t.get("showlegend", True) is not False}
    assert {prime["run_id"], verl["run_id"], lego["run_id"]} <= set(lines)  # no run dropped
    unit = spec["layout"]["xaxis"]["ticksuffix"]
    scale = {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
    assert max(x for x in lines[verl["run_id"]]["x"] if x is not None) * scale == pytest.approx(want, rel=1e-6)
    caption = next(c.value for c in at.caption if c.value.startswith("Estimated wall time"))
    assert verl["run_id"] in caption and lego["run_id"] in caption and prime["run_id"] not in caption


# Tables ----------------------------------------------------------------------------------------

def test_config_diff_keys_are_shown_whole(monkeypatch, demo_runs):
    folder, runs = demo_runs
    ids = list(runs[(runs["kind"] == "prime-rl") & (runs["flavor"] == "rl")]["run_id"])
    at = open_page(monkeypatch, folder, "pages/compare.py", {"run": ids[0], "runs": ids})
    table = next(d for d in at.dataframe if d.value.index.name == "key")
    longest = max(map(len, table.value.index))
    assert longest > 22  # "inference.model.max_mo…" was cut at about this many characters
    key = json.loads(table.proto.columns)["_index"]
    assert key["width"] >= longest * 7.5 and key["pinned"]


def test_trajectory_table_puts_reward_first_and_ids_last(monkeypatch, demo_runs):
    folder, runs = demo_runs
    row = runs[runs["kind"] == "swe-lego-rl"].iloc[0]
    run = rd.open_run(row["path"], run_id=row["run_id"])
    at = open_page(monkeypatch, folder, "pages/trajectory.py", {"run": row["run_id"]})
    table = next(d for d in at.dataframe if "sample_id" in d.value.columns and "reward" in d.value.columns)
    cols = list(table.value.columns)
    assert cols[:2] == ["reward", "advantage"] and cols[-3:] == ["task_id", "group_id", "sample_id"]
    assert set(table.value["sample_id"]) == set(run.samples()["sample_id"])  # whole ids, not cut
    config = json.loads(table.proto.columns)
    assert config["sample_id"]["width"] < 200 and "double-click" in config["sample_id"]["help"]


def test_health_table_shows_whole_messages_first(monkeypatch, demo_runs):
    folder, runs = demo_runs
    for run_id, path in zip(runs["run_id"], runs["path"]):
        found = rd.open_run(path, run_id=run_id).health()
        if not found:
            continue
        at = open_page(monkeypatch, folder, "pages/health.py", {"run": run_id})
        table = next(d for d in at.dataframe if "message" in d.value.columns)
        assert list(table.value["message"]) == [f.message for f in found]  # whole text delivered
        assert list(table.proto.column_order)[:2] == ["severity", "message"]
        assert list(table.proto.column_order)[-1] == "metric"
        width = json.loads(table.proto.columns)["message"]["width"]
        assert width >= max(len(f.message) for f in found) * 7.5
        return
    pytest.fail("no demo run with health findings")
