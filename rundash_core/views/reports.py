"""A run's reports (`reports/<slug>.md`, prime-rl spec 2.1 and 8.2): listed, and made safe to render.

A report is Markdown written by a person or an agent, with optional YAML front matter (`title`).
It is run-provided text, so before Streamlit renders it, it is rewritten by `inert_markdown`
(one token filter, shared with the AI answer): no HTML, links only to http(s) and relative targets,
images as links (no fetch on render). Secrets are hidden by the one gate: pages read a report
through `Run.report(name)` (and titles through `Run.reports()`), never `read_report` itself. Citations become links:
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

from rundash_core import cache, frames
from rundash_core.io.files import file_id, read_text
from rundash_core.safety import inert_markdown

FOLDER = "reports"
MAX_BYTES = 2 << 20
TITLE_BYTES = 64 << 10  # where a title is looked for when listing
MAX_TITLE = 200  # characters shown in the report picker
_CITE = re.compile(r"\b(([Ss]tep)[ _]?(\d{1,9}))\b|(?<![A-Za-z0-9_-])([A-Za-z0-9_-]{6,})")  # step N | a word


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
    """The report at `path` (its first 2 MB) as the file says it (`Run.report` is the gated
    reader); an unreadable one says why."""
    name = os.path.basename(path)[:-3] if path.endswith(".md") else os.path.basename(path)
    try:
        text = read_text(path, limit)
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
# characters of a report rendered as Markdown: markdown-it's parse costs up to ~12 µs a character
# on hostile text (200k `[` took 5.6 s; 64k of `[` or `*a` about 1 s, 64 KB of prose 25 ms), so a
# longer report is shown as escaped plain text, said so, and a rendering is kept per report text
MAX_MARKDOWN = 64_000


def shown_body(body: str, *, run_id: str, sample_ids=()) -> tuple[str, str, str | None]:
    """What the Reports page shows for a body: ("markdown", `safe_markdown`, None), or for one
    over MAX_MARKDOWN characters ("text", the body, a note saying why it is plain). Renderings
    are cached by the body's text and the citable ids (each rerun of the page costs nothing)."""
    if len(body) > MAX_MARKDOWN:
        return "text", body, (f"shown as plain text: {len(body):,} characters, over the {MAX_MARKDOWN:,} "
                              "rendered as Markdown")
    ids = frozenset(sample_ids)
    key = ("report-markdown", run_id, len(body), hash(body), hash(ids))
    md = cache.shared.get_or_create(key, lambda: safe_markdown(body, run_id=run_id, sample_ids=ids),
                                    size=2 * len(body) + 256)
    return "markdown", md, None


def safe_markdown(body: str, *, run_id: str, sample_ids=()) -> str:
    """The report body as Markdown Streamlit can render without any run-provided HTML, script
    link or remote image (`inert_markdown`), with citations linked (see the module doc)."""
    ids = set(sample_ids)
    return inert_markdown.inert(body, hook=lambda text: _cite(text, run_id, ids))


def page_link(page: str, **params) -> str:
    """A link to another page of the app, relative to the current one (works under a base path)."""
    return f"{page}?{urlencode({k: v for k, v in params.items() if v is not None}, quote_via=quote)}"


def _cite(text: str, run_id: str, ids: set) -> str:
    """Plain text as Markdown: `step N` → Trajectory and Metrics at that step; a known sample id →
    its episode; the rest escaped (bare URLs never reach here: `inert_markdown` keeps them whole)."""
    pieces, pos = [], 0
    for m in _CITE.finditer(text):
        if m.group(2) is not None:
            n = int(m.group(3))
            pieces += [inert_markdown.escape(text[pos:m.start()]),
                       inert_markdown.link(inert_markdown.escape(m.group(1)), page_link("trajectory", run=run_id, step=n)),
                       " (" + inert_markdown.link("metrics", page_link("metrics", run=run_id, step=n)) + ")"]
        elif m.group(4) in ids:
            pieces += [inert_markdown.escape(text[pos:m.start()]),
                       inert_markdown.link(inert_markdown.escape(m.group(4)), page_link("trajectory", run=run_id, sample=m.group(4)))]
        else:
            continue
        pos = m.end()
    pieces.append(inert_markdown.escape(text[pos:]))
    return "".join(pieces)


def episode_ids(samples: pd.DataFrame) -> set[str]:
    """The sample ids a report may cite (a `sample_id`, or the writer's `episode_id`: `episode()`
    opens either): long enough, and with a digit and a non-digit, not to match ordinary words or
    numbers (`answer`, `100000`)."""
    cited = [samples[c].dropna().astype(str) for c in ("sample_id", "episode_id") if c in samples.columns]
    return {s for ids in cited for s in ids if len(s) >= 6 and any(c.isdigit() for c in s) and not s.isdigit()}
