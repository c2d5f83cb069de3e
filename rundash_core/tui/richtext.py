"""A `Doc` as a `rich.text.Text`: the text is never parsed as markup (run text such as
`[bold red]x[/]` or `[@click=app.quit]` shows literally) and holds no terminal escapes; styles
come only from the span names."""
from __future__ import annotations

from rich.text import Text

from rundash_core.tui.highlight import Doc, clean

STYLE = {
    "heading": "bold underline", "role": "bold cyan", "label": "bold", "special": "cyan",
    "role_word": "bold cyan", "vision": "magenta", "pad": "bright_black", "token": "blue",
    "tool": "dark_orange", "answer": "green", "think": "bright_black italic", "match": "black on yellow",
    "muted": "bright_black", "error": "bold red",
}


def to_text(doc: Doc | str, *, no_wrap: bool = False) -> Text:
    """The doc's text with its spans' styles (unknown names are ignored)."""
    if isinstance(doc, str):
        return Text(clean(doc), no_wrap=no_wrap)
    text = Text(doc.text, no_wrap=no_wrap)
    for start, end, name in doc.spans:
        style = STYLE.get(name)
        if style:
            text.stylize(style, start, end)
    return text
