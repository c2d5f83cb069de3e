"""verl's one-line `Initial/Final validation metrics: {…}` prints (`docs/formats/verl.md`
section 7): era S1 logs record validation only there. Read by `metric_log` for the lines it finds
them on."""
from __future__ import annotations

import ast
import re

import orjson

from rundash_core.sources.verl.grammar import clean_piece

PPRINT = b"validation metrics: {"
_PPRINT_LINE = re.compile(r"""^\(?(["'])(Initial|Final) validation metrics: (\{.*\})\1\)?$""")


def _literal(text: str):
    """A printed Python dict: through JSON when it is plainly one (quotes swapped), else
    `ast.literal_eval`. None when it is not a literal."""
    if '"' not in text and "\\" not in text and "np." not in text:
        try:
            return orjson.loads(text.replace("'", '"'))
        except orjson.JSONDecodeError:
            pass
    try:
        return ast.literal_eval(re.sub(r"np\.[a-z]+\d*\(([^()]*)\)", r"\1", text))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def read_pprint(line: bytes) -> tuple[bool, str | None, dict[str, float]]:
    """(is it a final-validation print, "Initial"/"Final"/None, its `test_score/<ds>` values
    renamed `val/test_score/<ds>`): other keys are already on the metric lines."""
    _source, body = clean_piece(line.decode("utf-8", "replace"))
    final = "Final validation metrics" in body
    m = _PPRINT_LINE.match(body)
    values = _literal(m.group(3)) if m is not None else None
    if not isinstance(values, dict):
        return final, None, {}
    renamed = {f"val/{k}": float(v) for k, v in values.items()
               if isinstance(k, str) and k.startswith("test_score/") and isinstance(v, (int, float))}
    return final, m.group(2), renamed
