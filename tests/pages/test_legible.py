"""Right and readable on real runs: charts that stay legible (one unit and one magnitude per
panel, legends below the axis, distinct line styles) and tables that say only what they know
(absent values as "—", every row of a small table shown, long names shortened), checked on the
real SWE-Lego-RL log in tests/data, the built-in demo and hand-made data of the same shapes."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import rundash_core as rd
from rundash_core.charts.figures import (
    AXIS_BELOW,
    DASHES,
    LEGEND_ROW,
    PALETTE,
    PLOT_HEIGHT,
    ChartOptions,
    build_chart,
    legend_names,
    legend_rows,
    style_of,
    unique_styles,
)
from rundash_core.charts.sections import Panel, sections_for, split_by_unit
from rundash_core.charts.series import X_STEP, Series, SeriesIndex, series_index
from rundash_core.charts.units import unit_of
from rundash_core.charts.view import (
    compare_chart,
    matched_keys,
    panel_chart,
    panel_charts,
    scale_label,
    section_charts,
    split_by_magnitude,
    typical_size,
)
from rundash_core.views.display_text import is_absent, short_labels, shorten, table_height, text_or

from helpers import DATA, open_page
from helpers.pages import figures

LEGO = DATA / "lego" / "logs" / "qwen3-8b-swegym-gspo-async-r1.log"  # a real async SWE-Lego-RL log
AGENT_LOOP = "timing_s/agent_loop"


@pytest.fixture(scope="module")
def lego():
    run = rd.open_run(LEGO)
    ov = run.overview()
    index = series_index(run)
    return run, ov, index, sections_for(run.kind, ov.flavor, index.metrics, train_envs=ov.train_envs,
                                        eval_envs=ov.eval_envs)


def tidy(rows) -> pd.DataFrame:
    """rows: (step, metric, value); one producer."""
    df = pd.DataFrame([(s, float(s), m, v, "trainer") for s, m, v in rows],
                      columns=["step", "time", "metric", "value", "producer"])
    return df.astype({"step": "Int64", "metric": "category", "producer": "category"})


def series(label: str, y, x=None) -> Series:
    y = np.asarray(y, dtype="float64")
    x = np.arange(len(y), dtype="float64") if x is None else np.asarray(x, dtype="float64")
    return Series(label, "trainer", label, x, y, X_STEP, x)


def lines(fig: dict) -> list[dict]:
    return [t for t in fig["data"] if t.get("showlegend", True) is not False]


def assert_legible(layout: dict, n_lines: int) -> None:
    """The plot area keeps its height; a legend sits in the bottom margin below the x axis's ticks and
    title, with room for as many rows as its entries need."""
    m = layout["margin"]
    assert layout["height"] - m["t"] - m["b"] == PLOT_HEIGHT
    if n_lines < 2:
        assert layout["showlegend"] is False
        return
    legend = layout["legend"]
    assert legend["orientation"] == "h" and legend["yref"] == "container"
    assert legend["y"] == 0 and legend["yanchor"] == "bottom"  # standing on the figure's bottom edge...
    assert legend["maxheight"] <= m["b"] - AXIS_BELOW  # ...it cannot reach the tick labels and the axis title


# units ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key, unit", [
    ("timing_s/gen", "seconds"), ("timing/update_critic", "seconds"), ("time/step", "seconds"),
    ("train/time(s)", "seconds"), ("rollouter/validate_time", "seconds"), ("fully_async/total_wait_time", "seconds"),
    (f"{AGENT_LOOP}/harbor_total/mean", "seconds"), (f"{AGENT_LOOP}/tool_calls/mean", "seconds"),
    ("train/agg/all/agent/timing/total/mean", "seconds"),
    (f"{AGENT_LOOP}/proxy_total_prompt_tokens/max", "tokens"), ("perf/total_num_tokens", "tokens"),
    ("response_length/mean", "tokens"), ("global_seqlen/minmax_diff", "tokens"), ("train/total_tokens(B)", "tokens"),
    (f"{AGENT_LOOP}/proxy_num_calls/mean", "count"), ("num_turns/max", "count"), ("tool_call_counts/mean", "count"),
    ("perf/mfu/actor", "ratio"), ("response_length/clip_ratio", "ratio"), ("actor/pg_clipfrac", "ratio"),
    ("inference/agg/kv_cache_usage_perc/mean", "ratio"), ("effective/x/is_truncated/mean", "ratio"),
    ("perf/throughput", "per second"), ("Tokens/Sec/GPU", "per second"),
    ("inference/agg/generation_tokens_total:rate/sum", "per second"),
    ("timing_per_token_ms/gen", "ms per token"), ("timing_per_token/gen", "s per token"),
    ("perf/max_memory_allocated_gb", "GB"), ("system/ckpt_disk_free_gib", "GiB"),
    ("rollout_corr/chi2_token", None), ("critic/score/mean", None), ("actor/entropy", None), ("optim/lr", None)])
def test_unit_of_reads_the_unit_from_the_key(key, unit):
    assert unit_of(key) == unit


def test_a_panel_of_seconds_and_token_counts_becomes_one_panel_per_unit(lego):
    """The real log's "other agent-loop" catch-all held stage seconds (~200) and proxy prompt
    token counts (~3M) on one axis; now each unit has its own panel, titled with it."""
    _run, _ov, index, secs = lego
    agent = {p.title: p for s in secs if s.title == "Agent loop" for p in s.panels}
    assert "other agent-loop" not in agent
    seconds, tokens = agent["other agent-loop · seconds"], agent["other agent-loop · tokens"]
    assert (seconds.unit, tokens.unit) == ("seconds", "tokens")
    assert {unit_of(k) for k in seconds.keys} == {"seconds"} and len(seconds.keys) >= 9
    assert set(tokens.keys) == {f"{AGENT_LOOP}/proxy_total_completion_tokens/max",
                                f"{AGENT_LOOP}/proxy_total_prompt_tokens/max"}
    sizes = [typical_size(s) for k in seconds.keys for s in index.series(k)]
    assert max(sizes) < 1e4 < min(typical_size(s) for k in tokens.keys for s in index.series(k))
    for s in secs:  # no panel of the run mixes two known units
        for p in s.panels:
            assert len({unit_of(k) for k in p.keys} - {None}) <= 1, (s.title, p.title)


def test_split_by_unit_keeps_unknown_units_apart_and_single_unit_panels_whole():
    whole = split_by_unit(Panel("stage time", ("timing_s/gen", "timing_s/adv")))
    assert whole == [Panel("stage time", ("timing_s/gen", "timing_s/adv"), "step", "seconds")]
    mixed = split_by_unit(Panel("other", ("x/brand_new", "a/wait_time", "a/num_calls", "b/idle_time", "y/new")))
    assert [(p.title, p.keys, p.unit) for p in mixed] == [
        ("other", ("x/brand_new", "y/new"), None), ("other · seconds", ("a/wait_time", "b/idle_time"), "seconds"),
        ("other · count", ("a/num_calls",), "count")]
    # one known unit and unknown keys: kept whole, with no unit claimed
    assert split_by_unit(Panel("p", ("a/total_partial_num", "a/max_partial_span"))) == [
        Panel("p", ("a/total_partial_num", "a/max_partial_span"), "step", None)]


# magnitudes -------------------------------------------------------------------------------------------
def test_series_differing_by_more_than_1e3_get_panels_of_their_own():
    merge, validate, other = series("merge", [0.7, 0.8, 0.9]), series("validate", [880, 935, 990]), series("gen", [300] * 3)
    zeros, empty = series("zeros", [0, 0, 0]), series("empty", [])
    groups = split_by_magnitude([merge, validate, zeros, other, empty])
    # from the smallest up, each group spans at most 1e3: 300 s joins 0.8 s, 935 s does not
    assert [[s.label for s in g] for g in groups] == [["merge", "zeros", "gen", "empty"], ["validate"]]
    assert split_by_magnitude([merge, other])[0] == [merge, other]  # within 1e3: one panel
    signed = [series("advantages/max", [3.0, 2.5]), series("advantages/mean", [1e-9, -2e-9])]
    assert len(split_by_magnitude(signed)) == 1  # a signed panel keeps its shared zero
    chained = [series(f"s{i}", [v]) for i, v in enumerate([1, 500, 250_000, 1e8])]
    for g in split_by_magnitude(chained):  # no group spans more than 1e3
        sizes = [typical_size(s) for s in g]
        assert max(sizes) <= 1e3 * min(sizes)
    assert [scale_label(v) for v in (935, 0.76, 2.8e6, 0.236, 3.1e-5, 12)] == ["~1k", "~1", "~1M", "~0.1", "~1e-5", "~10"]


def test_validation_time_of_a_real_async_run_is_split_by_magnitude(lego):
    """timing_s/merge_val (~0.8 s) and rollouter/validate_time (~900 s) used to share one axis,
    the merge a flat line at zero."""
    _run, _ov, index, secs = lego
    panel = next(p for s in secs for p in s.panels if p.title == "validation time")
    assert panel.unit == "seconds" and {"timing_s/merge_val", "rollouter/validate_time"} <= set(panel.keys)
    charts = panel_charts(index, panel, X_STEP, ChartOptions())
    assert [c.title for c in charts] == ["validation time · ~1", "validation time · ~1k"]
    assert [[s.metric for s in c.series] for c in charts] == [["timing_s/merge_val"], ["rollouter/validate_time"]]
    for c in charts:
        assert c.figure.layout.yaxis.title.text == "seconds"
    validation = next(s for s in secs if s.title == "Validation")
    titles = [c.title for c in section_charts(index, validation, X_STEP, ChartOptions())]
    assert "validation time · ~1k" in titles and "validation time" not in titles


# legends ---------------------------------------------------------------------------------------------
def test_a_13_series_panel_keeps_its_height_and_its_legend_below_the_axis(lego):
    """The real log's 13-key agent-loop catch-all, drawn as one panel (as it was): the plot keeps
    its height instead of shrinking to ~50 px, the legend grows the figure below the x axis."""
    _run, _ov, index, _secs = lego
    keys = sorted(k for k in index.metrics if k.startswith(f"{AGENT_LOOP}/harbor_") and k.endswith("/min"))
    keys += sorted(k for k in index.metrics if "proxy_tool_gap" in k or "proxy_total" in k and k.endswith("/max"))
    assert len(keys) >= 13
    big = panel_chart(index, "other agent-loop", keys, X_STEP, ChartOptions())
    small = panel_chart(index, "two", keys[:2], X_STEP, ChartOptions())
    big_layout, small_layout = big.figure.to_plotly_json()["layout"], small.figure.to_plotly_json()["layout"]
    assert_legible(big_layout, len(big.series))
    assert_legible(small_layout, len(small.series))
    assert big_layout["height"] > small_layout["height"] + 4 * LEGEND_ROW  # the legend's rows add height
    names = [t.name for t in big.figure.data if t.showlegend is not False]
    assert len(set(names)) == len(names) == len(keys)
    assert not any(n.startswith(AGENT_LOOP) for n in names)  # the shared key path is said once, in the subtitle
    assert [t.meta for t in big.figure.data if t.showlegend is not False] == keys  # full keys kept
    assert big.figure.layout.title.subtitle.text.startswith(f"{AGENT_LOOP}/…: ")
    rows = legend_rows(names)
    assert big_layout["legend"]["maxheight"] >= rows * 19 + 10  # room for plotly's rows (19 px) and padding


def test_short_legends_keep_the_full_labels():
    assert legend_names(["time/step (orch)", "time/step (trainer)"]) == ["time/step (orch)", "time/step (trainer)"]
    long = [f"timing_s/agent_loop/harbor_{s}/mean" for s in ("agent_execute", "agent_setup", "env_setup", "total")]
    assert legend_names(long) == ["harbor_agent_execute", "harbor_agent_setup", "harbor_env_setup", "harbor_total"]
    assert matched_keys(long) == "timing_s/agent_loop/…: harbor_agent_execute/mean, harbor_agent_setup/mean, " \
                                 "harbor_env_setup/mean +1"
    assert legend_rows(["x" * 10] * 2) == 1 and legend_rows(["x" * 60] * 3) == 3


def test_no_two_series_of_a_panel_share_a_colour_and_a_line_style():
    many = [series(f"key/{i:02d}", np.arange(5.0) + i) for i in range(30)]
    chart = build_chart("30 series", many)
    styles = [(t.line.color, t.line.dash) for t in chart.figure.data if t.showlegend is not False]
    assert len(styles) == 30 and len(set(styles)) == 30
    assert styles[:len(PALETTE)] == [(c, "solid") for c in PALETTE]  # the palette first, solid
    assert styles[len(PALETTE)] == (PALETTE[0], DASHES[1])  # then the palette again, dashed
    # Compare: 14 runs (more than the palette) and a run logging the metric from two producers
    ix = {f"run-{i:02d}": SeriesIndex(tidy([(0, "reward", 0.1 * i), (1, "reward", 0.2 * i)])) for i in range(14)}
    ix["run-00"] = SeriesIndex(pd.concat([tidy([(0, "reward", 0.5), (1, "reward", 0.6)]),
                                          tidy([(0, "reward", 0.7)]).assign(producer="orch")]).astype(
        {"producer": "category"}))
    colors = {label: style_of(i) for i, label in enumerate(ix)}
    chart = compare_chart("reward", ix, "reward", X_STEP, ChartOptions(), colors)
    got = {t.name: (t.line.color, t.line.dash) for t in chart.figure.data if t.showlegend is not False}
    assert len(set(got.values())) == len(got) == 15
    assert got["run-13"] == style_of(13) == (PALETTE[1], DASHES[1])
    assert got["run-00 · orch"][0] == got["run-00 · trainer"][0] == PALETTE[0]  # one colour per run, two dashes
    assert unique_styles([("#111111", "solid")] * 3) == [("#111111", d) for d in DASHES[:3]]


def test_metrics_page_sections_are_legible_on_the_demo_swe_lego_run(monkeypatch, demo_runs):
    folder, runs = demo_runs
    run_id = runs[runs["kind"] == "swe-lego-rl"].iloc[0]["run_id"]
    at = open_page(monkeypatch, folder, "pages/metrics.py",
                   {"run": run_id, "s_reward-score": "false", "s_agent-loop": "true", "s_validation": "true"})
    figs = figures(at)
    titles = [f["layout"]["title"]["text"] for f in figs]
    assert {"other agent-loop · seconds", "other agent-loop · tokens", "validation time · ~1k"} <= set(titles)
    assert "other agent-loop" not in titles and "validation time" not in titles
    for fig in figs:
        shown = lines(fig)
        assert_legible(fig["layout"], len(shown))
        assert len({(t["line"]["color"], t["line"]["dash"]) for t in shown}) == len(shown), fig["layout"]["title"]
        units = {unit_of(t["meta"].split(" (")[0]) for t in shown} - {None}
        assert len(units) <= 1, fig["layout"]["title"]
        y_title = fig["layout"]["yaxis"].get("title", {}).get("text")
        assert y_title is None or {y_title} == units


# tables ----------------------------------------------------------------------------------------------
def test_table_height_shows_every_row_of_a_small_table():
    assert table_height(1) == 2 * 35 + 3 and table_height(7) == 8 * 35 + 3 and table_height(12) == 13 * 35 + 3
    assert table_height(0) == table_height(1)
    assert table_height(500, max_rows=10) == int(11.5 * 35) + 3  # long: scrolls, half a row says so


def test_shortened_names_keep_both_ends_and_stay_distinct():
    path = "/shared/team/outputs/prime-rl/math-python+wiki-search--qwen3-4b--0b45f1ec"
    short = shorten(path, 40)
    assert len(short) == 40 and short.startswith("/shared/team/") and short.endswith("qwen3-4b--0b45f1ec")
    assert shorten("short", 40) == "short"
    names = ["reverse-text--qwen3-0.6b--a7be3ee1", "reverse-text--qwen3-0.6b--3f9a1c2e", "abcdefghij-XX-klmnopqrst",
             "abcdefghij-YY-klmnopqrst"]
    assert short_labels(names, 20) == ["reverse-t…--a7be3ee1", "reverse-t…--3f9a1c2e", "abcdefghij-XX-klmnopqrst",
                                       "abcdefghij-YY-klmnopqrst"]  # the last two would read alike: kept whole


def test_absent_values_are_never_text():
    for v in (None, float("nan"), pd.NA, pd.NaT, np.nan, "", "  "):
        assert is_absent(v) and text_or(v) == "—" and text_or(v, "n/a") == "n/a"
    for v in (0, 0.0, "None?", "x", [1], False):
        assert not is_absent(v)


def displayed(styler) -> pd.DataFrame:
    """What a Styler handed to st.dataframe displays, cell by cell (its display values)."""
    lines = styler.to_string(delimiter="\t").splitlines()
    header, rows = lines[0].split("\t")[1:], [line.split("\t")[1:] for line in lines[1:]]
    return pd.DataFrame(rows, columns=header)


def test_overview_shows_absent_values_as_dashes_and_every_run(monkeypatch, demo_runs, tables):
    """The Relax run has no model and no step limit: the card says n/a and the runs table shows —,
    never "None" or "nan"; the table is as tall as its rows; long paths keep both ends."""
    folder, runs = demo_runs
    relax = runs[runs["kind"] == "relax"].iloc[0]
    assert is_absent(relax["model"]) and is_absent(relax["max_steps"])
    at = open_page(monkeypatch, folder, "pages/overview.py", {"run": relax["run_id"]})
    texts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    assert "**n/a**" in texts
    assert not any(w in t for t in texts for w in ("None", "nan", "NaN", "<NA>"))
    data, kw = next((d, kw) for d, kw in tables if kw.get("key") == "runs_table")
    assert kw["placeholder"] == "—" and kw["height"] == table_height(len(runs))
    shown = at.dataframe[0].value
    assert shown["run_id"].tolist() == runs["run_id"].tolist()  # names whole: they select the run
    assert pd.isna(shown.set_index("run_id").loc[relax["run_id"], "model"])  # absent, not the text "None"
    assert not shown.astype(object).isin(["None", "nan", "NaN", "<NA>"]).any().any()
    assert shown["path"].tolist() == runs["path"].tolist()  # cells hold the whole path (double-click shows it)
    for full, display in zip(runs["path"], displayed(data)["path"]):  # ... and display it shortened
        assert len(display) <= 48 and display[-10:] == full[-10:] and display[:10] == full[:10]
    assert displayed(data).loc[shown["run_id"] == relax["run_id"], "model"].tolist() == ["—"]
    assert any(c.value == f"`{relax['path']}`" for c in at.caption)  # the card has the whole path
