"""Untrusted Markdown (a model's answer, a run's report) rewritten so that it loads and runs nothing.

String replacement cannot do this: `!![x](u)` with `![` replaced is still an image, and escapes,
entities and references re-form syntax after the edit. Instead the text is parsed once by
markdown-it-py (CommonMark plus GFM tables and strikethrough) and written out again from its
tokens: only the structure we emit exists in the output (headings, lists, quotes, tables, code,
emphasis, links to http(s) or relative targets); every piece of text is escaped so it cannot form
syntax in Streamlit's renderer (no HTML, entity, autolink, email literal, `:icon:`, `$math$`).
An image becomes a link labelled with its alt text (clicking is a choice, a fetch on render is not; a
link is allowed anyway, so nothing new is granted); raw HTML becomes its text.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from urllib.parse import unquote

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

_PARSER = MarkdownIt("commonmark").enable(["table", "strikethrough"])
_DEEP = _PARSER.options["maxNesting"] - 2  # a block nested this deep may have lost content
_INLINE_SPECIAL = re.compile(r"([\\`*_\[\]&~$:@|#{}])")
_LINE_START = re.compile(r"^([ \t]*)(\d{1,9}(?=[.)])|[-+=])")
_BARE_URL = re.compile(r"https?://[A-Za-z0-9\-._~:/?#&+,;=%]+", re.I)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_LIST_ITEM = re.compile(r"^ {0,3}(?:[-+*]|\d{1,9}[.)])(?:[ \t]|$)")

Hook = Callable[[str], str]  # plain text -> Markdown (e.g. citations as links); must escape the rest


def escape(text: str) -> str:
    """Plain text as Markdown that renders exactly as that text, wherever it is put inline."""
    text = _INLINE_SPECIAL.sub(r"\\\1", text).replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace("!", "&#33;")  # (an entity never forms syntax; no `![` appears at all)
    return text.replace("\r", " ").replace("\n", " ")


def safe_url(url: str) -> bool:
    """http(s), or a relative target inside the app (`trajectory?run=…`, `#x`, `docs/x.md`) whose
    first segment has no `:` even decoded and without blanks (`java%09script:` is refused)."""
    url = url.strip()
    if url.lower().startswith(("http://", "https://")):
        return not any(ord(c) < 33 for c in url)
    plain = "".join(c for c in unquote(url) if ord(c) > 32)
    return bool(plain) and not plain.startswith(("//", "\\", "/\\")) and ":" not in re.split(r"[/?#]", plain, maxsplit=1)[0]


def link(label_md: str, url: str) -> str:
    """`[label](url)` with a target that ends where we say (unbalanced parentheses encoded)."""
    url = "".join(c if ord(c) > 32 and c not in "<>\\" else f"%{ord(c):02X}" for c in url)
    if url.count("(") != url.count(")"):
        url = url.replace("(", "%28").replace(")", "%29")
    return f"[{label_md or escape(url)}]({url})"


def inert(text: str, hook: Hook | None = None) -> str:
    """`text` as Markdown that Streamlit renders with no image, HTML or script link from it
    (see the module doc); `hook` renders plain text outside links and code (default: escaped)."""
    tokens = _PARSER.parse(text)
    writer, lines, out = _Writer(hook or escape), text.split("\n"), []
    for node in SyntaxTreeNode(tokens).children:
        if out:
            out.append("")
        if node.map and any(n.level >= _DEEP for n in node.walk()):  # past markdown-it's nesting limit it drops content: show the lines as text
            out += [writer.line_start(escape(line)) + "  " for line in lines[node.map[0]:node.map[1]] if line.strip()]
        else:
            out += writer.blocks([node], tight=False)
    return "\n".join(out).strip("\n")


def inert_stream(chunks: Iterable[str], hook: Hook | None = None) -> Iterator[str]:
    """`inert` over a stream, one run of blocks at a time: a piece is cut before a line that starts
    a new top-level block after a blank line (not inside a fence), so each piece parses alone as
    it would in the whole; the pieces join to the whole answer."""
    buffer, pending, fence, prev_blank = [], "", None, False
    for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split("\n")
        for line in lines:
            m = _FENCE.match(line)
            if fence is None and prev_blank and line.strip() and not line[:1].isspace() \
                    and not _LIST_ITEM.match(line) and buffer:
                yield inert("\n".join(buffer), hook) + "\n\n"
                buffer = []
            if m and (fence is None or (m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence))):
                fence = m.group(1) if fence is None else None
            buffer.append(line)
            prev_blank = not line.strip()
    if pending:
        buffer.append(pending)
    if "".join(buffer).strip():
        yield inert("\n".join(buffer), hook)


class _Writer:
    def __init__(self, hook: Hook):
        self.hook = hook

    # blocks --------------------------------------------------------------------------------
    def blocks(self, nodes, *, tight: bool) -> list[str]:
        out: list[str] = []
        for node in nodes:
            lines = self.block(node)
            if out and not tight:
                out.append("")
            out += lines
        return out

    def block(self, node) -> list[str]:
        kind = node.type
        if kind == "paragraph":
            return self.lines(node.children[0] if node.children else None)
        if kind == "heading":
            text = " ".join(self.lines(node.children[0] if node.children else None))
            return [f"{'#' * int(node.tag[1])} {text}".rstrip()]
        if kind in ("code_block", "fence"):
            return self.code(node)
        if kind == "hr":
            return ["___"]
        if kind == "html_block":
            return [self.line_start(escape(line)) for line in node.content.rstrip("\n").split("\n")]
        if kind == "blockquote":
            return [f"> {line}".rstrip() for line in self.blocks(node.children, tight=False)] or [">"]
        if kind in ("bullet_list", "ordered_list"):
            return self.list(node)
        if kind == "table":
            return self.table(node)
        return self.blocks(node.children, tight=False)  # anything else: its content

    def code(self, node) -> list[str]:
        body = node.content[:-1] if node.content.endswith("\n") else node.content
        fence = "`" * max(3, max((len(r) for r in re.findall(r"`+", body)), default=0) + 1)
        info = re.sub(r"[^\w+#.-]", "", (node.info or "").split(" ")[0]) if node.type == "fence" else ""
        return [fence + info, *(body.split("\n") if body else []), fence]

    def list(self, node) -> list[str]:
        tight = any(p.type == "paragraph" and p.hidden for item in node.children for p in item.children)
        start = int(node.attrs.get("start", 1)) if node.type == "ordered_list" else None
        out: list[str] = []
        for i, item in enumerate(node.children):
            marker = f"{start + i}." if start is not None else "-"
            lines = self.blocks(item.children, tight=tight) or [""]
            if out and not tight:
                out.append("")
            pad = " " * (len(marker) + 1)
            out.append(f"{marker} {lines[0]}".rstrip())
            out += [pad + line if line else "" for line in lines[1:]]
        return out

    def table(self, node) -> list[str]:
        rows, aligns = [], []
        for section in node.children:
            for tr in section.children:
                cells = [self.inline(c.children[0] if c.children else None, table=True) for c in tr.children]
                if not rows:
                    aligns = [str(c.attrs.get("style", "")).replace("text-align:", "") for c in tr.children]
                rows.append(cells)
        if not rows:
            return []
        delim = [{"left": ":--", "right": "--:", "center": ":-:"}.get(a, "---") for a in aligns]
        return [f"| {' | '.join(c or ' ' for c in row)} |" for row in rows[:1]] + [f"| {' | '.join(delim)} |"] \
            + [f"| {' | '.join(c or ' ' for c in row)} |" for row in rows[1:]]

    # inline --------------------------------------------------------------------------------
    def lines(self, inline) -> list[str]:
        return [self.line_start(line) for line in self.inline(inline).split("\n")]

    @staticmethod
    def line_start(line: str) -> str:
        """A line's first characters escaped where they would start a block (`- `, `1.`, `>`, `=`)."""
        return _LINE_START.sub(lambda m: m.group(1) + (m.group(2) + "\\" if m.group(2)[:1].isdigit() else
                                                      "\\" + m.group(2)), line.lstrip(" \t"), count=1)

    def inline(self, inline, *, table: bool = False) -> str:
        return "".join(self.span(n, in_link=False, table=table) for n in (inline.children if inline else []))

    def span(self, node, *, in_link: bool, table: bool) -> str:
        kind = node.type
        inner = lambda: "".join(self.span(c, in_link=in_link or kind == "link", table=table) for c in node.children)
        if kind in ("text", "text_special"):
            return self.text(node.content, in_link)
        if kind == "html_inline":
            return escape(node.content)
        if kind == "softbreak":
            return "\n"
        if kind == "hardbreak":
            return "\\\n"
        if kind == "code_inline":
            return self.code_span(node.content, table)
        if kind in ("em", "strong", "s"):
            mark = {"em": "*", "strong": "**", "s": "~~"}[kind]
            return f"{mark}{inner()}{mark}"
        if kind == "link":
            href = str(node.attrs.get("href", ""))
            label = inner()
            return link(label, href) if safe_url(href) and not in_link else label or escape(href)
        if kind == "image":
            src = str(node.attrs.get("src", ""))
            alt = "".join(self.text(c.content, True) for c in node.children if c.type in ("text", "text_special"))
            label = alt or "image"
            return link(label, src) if safe_url(src) and not in_link else label
        return "".join(self.span(c, in_link=in_link, table=table) for c in node.children) if node.children \
            else escape(node.content)

    def text(self, text: str, in_link: bool) -> str:
        if in_link:
            return escape(text)
        out, pos = [], 0
        for m in _BARE_URL.finditer(text):
            url = m.group(0).rstrip(".,:;?'")
            out += [self.hook(text[pos:m.start()]), url]  # http(s) only: Streamlit links it, and may
            pos = m.start() + len(url)                       # (none of its characters forms syntax)
        out.append(self.hook(text[pos:]))
        return "".join(out)

    @staticmethod
    def code_span(body: str, table: bool) -> str:
        body = body.replace("\n", " ") or " "
        fence = "`" * (max((len(r) for r in re.findall(r"`+", body)), default=0) + 1)
        pad = " " if body[:1] in "` " or body[-1:] in "` " else ""
        span = f"{fence}{pad}{body}{pad}{fence}"
        return span.replace("|", "\\|") if table else span
