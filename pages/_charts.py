"""Chart widgets shared by Metrics and Compare: smoothing, x axis, toggles, one chart with its CSV.

Every control is bound to a URL query parameter (`bind="query-params"`), so a copied URL reproduces
the view. Charts come from `rundash_core.charts`; nothing here reads files or computes series.
"""
from __future__ import annotations

import re

import streamlit as st

from rundash_core.charts import figures, smoothing
from rundash_core.charts.figures import Chart, ChartOptions
from rundash_core.charts.series import X_STEP, X_TIME
from rundash_core.safety.user_regex import NOTHING, compile_user_pattern
from rundash_core.views.display_text import md_code, md_escape

X_LABELS = {X_STEP: "step", X_TIME: "relative wall time"}
PLOTLY_CONFIG = {"displaylogo": False, "modeBarButtonsToRemove": ["lasso2d", "select2d"]}


def url_widget(widget, label, *args, key: str, format_func=None, **kwargs):
    """A widget whose value lives in the URL under `key`, so a copied link reproduces the view.
    A choice shown through `format_func` keeps its short option value in the URL (`view=all`,
    `align=time`), not its display label: labels may change without breaking links."""
    if format_func is None:
        return widget(label, *args, key=key, bind="query-params", **kwargs)
    options = list(args[0] if args else kwargs["options"])
    if key not in st.session_state and (chosen := _option(st.query_params.get(key), options)) is not None:
        st.session_state[key] = chosen
        kwargs.pop("index", None), kwargs.pop("default", None)  # the URL's value wins
    value = widget(label, *args, key=key, format_func=format_func, **kwargs)
    if value is None:
        st.query_params.pop(key, None)
    else:
        st.query_params[key] = str(value)
    return value


def _option(raw: str | None, options: list):
    """The option whose text is `raw` (URL values are strings)."""
    return next((o for o in options if raw is not None and str(o) == raw), None)


def smoothing_controls(container=st) -> tuple[str, float]:
    """Method and amount; each method keeps its own amount (`?smooth=ema&ema=0.6`)."""
    c1, c2 = container.columns([1, 1.3])
    method = url_widget(c1.selectbox, "Smoothing", smoothing.METHODS, key="smooth",
                  format_func=lambda m: smoothing.LABELS.get(m, m),
                  help="Computed on the full-resolution series, before downsampling; the raw series "
                       "stays as a faint line (or min–max band) behind the smoothed one.")
    if method == "none":
        c2.slider("Amount", 0, 1, 0, disabled=True, key="smooth_off")
        return method, 0.0
    lo, hi, step = smoothing.RANGES[method]
    default = smoothing.DEFAULTS[method]
    kind = int if all(float(v).is_integer() for v in (lo, hi, step, default)) else float
    amount = url_widget(c2.slider, smoothing.AMOUNT_LABELS.get(method, method), kind(lo), kind(hi), kind(default), kind(step),
                  key=f"amount_{method}")
    return method, float(amount)


def chart_options(container=st) -> ChartOptions:
    """Smoothing plus the log-y and ignore-outliers toggles."""
    method, amount = smoothing_controls(container)
    c1, c2 = container.columns(2)
    log_y = url_widget(c1.toggle, "Log y", key="logy")
    clip = url_widget(c2.toggle, "Ignore outliers", key="clip",
                help="Clip the y range to the 1st–99th percentile of the data shown.")
    return ChartOptions(smoothing=method, amount=amount, log_y=log_y, clip_outliers=clip)


def x_axis(choices: list[str], container=st, key: str = "x", estimated: bool = False) -> str:
    """The X axis picker; `estimated`: the run's time is summed from step durations, and says so."""
    labels = {**X_LABELS, X_TIME: "estimated wall time"} if estimated else X_LABELS
    return url_widget(container.selectbox, "X axis", choices, key=key, format_func=lambda c: labels.get(c, c),
                help="Step, time since the run's first record, or any metric (e.g. tokens) logged at "
                     "the same steps. Time-keyed panels (inference) always plot against time.")


def regex_filter(label: str, key: str, placeholder: str = "", container=st):
    """A regex text box, case-insensitive, on RE2 (linear time: a user's pattern cannot stall the
    server); an invalid or refused pattern is reported and matches nothing."""
    text = url_widget(container.text_input, label, key=key, placeholder=placeholder)
    if not text:
        return None
    pattern, error = compile_user_pattern(text)
    if error:
        container.error(f"Invalid regex {md_code(text)}: {md_escape(error)}")
        return NOTHING
    return pattern


def live_paused(running: bool, container=st) -> bool:
    """The pause toggle of live refresh (shown only while the run is running)."""
    if not running:
        return True
    return url_widget(container.toggle, "Pause live refresh", key="paused",
                help="While the run is running, charts re-read the appended metrics every few seconds.")


def show_chart(chart: Chart, key: str) -> None:
    """A chart with its matched keys, its note (if any) and a CSV download of the full data."""
    if not chart.series:
        st.caption(f"**{md_escape(chart.title)}**: {md_escape(chart.note or 'no data')}")
        return
    st.plotly_chart(chart.figure, key=f"fig_{key}", config=PLOTLY_CONFIG, width="stretch")
    csv_button(chart.csv, chart.title, key=f"csv_{key}",
               help=f"All {sum(len(s) for s in chart.series):,} points, not downsampled.")


def csv_button(data, title: str, key: str, help: str) -> None:
    """A CSV download whose bytes are made only when clicked (`data` is a callable)."""
    st.download_button("CSV", data=data, file_name=f"{_slug(title)}.csv", mime="text/csv", key=key,
                       icon=":material/download:", type="tertiary", on_click="ignore", help=help)


def chart_grid(charts: list[Chart], key: str, columns: int = 2) -> None:
    cols = st.columns(columns)
    for i, chart in enumerate(charts):
        with cols[i % columns]:
            show_chart(chart, f"{key}_{i}")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80] or "chart"


def colors_for(labels: list[str]) -> dict[str, tuple[str, str]]:
    """One stable (colour, dash) per run: its position in the selection (past the palette's
    colours, the same colours dashed)."""
    return {label: figures.style_of(i) for i, label in enumerate(labels)}


CHAR_PX, CELL_PAD_PX = 7.5, 28  # st.dataframe's 14 px sans-serif, per character and per cell


def text_width(texts, *, least: int = 80, most: int = 1200) -> int:
    """A st.dataframe column width (px) that shows the longest of `texts` whole, within [least, most]:
    config keys and health messages are read in full, not cut at a fixed width."""
    longest = max((len(str(t)) for t in texts), default=0)
    return int(min(max(longest * CHAR_PX + CELL_PAD_PX, least), most))
