"""Turning run facts into display text: durations, folded lists, safe markdown."""
from __future__ import annotations

import re

import pandas as pd

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


def md_escape(text: object) -> str:
    """Escape run-provided text for Streamlit markdown (labels, tooltips): no links, images,
    emphasis or HTML can come from data."""
    return _MD_SPECIAL.sub(r"\\\1", str(text))


def md_code(text: object) -> str:
    """Run-provided text as an inline code span: shown literally (markdown escapes would show as
    backslashes there), with a fence longer than any backtick run inside and no line breaks."""
    body = " ".join(str(text).splitlines()) or " "
    fence = "`" * (max((len(m) for m in re.findall(r"`+", body)), default=0) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def format_duration(seconds: float | None) -> str:
    """`3d 4h`, `2h 05m`, `4m 09s`, `12s`; n/a when unknown."""
    if seconds is None or seconds != seconds or seconds < 0:
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
    """`a, b +3` for long lists (the full list goes in a tooltip); `n/a` for none."""
    if not items:
        return "n/a"
    shown = ", ".join(items[:keep])
    return shown if len(items) <= keep else f"{shown} +{len(items) - keep}"


def format_time(ts: pd.Timestamp | None) -> str:
    return "n/a" if ts is None or pd.isna(ts) else ts.strftime("%Y-%m-%d %H:%M UTC")


def step_headline(step: int | None, max_steps: int | None) -> str:
    if step is None:
        return "no steps yet"
    return f"step {step}" + (f" of {max_steps}" if max_steps is not None else "")
