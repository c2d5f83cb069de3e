"""The run contract (`rundash_core.run.Run`), for every kind: every method answers with its schema,
`episode(sid)` works for every listed `sid`, and a run with nothing readable answers empty frames
plus problems. A new source must pass these (they run over every run `rd.discover` finds in the
demo and in `tests/data`; `RUNDASH_TEST_EXTRA_RUNS`, folders joined by os.pathsep, adds more, e.g.
a collection of real runs)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

import rundash_core as rd
from rundash_core import demo, frames
from rundash_core.overview import Overview
from rundash_core.run import CAPABILITIES, Run
from rundash_core.sources import SOURCES

from helpers import DATA, REPO

EXTRA = [Path(p) for p in os.environ.get("RUNDASH_TEST_EXTRA_RUNS", "").split(os.pathsep) if p]
DEMO = None


def _demo_folder() -> Path:
    global DEMO
    if DEMO is None:
        import atexit
        import tempfile

        DEMO = demo.ensure_demo(Path(tempfile.mkdtemp(prefix="rundash-contract-")) / "demo")
        atexit.register(shutil.rmtree, DEMO.parent, True)  # built at collection, once per xdist worker
    return DEMO


def _runs() -> list:
    folders = [DATA, _demo_folder(), *EXTRA]  # (only what the repo holds unless asked: the same tests everywhere)
    out = []
    for folder in folders:
        frame = rd.discover([folder])
        out += [pytest.param(path, run_id, id=f"{folder.name}/{run_id}") for path, run_id in zip(frame.path, frame.run_id)]
    return out


RUNS = _runs()


def test_every_kind_is_covered():
    kinds = {rd.open_run(p.values[0]).kind for p in RUNS}
    assert kinds == {s.kind for s in SOURCES}


@pytest.mark.parametrize("path,run_id", RUNS)
def test_every_method_answers_its_schema(path, run_id):
    run = rd.open_run(path, run_id=run_id)
    assert isinstance(run, Run) and run.capabilities <= set(CAPABILITIES)
    ov = run.overview()
    assert isinstance(ov, Overview) and ov.run_id == run_id and ov.kind == run.kind
    tidy = run.metrics()
    assert list(tidy.columns) == ["step", "time", "metric", "value", "producer"]
    assert str(tidy["step"].dtype) == "Int64" and tidy["value"].dtype == "float64"
    wide = run.metrics_wide()
    assert list(wide.columns[:2]) == ["step", "time"] and str(wide["step"].dtype) == "Int64"
    assert isinstance(run.metrics_version(), tuple)
    assert isinstance(run.config(), dict) and isinstance(run.configs(), dict)
    assert run.attempts() and run.latest_attempt() in run.attempts()
    assert all(isinstance(p, rd.Problem) for p in run.problems())
    for method, schema in ((run.samples, frames.SAMPLES), (run.steps, frames.STEPS),
                           (run.validation, frames.VALIDATION), (run.logs, frames.LOGS)):
        assert frames.check(method(), schema) == [], method.__name__
    assert frames.check(run.read_log([]), frames.LOG_LINES) == []
    if "metrics" in run.capabilities and run.kind != "relax":
        assert len(tidy) or run.problems()  # no metrics is said, never silent
    assert run.kind_capabilities <= run.capabilities <= set(CAPABILITIES)  # (after every listing was read)
    reports = run.reports()
    assert ("reports" in run.capabilities) == (not reports.empty)


def test_one_capabilities_mechanism():
    """Every source says what its kind offers in `kind_capabilities` (the vocabulary's names) and
    answers `capabilities` through `Run`'s one property: no source defines its own."""
    for cls in (source.run_class for source in SOURCES):
        assert cls.capabilities is Run.capabilities and isinstance(Run.capabilities, property), cls
        assert isinstance(cls.kind_capabilities, frozenset) and cls.kind_capabilities <= set(CAPABILITIES), cls


@pytest.mark.parametrize("path,run_id", RUNS)
def test_samples_ids_are_unique_url_safe_and_open_their_episode(path, run_id):
    run = rd.open_run(path, run_id=run_id)
    samples = run.samples()
    if "samples" not in run.capabilities:
        assert samples.empty
        return
    assert samples["sample_id"].is_unique
    assert all(frames.is_url_safe(s) for s in samples["sample_id"])
    assert samples["locator"].notna().all()
    for sid in samples["sample_id"]:
        ep = run.episode(sid)
        row = samples[samples["sample_id"] == sid].iloc[0]
        assert ep.sample_id == sid and ep.run_id == run.run_id and ep.split == row["split"]
        assert ep.step == (None if pd.isna(row["step"]) else row["step"])  # (Harbor: no trainer step known)
        if pd.notna(row["reward"]):
            assert ep.reward == pytest.approx(row["reward"])
    with pytest.raises(KeyError):
        run.episode("no-such-sample")
    steps = run.steps()
    assert steps["samples"].sum() == samples["step"].notna().sum()


def test_sample_ids_are_the_same_after_a_restart(tmp_path):
    """Ids do not depend on process state: a fresh cache (a restarted server) gives the same ones."""
    from rundash_core import cache

    for p in RUNS:
        run = rd.open_run(p.values[0])
        first = list(run.samples()["sample_id"])
        if "samples" in run.capabilities:
            cache.shared.clear()
            assert list(rd.open_run(p.values[0]).samples()["sample_id"]) == first


def test_relax_episode_reads_one_line_at_its_locator(tmp_path, monkeypatch):
    save = shutil.copytree(DATA / "relax" / "relax-run", tmp_path / "relax-run")
    run = rd.open_run(save)
    samples = run.samples()
    sid = samples["sample_id"].iloc[-1]
    path, offset, length = frames.parse_line_locator(samples["locator"].iloc[-1])
    import orjson

    record = orjson.loads(Path(path).read_bytes()[offset:offset + length])
    read = []
    from rundash_core.sources.relax import run as relax_run

    real = relax_run.read_range
    monkeypatch.setattr(relax_run, "read_range", lambda p, a, b: read.append((a, b)) or real(p, a, b))
    ep = run.episode(sid)
    assert read == [(offset, offset + length)]
    assert ep.messages[0].content == record["prompt"] and ep.messages[1].content == record["response"]


def test_harbor_episode_has_the_agent_transcript():
    log = DATA / "lego" / "logs" / "qwen3-8b-swegym-gspo-async-r1.log"
    run = rd.open_run(log)
    samples = run.samples()
    row = samples[samples["locator"].str.endswith("pytest-dev__pytest-14655-07b4c762")].iloc[0]
    ep = run.episode(row["sample_id"])
    roles = [m.role for m in ep.messages]
    assert roles[:3] == ["system", "user", "assistant"] and "tool" in roles
    call = ep.messages[2].tool_calls[0]
    assert call.name == "execute_bash" and '"command"' in call.arguments
    answer = next(m for m in ep.messages if m.role == "tool")
    assert answer.tool_call_id == call.id and "def approx" in answer.content
    assert ep.messages[2].reasoning and ep.timing


def test_a_run_with_nothing_readable_answers_empty_frames_and_problems(tmp_path):
    """Each kind, its files present but unreadable (empty or garbage): frames of the schema, problems."""
    relax_dir = tmp_path / "relax" / "rollout_result" / "train"
    relax_dir.mkdir(parents=True)
    (relax_dir / "1.jsonl").write_bytes(b"\x00garbage\n")
    prime = tmp_path / "prime" / "monitors" / "file"
    prime.mkdir(parents=True)
    (prime / "metrics.jsonl").write_bytes(b"not json\n")
    log = tmp_path / "verl.log"
    log.write_bytes(b"\xff\xfe nothing here\n")
    for path in (tmp_path / "relax", tmp_path / "prime", log):
        run = rd.open_run(path)
        assert run.samples().empty and (run.metrics()["value"] == 0).all()  # Relax: a step of 0 samples
        assert frames.check(run.samples(), frames.SAMPLES) == [] and frames.check(run.steps(), frames.STEPS) == []
        assert run.problems(), run.kind
        assert run.overview().step == (1 if path.name == "relax" else None)  # Relax: the file's name says step 1


def test_unknown_producer_names_the_producers():
    run = rd.open_run(DATA / "prime-rl" / "math-python+wiki-search--qwen3-4b--0b45f1ec")
    with pytest.raises(ValueError, match="orch.*trainer|trainer.*orch"):
        run.metrics_wide(producer="nobody")


def test_pages_and_cli_never_branch_on_kind():
    root = REPO
    core = root / "rundash_core"
    terminal = [*core.glob("serve/*.py"), *core.glob("tui/*.py")]
    for f in [*root.joinpath("pages").glob("*.py"), root / "app.py", *terminal]:
        text = f.read_text()
        assert ".kind ==" not in text and ".kind !=" not in text and "kind in (" not in text, f.name


def test_configs_hide_secrets_unless_the_owner_asks(tmp_path):
    """`run.config()`/`run.configs()` go through the one redaction rule; `redacted=False` is the
    owner's opt-in in a notebook."""
    import json
    import shutil

    from helpers import NEW_RUN

    run_dir = shutil.copytree(NEW_RUN, tmp_path / NEW_RUN.name, symlinks=True)
    orch = run_dir / "configs" / "attempt_2" / "resolved" / "orchestrator.json"
    cfg = json.loads(orch.read_text())
    cfg["wandb"] = {"key": "0123456789abcdef0123456789abcdef01234567"}
    cfg["client"] = {"api_key": "sk-live-SECRET-VALUE-123"}
    orch.write_text(json.dumps(cfg))
    (run_dir / "configs" / "attempt_2" / "command.txt").write_text("OPENAI_API_KEY=sk-live-SECRET-VALUE-123 uv run rl --token abcdefSECRET\n")
    run = rd.open_run(run_dir)
    shown = repr(run.configs()) + repr(run.config())
    assert "SECRET" not in shown and "0123456789abcdef0123456789abcdef01234567" not in shown
    assert "max_steps" in repr(run.configs())  # the rest stays
    raw = run.configs(redacted=False)
    assert "sk-live-SECRET-VALUE-123" in repr(raw) and "abcdefSECRET" in raw["command.txt"]
