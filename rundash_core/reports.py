"""A run's reports (`reports/<slug>.md`, prime-rl spec 2.1 and 8.2): listed, and made safe to render.

A report is Markdown written by a person or an agent, with optional YAML front matter (`title`).
It is run-provided text, so before Streamlit renders it: HTML is escaped (`<` shows as text),
links and images keep only http(s), mailto and relative targets (a `javascript:` or `data:` link
becomes its text), images become links (no remote fetch on render), secrets are hidden; code
spans and blocks are left as written (Markdown shows them literally). Citations become links:
`step 12` to the Trajectory page at that step and the Metrics page, an episode's sample id to
the Trajectory page's episode.
"""
from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass, field
from urllib.parse import quote, urlencode

import pandas as pd

from . import cache, frames
from .io.files import file_id, read_text
from .redact import redact_text

FOLDER = "reports"
MAX_BYTES = 2 << 20
TITLE_BYTES = 64 << 10  # where a title is looked for when listing
MAX_TITLE = 200  # characters shown in the report picker
_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(?<![\\`])(`+)(?!`)(.+?)(?<!`)\1(?!`)")  # exact run lengths, not after \\
_LINK = re.compile(r"(!?)\[((?:[^\[\]\\]|\\.)*)\]\(\s*<?([^()\s>]*(?:\([^()\s]*\)[^()\s>]*)*)>?(?:\s+(\"[^\"]*\"|'[^']*'))?\s*\)")
_SAFE_URL = re.compile(r"^(?:https?://|mailto:|#|/(?!/)|\.{0,2}/|[\w.-]+(?:[/?#]|$))", re.I)
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)
_STEP = re.compile(r"\b([Ss]tep)[ _]?(\d{1,9})\b")
_TOKEN = re.compile(r"[A-Za-z0-9_-]{6,}")


@dataclass
class Report:
    """One report: its name (the file's slug), title, front matter and Markdown body."""

    name: str
    title: str
    meta: dict = field(default_factory=dict)
    body: str = ""
    error: str | None = None


def report_paths(run_dir: str) -> list[str]:
    folder = os.path.join(run_dir, FOLDER)
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".md") and not n.startswith("."))
    except OSError:
        return []
    return [p for n in names if file_id(p := os.path.join(folder, n)) is not None]


def has_reports(run_dir: str) -> bool:
    return bool(report_paths(run_dir))


def list_reports(run_dir: str) -> pd.DataFrame:
    """One row per report (`frames.REPORTS`), newest first."""
    rows = []
    for path in report_paths(run_dir):
        fid = file_id(path)
        rows.append({"name": os.path.basename(path)[:-3], "title": _listed_title(path, fid), "path": path,
                     "size": fid.size, "updated": pd.Timestamp(fid.mtime_ns, unit="ns", tz="UTC")})
    if not rows:
        return frames.empty(frames.REPORTS)
    return frames.typed(rows, frames.REPORTS).sort_values("updated", ascending=False, kind="stable").reset_index(drop=True)


def _listed_title(path: str, fid) -> str:
    """A report's title for the listing: from its first `TITLE_BYTES`, cached per file version
    (a run with thousands of reports, or a huge one, lists without reading them whole each time)."""
    return cache.shared.current(("report-title", fid.dev, fid.ino), fid,
                                lambda: read_report(path, limit=TITLE_BYTES).title, size=lambda t: len(t) + 64)


def read_report(path: str, *, limit: int = MAX_BYTES) -> Report:
    """The report at `path` (its first 2 MB), secrets hidden; an unreadable one says why."""
    name = os.path.basename(path)[:-3] if path.endswith(".md") else os.path.basename(path)
    try:
        text = redact_text(read_text(path, limit))
    except OSError as e:
        return Report(name, name, error=e.strerror or str(e))
    meta, body = front_matter(text)
    title = str(meta.get("title") or "").strip() or _first_heading(body) or name
    title = " ".join(title.split())
    return Report(name, title if len(title) <= MAX_TITLE else title[:MAX_TITLE - 1] + "…", meta, body)


def front_matter(text: str) -> tuple[dict, str]:
    """(`key: value` pairs of a leading `---` block, the rest). Only flat scalar keys are read
    (quotes removed); a block that never closes is body text."""
    lines = text.lstrip("\ufeff").split("\n")
    if not lines or lines[0].strip() != "---":
        return {}, text
    for i in range(1, min(len(lines), 200)):
        if lines[i].strip() in ("---", "..."):
            meta, block = {}, lines[1:i]
            for j, line in enumerate(block):
                key, sep, value = line.partition(":")
                if sep and key.strip() and not line[:1].isspace() and not key.strip().startswith("#"):
                    value = value.strip()
                    if value in ("", "|", ">", "|-", ">-", "|+", ">+"):  # a value on the indented lines below
                        more = itertools.takewhile(lambda x: x[:1].isspace() or not x.strip(), block[j + 1:])
                        value = " ".join(x.strip() for x in more if x.strip())
                    meta[key.strip()] = _unquote(value)
            return meta, "\n".join(lines[i + 1:])
    return {}, text


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _first_heading(body: str) -> str:
    m = re.search(r"^#{1,3}\s+(.+?)\s*#*\s*$", body, re.M)
    return m.group(1) if m else ""


# Rendering --------------------------------------------------------------------------------------
_LIST_ITEM = re.compile(r"^ {0,3}(?:[-+*]|\d{1,9}[.)])(?:[ \t]|$)")
_REF_DEF_ANY = re.compile(r"(\[(?:[^\[\]\\]|\\.)+\]:[ \t]*(?:\n[ \t]*)?)(<[^>\n]*>|\S+)")
_LINK_OPEN = re.compile(r"\]\((?=[ \t]*(?:\n[ \t]*)?([^\s()]*))")
_IMAGE_OPEN = re.compile(r"(?<!\\)((?:\\\\)*)!\[")


def safe_markdown(body: str, *, run_id: str, sample_ids=()) -> str:
    """The report body as Markdown Streamlit can render without any run-provided HTML, script
    link or remote image, with citations linked (see the module doc). Text is made safe a block of
    lines at a time (a link or a code span may span lines); only what Markdown surely reads as
    code is left as written, anything doubtful is escaped."""
    ids = set(sample_ids)
    out: list[str] = []
    chunk: list[str] = []
    fence, in_list, prev_blank, prev_code = None, False, True, False

    def flush():
        if chunk:
            out.append(_safe_chunk("\n".join(chunk), run_id, ids))
            chunk.clear()

    for line in body.split("\n"):
        m = _FENCE.match(line)
        if fence is not None:
            out.append(line)
            if m and m.group(2)[0] == fence[0] and len(m.group(2)) >= len(fence) and not line[m.end():].strip():
                fence = None
            continue
        blank = not line.strip()
        # a fence: not one whose info string has a backtick, nor an indented one in a list (it
        # would end with the list item, and what follows is no longer code)
        if m and not (m.group(2)[0] == "`" and "`" in line[m.end():]) and not (m.group(1) and in_list):
            flush()
            fence, in_list, prev_blank, prev_code = m.group(2), False, False, False
            out.append(line)
            continue
        # an indented code block: after a blank line (not a paragraph's continuation), not in a list
        if line.startswith("    ") and not blank and (prev_blank or prev_code) and not in_list:
            flush()
            out.append(line)
            prev_blank, prev_code = False, True
            continue
        if _LIST_ITEM.match(line):
            in_list = True
        elif not blank and prev_blank and not line[:1].isspace():
            in_list = False
        chunk.append(line)
        prev_blank, prev_code = blank, False
    flush()
    return "\n".join(out)


def _safe_chunk(text: str, run_id: str, ids: set) -> str:
    """Consecutive non-code lines: code spans kept, the rest made safe (`_safe_text`)."""
    parts = []
    for piece, is_code in _code_spans(text):
        if is_code:
            parts.append(piece)
            continue
        piece = _REF_DEF_ANY.sub(lambda m: m.group(1) + _safe_url_or(m.group(2).strip("<>"), "#"), piece)
        piece = _safe_text(piece, run_id, ids)
        # whatever link or image Markdown could still read (across lines, nested parentheses, a
        # title in parentheses, a reference image) is broken up unless its target is safe
        piece = _LINK_OPEN.sub(lambda m: "](" if _safe_url(m.group(1)) else "]\\(", piece)
        parts.append(_IMAGE_OPEN.sub(lambda m: m.group(1) + "\\![", piece))
    return "".join(parts)


def _code_spans(text: str) -> list[tuple[str, bool]]:
    """(piece, is a code span) in order. Spans are read one line at a time; once a line leaves a
    backtick run without its pair, Markdown might pair it further down, so the rest of that
    paragraph gets no code spans (it is escaped instead: safe, if less pretty)."""
    pieces: list[tuple[str, bool]] = []
    unsure = False
    for line in text.split("\n"):
        if not line.strip():
            unsure = False
        pos = 0
        if not unsure:
            for m in _CODE_SPAN.finditer(line):
                unsure = unsure or "`" in line[pos:m.start()].replace("\\`", "")
                if unsure:
                    break
                pieces += [(line[pos:m.start()], False), (m.group(0), True)]
                pos = m.end()
            unsure = unsure or "`" in line[pos:].replace("\\`", "")
        pieces += [(line[pos:], False), ("\n", False)]
    # text pieces joined again (a link may span lines)
    return [("".join(p for p, _ in group), is_code)
            for is_code, group in itertools.groupby(pieces[:-1], key=lambda piece: piece[1])]


def _safe_text(text: str, run_id: str, ids: set) -> str:
    parts, pos = [], 0
    for m in _LINK.finditer(text):
        parts.append(_cite(_escape_html(text[pos:m.start()]), run_id, ids))
        label, url = _escape_html(m.group(2)), m.group(3)
        if m.group(1):
            label = f"image: {label}" if label else "image"
        parts.append(f"[{label}]({url})" if _safe_url(url) else label)
        pos = m.end()
    parts.append(_cite(_escape_html(text[pos:]), run_id, ids))
    return "".join(parts)


def _escape_html(text: str) -> str:
    return text.replace("<", "&lt;").replace(">", "&gt;") if "<" in text or ">" in text else text


def _safe_url(url: str) -> bool:
    url = url.strip()
    if not url:
        return False
    if _SCHEME.match(url):
        return url.lower().startswith(("http://", "https://", "mailto:"))
    return not url.startswith("//") and bool(_SAFE_URL.match(url)) or url.startswith("?")


def _safe_url_or(url: str, instead: str) -> str:
    return url if _safe_url(url) else instead


def page_link(page: str, **params) -> str:
    """A link to another page of the app, relative to the current one (works under a base path)."""
    return f"{page}?{urlencode({k: v for k, v in params.items() if v is not None}, quote_via=quote)}"


def _cite(text: str, run_id: str, ids: set) -> str:
    """`step N` → Trajectory and Metrics at that step; a known sample id → its episode."""
    def step(m: re.Match) -> str:
        if _in_url(text, m.start()):
            return m.group(0)
        n = int(m.group(2))
        return (f"[{m.group(0)}]({page_link('trajectory', run=run_id, step=n)}) "
                f"([metrics]({page_link('metrics', run=run_id, step=n)}))")

    text = _STEP.sub(step, text)
    if not ids:
        return text
    pieces, pos = [], 0
    for m in _TOKEN.finditer(text):
        if m.group(0) in ids and not _inside_link(text, m.start()) and not _in_url(text, m.start()):
            pieces.append(text[pos:m.start()])
            pieces.append(f"[{m.group(0)}]({page_link('trajectory', run=run_id, sample=m.group(0))})")
            pos = m.end()
    pieces.append(text[pos:])
    return "".join(pieces)


def _in_url(text: str, at: int) -> bool:
    """Is `at` inside a bare URL (`https://…/step_12`, `www.…`) that Markdown links on its own?"""
    window = text[max(0, at - 2048):at]  # the URL so far, if one
    word = window[max(map(window.rfind, (" ", "\n", "\t"))) + 1:]
    return "://" in word or word.lower().lstrip("(&lt;").startswith("www.")


def _inside_link(text: str, at: int) -> bool:
    """Is `at` inside a `[..](..)` made by the step citation just before?"""
    start = max(0, at - 4096)  # a citation link is short: look back that far only
    return text.rfind("](", start, at) > text.rfind(")", start, at)


def episode_ids(samples: pd.DataFrame) -> set[str]:
    """The sample ids a report may cite (a `sample_id`, or the writer's `episode_id`: `episode()`
    opens either): long enough, and with a digit and a non-digit, not to match ordinary words or
    numbers (`answer`, `100000`)."""
    cited = [samples[c].dropna().astype(str) for c in ("sample_id", "episode_id") if c in samples.columns]
    return {s for ids in cited for s in ids if len(s) >= 6 and any(c.isdigit() for c in s) and not s.isdigit()}


class WithReports:
    """A source's `capabilities`: on the class, its base set; on a run, plus "reports" when the
    run has a report (a run without reports offers none)."""

    def __init__(self, base):
        self.base = frozenset(base)

    def __get__(self, run, owner=None) -> frozenset[str]:
        if run is None:
            return self.base
        return self.base | {"reports"} if has_reports(run.path) else self.base
