"""Series cut from tidy frames and the figures built from them (rundash_core.charts.series/figures/view)."""
from __future__ import annotations

import io
import os

import numpy as np
import pandas as pd
import plotly.io as pio
import pytest

import rundash_core as rd
from rundash_core.charts.figures import ChartOptions, plotly_text
from rundash_core.charts.keytree import key_tree
from rundash_core.charts.series import X_STEP, X_TIME, SeriesIndex, series_index
from rundash_core.charts.view import key_groups, metric_charts, panel_chart, x_choices


def tidy(rows) -> pd.DataFrame:
    """rows: (step or None, time, metric, value, producer)."""
    df = pd.DataFrame(rows, columns=["step", "time", "metric", "value", "producer"])
    df["step"] = df["step"].astype("Int64")
    df["metric"] = df["metric"].astype("category")
    df["producer"] = df["producer"].astype("category")
    return df


@pytest.fixture
def small() -> pd.DataFrame:
    return tidy([
        (1, 100.0, "time/step", 2.0, "trainer"), (1, 101.0, "time/step", 3.0, "orch"),
        (2, 130.0, "time/step", 4.0, "trainer"), (2, 131.0, "time/step", 5.0, "orch"),
        (3, 160.0, "time/step", 6.0, "trainer"),
        (1, 100.0, "progress/num_tokens", 1000.0, "trainer"), (2, 130.0, "progress/num_tokens", 2500.0, "trainer"),
        (3, 160.0, "progress/num_tokens", 4000.0, "trainer"),
        (None, 115.0, "inference/agg/kv/mean", 0.5, "orch"), (None, 145.0, "inference/agg/kv/mean", 0.7, "orch"),
        (2, 131.0, "reward/mean", 0.25, "orch"), (1, 101.0, "reward/mean", 0.125, "orch"),
    ])


def test_two_producers_of_one_key_are_two_labelled_series(small):
    ix = SeriesIndex(small)
    s = {x.label: x for x in ix.series("time/step")}
    assert set(s) == {"time/step (trainer)", "time/step (orch)"}
    assert s["time/step (trainer)"].x.tolist() == [1, 2, 3] and s["time/step (trainer)"].y.tolist() == [2, 4, 6]
    assert s["time/step (orch)"].y.tolist() == [3, 5]
    # one producer: the label is the key itself; points come sorted by step whatever the row order
    (r,) = ix.series("reward/mean")
    assert r.label == "reward/mean" and r.x.tolist() == [1, 2] and r.y.tolist() == [0.125, 0.25]


def test_time_keyed_rows_plot_against_relative_time(small):
    ix = SeriesIndex(small)
    (kv,) = ix.series("inference/agg/kv/mean", x=X_STEP)  # no step: falls back to time
    assert kv.x_kind == X_TIME
    assert kv.x.tolist() == [15.0, 45.0]  # seconds since the run's first record (t=100)
    (r,) = ix.series("reward/mean", x=X_TIME)
    assert r.x.tolist() == [1.0, 31.0]


def test_x_axis_can_be_another_metric_at_the_same_steps(small):
    ix = SeriesIndex(small)
    s = {x.label: x for x in ix.series("time/step", x="progress/num_tokens")}
    assert s["time/step (trainer)"].x.tolist() == [1000, 2500, 4000]
    # the orchestrator does not log tokens: its steps are looked up in the trainer's
    assert s["time/step (orch)"].x.tolist() == [1000, 2500] and s["time/step (orch)"].y.tolist() == [3, 5]
    assert x_choices(ix)[:2] == [X_STEP, X_TIME] and "progress/num_tokens" in x_choices(ix)


def test_verl_runs_without_timestamps_offer_no_time_axis():
    df = tidy([(1, np.nan, "critic/score/mean", 0.1, "trainer"), (2, np.nan, "critic/score/mean", 0.2, "trainer")])
    ix = SeriesIndex(df)
    assert X_TIME not in x_choices(ix)
    chart = panel_chart(ix, "reward", ["critic/score/mean"], X_TIME, ChartOptions())
    assert not chart.series and "timestamps" in chart.note


def test_a_long_series_is_downsampled_but_keeps_its_spike_and_full_csv():
    n = 100_000
    y = np.sin(np.arange(n) / 500.0)
    y[77_777] = 50.0
    df = tidy([(i, 1000.0 + i, "loss", v, "trainer") for i, v in enumerate(y)])
    chart = panel_chart(SeriesIndex(df), "loss", ["loss"], X_STEP, ChartOptions(smoothing="ema", amount=0.9))
    fig = chart.figure
    assert chart.points <= 1500 and all(len(t.x) <= 1500 for t in fig.data)
    assert len(pio.to_json(fig, validate=False)) < 200_000  # what the browser gets stays small
    band_max = [t for t in fig.data if t.name.endswith(" max")][0]
    assert max(band_max.y) == 50.0  # the spike survives downsampling in the band
    line = [t for t in fig.data if t.name == "loss"][0]
    assert max(line.y) < 50.0  # the smoothed line does not carry it at full height
    csv = pd.read_csv(io.BytesIO(chart.csv()))
    assert len(csv) == n and csv["value"].max() == 50.0 and csv["step"].tolist()[:3] == [0, 1, 2]


def test_short_series_keep_the_raw_line_behind_the_smoothed_one(small):
    chart = panel_chart(SeriesIndex(small), "t", ["time/step"], X_STEP, ChartOptions(smoothing="running_avg", amount=2))
    by_name = {t.name: t for t in chart.figure.data}
    assert set(by_name) == {"time/step (trainer) (raw)", "time/step (trainer)", "time/step (orch) (raw)",
                            "time/step (orch)"}
    assert list(by_name["time/step (trainer)"].y) == [2.0, 3.0, 5.0]  # trailing mean over 2 points
    assert list(by_name["time/step (trainer) (raw)"].y) == [2.0, 4.0, 6.0]
    assert by_name["time/step (trainer) (raw)"].line.color.startswith("rgba(")  # faint


def test_log_y_and_outlier_clip_set_the_axis():
    y = np.r_[np.linspace(1, 2, 200), 1e6]
    df = tidy([(i, float(i), "m", v, "trainer") for i, v in enumerate(y)])
    ix = SeriesIndex(df)
    clipped = panel_chart(ix, "m", ["m"], X_STEP, ChartOptions(clip_outliers=True)).figure.layout.yaxis
    assert clipped.range[1] < 10  # the 1e6 outlier is outside the range
    logged = panel_chart(ix, "m", ["m"], X_STEP, ChartOptions(log_y=True, clip_outliers=True)).figure.layout.yaxis
    assert logged.type == "log" and logged.range[1] < 1.0  # log10 units


def test_a_few_steps_are_ticked_at_whole_steps_only():
    """Three steps: plotly's own ticks (0.5, 1.5, …) would be labelled 0, 1, 1, 2 on a whole-number
    axis; a long run keeps plotly's spacing."""
    few = SeriesIndex(tidy([(i, float(i), "m", 0.1 * i, "trainer") for i in (1, 2, 3)]))
    assert panel_chart(few, "m", ["m"], X_STEP, ChartOptions()).figure.layout.xaxis.dtick == 1
    many = SeriesIndex(tidy([(i, float(i), "m", 0.1 * i, "trainer") for i in range(500)]))
    assert panel_chart(many, "m", ["m"], X_STEP, ChartOptions()).figure.layout.xaxis.dtick is None


def test_titles_and_labels_from_data_are_not_markup():
    assert plotly_text("<a href='x'>k</a>") == "&lt;a href='x'&gt;k&lt;/a&gt;"
    df = tidy([(1, 1.0, "<b>evil</b>", 1.0, "trainer"), (2, 2.0, "<b>evil</b>", 2.0, "trainer")])
    chart = panel_chart(SeriesIndex(df), "<b>evil</b>", ["<b>evil</b>"], X_STEP, ChartOptions())
    assert "<b>" not in chart.figure.layout.title.text and "<b>" not in chart.figure.data[-1].name


def test_series_index_follows_the_store_version(tmp_path):
    """The index is keyed by the run's store version: an append rebuilds it, a store made again
    (cache evicted) never serves an index of the old one."""
    from rundash_core import cache

    from helpers import NEW_METRICS, NEW_RUN, copy_run

    run = rd.open_run(copy_run(NEW_RUN, tmp_path))
    a = series_index(run)
    assert series_index(run) is a
    with open(run.path + "/" + NEW_METRICS, "a") as fh:
        fh.write('{"step": 99, "time": 1.9e9, "reward/mean": 0.75, "producer": "orch"}\n')
    b = series_index(run)
    assert b is not a and b.series("reward/mean")[0].y[-1] == 0.75
    version = run.metrics_version()
    cache.shared.discard(("metrics", os.path.realpath(run.path + "/" + NEW_METRICS)))
    assert run.metrics_version() != version  # a new store, a new stamp (no memory addresses)


def test_all_metrics_groups_cover_every_key_of_a_demo_run(tmp_path):
    from rundash_core import demo

    folder = demo.ensure_demo(tmp_path / "demo")
    runs = rd.discover([folder])
    path = runs[runs["kind"] == "prime-rl"]["path"].iloc[0]
    run = rd.open_run(path)
    ix = series_index(run)
    groups = key_groups(key_tree(ix.metrics, max_depth=3))
    assert sorted(k for _, keys in groups for k in keys) == sorted(ix.metrics)
    charts = metric_charts(ix, [k for _, keys in groups for k in keys][:20], X_STEP, ChartOptions())
    assert all(c.series for c in charts)
    expected = run.metrics()
    first = charts[0].series[0]
    rows = expected[(expected["metric"] == first.metric) & (expected["producer"] == first.producer)]
    assert len(first) == len(rows)


def test_a_constant_series_gets_a_range_around_its_value():
    df = tidy([(i, float(i), "actor/lr", 1e-6, "trainer") for i in range(5)])
    yaxis = panel_chart(SeriesIndex(df), "lr", ["actor/lr"], X_STEP, ChartOptions()).figure.layout.yaxis
    assert yaxis.range[0] < 1e-6 < yaxis.range[1] and yaxis.range[1] - yaxis.range[0] < 1e-6
