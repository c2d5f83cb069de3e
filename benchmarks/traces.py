"""`python -m benchmarks traces`: listing and opening episodes of a ≥ 1 GB prime-rl stream.

Writes a prime-rl run whose `monitors/file/traces/` holds a stream of about `--size-mb` (default
1,100 MB) of real-shaped episode records (the real-writer records of the prime-rl test run, each copy
with its own episode, trace and group ids), chunked at `--chunk-mb`: every full chunk sealed in the
Zstandard seekable format (frames of 4 MiB of text, level 3, no content size: as prime-rl's writer
makes them), the last one left plain (live) with a half-written last line; `stream.index.jsonl`
with one row per episode; orch ship annotations (`annotations/orch/`) that put each episode in its
step. Then, in this process, with rundash's caches emptied where it says cold:

- baseline: decompressing one whole sealed chunk (what a reader without the seek table does);
- listing one step's samples, cold and warm: `run.samples(step=S)`;
- opening one episode by id in a sealed chunk, cold (no seek table, no frame cached) and warm
  (another episode of the same chunk), and one in the live chunk: `run.episode(sample_id)`;
- which stream files the listing opened: every `open_file` of rundash is counted while it lists.

Targets: open one episode ≤ 1/50 of the whole-chunk time; listing a step opens no stream file.
Times are wall and CPU seconds; the ratios and targets compare CPU time (the machine these run on
is shared: wall time there mostly measures the other processes). The files are fresh in the OS page
cache for every contender alike (the baseline too).
"""
from __future__ import annotations

import os
import struct
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson
import zstandard

from benchmarks.common import format_table, pass_miss, print_report, secs, work_root

FRAME_BYTES = 4 << 20  # prime-rl's seekable writer cuts a frame every 4 MiB of text
EPISODES_PER_STEP = 256
GROUP_SIZE = 8
TARGET_RATIO = 50.0
COLD_OPENS = 5  # episodes opened cold, each in its own frame: the median counts
TEMPLATE_RUN = "math-python+wiki-search--qwen3-4b--0b45f1ec"
_ODD_A, _ODD_B = 0x9E3779B97F4A7C15F39CC0605CEDC835, 0xC2B2AE3D27D4EB4F165667B19E3779F9  # id scramblers


# The templates: the test run's real-writer records ------------------------------------------------
@dataclass
class Template:
    record: bytes
    row: dict  # its index row
    eid: bytes
    tid: bytes | None
    group: bytes | None


def template_dir() -> Path:
    """The run whose records are copied: the repository's tests/data, else the shared samples."""
    root = Path(__file__).resolve().parents[1]
    for d in (root / "tests" / "data" / "prime-rl-traces" / TEMPLATE_RUN,
              *sorted((root.parent / "shared" / "samples" / "generated" / "prime-rl").glob("*--qwen3-4b--*"))):
        if (d / "monitors" / "file" / "traces" / "stream.index.jsonl").is_file():
            return d
    raise FileNotFoundError(f"no prime-rl traces to copy records from (tests/data/prime-rl-traces/{TEMPLATE_RUN})")


def templates(run_dir: Path) -> list[Template]:
    from rundash_core.sources.prime_rl.traces import chunk_path, read_record_line, traces_dir

    folder = traces_dir(str(run_dir))
    out = []
    for raw in Path(folder, "stream.index.jsonl").read_bytes().splitlines():
        row = orjson.loads(raw)
        record = read_record_line(chunk_path(os.path.join(folder, "stream"), row.get("chunk", 0)), row["offset"])
        tids = row.get("trace_ids") or []
        out.append(Template(record + b"\n", row, row["id"].encode(), tids[0].encode() if tids else None,
                            row["group"].encode() if isinstance(row.get("group"), str) else None))
    return out


# Writing the stream -------------------------------------------------------------------------------------
@dataclass
class Stream:
    run_dir: str
    bytes: int
    episodes: int
    steps: int
    sealed: list[str]
    live: str
    seconds: float


def seal(plain: str, frame_bytes: int = FRAME_BYTES) -> str:
    """`NNNNN.jsonl` → `NNNNN.jsonl.zst` in the seekable format, the way prime-rl seals a chunk
    (written as `.tmp`, renamed, the plain file deleted)."""
    comp = zstandard.ZstdCompressor(level=3, write_content_size=False)
    dest, entries = plain + ".zst", []
    with open(plain, "rb") as src, open(dest + ".tmp", "wb") as out:
        while piece := src.read(frame_bytes):
            frame = comp.compress(piece)
            out.write(frame)
            entries.append((len(frame), len(piece)))
        table = b"".join(struct.pack("<II", c, d) for c, d in entries)
        out.write(struct.pack("<II", 0x184D2A5E, len(entries) * 8 + 9) + table
                  + struct.pack("<IBI", len(entries), 0, 0x8F92EAB1))
    os.replace(dest + ".tmp", dest)
    os.unlink(plain)
    return dest


def write_stream(root: str, *, size_mb: float, chunk_mb: float, frame_bytes: int = FRAME_BYTES) -> Stream:
    t_start = time.perf_counter()
    tpl = templates(template_dir())
    run_dir = os.path.join(root, "bench-traces--qwen3-4b--00000000")
    traces = os.path.join(run_dir, "monitors", "file", "traces")
    stream = os.path.join(traces, "stream")
    os.makedirs(stream)
    os.makedirs(os.path.join(traces, "annotations", "orch"))
    target, chunk_bytes = int(size_mb * 1e6), int(chunk_mb * 1e6)
    chunk, size, total, line, sealed = 0, 0, 0, 0, []
    t = 1_790_000_000.0
    ships: list[tuple[bytes, dict]] = []
    plain = open(os.path.join(stream, "00000.jsonl"), "wb")
    with open(os.path.join(traces, "stream.index.jsonl"), "wb") as index, \
            open(os.path.join(traces, "annotations", "orch", "00000.jsonl"), "wb") as ann, \
            open(os.path.join(traces, "annotations", "orch.index.jsonl"), "wb") as ann_index:
        while total < target:
            step = line // EPISODES_PER_STEP
            src = tpl[line % len(tpl)]
            eid = b"%032x" % ((line * _ODD_A) & ((1 << 128) - 1))
            tid = b"%032x" % ((line * _ODD_B) & ((1 << 128) - 1))
            group = b"%08x-0000-4000-8000-%012x" % (step, (line % EPISODES_PER_STEP) // GROUP_SIZE)
            data = src.record.replace(src.eid, eid)
            if src.tid is not None:
                data = data.replace(src.tid, tid)
            if src.group is not None:
                data = data.replace(src.group, group)
            if size and size + len(data) > chunk_bytes:  # roll over: seal the full chunk
                plain.close()
                sealed.append(seal(plain.name, frame_bytes))
                chunk, size = chunk + 1, 0
                plain = open(os.path.join(stream, f"{chunk:05d}.jsonl"), "wb")
            plain.write(data)
            duration = float(src.row.get("duration") or 5.0)
            row = {**src.row, "line": line + 1, "chunk": chunk, "offset": size, "id": eid.decode(),
                   "trace_ids": [tid.decode()] if src.tid is not None else [], "group": group.decode(),
                   "dispatch": t, "arrival": t + duration, "duration": duration}
            index.write(orjson.dumps(row) + b"\n")
            if src.tid is not None:
                ships.append((tid, {"effective": True, "advantage": 0.0}))
            size, total, line, t = size + len(data), total + len(data), line + 1, t + 0.05
            if line % EPISODES_PER_STEP == 0 or total >= target:  # the step ships: its annotations
                for trace_id, info in ships:
                    info = {**info, "ship": {"step": step, "time": t}}
                    rec = orjson.dumps({"version": 1, "trace_id": trace_id.decode(), "info": info, "branches": []})
                    ann_index.write(orjson.dumps({"trace_id": trace_id.decode(), "chunk": 0, "offset": ann.tell(),
                                                  "info": info}) + b"\n")
                    ann.write(rec + b"\n")
                ships = []
        plain.write(tpl[0].record[: len(tpl[0].record) // 2])  # the live chunk's half-written last line
        plain.close()
    return Stream(run_dir, total, line, (line - 1) // EPISODES_PER_STEP + 1, sealed, plain.name,
                  time.perf_counter() - t_start)


# Measuring ------------------------------------------------------------------------------------------------
def whole_chunk_seconds(path: str) -> tuple[float, int]:
    """Decompressing a whole sealed chunk, as a reader without the seek table must."""
    t, n = time.perf_counter(), 0
    with open(path, "rb") as fh, zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True) as r:
        while block := r.read(16 << 20):
            n += len(block)
    return time.perf_counter() - t, n


@contextmanager
def counting_opens():
    """Every file rundash opens (through `rundash_core.io.files.open_file`, wherever imported)."""
    from rundash_core.io import files

    real, opened = files.open_file, []

    def counted(path):
        opened.append(os.fspath(path))
        return real(path)
    patched = [m for name, m in list(sys.modules.items())
               if name.startswith("rundash_core") and getattr(m, "open_file", None) is real]
    for m in patched:
        m.open_file = counted
    try:
        yield opened
    finally:
        for m in patched:
            m.open_file = real


def _cold() -> None:
    from rundash_core import cache
    from rundash_core.io import zst_seekable

    cache.shared.clear()
    zst_seekable.clear_frame_cache()


def _read_record(run_dir: str, sample_id: str) -> dict:
    """The episode's record only: its row by id, its line through the seek table, parsed (no
    mapping into an `Episode`, no annotations)."""
    from rundash_core import frames
    from rundash_core.sources.prime_rl.traces import read_record_line, sample_row

    plain, offset, length = frames.parse_line_locator(sample_row(run_dir, sample_id)["locator"])
    return orjson.loads(read_record_line(plain, offset, length))


def _cold_chunks(sealed: list[str]) -> None:
    """No seek table and no decompressed frame of any sealed chunk cached."""
    from rundash_core import cache
    from rundash_core.io import zst_seekable
    from rundash_core.io.files import file_id

    for path in sealed:
        cache.shared.discard(("zst-seek-table", os.path.realpath(path), file_id(path)))
    zst_seekable.clear_frame_cache()


def _median_cold(fn, sample_ids: list[str], sealed: list[str]) -> tuple[object, tuple[float, float]]:
    """`fn(sid)` for several episodes, each with no seek table or frame cached: the median (wall,
    CPU) seconds."""
    runs, value = [], None
    for sid in sample_ids:
        _cold_chunks(sealed)
        value, took = _timed(lambda: fn(sid))
        runs.append(took)
    walls, cpus = sorted(w for w, _c in runs), sorted(c for _w, c in runs)
    return value, (walls[len(walls) // 2], cpus[len(cpus) // 2])


def _timed(fn, repeat: int = 1) -> tuple[object, tuple[float, float]]:
    """`fn()` and its (wall, CPU) seconds, the best of `repeat` runs (CPU time says more than wall
    time on a busy shared machine)."""
    best, value = (float("inf"), float("inf")), None
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        value = fn()
        best = min(best, (time.perf_counter() - t, time.process_time() - c))
    return value, best


def measure(stream: Stream) -> dict:
    import rundash_core as rd

    run = rd.open_run(stream.run_dir)
    load0 = os.getloadavg()[0]
    if stream.sealed:
        content, baseline = _timed(lambda: whole_chunk_seconds(stream.sealed[0])[1], repeat=2)
    else:
        content, baseline = 0, None
    step = stream.steps // 2
    _cold()
    with counting_opens() as opened:
        listed, list_cold = _timed(lambda: run.samples(step=step))
        _, list_warm = _timed(lambda: run.samples(step=step), repeat=3)
    stream_dir = os.path.join(stream.run_dir, "monitors", "file", "traces", "stream") + os.sep
    stream_opens = [p for p in opened if p.startswith(stream_dir)]
    everything = run.samples()
    in_chunk = everything[everything["locator"].str.contains(os.sep + "stream" + os.sep + "00000.jsonl:", regex=False)]
    live_name = os.path.basename(stream.live)
    in_live = everything[everything["locator"].str.contains(os.sep + live_name + ":", regex=False)]
    sid, other = in_chunk["sample_id"].iloc[len(in_chunk) // 2], in_chunk["sample_id"].iloc[len(in_chunk) // 3]
    live_sid = in_live["sample_id"].iloc[len(in_live) // 2]
    _cold()
    run.samples()  # the listing and what is derived from it are not what is measured here:
    run.episode(live_sid)  # (the id → row map, the annotation index)
    _cold_chunks(stream.sealed)
    picks = list(in_chunk["sample_id"].iloc[1::max(1, len(in_chunk) // COLD_OPENS)][:COLD_OPENS])
    ep, open_cold = _median_cold(lambda s: run.episode(s), picks, stream.sealed)
    _, read_cold = _median_cold(lambda s: _read_record(stream.run_dir, s), picks, stream.sealed)
    _, open_warm = _timed(lambda: run.episode(other), repeat=1)
    _, open_live = _timed(lambda: run.episode(live_sid), repeat=1)
    timings = {"baseline": baseline, "list_cold": list_cold, "list_warm": list_warm, "open_cold": open_cold,
               "read_cold": read_cold, "open_warm": open_warm, "open_live": open_live}
    return {**{f"{k}_s": v and v[0] for k, v in timings.items()},
            **{f"{k}_cpu_s": v and v[1] for k, v in timings.items()},
            "chunk_content_bytes": content, "step": step, "listed": len(listed), "opens_while_listing": len(opened),
            "stream_opens_while_listing": stream_opens, "episode_messages": len(ep.messages), "sample_id": sid,
            "episodes": len(everything), "loadavg": [load0, os.getloadavg()[0]]}


def build_report(stream: Stream, r: dict) -> tuple[str, dict]:
    base = r["baseline_cpu_s"]  # compared on CPU time: wall time on a busy shared machine says little

    def ratio(s: float) -> str:
        if not base or s <= 0:
            return ""
        return f"1/{base / s:,.0f}" if s < base else f"{s / base:,.1f}×"
    ok_open = bool(base) and r["open_cold_cpu_s"] <= base / TARGET_RATIO
    ok_list = not r["stream_opens_while_listing"]
    def cpu(key: str) -> str:
        return secs(r[f"{key}_cpu_s"]) if r.get(f"{key}_cpu_s") is not None else ""
    def line(label: str, key: str, target: str = "") -> list[str]:
        return [label, secs(r[f"{key}_s"]), cpu(key), ratio(r[f"{key}_cpu_s"]), target]

    ok_read = bool(base) and r["read_cold_cpu_s"] <= base / TARGET_RATIO
    goal = f"≤ 1/{TARGET_RATIO:.0f}: "
    rows = [
        [f"baseline: decompress sealed chunk 00000 ({r['chunk_content_bytes'] / 1e6:,.0f} MB of text)",
         secs(r["baseline_s"]) if base else "n/a", cpu("baseline"), "1", ""],
        line(f"list step {r['step']}'s {r['listed']} samples, cold (index + annotation index parsed)", "list_cold"),
        line(f"list step {r['step']}'s samples, warm", "list_warm"),
        line(f"open one episode by id, sealed chunk, cold (seek table + its frame; median of {COLD_OPENS})",
             "open_cold", goal + pass_miss(ok_open)),
        line("  of which reading its record (row by id, seek table, frame, JSON parse)", "read_cold",
             goal + pass_miss(ok_read)),
        line("open another episode of that chunk, warm", "open_warm"),
        line("open one episode in the live chunk (byte seek)", "open_live"),
        ["stream files opened while listing a step", str(len(r["stream_opens_while_listing"])), "", "",
         f"0: {pass_miss(ok_list)}"],
    ]
    head = (f"prime-rl stream: {stream.bytes / 1e6:,.0f} MB of records, {stream.episodes:,} episodes in "
            f"{stream.steps} steps, {len(stream.sealed)} sealed chunks + 1 live chunk "
            f"(written in {stream.seconds:.0f} s); "
            f"files {r['opens_while_listing']} opened while listing (index files only); "
            f"load average {r['loadavg'][0]:.1f} → {r['loadavg'][1]:.1f} on {os.cpu_count()} CPUs")
    table = format_table(["operation", "seconds", "CPU s", "vs whole chunk (CPU)", "target"], rows, right={1, 2, 3})
    return head + "\n\n" + table, {"open_ok": ok_open, "list_ok": ok_list}


def add_parser(sub) -> None:
    p = sub.add_parser("traces", help="a ≥ 1 GB prime-rl trace stream: list a step, open an episode")
    p.add_argument("--size-mb", type=float, default=1100.0, help="stream size in MB (default 1,100)")
    p.add_argument("--chunk-mb", type=float, default=512.0, help="chunk size in MB before sealing (default 512)")
    p.add_argument("--frame-kb", type=int, default=FRAME_BYTES >> 10, help="seekable frame size in KiB (default 4096)")
    p.add_argument("--dir", help="write the run to DIR and keep it (default: a temp dir, removed at the end)")
    p.add_argument("--json", help="also write all measurements to this JSON file")
    p.set_defaults(func=cmd_traces)


def cmd_traces(args) -> int:
    with work_root(args.dir, "rundash-bench-traces-") as root:
        print(f"writing a {args.size_mb:,.0f} MB prime-rl stream in {args.chunk_mb:,.0f} MB chunks …", flush=True)
        stream = write_stream(root, size_mb=args.size_mb, chunk_mb=args.chunk_mb, frame_bytes=args.frame_kb << 10)
        print("measuring …", flush=True)
        from rundash_core.io import files

        files.set_roots([root])  # as the app does
        try:
            results = measure(stream)
        finally:
            files.set_roots(None)
        text, checks = build_report(stream, results)
        print_report(text, args.json, {"stream": stream.__dict__, "results": results, "checks": checks})
        return 0 if checks["open_ok"] and checks["list_ok"] else 1
