"""Turning run facts into display text: durations, folded lists, safe markdown."""
from __future__ import annotations

import re

import pandas as pd

from rundash_core.io.files import shown_path

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:@&])")  # @: no mailto autolink; &: no entity


def utf8_text(text: object) -> str:
    """`str(text)` that can be sent (UTF-8): a non-UTF-8 file name's bytes as `\\xff`, the one
    escape form (`io.files.shown_path`)."""
    return shown_path(str(text))


def md_escape(text: object) -> str:
    """Escape run-provided text for Streamlit markdown (labels, tooltips): no links, images,
    emphasis, e-mail autolink, entity or HTML can come from data (whole documents from a run or a model:
    `inert_markdown`)."""
    return _MD_SPECIAL.sub(r"\\\1", utf8_text(text))


def md_code(text: object) -> str:
    """Run-provided text as an inline code span: shown literally (markdown escapes would show as
    backslashes there), with a fence longer than any backtick run inside and no line breaks."""
    body = " ".join(utf8_text(text).splitlines()) or " "
    fence = "`" * (max((len(m) for m in re.findall(r"`+", body)), default=0) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def format_duration(seconds: float | None) -> str:
    """`3d 4h`, `2h 05m`, `4m 09s`, `12s`; n/a when unknown."""
    if is_absent(seconds) or seconds < 0:
        return "n/a"
    s = int(seconds)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}d {h}h"
    if h:
        return f"{h}h {m:02d}m"
    if m:
        return f"{m}m {s:02d}s"
    return f"{s}s"


def fold_list(items: list[str], keep: int = 2) -> str:
    """`a, b +3` for long lists (the full list goes in a tooltip); `n/a` for none (absent entries
    are left out)."""
    items = [str(i) for i in (items or []) if not is_absent(i)]
    if not items:
        return "n/a"
    shown = ", ".join(items[:keep])
    return shown if len(items) <= keep else f"{shown} +{len(items) - keep}"


def format_time(ts: pd.Timestamp | None) -> str:
    return "n/a" if is_absent(ts) else ts.strftime("%Y-%m-%d %H:%M UTC")


def step_headline(step: int | None, max_steps: int | None) -> str:
    if is_absent(step):
        return "no steps yet"
    return f"step {int(step)}" + (f" of {int(max_steps)}" if not is_absent(max_steps) else "")


# tables -----------------------------------------------------------------------------------------------
ABSENT = "—"  # an absent value in a table (st.dataframe(placeholder=ABSENT)), a legend or a label
ROW_HEIGHT = 35  # st.dataframe's default row height (px); the header row is as tall
TABLE_ROWS = 12  # tables up to this many rows are shown whole, longer ones scroll


def is_absent(value: object) -> bool:
    """None, NaN, NaT, pd.NA and blank text: what a page shows as "—" or "n/a", never as text."""
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # list-likes are values
        return False


def text_or(value: object, absent: str = ABSENT) -> str:
    """`value` as text, `absent` when it is absent (`is_absent`): never "None" or "nan"."""
    return absent if is_absent(value) else str(value)


def table_height(rows: int, max_rows: int = TABLE_ROWS, row_height: int = ROW_HEIGHT) -> int:
    """A st.dataframe height showing `rows` rows whole (header + rows + borders), so the last row is
    never cut; past `max_rows` the table scrolls at `max_rows` rows and a half (the half row says
    "there is more")."""
    if rows <= max_rows:
        return (max(rows, 1) + 1) * row_height + 3
    return int((max_rows + 1.5) * row_height) + 3


def shorten(text: object, width: int = 40) -> str:
    """`text` of at most `width` characters: a longer one keeps its start and its end around "…",
    so both a path's root and its run folder (or a run name's hash) stay readable."""
    text = str(text)
    if len(text) <= width:
        return text
    keep = max(width - 1, 2)
    head = keep // 2
    return f"{text[:head]}…{text[len(text) - (keep - head):]}"


def shortened(frame: pd.DataFrame, widths: dict[str, int]):
    """`frame` for st.dataframe with the long text of some columns shown `shorten`ed while the cells
    keep their whole value: a pandas Styler whose display values are short, so double-clicking a
    cell (Streamlit's cell overlay) shows it whole. Absent values show as `ABSENT`."""
    def short(width: int):
        return lambda v: shorten(v, width)

    return frame.style.format({c: short(w) for c, w in widths.items() if c in frame.columns}, na_rep=ABSENT)


def short_labels(names: list[str], width: int = 40) -> list[str]:
    """`shorten` of each name, except where two shortened names would read the same (then the full
    names): display values that still tell every row apart."""
    short = [shorten(n, width) for n in names]
    seen: dict[str, int] = {}
    for s in short:
        seen[s] = seen.get(s, 0) + 1
    return [s if seen[s] == 1 or s == str(n) else str(n) for s, n in zip(short, names)]


def abbrev_count(n: int | None) -> str:
    """A count as people read it at a glance: 987, 12.3k, 4.5M, 1.2B (n/a when unknown)."""
    if is_absent(n):
        return "n/a"
    n = int(n)
    if abs(n) < 1000:
        return str(n)
    for div, suffix in ((1_000, "k"), (1_000_000, "M"), (1_000_000_000, "B")):
        value = round(n / div, 1)
        if abs(value) < 1000 or suffix == "B":
            return f"{value:.1f}".removesuffix(".0") + suffix
    return str(n)
