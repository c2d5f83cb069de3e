"""One gate, not two (issue 24): pages never redact (they read runs through the gated readers, so
they cannot forget it), and outside the gate the library calls no redaction except where a comment
says why."""
import ast
import importlib.util
import pathlib

from helpers import REPO

ROOT = REPO
DETECTION = ("redact", "secret_shapes", "secret_blocks", "reader_view")  # the detector and its parts
REDACTING = {f"rundash_core.safety.{m}" for m in DETECTION + ("gate",)}
# calls of redact()/redact_text() outside the gate, each justified at the call: the log search
# matches a line by what is shown of it (it decides what is found, it sends nothing)
JUSTIFIED = {"rundash_core/logs/reading.py"}


def _imports(path: pathlib.Path) -> set[str]:
    """Modules and names `path` imports (absolute, `rundash_core.x` / `rundash_core.x.name`)."""
    tree, out = ast.parse(path.read_text()), set()
    package = ".".join(path.relative_to(ROOT).parent.parts) if path.is_relative_to(ROOT) else ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            out |= {base} | {f"{base}.{a.name}" for a in node.names}
    return out


def _redact_calls(path: pathlib.Path) -> list[int]:
    tree = ast.parse(path.read_text())
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and
            (getattr(n.func, "id", None) or getattr(n.func, "attr", None)) in ("redact", "redact_text")]


def test_no_page_imports_redaction():
    assert all(importlib.util.find_spec(m) for m in REDACTING)  # the names checked are real modules
    scripts = sorted((ROOT / "pages").glob("*.py")) + [ROOT / "app.py"]
    assert len(scripts) > 10
    bad = {str(p.relative_to(ROOT)): sorted(m for m in _imports(p) if m in REDACTING or
                                             any(m.startswith(r + ".") for r in REDACTING))
           for p in scripts}
    assert {p: m for p, m in bad.items() if m} == {}
    assert not any(_redact_calls(p) for p in scripts)


def test_the_library_redacts_only_in_the_gate_or_where_a_comment_says_why():
    calls = {str(p.relative_to(ROOT)): _redact_calls(p) for p in sorted((ROOT / "rundash_core").rglob("*.py"))}
    outside = {p for p, lines in calls.items() if lines and p not in {f"rundash_core/safety/{m}.py" for m in DETECTION + ("gate",)}}
    assert outside == JUSTIFIED


def test_the_check_could_fail(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from rundash_core.safety.redact import redact_text\nimport rundash_core.safety.gate\nredact_text('x')\n")
    found = _imports(probe)
    assert "rundash_core.safety.redact.redact_text" in found and "rundash_core.safety.gate" in found
    assert _redact_calls(probe) == [3]
