"""Run reports (`reports/*.md`): listing, front matter, safe Markdown with linked citations, and the
Reports page."""
from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pandas as pd
import pytest

import rundash_core as rd
from rundash_core import frames
from rundash_core.io import files
from rundash_core.views import reports

from helpers import NEW_RUN, make_rl_run, open_page

HOSTILE = """---
title: "Hostile <b>report</b>"
author: agent
---

# Findings

<script>alert(1)</script> and <img src=x onerror=alert(2)> inline.

[click](javascript:alert(3)) [data](data:text/html;base64,PHNjcmlwdD4=) [fine](https://example.com/a_(b))
![pixel](https://tracker.example/p.png) [ref link][r] see step 12 and Step 7, not steps12.

[r]: javascript:alert(4)

`<b>code span</b>` and

```html
<script>kept as code</script> step 3
```

key: OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz0123456789
"""


def make_report(run, name: str, text: str):
    folder = run / "reports"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.md").write_text(text)
    return folder / f"{name}.md"


def test_front_matter_and_titles(tmp_path):
    assert reports.front_matter("---\ntitle: 'A: b'\nn: 3\n  nested: x\n---\nbody\n") == ({"title": "A: b", "n": "3"}, "body\n")
    assert reports.front_matter("---\ntitle: never closed\n") == ({}, "---\ntitle: never closed\n")
    run = make_rl_run(tmp_path, "r--m--0123abcd")
    make_report(run, "b-heading", "intro\n\n## From the heading\n")
    make_report(run, "a-front", "---\ntitle: From   front matter\n---\n# Other\n")
    make_report(run, "c-bare", "no title at all\n")
    (run / "reports" / "notes.txt").write_text("not a report")
    listing = rd.open_run(run).reports()
    assert frames.check(listing, frames.REPORTS) == []
    assert dict(zip(listing["name"], listing["title"])) == {
        "a-front": "From front matter", "b-heading": "From the heading", "c-bare": "c-bare"}


def test_reports_capability_only_when_a_run_has_some(tmp_path):
    run = rd.open_run(make_rl_run(tmp_path, "r--m--0123abcd"))
    assert run.reports().empty and "reports" not in run.capabilities
    make_report(Path(run.path), "r", "# R\n")
    assert "reports" not in run.capabilities  # (learned at the next listing, not on reading it)
    assert len(run.reports()) == 1 and "reports" in run.capabilities and "reports" in rd.CAPABILITIES
    verl = rd.open_run(NEW_RUN.parent.parent / "verl" / "dq_math.log")
    assert frames.check(verl.reports(), frames.REPORTS) == [] and "reports" not in verl.capabilities


def test_safe_markdown_keeps_no_html_no_script_links_no_remote_images(tmp_path):
    run = make_rl_run(tmp_path, "r--m--0123abcd")
    make_report(run, "hostile", HOSTILE)
    report = rd.open_run(run).report("hostile")  # the gated reader pages use
    assert report.title == "Hostile <b>report</b>" and report.meta["author"] == "agent"
    md = reports.safe_markdown(report.body, run_id="r1", sample_ids={"abc123def"})
    outside_code = md.split("```")[0] + md.split("```")[2]
    assert "<script" not in outside_code and "<img" not in outside_code
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md and "&lt;img src=x onerror=alert(2)&gt;" in md
    assert "javascript:" not in md and "data:text" not in md
    assert "click" in md and "[fine](https://example.com/a_(b))" in md
    assert "tracker.example/p.png" in md and "![" not in md  # an image is only a link
    assert "`<b>code span</b>`" in md and "<script>kept as code</script> step 3" in md  # code is shown literally
    assert "sk-abcdefghijklmnopqrstuvwxyz0123456789" not in md  # secrets hidden


def _links(md: str) -> dict[str, list[str]]:
    import re

    return {label: url for label, url in re.findall(r"\[([^\]]+)\]\(([^)\s]+)\)", md)}


def test_citations_link_steps_and_episodes():
    md = reports.safe_markdown("At step 12 (Step 7) episode abc123def failed; abc123 is not one. stepping 5.",
                               run_id="run/x", sample_ids={"abc123def", "zzz999zzz"})
    links = _links(md)
    traj = urlparse(links["step 12"])
    assert traj.path == "trajectory" and parse_qs(traj.query) == {"run": ["run/x"], "step": ["12"]}
    assert parse_qs(urlparse(links["Step 7"]).query)["step"] == ["7"]
    metrics = [u for label, u in __import__("re").findall(r"\[(metrics)\]\(([^)]+)\)", md)]
    assert len(metrics) == 2 and all(urlparse(u).path == "metrics" for u in metrics)
    assert parse_qs(urlparse(links["abc123def"]).query) == {"run": ["run/x"], "sample": ["abc123def"]}
    assert "abc123 is" in md and "stepping 5" in md  # no citation made up


def test_reports_page_renders_the_demo_report(demo_runs, monkeypatch):
    folder, runs = demo_runs
    with_reports = [r for r in runs["run_id"] if len(rd.open_run(runs.set_index("run_id").loc[r, "path"]).reports())]
    assert with_reports
    at = open_page(monkeypatch, folder, "pages/reports.py", {"run": with_reports[0]})
    body = [m for m in at.markdown if "trajectory?run=" in m.value]
    assert body and all(not m.proto.allow_html for m in at.markdown if "trajectory?" in m.value)
    assert at.query_params.get("report") or at.selectbox(key="report").value


def test_reports_page_escapes_a_hostile_report_and_says_when_there_is_none(tmp_path, monkeypatch):
    run = make_rl_run(tmp_path / "out", "r--m--0123abcd", rows=[{"step": 0, "time": 1.0, "producer": "trainer", "loss": 1.0}])
    at = open_page(monkeypatch, tmp_path / "out", "pages/reports.py", {"run": run.name})
    assert any("no reports" in m.value for m in [*at.markdown, *at.info])
    make_report(run, "hostile", HOSTILE)
    at = open_page(monkeypatch, tmp_path / "out", "pages/reports.py", {"run": run.name})
    rendered = [m for m in at.markdown if "Findings" in m.value]
    assert len(rendered) == 1 and not rendered[0].proto.allow_html
    assert "&lt;script&gt;" in rendered[0].value and "javascript:" not in rendered[0].value
    assert at.selectbox(key="report").options == ["Hostile <b>report</b>"]  # a label: shown as text


def test_a_report_is_read_through_the_gate_by_name(tmp_path):
    run = make_rl_run(tmp_path, "r--m--0123abcd")
    secret = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
    make_report(run, "keys", f"---\ntitle: Keys\napi_key: {secret}\n---\n# Keys\nOPENAI_API_KEY={secret}\n")
    shown = rd.open_run(run).report("keys")
    assert shown.title == "Keys" and "OPENAI_API_KEY=" in shown.body
    assert secret not in shown.body and secret not in str(shown.meta)
    raw = rd.open_run(run, reveal=True).report("keys")  # the notebook opt-in: the file as it says
    assert secret in raw.body and raw.meta["api_key"] == secret
    with pytest.raises(KeyError, match="no report 'absent'"):
        rd.open_run(run).report("absent")


def test_a_report_over_the_markdown_budget_is_plain_text_said_so(tmp_path, monkeypatch):
    import time

    run = make_rl_run(tmp_path / "out", "r--m--0123abcd")
    make_report(run, "brackets", "# Brackets\n" + "[" * 200_000)  # markdown-it alone: 5.6 s
    start = time.process_time()  # CPU seconds: a busy machine (xdist, other users) does not make them grow
    at = open_page(monkeypatch, tmp_path / "out", "pages/reports.py", {"run": run.name})
    assert time.process_time() - start < 4  # (the whole page: the parse alone took 5.6 s)
    notes = [c.value for c in at.caption if "shown as plain text" in c.value]
    assert len(notes) == 1 and "200,011 characters" in notes[0] and "64,000" in notes[0], notes
    assert ["# Brackets\n" + "[" * 200_000 == c.value for c in at.code].count(True) == 1
    assert not any("[[[[" in m.value for m in at.markdown)


def test_a_report_rendering_is_kept_per_text():
    body = "# R\nAt step 12 [a](https://example.com) " + "*a" * 1000
    kind, md, note = reports.shown_body(body, run_id="r1", sample_ids={"abc123def"})
    assert kind == "markdown" and note is None and "trajectory?run=r1&step=12" in md
    assert reports.shown_body(body, run_id="r1", sample_ids={"abc123def"})[1] is md  # kept: not rendered again
    assert reports.shown_body(body + "x", run_id="r1", sample_ids=())[1] is not md  # another text: rendered
    long = "x" * (reports.MAX_MARKDOWN + 1)
    assert reports.shown_body(long, run_id="r1")[0:2] == ("text", long)



# Markdown shapes, citations, titles, the listing ------------------------------------------------
HOSTILE_MARKDOWN = {
    "link across lines": "[click](\njavascript:alert(1))",
    "label across lines": "[cl\nick](javascript:alert(1))",
    "link with a (title)": "[x](javascript:alert(1) (title))",
    "nested parentheses": "[x](javascript:alert((1)))",
    "reference on the next line": "[r]:\njavascript:alert(4)\n\n[x][r]",
    "reference with an escaped ]": "[a\\]b]: javascript:alert(4)\n\n[x][a\\]b]",
    "reference image": "![alt][r]\n\n[r]: https://tracker.example/p.png",
    "shortcut image": "![r]\n\n[r]: https://tracker.example/p.png",
    "indented paragraph continuation": "text\n    <script>alert(1)</script>",
    "indented line in a list": "- item\n\n    <img src=x onerror=alert(1)>",
    "escaped backticks": "\\`<img src=x onerror=alert(1)>\\`",
    "code span opened a line above": "`a\nb` <img src=x onerror=alert(1)> `c`",
    "not a fence (backtick in info)": "```a`b\n<img src=x onerror=alert(1)>",
    "fence ended with its list item": "- a\n\n  ```\n<img src=x onerror=alert(1)>\n```",
    "entity-encoded scheme": "[x](&#106;avascript:alert(1))",
    "mixed case": "[x](JaVaScRiPt:alert(1)) [y](VBScript:msgbox(1)) [z](data:text/html,x)",
    "autolink": "<javascript:alert(1)>",
    "tab in the scheme": "[x](java\tscript:alert(1)) [y](<java\tscript:alert(1)>)",
    "entities for tags": "&lt;script&gt;alert(1)&lt;/script&gt; &#x3C;img src=x onerror=alert(1)&#x3E;",
}


def _html(md: str) -> str:
    """How a CommonMark renderer reads the Markdown, with raw HTML on and every link target kept
    (Streamlit sanitizes too; this checks that the Markdown itself is safe)."""
    markdown_it = pytest.importorskip("markdown_it")
    renderer = markdown_it.MarkdownIt("commonmark", {"html": True})
    renderer.validateLink = lambda url: True
    return renderer.render(md)


@pytest.mark.parametrize("source", list(HOSTILE_MARKDOWN.values()), ids=list(HOSTILE_MARKDOWN))
def test_markdown_reads_no_html_script_link_or_image_from_a_report(source):
    html = _html(reports.safe_markdown(source, run_id="r", sample_ids={"abc123def"}))
    assert not re.findall(r"<(?:script|img)\b", html), html
    assert all(u.startswith(("https://", "http://", "mailto:", "#", "trajectory?", "metrics?"))
               for u in re.findall(r'href="([^"]*)"', html)), html


def test_what_is_safe_still_renders_as_written():
    body = ("Intro `<think>` tag and ``a`b`` code.\n\n```python\nx = '<b>'\n```\n\n    indented <code>\n\n"
            "[a](https://en.wikipedia.org/wiki/A_(b)) [rel](docs/x.md) [ok](\nhttps://x.com)\n\n"
            "[r]:\n  https://y.com\n")
    html = _html(reports.safe_markdown(body, run_id="r"))
    assert "<code>&lt;think&gt;</code>" in html and "<code>a`b</code>" in html
    assert "x = '&lt;b&gt;'" in html and "indented &lt;code&gt;" in html  # code shows the text as written
    assert 'href="https://en.wikipedia.org/wiki/A_(b)"' in html and 'href="docs/x.md"' in html
    assert 'href="https://x.com"' in html


def test_citations_skip_bare_urls_and_ids_that_read_as_words_or_numbers():
    md = reports.safe_markdown("see https://x.com/step_12/abc123def then step 4 and abc123def",
                               run_id="r", sample_ids={"abc123def"})
    assert "https://x.com/step_12/abc123def then" in md
    assert "[step 4](trajectory?run=r&step=4)" in md and "[abc123def](trajectory?run=r&sample=abc123def)" in md
    ids = reports.episode_ids(pd.DataFrame({"sample_id": ["answer", "1000000", "12-train-3", "ab1"]}))
    assert ids == {"12-train-3"}


def test_front_matter_block_titles_and_huge_titles(tmp_path):
    assert reports.front_matter("---\ntitle: >\n  Folded\n  title\nauthor: a\n---\nbody")[0] == {
        "title": "Folded title", "author": "a"}
    run = make_rl_run(tmp_path, "r--m--0123abcd")
    (run / "reports").mkdir()
    (run / "reports" / "huge.md").write_text("---\ntitle: " + "T" * 100_000 + "\n---\nbody\n")
    title = reports.read_report(str(run / "reports" / "huge.md")).title
    assert 0 < len(title) <= reports.MAX_TITLE and title.startswith("TTT")


def test_the_listing_reads_a_report_once_per_file_version(tmp_path):
    run = make_rl_run(tmp_path, "r--m--0123abcd")
    (run / "reports").mkdir()
    path = run / "reports" / "a.md"
    path.write_text("# First title\n")
    assert reports.list_reports(str(run))["title"].tolist() == ["First title"]
    st = path.stat()
    path.write_text("# Other title\n")  # same size and mtime: the same version as far as stat tells
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert reports.list_reports(str(run))["title"].tolist() == ["First title"]  # from the cache
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert reports.list_reports(str(run))["title"].tolist() == ["Other title"]


def test_a_report_linked_out_of_the_roots_is_not_listed(tmp_path):
    run = make_rl_run(tmp_path / "root", "r--m--0123abcd")
    (tmp_path / "secret.md").write_text("# Secret\n")
    (run / "reports").mkdir()
    (run / "reports" / "in.md").write_text("# In\n")
    (run / "reports" / "out.md").symlink_to(tmp_path / "secret.md")
    files.set_roots([tmp_path / "root"])
    assert reports.list_reports(str(run))["name"].tolist() == ["in"]
