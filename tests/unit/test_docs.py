"""README.md and docs/ say what the code does: the README stays short and its examples run, every
link resolves, every environment variable and URL parameter the code reads is documented, and
every "spec N.N" the code cites is a section of docs/formats/. Each test reads the code as it is
(no list kept by hand), so a new variable, parameter or citation without its doc fails here."""
from __future__ import annotations

import ast
import functools
import importlib
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
README = REPO / "README.md"
FORMATS = DOCS / "formats"
KINDS = ("prime-rl", "verl", "swe-lego-rl", "relax", "tensorboard", "wandb")  # the kinds with a format spec in docs/formats/


def code_files() -> list[Path]:
    """The product's Python: rundash_core/, pages/ and app.py."""
    files = [REPO / "app.py"]
    for top in ("rundash_core", "pages"):
        files += sorted((REPO / top).rglob("*.py"))
    return [f for f in files if f.is_file()]


def doc_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def fenced_blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)


# README ------------------------------------------------------------------------------------------
def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 160, f"README.md has {len(lines)} lines; move detail to docs/ (at most 160)"


def test_readme_test_command_is_what_ci_runs():
    """CI runs exactly the README's test command: the bash block of Quick start that runs pytest."""
    commands = [line.strip() for block in fenced_blocks(README.read_text(encoding="utf-8"), "bash")
                for line in block.splitlines() if "pytest" in line]
    assert len(commands) == 1, f"one README command runs the tests, found {commands}"
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert commands[0] in [line.strip() for line in ci], f".ci/run does not run {commands[0]!r}"


def test_readme_notebook_example_runs(demo_runs, tmp_path, monkeypatch, capsys):
    """The README's notebook example runs as written, on the built-in demo (the session's copy:
    `ensure_demo()` finds it at `$RUNDASH_CACHE_DIR/demo`)."""
    blocks = fenced_blocks(README.read_text(encoding="utf-8"), "python")
    assert len(blocks) == 1, "the README has one notebook example"
    assert len(blocks[0].strip().splitlines()) <= 12
    folder, _runs = demo_runs
    assert folder.name == "demo"
    monkeypatch.setenv("RUNDASH_CACHE_DIR", str(folder.parent))
    monkeypatch.delenv("RUNDASH_ROOTS", raising=False)
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], "README.md", "exec"), {"__name__": "readme_example"})  # noqa: S102 (the README's own code)
    assert "step" in capsys.readouterr().out  # run.overview().progress: "step N of M"


# Links -------------------------------------------------------------------------------------------
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)  # a '#' in a code block is no heading
    return {slug(m) for m in re.findall(r"^#+ +(.+)$", text, flags=re.MULTILINE)}


def test_relative_links_resolve():
    broken = []
    for doc in doc_files():
        text = re.sub(r"^```.*?^```", "", doc.read_text(encoding="utf-8"), flags=re.DOTALL | re.MULTILINE)
        for target in LINK.findall(text):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            where = f"{doc.relative_to(REPO)} → {target}"
            if not dest.is_file():
                broken.append(f"{where}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{where}: no heading #{anchor}")
    assert not broken, "\n".join(broken)


def test_link_check_sees_links():
    """The link check reads the links it should (the README links every docs page)."""
    targets = set(LINK.findall(README.read_text(encoding="utf-8")))
    pages = {f"docs/{p.name}" for p in DOCS.glob("*.md")}
    assert "docs/screenshot.png" in targets
    assert pages and pages <= targets, f"docs pages the README does not link: {sorted(pages - targets)}"


# Names the docs give -----------------------------------------------------------------------------
CODE_NAME = re.compile(r"`(rundash_core(?:[/.][A-Za-z_][A-Za-z0-9_]*)+(?:\.py|/)?)")


def _resolves_in_code(name: str) -> bool:
    """`rundash_core/x/y.py` (or a folder) exists; `rundash_core.x.y[.attr]` imports and has the attr."""
    if "/" in name:
        return (REPO / name).exists()
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_modules_and_files_the_docs_name_exist():
    """A module, file or attribute of rundash_core the README or docs/ names is there (a move
    updates the docs)."""
    named = {(doc.relative_to(REPO), m) for doc in doc_files()
             for m in CODE_NAME.findall(doc.read_text(encoding="utf-8"))}
    assert len(named) > 10
    missing = sorted(f"{doc}: {name}" for doc, name in named if not _resolves_in_code(name))
    assert not missing, "\n".join(missing)


def test_notebook_chart_example_runs(demo_runs, monkeypatch):
    """docs/notebook.md's chart example draws a demo run's first section."""
    import plotly.graph_objects as go

    import rundash_core as rd

    block = next(b for b in fenced_blocks((DOCS / "notebook.md").read_text(encoding="utf-8"), "python")
                 if "section_charts" in b)
    monkeypatch.setattr(go.Figure, "show", lambda self, *a, **k: None)  # no browser
    _folder, runs = demo_runs
    scope = {"run": rd.open_run(runs.path[0])}
    exec(compile(block, "docs/notebook.md", "exec"), scope)  # noqa: S102 (the docs' own code)
    assert scope["charts"] and len(scope["charts"][0].frame()) > 0


# Environment variables ---------------------------------------------------------------------------
def test_every_environment_variable_is_in_settings():
    """Every RUNDASH_* the product, the benchmarks or the tests read is in docs/settings.md."""
    named = set()
    tools = [f for top in ("benchmarks", "tests") for f in sorted((REPO / top).rglob("*.py"))
             if "data" not in f.relative_to(REPO / top).parts[:1]]  # (not the sample runs in tests/data)
    for f in code_files() + tools:
        named |= set(re.findall(r"\bRUNDASH_[A-Z][A-Z0-9_]*\b", f.read_text(encoding="utf-8")))
    assert {"RUNDASH_DIRS", "RUNDASH_ROOTS", "RUNDASH_VERL_SAMPLES", "RUNDASH_TEST_EXTRA_RUNS"} <= named  # product, benchmarks, tests
    settings = (DOCS / "settings.md").read_text(encoding="utf-8")
    missing = sorted(v for v in named if f"`{v}`" not in settings)
    assert not missing, f"docs/settings.md does not document {missing}"


# URL parameters ----------------------------------------------------------------------------------
QP_METHODS = {"get", "get_all", "pop", "setdefault"}


def _str(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _key(node) -> str | None:
    """A URL key as written: "x", or f"s_{section}" as "s_<" (docs write `s_<section>`)."""
    if _str(node) is not None:
        return _str(node)
    if isinstance(node, ast.JoinedStr) and node.values and _str(node.values[0]):
        return _str(node.values[0]) + "<"
    return None


def _name(func) -> str | None:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _is_query_params(node) -> bool:
    return _name(node) == "query_params" if isinstance(node, (ast.Name, ast.Attribute)) else False


def _is_streamlit(func) -> bool:
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "st"


def _kw(call: ast.Call, name: str):
    return next((k.value for k in call.keywords if k.arg == name), None)


def _key_arg(call: ast.Call, index: int | None):
    """The `key` argument of a call: by keyword, else at its position."""
    node = _kw(call, "key")
    if node is None and index is not None and index < len(call.args):
        node = call.args[index]
    return node


def _forwarders(trees: list[ast.Module]) -> dict[str, tuple[int | None, str | None]]:
    """Functions that bind their `key` parameter to the URL (directly with bind="query-params", or
    by handing it to another such function): name -> (position of `key`, its default)."""
    defs = [d for t in trees for d in ast.walk(t) if isinstance(d, ast.FunctionDef)]
    found: dict[str, tuple[int | None, str | None]] = {}
    changed = True
    while changed:
        changed = False
        for d in defs:
            names = [a.arg for a in d.args.posonlyargs + d.args.args]
            kwonly = [a.arg for a in d.args.kwonlyargs]
            if d.name in found or "key" not in names + kwonly:
                continue
            for call in (n for n in ast.walk(d) if isinstance(n, ast.Call)):
                bound = _str(_kw(call, "bind")) == "query-params" or _name(call.func) in found
                arg = _key_arg(call, found.get(_name(call.func), (None,))[0])
                if bound and isinstance(arg, ast.Name) and arg.id == "key":
                    if "key" in names:
                        i = names.index("key")
                        defaults = [None] * (len(names) - len(d.args.defaults)) + list(d.args.defaults)
                        found[d.name] = (i, _str(defaults[i]))
                    else:
                        found[d.name] = (None, _str(d.args.kw_defaults[kwonly.index("key")]))
                    changed = True
                    break
    return found


@functools.cache
def url_keys() -> frozenset[str]:
    """Every query-parameter key the pages and rundash_core read or write: st.query_params[...] /
    .get / .get_all / .pop / `in`, widgets bound with bind="query-params" (and the helpers that
    bind a `key` they are given), page_link(query_params={...}), and the links rundash builds with
    urlencode (a dict literal's keys, or the keywords of a helper taking **params)."""
    trees = []
    for f in code_files():  # widgets live in pages/ and app.py (Streamlit appears nowhere else but the
        text = f.read_text(encoding="utf-8")  # cache adapter); rundash_core builds links with urlencode
        if f.parts[len(REPO.parts)] != "rundash_core" or re.search(r"query.params|urlencode", text):
            trees.append(ast.parse(text, str(f)))
    forwarders = _forwarders(trees)
    linkers = set()  # functions taking **params that urlencode them: their callers' keywords are keys
    keys: set[str] = set()
    for tree in trees:
        for d in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            if any(isinstance(c, ast.Call) and _name(c.func) == "urlencode" for c in ast.walk(d)):
                keys |= {k for n in ast.walk(d) if isinstance(n, ast.Dict) for k in map(_str, n.keys) if k}
                if d.args.kwarg is not None:
                    linkers.add(d.name)
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Subscript) and _is_query_params(node.value):
                keys.add(_key(node.slice))
            elif isinstance(node, ast.Compare) and any(_is_query_params(c) for c in node.comparators):
                keys.add(_key(node.left))
            elif isinstance(node, ast.Call):
                fn = node.func
                if isinstance(fn, ast.Attribute) and fn.attr in QP_METHODS and _is_query_params(fn.value) and node.args:
                    keys.add(_key(node.args[0]))
                if _str(_kw(node, "bind")) == "query-params":
                    keys.add(_key(_kw(node, "key")))
                if _name(fn) in forwarders:
                    index, default = forwarders[_name(fn)]
                    arg = _key_arg(node, index)
                    keys.add(_key(arg) if arg is not None else default)
                if isinstance(_kw(node, "query_params"), ast.Dict):
                    keys |= set(map(_str, _kw(node, "query_params").keys))
                if _name(fn) in linkers and not _is_streamlit(fn):  # st.page_link takes label=, icon=
                    keys |= {k.arg for k in node.keywords if k.arg}
    keys.discard(None)
    return frozenset(keys)


def test_url_parameter_scan_finds_the_known_ones():
    """The scan reads what the pages bind (else the next test would pass on nothing)."""
    keys = url_keys()
    assert {"run", "sample", "step", "runs", "smooth", "amount_<", "s_<", "a_<", "x", "match", "tokens",
            "split", "report", "level"} <= keys, sorted(keys)


def test_every_url_parameter_is_documented():
    doc = (DOCS / "url-params.md").read_text(encoding="utf-8")
    missing = sorted(k for k in url_keys() if f"`{k}" + ("" if k.endswith("<") else "`") not in doc)
    assert not missing, f"docs/url-params.md does not document {missing}"


# Format spec citations ---------------------------------------------------------------------------
CITE = re.compile(r"(?:\b(" + "|".join(KINDS) + r")\s+)?\bspecs?\s+§?(\d+(?:\.\d+)?)(?![\d.]*\d)", re.IGNORECASE)
NAMED_SPEC = re.compile(r"formats/(" + "|".join(KINDS) + r")\.md")
FILE_CITE = re.compile(r"formats/(" + "|".join(KINDS) + r")\.md`?,?\s+(?:sections?\s+)?(\d+(?:\.\d+)?)(?![\d.]*\d)")


def spec_sections(kind: str) -> dict[str, str]:
    """Numbered headings of docs/formats/<kind>.md ('4', '4.1', ...) -> the section's body."""
    text = (FORMATS / f"{kind}.md").read_text(encoding="utf-8")
    parts = re.split(r"^#{2,4} +(\d+(?:\.\d+)*)\.? .*$", text, flags=re.MULTILINE)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def resolves(kind: str, number: str) -> bool:
    """`N.M` is heading N.M, or item M of the numbered list of a section N that has no subsections
    (verl's "spec 4.8": step 8 of the cleanup pipeline); `N` is heading N."""
    sections = spec_sections(kind)
    if number in sections:
        return True
    top, _, item = number.partition(".")
    if not item or top not in sections or any(s.startswith(top + ".") for s in sections):
        return False
    return re.search(rf"^{item}\. ", sections[top], flags=re.MULTILINE) is not None


def module_kind(path: Path, text: str) -> str | None:
    """The kind a module's bare "spec N" means: the one formats file it names, else its
    sources/<kind>/ folder."""
    named = set(NAMED_SPEC.findall(text))
    if len(named) == 1:
        return named.pop()
    parts = path.relative_to(REPO).parts
    if "sources" in parts and parts.index("sources") + 2 < len(parts):
        folder = parts[parts.index("sources") + 1].replace("_", "-")
        return folder if folder in KINDS else None
    return None


def citations() -> list[tuple[str, str | None, str, str]]:
    """(file:line, kind, number, the citation as written) for every "spec N.N" in the code, and
    every section number given after a formats file's name."""
    out = []
    for f in code_files():
        text = f.read_text(encoding="utf-8")
        default = module_kind(f, text)
        for m in [*CITE.finditer(text), *FILE_CITE.finditer(text)]:  # "spec N.N"; "formats/verl.md` section 11"
            line = text.count("\n", 0, m.start()) + 1
            out.append((f"{f.relative_to(REPO)}:{line}", (m.group(1) or "").lower() or default, m.group(2), m.group(0)))
    return out


def test_resolver_reads_the_specs():
    """The resolver finds sections that exist and refuses ones that do not."""
    assert resolves("prime-rl", "5.6") and resolves("verl", "4.8") and resolves("verl", "10")
    assert not resolves("prime-rl", "5.9") and not resolves("verl", "4.12") and not resolves("relax", "6.7")
    assert len(citations()) > 20


def test_every_spec_citation_resolves_inside_the_repo():
    unresolved = [f"{where}: {text!r}" + ("" if kind else " (which kind? write '<kind> spec N')")
                  for where, kind, number, text in citations() if not (kind and resolves(kind, number))]
    outside = [f"{f.relative_to(REPO)}" for f in code_files() if "../shared" in f.read_text(encoding="utf-8")]
    assert not unresolved, "\n".join(unresolved)
    assert not outside, f"paths outside the repo ('../shared'): {outside}"
