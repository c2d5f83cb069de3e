"""W&B runs live and messy: a growing file is read by its appended bytes (counted from outside, as
`test_bounded_reads.py` counts), a record still being written is no problem while the run is live
and a torn one when it is not, a damaged block is named and skipped, a new step-metric definition
re-steps what was read; without the `wandb` package a run still lists with one problem naming the
extra; reading opens no connection. Runs are written with wandb's own `Record`s and the framing
wandb-core writes (`records.Writer`, checked byte for byte against wandb's files), and the demo."""
from __future__ import annotations

import io
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rundash_core as rd
from benchmarks.common import counted_reads
from rundash_core import cache
from rundash_core.sources.wandb import demo_run, records
from rundash_core.sources.wandb.run import NEEDS_EXTRA

pb = pytest.importorskip("wandb.proto.wandb_internal_pb2")

DATA = Path(__file__).resolve().parents[1] / "data" / "wandb" / "wandb"
READER = ("rundash_core.sources.wandb.records",)


def test_framing_is_what_wandb_writes_byte_for_byte():
    """Every sample re-framed by `records.Writer` from its own records is the same bytes (one
    file crosses a 32 KiB block: FIRST / LAST chunks and padding)."""
    for path in sorted(DATA.glob("*/run-*.wandb")):
        data = path.read_bytes()
        framed = records.frame(data, 0)
        out = io.BytesIO()
        writer = records.Writer(out)
        for _off, payload in framed.records:
            writer.write(payload)
        assert out.getvalue() == data[: framed.end] and framed.corrupt == []
    assert max(p.stat().st_size for p in DATA.glob("*/run-*.wandb")) > records.BLOCK


def _live_run(root: Path, steps: range, *, start: float, big: int = 0) -> tuple[Path, list[bytes]]:
    """A run folder whose file holds the run record and `steps` (values padded with `big` extra
    keys, so records cross blocks); its payloads."""
    payloads = [demo_run.run_record(pb, "live01", project="p", name="live", config={"model_name_or_path": "m"},
                                    start=start)]
    payloads += _rows(steps, start, big)
    folder = root / "wandb" / demo_run.folder_name("live01", start)
    demo_run.write_attempt(folder, "live01", payloads)
    return folder, payloads


def _rows(steps, start: float, big: int) -> list[bytes]:
    return [demo_run.history_record(pb, {"loss": 1.0 / (s + 1), **{f"extra/k{j}": s + j for j in range(big)}},
                                    s, start + s, float(s)) for s in steps]


def _append(folder: Path, payloads: list[bytes]) -> None:
    path = next(folder.glob("run-*.wandb"))
    with open(path, "ab") as fh:
        writer = records.Writer(fh, at=path.stat().st_size)
        for p in payloads:
            writer.write(p)


def test_a_growing_file_is_read_by_its_appended_bytes(tmp_path):
    now = time.time()
    folder, _ = _live_run(tmp_path, range(0, 200), start=now - 300, big=400)  # ~8 KiB a record
    run = rd.open_run(folder)
    assert len(run.metrics()) == 200 * 401
    path = next(folder.glob("run-*.wandb"))
    size = path.stat().st_size
    more = _rows(range(200, 230), now - 300, 400)
    _append(folder, more)
    grown = path.stat().st_size
    with counted_reads(READER) as count:
        m = rd.open_run(folder).metrics()
    assert len(m) == 230 * 401 and m["step"].max() == 229
    assert count.bytes <= grown - size + 4096, (count.bytes, grown - size)
    with counted_reads(READER) as count:  # nothing new: nothing read
        assert len(rd.open_run(folder).metrics()) == 230 * 401
    assert count.bytes == 0
    # half a record written: not read yet, no problem while the run is live
    whole = io.BytesIO()
    records.Writer(whole, at=grown).write(_rows([230], now - 300, 400)[0])
    with open(path, "ab") as fh:
        fh.write(whole.getvalue()[:3000])
    assert rd.open_run(folder).overview().status == "running"
    assert len(rd.open_run(folder).metrics()) == 230 * 401 and rd.open_run(folder).problems() == []
    with open(path, "ab") as fh:
        fh.write(whole.getvalue()[3000:])
    assert rd.open_run(folder).metrics()["step"].max() == 230


def test_a_copy_with_fresh_file_times_is_not_running(tmp_path):
    shutil.copytree(DATA / "offline-run-20261202_051905-trl0c2d3", tmp_path / "wandb" / "offline-run-20261202_051905-trl0c2d3")
    path = next((tmp_path / "wandb").glob("*/run-*.wandb"))
    with open(path, "r+b") as fh:  # without its exit record (a copy of a run that was still going)
        framed = records.frame(fh.read(), 0)
        exit_at = next(off for off, p in framed.records if records.record_field(p)[0] == records.EXIT)
        fh.truncate(exit_at)
    os.utime(path)  # fresh
    run = rd.open_run(path.parent)
    assert run.overview().status == "stopped" and not run.overview().finished


def test_a_damaged_block_is_named_and_the_rest_read(tmp_path):
    now = time.time() - 7200
    folder, payloads = _live_run(tmp_path, range(0, 120), start=now, big=60)
    path = next(folder.glob("run-*.wandb"))
    data = bytearray(path.read_bytes())
    assert len(data) > 3 * records.BLOCK
    data[records.BLOCK + 500] ^= 0xFF  # one byte in the second block
    path.write_bytes(bytes(data))
    run = rd.open_run(folder)
    steps = set(run.metrics()["step"])
    problems = run.problems()
    assert [p for p in problems if "checksum mismatch" in p.what], problems
    assert 0 in steps and 119 in steps and len(steps) < 120  # the block's records only are lost
    assert not [p for p in problems if "torn" in p.what]


def test_a_step_metric_defined_later_re_steps_what_was_read(tmp_path):
    start = time.time() - 7200
    folder = tmp_path / "wandb" / demo_run.folder_name("def01", start)
    rows = [demo_run.history_record(pb, {"train/reward": s / 10, "train/global_step": s * 4}, s, start + s, s)
            for s in range(5)]
    demo_run.write_attempt(folder, "def01", [demo_run.run_record(pb, "def01", project="p", name="d", config={},
                                                                  start=start), *rows])
    assert set(rd.open_run(folder).metrics()["step"]) == {0, 1, 2, 3, 4}
    _append(folder, [demo_run.metric_record(pb, glob="train/*", step_metric="train/global_step")])
    m = rd.open_run(folder).metrics()
    assert set(m["step"]) == {0, 4, 8, 12, 16}
    assert rd.open_run(folder).overview().step == 17  # global steps 0..16: 17 done


def test_the_demo_run_is_fast_deterministic_and_resumed(tmp_path):
    t_end = 1_796_000_000.0
    t = time.perf_counter()
    first = demo_run.write_wandb_run(tmp_path / "a", t_end)
    took = time.perf_counter() - t
    second = demo_run.write_wandb_run(tmp_path / "b", t_end)
    assert took < 0.5
    names = sorted(p.name for p in first.parent.iterdir())
    assert names == sorted(p.name for p in second.parent.iterdir()) and len(names) == 2
    for name in names:
        a, b = (next((root / "wandb" / name).glob("*.wandb")).read_bytes() for root in (tmp_path / "a", tmp_path / "b"))
        assert a == b
    ov = rd.open_run(first).overview()
    assert ov.attempts == 2 and ov.status == "completed" and ov.step == 30 and ov.model == demo_run.MODEL


NO_WANDB = """
import sys, json
sys.modules["wandb"] = None  # as if the extra were not installed
import rundash_core as rd
run = rd.open_run(sys.argv[1])
frame = rd.discover([sys.argv[2]])
print(json.dumps({"problems": [p.what for p in run.problems()], "rows": len(run.metrics()),
                  "config": run.config(), "listed": sorted(frame["kind"]), "status": run.overview().status,
                  "name": run.overview().name}))
"""


def test_without_wandb_runs_list_with_one_problem_naming_the_extra():
    folder = DATA / "offline-run-20261202_051905-trl0c2d3"
    out = subprocess.run([sys.executable, "-c", NO_WANDB, str(folder), str(DATA.parent)], check=True,
                         capture_output=True, text=True, timeout=120, env={**os.environ, "RUNDASH_ROOTS": ""})
    import json
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["problems"] == [NEEDS_EXTRA] and "rundash[wandb]" in NEEDS_EXTRA
    assert got["rows"] == 0 and got["config"] == {} and got["listed"] == ["wandb"] * 3
    assert got["name"] == "trl0c2d3" and got["status"] == "unknown"  # nothing read: not "running" on file times


def test_damaged_bytes_never_raise(tmp_path):
    """Random bytes overwritten (with the CRCs made to match, so the damage reaches the decoders),
    files cut anywhere: every reader answers, none raises."""
    import random
    import struct
    import zlib

    rnd = random.Random(26)
    good = (DATA / "offline-run-20261202_051905-trl0c2d3" / "run-trl0c2d3.wandb").read_bytes()
    for n in range(30):
        data = bytearray(good)
        for _ in range(rnd.randint(1, 20)):
            data[rnd.randrange(len(data))] = rnd.randrange(256)
        i = 7
        while n % 2 and i + 7 <= len(data):  # CRCs recomputed: garbage inside valid chunks
            crc, length, kind = struct.unpack_from("<IHB", data, i)
            if kind not in (1, 2, 3, 4) or i + 7 + length > len(data) or length + 7 > records.BLOCK - i % records.BLOCK:
                break
            struct.pack_into("<I", data, i, zlib.crc32(bytes(data[i + 7: i + 7 + length]), zlib.crc32(bytes([kind]))))
            i += 7 + length
        folder = tmp_path / f"w{n}" / "wandb" / "offline-run-20261202_051905-trl0c2d3"
        folder.mkdir(parents=True)
        (folder / "run-trl0c2d3.wandb").write_bytes(bytes(data[: rnd.randrange(len(data))] if n % 3 == 0 else data))
        run = rd.open_run(folder)
        run.metrics(), run.overview(), run.problems(), run.config(), run.summary(), run.resume_steps()


def test_reading_opens_no_connection(monkeypatch):
    def refuse(*_a, **_k):
        raise AssertionError("a W&B run was read over the network")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    cache.shared.clear()
    for folder in sorted(DATA.iterdir()):
        run = rd.open_run(folder)
        run.metrics(), run.overview(), run.problems(), run.config(), run.summary()
