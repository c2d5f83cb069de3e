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

import os
import re
from dataclasses import dataclass, field
from urllib.parse import quote, urlencode

import pandas as pd

from . import frames
from .io.files import file_id, read_text
from .redact import redact_text

FOLDER = "reports"
MAX_BYTES = 2 << 20
_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_LINK = re.compile(r"(!?)\[((?:[^\[\]\\]|\\.)*)\]\(\s*<?([^()\s>]*(?:\([^()\s]*\)[^()\s>]*)*)>?(?:\s+(\"[^\"]*\"|'[^']*'))?\s*\)")
_REF_DEF = re.compile(r"^( {0,3}\[[^\]]+\]:\s*)(\S+)(.*)$")
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
        rows.append({"name": os.path.basename(path)[:-3], "title": read_report(path).title, "path": path,
                     "size": fid.size, "updated": pd.Timestamp(fid.mtime_ns, unit="ns", tz="UTC")})
    if not rows:
        return frames.empty(frames.REPORTS)
    return frames.typed(rows, frames.REPORTS).sort_values("updated", ascending=False, kind="stable").reset_index(drop=True)


def read_report(path: str) -> Report:
    """The report at `path` (its first 2 MB), secrets hidden; an unreadable one says why."""
    name = os.path.basename(path)[:-3] if path.endswith(".md") else os.path.basename(path)
    try:
        text = redact_text(read_text(path, MAX_BYTES))
    except OSError as e:
        return Report(name, name, error=e.strerror or str(e))
    meta, body = front_matter(text)
    title = str(meta.get("title") or "").strip() or _first_heading(body) or name
    return Report(name, " ".join(title.split()), meta, body)


def front_matter(text: str) -> tuple[dict, str]:
    """(`key: value` pairs of a leading `---` block, the rest). Only flat scalar keys are read
    (quotes removed); a block that never closes is body text."""
    lines = text.lstrip("\ufeff").split("\n")
    if not lines or lines[0].strip() != "---":
        return {}, text
    for i in range(1, min(len(lines), 200)):
        if lines[i].strip() in ("---", "..."):
            meta = {}
            for line in lines[1:i]:
                key, sep, value = line.partition(":")
                if sep and key.strip() and not line[:1].isspace() and not key.strip().startswith("#"):
                    meta[key.strip()] = _unquote(value.strip())
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
def safe_markdown(body: str, *, run_id: str, sample_ids=()) -> str:
    """The report body as Markdown Streamlit can render without any run-provided HTML, script
    link or remote image, with citations linked (see the module doc)."""
    ids = set(sample_ids)
    out, fence = [], None
    for line in body.split("\n"):
        m = _FENCE.match(line)
        if fence is not None:
            out.append(line)
            if m and m.group(2)[0] == fence[0] and len(m.group(2)) >= len(fence) and not line[m.end():].strip():
                fence = None
            continue
        if m:
            fence = m.group(2)
            out.append(line)
            continue
        if line.startswith("    ") and line.strip():  # an indented code block line
            out.append(line)
            continue
        out.append(_safe_line(line, run_id, ids))
    return "\n".join(out)


def _safe_line(line: str, run_id: str, ids: set) -> str:
    ref = _REF_DEF.match(line)
    if ref:
        url = ref.group(2).strip("<>")
        return ref.group(1) + (url if _safe_url(url) else "#") + _escape_html(ref.group(3))
    parts, pos = [], 0
    for m in _CODE_SPAN.finditer(line):
        parts.append(_safe_text(line[pos:m.start()], run_id, ids))
        parts.append(m.group(0))
        pos = m.end()
    parts.append(_safe_text(line[pos:], run_id, ids))
    return "".join(parts)


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


def page_link(page: str, **params) -> str:
    """A link to another page of the app, relative to the current one (works under a base path)."""
    return f"{page}?{urlencode({k: v for k, v in params.items() if v is not None}, quote_via=quote)}"


def _cite(text: str, run_id: str, ids: set) -> str:
    """`step N` → Trajectory and Metrics at that step; a known sample id → its episode."""
    def step(m: re.Match) -> str:
        n = int(m.group(2))
        return (f"[{m.group(0)}]({page_link('trajectory', run=run_id, step=n)}) "
                f"([metrics]({page_link('metrics', run=run_id, step=n)}))")

    text = _STEP.sub(step, text)
    if not ids:
        return text
    pieces, pos = [], 0
    for m in _TOKEN.finditer(text):
        if m.group(0) in ids and not _inside_link(text, m.start()):
            pieces.append(text[pos:m.start()])
            pieces.append(f"[{m.group(0)}]({page_link('trajectory', run=run_id, sample=m.group(0))})")
            pos = m.end()
    pieces.append(text[pos:])
    return "".join(pieces)


def _inside_link(text: str, at: int) -> bool:
    """Is `at` inside a `[..](..)` made by the step citation just before?"""
    return text.rfind("](", 0, at) > text.rfind(")", 0, at)


def episode_ids(samples: pd.DataFrame) -> set[str]:
    """The sample ids a report may cite (long enough not to match ordinary words)."""
    return {s for s in samples["sample_id"].dropna().astype(str) if len(s) >= 6}


class WithReports:
    """A source's `capabilities`: on the class, its base set; on a run, plus "reports" when the
    run has a report (a run without reports offers none)."""

    def __init__(self, base):
        self.base = frozenset(base)

    def __get__(self, run, owner=None) -> frozenset[str]:
        if run is None:
            return self.base
        return self.base | {"reports"} if has_reports(run.path) else self.base
