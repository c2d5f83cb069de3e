"""In-flight prime-rl episodes (spec 5.7, `rundash_core.sources.prime_rl.live`): the real-writer live
files (verifiers 0.4.0, copied into tests/data/prime-rl-live) folded into partial traces, their
stages, dedupe against the stream, bad and vanishing files, and the demo's live writer."""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import orjson
import pytest

import rundash_core as rd
from rundash_core import frames
from rundash_core.sources.prime_rl import live

from helpers import DATA, copy_run

SRC = DATA / "prime-rl-traces" / "math-python+wiki-search--qwen3-4b--0b45f1ec"
LIVE = DATA / "prime-rl-live" / "live"
TRACE = "bf8bcef0f60f41e3a7e1fee85c3fc089"


@pytest.fixture
def run_dir(tmp_path) -> Path:
    """A copy of the real-writer run with its live/ folder (as the writer left it) in place."""
    run = copy_run(SRC, tmp_path / "out")
    shutil.copytree(LIVE, run / "monitors" / "file" / "traces" / "live")
    return run


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_fold_rebuilds_the_partial_trace():
    lines = _lines(LIVE / f"{TRACE}.jsonl")
    trace, dispatch, pending = live.fold_deltas(lines)
    assert trace["id"] == TRACE and trace["task"] == lines[0]["open"]["task"]
    nodes = [n for x in lines if "nodes" in x for n in x["nodes"]]
    assert len(trace["nodes"]) == len(nodes) > 0
    assert [n["message"]["role"] for n in trace["nodes"]] == [n["message"]["role"] for n in nodes]
    assert trace["calls"] == [c for x in lines if "calls" in x for c in x["calls"]]
    assert trace["tools"] == [x for x in lines if "set" in x][-1]["set"]["tools"]  # later `set` wins
    assert dispatch == lines[0]["dispatch"]
    assert pending == [x for x in lines if "pending" in x][-1]["pending"]  # the last pending, after the nodes
    # nodes clear what was pending; a discard drops nodes
    t2, _dispatch, p2 = live.fold_deltas(lines[:3])
    assert p2 == [] and len(t2["nodes"]) == len(nodes)
    t3, _dispatch, _pending = live.fold_deltas([*lines[:3], {"trace": TRACE, "discard": 1}])
    assert len(t3["nodes"]) == len(nodes) - 1
    t4, _dispatch, _pending = live.fold_deltas([*lines[:3], {"trace": TRACE, "discard": [0]}])
    assert t4["nodes"] == trace["nodes"][1:]


def test_stage_from_timing():
    assert live.stage(None) == "pending"
    t = {"timing": {"start": 1.0, "boot": {"start": 1.0, "end": 0.0}, "setup": {"start": 0.0, "end": 0.0}}}
    assert live.stage(t) == "boot"
    t["timing"]["setup"]["start"] = 2.0
    assert live.stage(t) == "setup"
    t["timing"]["agent"] = {"start": 3.0, "end": 0.0}
    assert live.stage(t) == "running"
    t["timing"]["finalize"] = {"start": 4.0, "end": 0.0}
    assert live.stage(t) == "finalize"
    t["timing"]["scoring"] = {"start": 5.0, "end": 0.0}
    assert live.stage(t) == "scoring"
    t["timing"]["scoring"]["end"] = 6.0
    assert live.stage(t) == "done"
    assert live.stage({**t, "errors": [{"type": "ProviderError"}]}) == "error"
    trace, _dispatch, _pending = live.fold_deltas(_lines(LIVE / f"{TRACE}.jsonl"))
    assert live.stage(trace) == "running"  # the writer's file: boot and setup done, agent started


def test_live_samples_of_the_real_writer(run_dir):
    run = rd.open_run(run_dir)
    rows = run.live_samples()
    assert frames.check(rows, frames.SAMPLES) == []
    pending = sorted(p.stem for p in (LIVE / "pending").glob("*.json"))
    assert sorted(rows["sample_id"]) == sorted([f"live-{TRACE}"] + [f"live-p-{d}" for d in pending])
    one = rows[rows["sample_id"] == f"live-{TRACE}"].iloc[0]
    first = _lines(LIVE / f"{TRACE}.jsonl")[0]["dispatch"]
    assert one["status"] == "in flight: running" and one["env"] == first["env"] and one["step"] == first["step"]
    assert one["group_id"] == first["group"] and one["split"] == first["kind"] and one["turns"] == 1
    for did in pending:
        d = json.loads((LIVE / "pending" / f"{did}.json").read_text())
        r = rows[rows["sample_id"] == f"live-p-{did}"].iloc[0]
        assert r["status"] == "in flight: pending" and r["env"] == d["env"] and r["task_id"] == d["task"]
    # newest dispatch first (smallest elapsed)
    assert rows["duration_s"].is_monotonic_increasing
    # the partial episode: its nodes, then the pending messages
    ep = run.episode(f"live-{TRACE}")
    trace, _dispatch, pending_msgs = live.fold_deltas(_lines(LIVE / f"{TRACE}.jsonl"))
    assert [m.role for m in ep.messages] == ([n["message"]["role"] for n in trace["nodes"]]
                                             + [m["role"] for m in pending_msgs])
    assert ep.raw["in_flight"]["stage"] == "running" and ep.env == first["env"]
    assert all(v > 0 for v in ep.timing.values())  # phases not ended yet are left out
    assert run.episode(f"live-p-{pending[0]}").messages == []
    with pytest.raises(KeyError):
        run.episode("live-nope")


def test_an_episode_that_landed_leaves_the_live_list(run_dir):
    """Dedupe by trace id: a live file whose trace is already in the stream index is not listed."""
    folder = run_dir / "monitors" / "file" / "traces"
    landed = json.loads((folder / "stream.index.jsonl").read_text().splitlines()[-1])["trace_ids"][0]
    shutil.copy(folder / "live" / f"{TRACE}.jsonl", folder / "live" / f"{landed}.jsonl")
    run = rd.open_run(run_dir)
    ids = set(run.live_samples()["sample_id"])
    assert f"live-{TRACE}" in ids and f"live-{landed}" not in ids
    # the writer deletes a landed episode's file: it is gone from the list on the next read
    (folder / "live" / f"{TRACE}.jsonl").unlink()
    assert f"live-{TRACE}" not in set(run.live_samples()["sample_id"])


def test_bad_live_files_are_skipped(run_dir):
    folder = run_dir / "monitors" / "file" / "traces" / "live"
    good = (folder / f"{TRACE}.jsonl").read_bytes()
    (folder / ("a" * 32 + ".jsonl")).write_bytes(b"\x00\xff garbage\n{not json\n")
    (folder / ("b" * 32 + ".jsonl")).write_bytes(good.split(b"\n")[0][:200])  # a torn first line only
    (folder / "pending" / "c.json").write_bytes(b"[1, 2]")
    (folder / "not-an-id!.jsonl").write_bytes(good)
    rows = rd.open_run(run_dir).live_samples()
    assert set(rows["sample_id"]) >= {f"live-{TRACE}"}
    assert not any(s.startswith(("live-aaaa", "live-bbbb", "live-p-c")) or "!" in s for s in rows["sample_id"])
    # a torn last line waits: the file's complete lines are read
    (folder / f"{TRACE}.jsonl").write_bytes(good + b'{"trace": "' + TRACE.encode() + b'", "nodes": [')
    trace_row = rd.open_run(run_dir).live_samples().set_index("sample_id").loc[f"live-{TRACE}"]
    assert trace_row["turns"] == 1


def test_no_live_folder_is_an_empty_frame(tmp_path):
    run = rd.open_run(copy_run(SRC, tmp_path / "out"))
    assert run.live_samples().empty and frames.check(run.live_samples(), frames.SAMPLES) == []
    relax = rd.open_run(DATA / "relax" / "relax-run")
    assert relax.live_samples().empty and list(relax.live_samples().columns) == list(frames.SAMPLES)


def test_demo_live_writer_writes_in_flight_traces_that_then_land(tmp_path):
    from rundash_core import demo
    from rundash_core.demo import live as writer

    folder = demo.ensure_demo(tmp_path / "demo")
    state = writer._LiveRun(folder)
    now = time.time()
    state.tick(now)
    run = rd.open_run(folder / writer.LIVE.name)
    rows = run.live_samples()
    flying = [s for s in rows["sample_id"] if not s.startswith(live.PENDING_PREFIX)]
    assert len(flying) == 1 and any(s.startswith(live.PENDING_PREFIX) for s in rows["sample_id"])
    assert rows.set_index("sample_id").loc[flying[0], "status"] == "in flight: running"
    ep = run.episode(flying[0])
    assert ep.messages and ep.messages[-1].role == "tool"  # the pending tool result comes last
    state.tick(now + 2)
    index = (folder / writer.LIVE.name / "monitors/file/traces/stream.index.jsonl").read_text().splitlines()
    assert orjson.loads(index[-1])["trace_ids"] == [flying[0].removeprefix(live.LIVE_PREFIX)]  # it landed
    after = set(run.live_samples()["sample_id"])
    assert flying[0] not in after and len(after) == 2  # replaced by the next step's in-flight pair


def test_a_live_file_is_followed_from_where_the_last_read_ended(run_dir):
    """In-flight files are followed like every prime-rl JSON-lines file (`lines.objects`): an
    append is read from the last read's end, a torn last line waits, a rewritten file is read
    again whole, and a bad line is named by `live_problems` while its file is there."""
    import os

    from rundash_core import cache
    path = run_dir / "monitors" / "file" / "traces" / "live" / f"{TRACE}.jsonl"
    good = path.read_bytes()
    first = good[:good.index(b"\n") + 1]
    path.write_bytes(first + good[len(first):len(first) + 10])  # one line and a torn one
    assert len(live._lines(str(path))) == 1
    assert cache.shared.peek(("prime-rl-live", os.path.realpath(path)))[1].tail.offset == len(first)
    with open(path, "ab") as f:  # the writer goes on
        f.write(good[len(first) + 10:])
    assert len(live._lines(str(path))) == good.count(b"\n")
    path.write_bytes(b'{"x": 1}\n[1]\n')  # rewritten: read again whole
    assert live._lines(str(path)) == [{"x": 1}]
    assert [p.what for p in live.live_problems(str(run_dir))] == ["1 complete line not a JSON object (skipped)"]
    path.unlink()
    assert live.live_problems(str(run_dir)) == []


def test_a_last_line_without_newline_counts_once_still_and_is_taken_back_if_it_goes_on(tmp_path, monkeypatch):
    """`lines.objects` follows with the one line follower (`ByteTail`, forked per read): a last
    line without its newline waits while the file is written, and counts once it is still: a
    finished file's last object is kept, a torn one is named as not an object; should the writer
    go on with that line, its first reading is taken back; a value read earlier stays as it was."""
    from rundash_core import cache
    from rundash_core.io import bytetail
    from rundash_core.sources.prime_rl import lines

    path = tmp_path / "index.jsonl"
    key = ("t-index", os.path.realpath(path))
    keep = lambda offset, length, obj: (offset, length, obj["i"])
    path.write_bytes(b'{"i": 1}\n{"i": 2}')  # finished without a final newline
    monkeypatch.setattr(bytetail, "SETTLE_S", 1e9)  # never still: the last line waits
    assert lines.objects(str(path), "t-final", keep) == [(0, 9, 1)]
    monkeypatch.setattr(bytetail, "SETTLE_S", -1e9)  # still at once: the last line is read
    assert lines.objects(str(path), "t-final", keep) == [(0, 9, 1), (9, 8, 2)]

    path.write_bytes(b'{"i": 1}\n{"i": 2')  # torn mid-line, then still
    first = lines.objects(str(path), "t-index", keep)
    assert first == [(0, 9, 1)] and lines.BAD_LINES[key[1]] == (1, 2)
    with open(path, "ab") as f:  # the writer went on with that line ("i": 23), then a new one
        f.write(b'3}\n{"i": 4}\n')
    assert lines.objects(str(path), "t-index", keep) == [(0, 9, 1), (9, 10, 23), (19, 9, 4)]
    assert key[1] not in lines.BAD_LINES and first == [(0, 9, 1)]  # (the value handed out before is unchanged)
    assert cache.shared.peek(key)[1].tail.offset == path.stat().st_size
