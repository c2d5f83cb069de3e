"""Reads stay in bounded windows whatever the bytes (issue 24, "Nothing raises").

Each shape is made in tmp_path from a real run of each kind: a 100 GB sparse file (a hole after
the real lines: `os.truncate`, which costs no disk), real lines written after such a hole (a
live writer going on), and 64 MB of tqdm `\\r` redraws with no newline (real bytes). The API
calls run in a subprocess limited to 2 GB of address space (RLIMIT_AS), which reports its own
peak RSS: no call raises, memory stays under PEAK_MB, each call takes seconds, the hole or the
cut line is named on Problems, and what the real lines say is read as from the undamaged copy.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import rundash_core as rd

from helpers import DATA, NEW_RUN, REPO, copy_run, make_rl_run

SPARSE = 100 << 30
PEAK_MB = 600
CALL_S = 20  # a call on a 100 GB sparse file (a loaded 2-core machine: generous)
CALLS = ("overview", "metrics", "validation", "health", "problems", "logs", "read_log", "samples")
TRACES_RUN = DATA / "prime-rl-traces" / "math-python+wiki-search--qwen3-4b--0b45f1ec"
VERL_LOG = DATA / "verl" / "eh_gemma-2-2b-it-sft-0.411.log"
LEGO_LOG = "qwen3-8b-swegym-gspo-async-r1.log"

CHILD = r"""
import json, os, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
import rundash_core as rd
run = rd.open_run(sys.argv[1])
out = {}
for call in sys.argv[2].split(","):
    t = time.monotonic()
    try:
        if call == "read_log":
            lines = run.read_log(list(run.logs()["path"]))
            value = list(lines["text"])[-3:]
        elif call == "follow":  # the Logs view following from the offsets it last showed
            after = json.loads(os.environ["FOLLOW_AFTER"])
            value = list(run.read_log(list(after), after=after)["text"])[-3:]
        elif call == "episode":
            value = len(run.episode(run.samples()["sample_id"].iloc[-1]).messages)
        elif call == "overview":
            o = run.overview()
            value = {"step": o.step, "last_step": o.last_step}
        elif call == "problems":
            value = [str(p) for p in run.problems()]
        else:
            value = len(getattr(run, call)())
        out[call] = {"value": value}
    except BaseException as e:
        out[call] = {"error": f"{type(e).__name__}: {e}"[:300]}
    out[call]["seconds"] = time.monotonic() - t
# VmHWM: this process's own peak (ru_maxrss keeps the forking parent's across exec: an xdist
# worker's 600 MB would count as the child's)
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
out["peak_mb"] = int(hwm.split()[1]) / 1024
print(json.dumps(out, default=str))
"""


def in_child(run_dir: Path, calls=CALLS, follow_after: dict | None = None) -> dict:
    """The calls in a fresh process under RLIMIT_AS 2 GB; each call's value, or its error."""
    env = {**os.environ, "FOLLOW_AFTER": json.dumps(follow_after or {})}
    done = subprocess.run([sys.executable, "-c", CHILD, str(run_dir), ",".join(calls)], capture_output=True,
                          text=True, timeout=300, cwd=REPO, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    errors = {c: r["error"] for c, r in out.items() if isinstance(r, dict) and "error" in r}
    assert not errors, errors
    assert out["peak_mb"] < PEAK_MB, out["peak_mb"]
    slow = {c: r["seconds"] for c, r in out.items() if isinstance(r, dict) and r["seconds"] > CALL_S}
    assert not slow, slow
    return {c: r["value"] for c, r in out.items() if isinstance(r, dict)} | {"peak_mb": out["peak_mb"]}


def expected(run_dir: Path, calls=CALLS) -> dict:
    """The same values read in this process from the undamaged copy."""
    run = rd.open_run(run_dir)
    o = run.overview()
    got = {"overview": {"step": o.step, "last_step": o.last_step}, "read_log": None}
    for call in calls:
        if call not in got and call not in ("problems", "episode"):
            got[call] = len(getattr(run, call)())
    return got


@pytest.fixture
def holes(tmp_path) -> Path:
    """tmp_path, where a file truncated to 100 GB takes (almost) no disk; else the test skips."""
    probe = tmp_path / "probe"
    probe.write_bytes(b"x\n")
    os.truncate(probe, SPARSE)
    used = probe.stat().st_blocks * 512
    probe.unlink()
    vfs = os.statvfs(tmp_path)
    if used > 64 << 20:
        pytest.skip(f"{tmp_path} does not keep holes in sparse files ({used} bytes used for a 100 GB truncate)")
    if vfs.f_bavail * vfs.f_frsize < 1 << 30:
        pytest.skip(f"less than 1 GB free under {tmp_path}")
    return tmp_path


def sparse(path: Path, then: bytes = b"") -> int:
    """Make `path` 100 GB (a hole after its bytes), optionally with `then` written after the hole;
    the offset where the hole starts."""
    at = path.stat().st_size
    os.truncate(path, SPARSE)
    if then:
        with open(path, "ab") as fh:
            fh.write(then)
    return at


def named(problems: list[str], path: Path, at: int) -> None:
    hole = f"{path}: 100 GB of NUL bytes from byte {at:,} (a hole or a crash while writing)"
    assert any(p.startswith(hole) for p in problems), problems


def same(got: dict, want: dict, calls) -> None:
    for call in calls:
        if call in want and call != "read_log":
            assert got[call] == want[call], (call, got[call], want[call])


# prime-rl --------------------------------------------------------------------------------------
def test_prime_rl_sparse_metrics_and_logs(holes):
    """The shape of the issue: `metrics.jsonl` truncated to 100 GB after its real lines (and a
    trainer log likewise): every call answers, the metrics are the real rows, the hole is named,
    the Logs view shows the log's real last lines."""
    good = copy_run(NEW_RUN, holes / "good")
    bad = copy_run(NEW_RUN, holes / "bad")
    metrics = bad / "monitors" / "file" / "metrics.jsonl"
    at = sparse(metrics)
    for log in (bad / "logs").rglob("trainer.log"):
        sparse(log)
    calls = ("overview", "metrics", "validation", "health", "problems", "logs", "read_log")
    got = in_child(bad, calls)
    same(got, expected(good, calls), calls)
    assert got["metrics"] > 1000 and got["overview"]["step"] is not None
    named(got["problems"], metrics, at)
    assert got["read_log"] and not any("\x00" in line or "line: its middle" in line for line in got["read_log"])


def test_prime_rl_lines_written_after_a_hole_are_read(holes):
    """A writer that goes on after a hole (its file was extended, then appended to): the rows
    after the hole are read too, the hole skipped unread."""
    rows = [{"step": s, "time": 100.0 + s, "perf/mfu": 1.0 + s, "producer": "trainer"} for s in range(4)]
    run = make_rl_run(holes / "out", "hole-run", rows=rows[:2])
    metrics = run / "monitors" / "file" / "metrics.jsonl"
    at = sparse(metrics, then=b"".join(json.dumps(r).encode() + b"\n" for r in rows[2:]))
    got = in_child(run, ("overview", "metrics", "problems"))
    assert got["overview"]["last_step"] == 3 and got["metrics"] == 4
    named(got["problems"], metrics, at)


def test_prime_rl_sparse_trace_files(holes):
    """The traces index, an annotation index, a plain stream chunk and an in-flight file, each
    100 GB sparse: the same samples are listed, an episode opens, each hole is named."""
    good = copy_run(TRACES_RUN, holes / "good")
    bad = copy_run(TRACES_RUN, holes / "bad")
    shutil.copytree(DATA / "prime-rl-live" / "live", bad / "monitors" / "file" / "traces" / "live")
    traces = bad / "monitors" / "file" / "traces"
    index = traces / "stream.index.jsonl"
    at = sparse(index)
    sparse(traces / "annotations" / "trainer.index.jsonl")
    sparse(traces / "stream" / "00001.jsonl")
    live = next((traces / "live").glob("*.jsonl"))
    live_at = sparse(live)
    calls = ("samples", "live_samples", "episode", "problems")
    got = in_child(bad, calls)
    assert got["samples"] == len(rd.open_run(good).samples()) > 0
    assert got["live_samples"] == 4 and got["episode"] > 0
    named(got["problems"], index, at)
    named(got["problems"], live, live_at)


# verl, SWE-Lego-RL, Relax ----------------------------------------------------------------------
def test_verl_sparse_log(holes):
    """A 100 GB sparse verl console log (the log that took a process to 23 GB): the summary's
    step, the metric lines and the validations are the real ones, the hole is named, the Logs
    view ends at the real last line."""
    good = holes / "good" / VERL_LOG.name
    good.parent.mkdir()
    shutil.copy(VERL_LOG, good)
    bad = holes / "bad" / VERL_LOG.name
    bad.parent.mkdir()
    shutil.copy(VERL_LOG, bad)
    at = sparse(bad)
    got = in_child(bad)
    same(got, expected(good), CALLS)
    assert got["overview"]["step"] == 58
    named(got["problems"], bad, at)
    assert got["read_log"][-1] == rd.open_run(good).read_log([str(good)])["text"].iloc[-1]


def test_verl_tqdm_redraws_without_newline(tmp_path):
    """64 MB of tqdm `\\r` redraws and no newline after a real log (real bytes, no hole): read
    in bounded windows, the line cut and named, its last redraw kept, the metrics all read."""
    vfs = os.statvfs(tmp_path)
    if vfs.f_bavail * vfs.f_frsize < 1 << 30:
        pytest.skip(f"less than 1 GB free under {tmp_path}")
    log = tmp_path / "bad" / VERL_LOG.name
    log.parent.mkdir()
    redraws = b"".join(b"\rTraining Progress: %3d%%|####  | %d/1000 [00:%02d<00:10]" % (i % 100, i, i % 60)
                       for i in range(1000))
    with open(log, "wb") as fh:
        fh.write(VERL_LOG.read_bytes())
        for _ in range((64 << 20) // len(redraws)):
            fh.write(redraws)
    got = in_child(log)
    want = expected(VERL_LOG)
    same(got, want, ("metrics", "validation"))
    assert got["overview"]["step"] == want["overview"]["step"]
    cut = [p for p in got["problems"] if "of \\r redraws from byte" in p]
    assert cut and cut[0].startswith(f"{log}: a line of 64 MB of \\r redraws"), got["problems"]
    assert got["read_log"][-1].strip().endswith("[00:39<00:10]")


def test_swe_lego_sparse_log(holes):
    """A SWE-Lego-RL log (with its trials) made 100 GB sparse, its vLLM sidecar too: steps,
    metrics, validation events and samples as before, the hole named."""
    good = holes / "good"
    shutil.copytree(DATA / "lego", good)
    bad = holes / "bad"
    shutil.copytree(DATA / "lego", bad)
    log = bad / "logs" / LEGO_LOG
    at = sparse(log)
    sparse(bad / "logs" / LEGO_LOG.replace(".log", "_vllm.log"))
    got = in_child(log)
    same(got, expected(good / "logs" / LEGO_LOG), CALLS)
    named(got["problems"], log, at)


def test_relax_sparse_rollout_file(holes):
    """A Relax rollout file made 100 GB sparse: its rows read, metrics and samples as before."""
    good = copy_run(DATA / "relax" / "relax-run", holes / "good")
    bad = copy_run(DATA / "relax" / "relax-run", holes / "bad")
    path = bad / "rollout_result" / "train" / "3.jsonl"
    at = sparse(path)
    calls = ("overview", "metrics", "validation", "samples", "problems")
    got = in_child(bad, calls)
    same(got, expected(good, calls), calls)
    named(got["problems"], path, at)


# Live follow -----------------------------------------------------------------------------------
def test_live_follow_across_a_hole(holes):
    """A followed verl log that grows by a hole and then real lines: the next read (and the Logs
    view's follow from the offset it last showed) reads the new lines, not the hole."""
    log = holes / "run" / VERL_LOG.name
    log.parent.mkdir()
    data = VERL_LOG.read_bytes()
    cut = data.index(b"step:30 - ")
    log.write_bytes(data[:cut])
    before = len(rd.open_run(log).metrics())
    at = sparse(log, then=data[cut:])
    got = in_child(log, ("overview", "metrics", "problems", "follow"), follow_after={str(log): cut})
    assert got["metrics"] > before and got["overview"]["step"] == 58
    named(got["problems"], log, at)
    assert got["follow"][-1] == rd.open_run(VERL_LOG).read_log([str(VERL_LOG)])["text"].iloc[-1]
