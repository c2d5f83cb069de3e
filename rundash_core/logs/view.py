"""What the Logs page shows, computed without Streamlit: entries of the picker, default files,
the Ray actors in view, and lines as HTML with their ANSI colours.

Every character of a log reaches the page through `html.escape`; colours come only from the SGR
codes this module knows, as fixed inline styles (no class or attribute text from the log).
"""
from __future__ import annotations

import html
import re
from functools import lru_cache
from typing import NamedTuple

import pandas as pd

from rundash_core.logs import line as logtext
from rundash_core.views.display_text import abbrev_count

ENV_GROUP = "envs"
_GROUP_ORDER = ("trainer", "orchestrator", "inference", "router", "evals", ENV_GROUP, "console")
HIDDEN_BY_DEFAULT = ("router", "launcher")  # the router's lines are in the inference engine's log too
LEVEL_CHOICES = ("DEBUG", "INFO", "WARNING", "ERROR")
PANE_HEIGHT = 560
ESTIMATED_MARK = "~"
ESTIMATED_LEGEND = ("~ before a time: the line has no time of its own; its time (and place among the other "
                    "files' lines) is estimated from the lines around it")
_SGR = re.compile(r"\x1b\[([0-9;]*)m")
_COLOURS = {0: "#6e7781", 1: "#d1242f", 2: "#1a7f37", 3: "#9a6700", 4: "#0969da", 5: "#8250df", 6: "#1b7c83",
            7: "#8c959f"}
_BRIGHT = {0: "#8c959f", 1: "#e5534b", 2: "#2da44e", 3: "#bf8700", 4: "#218bff", 5: "#a475f9", 6: "#3192aa",
           7: "#afb8c1"}
_LEVEL_COLOURS = {"ERROR": "#d1242f", "CRITICAL": "#d1242f", "WARNING": "#9a6700", "SUCCESS": "#1a7f37",
                  "DEBUG": "#0969da", "TRACE": "#1b7c83"}


# Entries of the picker ------------------------------------------------------------------------------
def group_of(component: str) -> str:
    """The picker entry of a component: every `env:<name>` is one "envs" entry."""
    return ENV_GROUP if component.startswith("env:") else component


def attempts(listing: pd.DataFrame) -> list[int]:
    return sorted({int(a) for a in listing["attempt"].dropna()})


def for_attempt(listing: pd.DataFrame, attempt: int | None) -> pd.DataFrame:
    """The files of one attempt, plus those that belong to none (launcher logs, a legacy layout)."""
    if attempt is None:
        return listing
    keep = listing["attempt"].isna() | (listing["attempt"] == attempt)
    return listing[keep.fillna(False).astype(bool)].reset_index(drop=True)


def groups(listing: pd.DataFrame) -> dict[str, list[str]]:
    """Picker entry → its files (master log first), in the usual order."""
    out: dict[str, list[str]] = {}
    for component, path in zip(listing["component"], listing["path"]):
        out.setdefault(group_of(str(component)), []).append(str(path))
    rank = {g: i for i, g in enumerate(_GROUP_ORDER)}
    return dict(sorted(out.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))


def default_groups(entries: list[str]) -> list[str]:
    """What the merged pane shows first: every entry but the router and per-rank logs (their
    lines are in the masters too) and launcher logs."""
    chosen = [g for g in entries if g not in HIDDEN_BY_DEFAULT and not g.startswith("rank:")]
    return chosen or entries[:1]


def merged_paths(entries: dict[str, list[str]], chosen: list[str]) -> list[str]:
    """The files the merged pane reads: each entry's master log; all of the env logs."""
    out = []
    for g in chosen:
        files = entries.get(g, [])
        out += files if g == ENV_GROUP else files[:1]
    return out


def file_label(path: str) -> str:
    """A file as the split pane's picker names it: its last two path parts."""
    from rundash_core.logs.reading import ROUTER_SUFFIX

    parts = path.removesuffix(ROUTER_SUFFIX).replace("\\", "/").split("/")
    label = "/".join(parts[-2:])
    return label + " (router lines)" if path.endswith(ROUTER_SUFFIX) else label


def actors_in(lines: pd.DataFrame) -> list[str]:
    """The Ray actors whose lines are in view (`TaskRunner`, `WorkerDict`, `raylet`, ...)."""
    found = {logtext.ray_actor(logtext.strip_ansi(t))[0] for t in lines["text"]}
    return sorted(a for a in found if a)


def count_label(n: int, *, of: int | None = None) -> str:
    return f"{abbrev_count(n)} lines" + (f" of {abbrev_count(of)}" if of is not None and of != n else "")


# Lines as HTML --------------------------------------------------------------------------------------
class _Style(NamedTuple):
    """The SGR state of a run of text (immutable: a transition is looked up, not recomputed)."""

    fg: str | None = None
    bg: str | None = None
    bold: bool = False
    dim: bool = False
    italic: bool = False
    underline: bool = False


_PLAIN = _Style()


@lru_cache(maxsize=1024)
def _css(style: _Style) -> str:
    parts = []
    if style.fg:
        parts.append(f"color:{style.fg}")
    if style.bg:
        parts.append(f"background:{style.bg}")
    if style.bold:
        parts.append("font-weight:600")
    if style.dim:
        parts.append("opacity:.65")
    if style.italic:
        parts.append("font-style:italic")
    if style.underline:
        parts.append("text-decoration:underline")
    return ";".join(parts)


def ansi_segments(text: str) -> list[tuple[str, str]]:
    """(text, css) runs of a line with its SGR colour codes applied; other escapes dropped."""
    if "\x1b" not in text:
        return [(text, "")] if text else []
    out, style, pos = [], _PLAIN, 0
    for m in _SGR.finditer(text):
        if m.start() > pos:
            out.append((logtext.ANSI.sub("", text[pos:m.start()]), _css(style)))
        style = _after_sgr(style, m.group(1))
        pos = m.end()
    if pos < len(text):
        out.append((logtext.ANSI.sub("", text[pos:]), _css(style)))
    return [(t, css) for t, css in out if t]


@lru_cache(maxsize=4096)
def _after_sgr(style: _Style, params: str) -> _Style:
    """The style after one SGR sequence (a log uses a handful: each transition is computed once)."""
    codes = [int(c) if c.isdigit() else 0 for c in params.split(";")] if params else [0]
    i = 0
    while i < len(codes):
        c = codes[i]
        if c == 0:
            style = _PLAIN
        elif c in (1, 2, 3, 4):
            style = style._replace(**{{1: "bold", 2: "dim", 3: "italic", 4: "underline"}[c]: True})
        elif c == 22:
            style = style._replace(bold=False, dim=False)
        elif c in (23, 24):
            style = style._replace(**{"italic" if c == 23 else "underline": False})
        elif 30 <= c <= 37 or 90 <= c <= 97:
            style = style._replace(fg=(_COLOURS if c < 90 else _BRIGHT)[c % 10])
        elif 40 <= c <= 47 or 100 <= c <= 107:
            style = style._replace(bg=(_COLOURS if c < 100 else _BRIGHT)[c % 10])
        elif c in (39, 49):
            style = style._replace(**{"fg" if c == 39 else "bg": None})
        elif c in (38, 48) and i + 1 < len(codes):  # 256-colour and true-colour: skip their arguments
            i += 2 if codes[i + 1] == 5 else 4
        i += 1
    return style


def line_html(text: str) -> str:
    """One line as escaped HTML spans (its secrets were hidden by the gate, `rundash_core.safety.gate`:
    `run.read_log` redacts each file's lines as one block)."""
    spans = []
    for part, css in ansi_segments(text):
        body = html.escape(part, quote=True)
        spans.append(f'<span style="{css}">{body}</span>' if css else body)
    return "".join(spans)


def time_labels(lines: pd.DataFrame) -> list[str]:
    """Each line's time as every log view shows it (`MM-DD HH:MM:SS` UTC, "" when unknown), with
    ESTIMATED_MARK before an estimated one (`frames.LOG_LINES.estimated`)."""
    stamps = lines["time"].dt.strftime("%m-%d %H:%M:%S").fillna("")
    marks = lines["estimated"].fillna(False).astype(bool) if "estimated" in lines else [False] * len(lines)
    return [ESTIMATED_MARK + s if m and s else s for s, m in zip(stamps, marks)]


def any_estimated(lines: pd.DataFrame) -> bool:
    return "estimated" in lines and bool(lines["estimated"].fillna(False).astype(bool).any())


def pane_html(lines: pd.DataFrame, *, show_component: bool, height: int = PANE_HEIGHT, empty: str = "") -> str:
    """The lines in a fixed-height box that scrolls (newest at the bottom), monospace; each line
    with its time (and component, in a merged pane), an estimated time marked (the legend under
    the box)."""
    rows = []
    for stamp, comp, level, text in zip(time_labels(lines), lines["component"], lines["level"], lines["text"]):
        colour = _LEVEL_COLOURS.get(str(level))
        mark = f'<span style="color:{colour}">▍</span>' if colour else '<span style="opacity:.15">▍</span>'
        meta = f'<span style="opacity:.55">{html.escape(stamp)}</span> '
        if show_component:
            meta += f'<span style="opacity:.75;font-weight:600">{html.escape(str(comp))}</span> '
        rows.append(f'<div style="white-space:pre-wrap;word-break:break-all">{mark}{meta}{line_html(str(text))}</div>')
    body = "".join(rows) or f'<div style="opacity:.6">{html.escape(empty)}</div>'
    # column-reverse keeps the box scrolled to its bottom (the newest line) without a script
    return (f'<div style="height:{int(height)}px;overflow:auto;display:flex;flex-direction:column-reverse;'
            'border:1px solid rgba(128,128,128,.35);border-radius:6px;padding:6px 8px;'
            'font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px;line-height:1.45">'
            f'<div>{body}</div></div>' + (f'<div style="opacity:.6;font-size:12px;margin-top:2px">'
                                          f'{html.escape(ESTIMATED_LEGEND)}</div>' if any_estimated(lines) else ""))


def append_lines(shown: pd.DataFrame, new: pd.DataFrame, *, keep: int) -> pd.DataFrame:
    """Followed lines added to those shown (merged files interleave by time, each file in its own
    order: by its clock, which a relayed older stamp does not turn back), the last `keep`."""
    if new.empty:
        return shown
    both = pd.concat([shown, new], ignore_index=True) if len(shown) else new.reset_index(drop=True)
    if both["time"].notna().all():
        clock = both.groupby("path", sort=False)["time"].cummax()
        both = both.iloc[clock.argsort(kind="stable")].reset_index(drop=True)
    return both.tail(keep).reset_index(drop=True)


def follow_lines(read_log, paths: list[str], shown: pd.DataFrame, *, ends: dict, seen: dict,
                 keep: int) -> tuple[pd.DataFrame, pd.DataFrame, bool]:
    """One follow step of a pane: the lines appended to `paths` since `ends` added to `shown` (the
    last `keep`). A file truncated or replaced since (`seen`) starts the pane again: the tails of
    every file are read anew, since the reset read holds only that file's tail. `read_log(paths,
    **kw)` reads with the pane's own options. Returns (lines to show, the frame read, whose attrs
    hold the next `ends`/`versions`/`older`/`problems`, whether the pane started again)."""
    new = read_log(paths, after=ends, seen=seen)
    if new.attrs.get("reset"):
        new = read_log(paths)
        return new, new, True
    return append_lines(shown, new, keep=keep), new, False


def prepend_lines(older: pd.DataFrame, shown: pd.DataFrame) -> pd.DataFrame:
    """An older page put in front of the lines shown."""
    if older.empty:
        return shown
    return pd.concat([older, shown], ignore_index=True) if len(shown) else older.reset_index(drop=True)


def per_component(lines: pd.DataFrame) -> str:
    """`trainer 1.2k · inference 12.3k`: lines shown per component."""
    counts = lines["component"].astype(str).map(group_of).value_counts(sort=False)
    return " · ".join(f"{name} {abbrev_count(n)}" for name, n in counts.items())
