"""Hostile text and file shapes (issue 24, "Nothing raises"): a lone surrogate escape, a line
nested 100,000 deep, a file name that is not UTF-8, unreadable files and folders, folders linked
out of the roots. Each run still lists and opens, every reader returns, the shape is named on
Problems, and every page opens without an exception element."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

import rundash_core as rd
from rundash_core import ai
from rundash_core.io.files import set_roots
from rundash_core.views.display_text import md_escape

from helpers import DATA, app_pages, copy_run, open_page
from helpers.serving import in_child_as

PRIME = DATA / "prime-rl" / "math-python+wiki-search--qwen3-4b--0b45f1ec"
TRACES = DATA / "prime-rl-traces" / "math-python+wiki-search--qwen3-4b--0b45f1ec"
METRICS = Path("monitors/file/metrics.jsonl")
BAD = b"bad\xff.log"
NOBODY = 65534  # the uid and gid the unreadable-file tests drop to
SURROGATE_LINE = b'{"step": 3, "time": 1.0, "x\\ud800y": 2.0, "note": "\\udfff", "producer": "trainer"}\n'
DEEP_LINE = b"[" * 100_000 + b"]" * 100_000 + b"\n"
LEGO_LOG = "qwen3-8b-swegym-gspo-async-r1.log"
LEGO_TRIAL = "harbor_trials/swe_lego_rl/qwen3-8b-swegym-gspo-async-r1/step_0196/sympy__sympy-24749-e0a19186"
READERS = ("overview", "metrics", "validation", "health", "samples", "logs", "reports", "problems")


def _bad_name(folder: Path) -> Path:
    return Path(os.fsdecode(os.path.join(os.fsencode(folder), BAD)))


def hostile_tree(parent: Path) -> Path:
    """One run of each kind with the shapes planted: metrics lines (prime-rl), a non-UTF-8 log
    name in each (a verl log so named is a run of its own)."""
    root = parent / "hostile"
    p = copy_run(PRIME, root, "prime")
    with open(p / METRICS, "ab") as fh:
        fh.write(SURROGATE_LINE + DEEP_LINE)
    _bad_name(p / "logs").write_bytes(b"hello from a badly named log\n")
    (root / "verl").mkdir()
    shutil.copy(DATA / "verl" / "dq_math.log", root / "verl" / "dq_math.log")
    shutil.copy(DATA / "verl" / "eh_gemma-2-2b-it-sft-0.411.log", _bad_name(root / "verl"))
    shutil.copytree(DATA / "lego", root / "lego", symlinks=True)
    _bad_name(root / "lego" / "logs" / "extra").parent.mkdir()
    _bad_name(root / "lego" / "logs" / "extra").write_bytes(b"x\n")
    shutil.copytree(DATA / "relax" / "relax-run", root / "relax")
    with open(root / "relax" / "rollout_result" / "train" / sorted(os.listdir(root / "relax" / "rollout_result" / "train"))[0], "ab") as fh:
        fh.write(SURROGATE_LINE + DEEP_LINE)
    return root


def _sweep(path: str) -> rd.Run:
    run = rd.open_run(path)
    for name in READERS:
        getattr(run, name)()  # any exception fails the test
    s = run.samples()
    for sid in list(s["sample_id"])[:2]:
        run.episode(sid)
    logs = run.logs()
    if len(logs):
        run.read_log(list(logs["path"]))
    assert ai.analysis_context(run).encode("utf-8")
    return run


def test_every_kind_lists_opens_and_reads_with_hostile_shapes(tmp_path):
    root = hostile_tree(tmp_path)
    df = rd.discover([root])
    assert set(df["kind"]) >= {"prime-rl", "verl", "swe-lego-rl", "relax"}
    assert all(p.encode("utf-8") for p in df["path"])  # every shown path is a UTF-8 string
    for path in df["path"]:
        _sweep(path)


def test_lone_surrogate_escape_is_replaced_and_named(tmp_path):
    run = _sweep(str(hostile_tree(tmp_path) / "prime"))
    assert "x\ufffdy" in set(run.metrics()["metric"])
    names = [p.what for p in run.problems()]
    assert any("lone UTF-16 surrogate" in w for w in names), names


def test_a_line_nested_100000_deep_is_a_named_problem(tmp_path):
    root = hostile_tree(tmp_path)
    run = _sweep(str(root / "prime"))
    found = [p for p in run.problems() if "nested too deep" in p.what]
    assert len(found) == 1 and found[0].path.endswith("metrics.jsonl") and found[0].line is not None
    assert run.metrics()["step"].max() >= 3  # the good rows around it are read
    relax = _sweep(str(root / "relax"))  # a rollout file: the same decode, named the same way
    whats = {p.what for p in relax.problems() if p.path.endswith("train/0.jsonl")}
    assert {"JSON nested too deep (skipped)", "lone UTF-16 surrogate escapes (replaced by U+FFFD)"} <= whats, whats


def test_a_trace_record_nested_too_deep_opens_what_it_can(tmp_path):
    run_dir = copy_run(TRACES, tmp_path / "out")
    index = run_dir / "monitors/file/traces/stream.index.jsonl"
    plain = run_dir / "monitors/file/traces/stream/00001.jsonl"
    rows = [json.loads(x) for x in index.read_text().splitlines()]
    last = rows[-1]
    data = plain.read_bytes()
    record = json.loads(data[last["offset"]:data.index(b"\n", last["offset"])])
    record["id"] = "f" * 32
    raw = json.dumps(record).encode()
    raw = raw[:-1] + b', "hostile": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    offset = plain.stat().st_size
    with open(plain, "ab") as fh:
        fh.write(raw + b"\n")
    with open(index, "a") as fh:
        fh.write(json.dumps({**last, "line": last["line"] + 1, "id": "f" * 32, "offset": offset}) + "\n")
    run = rd.open_run(run_dir)
    sid = [s for s in run.samples()["sample_id"] if "ffffffff" in s]
    assert sid, list(run.samples()["sample_id"])[-3:]
    ep = run.episode(sid[0])
    assert ep.messages  # the transcript is shown
    assert "nested too deep" in (ep.error or ""), ep.error
    found = [p for p in run.problems() if "nested too deep" in p.what]  # and named on Problems
    assert [p.path for p in found] == [str(plain)] and f"byte {offset}" in found[0].what, run.problems()


def test_a_log_whose_name_is_not_utf8_lists_and_reads(tmp_path):
    root = hostile_tree(tmp_path)
    run = rd.open_run(root / "prime")
    logs = run.logs()
    shown = [p for p in logs["path"] if p.endswith("bad\\xff.log")]
    assert shown, list(logs["path"])
    lines = run.read_log(shown)
    assert list(lines["text"]) == ["hello from a badly named log"]
    df = rd.discover([root / "verl"])
    row = df[df["path"].str.endswith("bad\\xff.log")].iloc[0]
    assert "not valid UTF-8" in row["error"]
    verl = rd.open_run(row["path"])  # the shown path opens the run
    assert verl.overview().step == rd.open_run(DATA / "verl" / "eh_gemma-2-2b-it-sft-0.411.log").overview().step
    assert len(verl.read_log(list(verl.logs()["path"])))


def test_nothing_from_outside_the_roots_is_listed(tmp_path):
    outside = tmp_path / "elsewhere"
    (outside / "trial-qqzz__x").mkdir(parents=True)
    for name in ("qqzz-name.log", "qqzz-name.md", "qqzz-name.jsonl", "0.jsonl"):
        (outside / name).write_text("{}\n")
    root = tmp_path / "root"
    p = copy_run(PRIME, root, "prime")
    shutil.rmtree(p / "logs/attempt_2/envs")
    os.symlink(outside, p / "logs/attempt_2/envs")
    shutil.rmtree(p / "reports")
    os.symlink(outside, p / "reports")
    os.symlink(outside, p / "logs/attempt_1/linked")
    shutil.copytree(DATA / "lego", root / "lego", symlinks=True)
    trials = root / "lego" / "harbor_trials"
    os.symlink(outside, trials / sorted(os.listdir(trials))[0] / "linked")
    relax = root / "relax"
    shutil.copytree(DATA / "relax" / "relax-run", relax)
    os.symlink(outside, relax / "rollout_result" / "linked")
    set_roots([root])
    try:
        for path in rd.discover([root])["path"]:
            run = rd.open_run(path)
            for name in ("logs", "reports", "samples"):
                text = getattr(run, name)().to_csv()
                assert "qqzz" not in text and "elsewhere" not in text and "/linked" not in text, (path, name)
    finally:
        set_roots(None)


# Unreadable files: as root mode 000 does not stop reads, so a forked child drops to nobody ---------
def _unreadable_tree() -> tuple[str, dict]:
    base = tempfile.mkdtemp(prefix="rundash-unreadable-")
    os.chmod(base, 0o755)
    p, t, v, lego, relax = (os.path.join(base, x) for x in ("p", "t", "v", "lego", "relax"))
    shutil.copytree(PRIME, p)
    shutil.copytree(TRACES, t)
    shutil.copytree(DATA / "lego", lego, symlinks=True)
    shutil.copytree(DATA / "relax" / "relax-run", relax)
    trial = f"{lego}/{LEGO_TRIAL}"
    os.makedirs(v)
    shutil.copy(DATA / "verl" / "dq_math.log", v)
    for r, ds, fs in os.walk(base):
        for x in ds:
            os.chmod(os.path.join(r, x), 0o755)
        for x in fs:
            os.chmod(os.path.join(r, x), 0o644)
    closed = {"trainer": f"{p}/logs/attempt_2/trainer.log", "envs": f"{p}/logs/attempt_2/envs",
              "report": f"{p}/reports/resume-after-oom.md", "chunk": f"{t}/monitors/file/traces/stream/00001.jsonl",
              "verl": f"{v}/dq_math.log", "trial": f"{trial}/result.json",
              "rollouts": f"{relax}/rollout_result/train/1.jsonl"}
    for path in closed.values():
        os.chmod(path, 0)
    return base, {"runs": [p, t, f"{v}/dq_math.log", f"{lego}/logs/{LEGO_LOG}", relax], "closed": closed}


def _report(runs: list[str]) -> dict:
    out = {"raised": [], "problems": [], "status": {}}
    for path in runs:
        try:
            run = rd.open_run(path)
            for name in READERS:
                getattr(run, name)()
            out["status"][path] = run.overview().status
            logs = run.logs()
            run.read_log(list(logs["path"]))
            for sid in list(run.samples()["sample_id"])[-2:]:
                try:
                    run.episode(sid)
                except rd.RunError as e:  # a sample whose record cannot be read: the file named
                    out["episode_refused"] = str(e)
            out["problems"] += [p.path for p in run.problems()]
        except Exception as e:  # noqa: BLE001 - reported to the parent, which fails the test
            out["raised"].append(f"{path}: {type(e).__name__}: {e}")
    return out


def _as_nobody(runs: list[str]) -> dict:
    _report([str(PRIME), str(TRACES), str(DATA / "verl" / "dq_math.log"), str(DATA / "lego" / "logs" / LEGO_LOG),
             str(DATA / "relax" / "relax-run")])  # import lazily loaded modules as root
    return in_child_as(NOBODY, lambda: _report(runs))


def test_unreadable_files_are_named_and_nothing_raises():
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to an unprivileged uid (mode 000 files are checked as nobody)")
    base, tree = _unreadable_tree()
    try:
        rep = _as_nobody(tree["runs"])
    finally:
        for r, ds, _fs in os.walk(base):
            for x in ds:
                os.chmod(os.path.join(r, x), 0o755)
        shutil.rmtree(base)
    assert not rep["raised"], rep["raised"]
    for what, path in tree["closed"].items():
        assert path in rep["problems"], (what, rep["problems"])
    assert rep["status"][tree["runs"][2]] == "unknown"
    assert tree["closed"]["chunk"] + ": permission denied" in rep["episode_refused"], rep.get("episode_refused")


# Pages ---------------------------------------------------------------------------------------------
def test_every_page_opens_on_hostile_runs(monkeypatch, tmp_path):
    root = hostile_tree(tmp_path)
    df = rd.discover([root])
    chosen = [df[df["kind"] == "prime-rl"].iloc[0], df[df["path"].str.endswith("verl/bad\\xff.log")].iloc[0]]
    for row in chosen:
        for page in app_pages():
            open_page(monkeypatch, root, page, {"run": row["run_id"]})  # asserts no exception element


def _trajectory_as_nobody(monkeypatch, folder: str, run_id: str, sample_id: str) -> dict:
    """The Trajectory page on `sample_id`, opened through AppTest by an unprivileged child."""
    from streamlit.testing.v1 import AppTest

    from helpers import APP

    def page() -> AppTest:
        at = AppTest.from_file(str(APP), default_timeout=90)
        at.query_params["run"], at.query_params["sample"] = run_id, sample_id
        at.run()
        return at.switch_page("pages/trajectory.py").run()

    monkeypatch.setenv("RUNDASH_DIRS", folder)  # (restored after the test: later tests in this process never see it)
    monkeypatch.delenv("RUNDASH_ROOTS", raising=False)
    page()  # as root first: every module the page imports is loaded (the chunk is readable to root)

    def shown() -> dict:
        rd.cache.shared.clear()
        at = page()
        return {"exceptions": [str(e.value) for e in at.exception], "errors": [e.value for e in at.error],
                "warnings": [w.value for w in at.warning]}

    return in_child_as(NOBODY, shown)


def test_the_trajectory_page_names_an_unreadable_episode_file(monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to an unprivileged uid (mode 000 files are checked as nobody)")
    base, tree = _unreadable_tree()
    chunk = tree["closed"]["chunk"]
    try:
        os.chmod(chunk, 0o644)
        run = rd.open_run(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(chunk))))))
        samples = run.samples()
        sid = samples[samples["locator"].str.contains("00001.jsonl")]["sample_id"].iloc[-1]
        os.chmod(chunk, 0)
        shown = _trajectory_as_nobody(monkeypatch, os.path.dirname(run.path), run.run_id, sid)
    finally:
        for r, ds, _fs in os.walk(base):
            for x in ds:
                os.chmod(os.path.join(r, x), 0o755)
        shutil.rmtree(base)
    assert shown["exceptions"] == [], shown
    said = shown["errors"] + shown["warnings"]
    assert any(md_escape(f"{chunk}: permission denied") in m for m in said), said  # the file, and why
