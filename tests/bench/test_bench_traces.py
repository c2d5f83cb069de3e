"""The traces benchmark at a small size: the stream it writes is a real prime-rl stream (sealed
seekable chunks rundash reads, a live chunk, the index), and its report says what it measured."""
from __future__ import annotations

import json
import os
import re

import orjson
import zstandard

import rundash_core as rd
from benchmarks import traces as bench
from benchmarks.__main__ import main
from rundash_core.io import zst_seekable


def test_the_written_stream_is_sealed_chunks_a_live_chunk_and_its_index(tmp_path):
    stream = bench.write_stream(str(tmp_path), size_mb=6, chunk_mb=2, frame_bytes=256 << 10)
    traces = os.path.join(stream.run_dir, "monitors", "file", "traces")
    names = sorted(os.listdir(os.path.join(traces, "stream")))
    assert names[:-1] == [f"{n:05d}.jsonl.zst" for n in range(len(names) - 1)] and names[-1].endswith(".jsonl")
    assert len(stream.sealed) >= 2 and stream.bytes >= 6e6
    table = zst_seekable.seek_table(stream.sealed[0])
    assert table.frames > 1 and max(table.d_sizes) == 256 << 10
    with open(stream.sealed[0], "rb") as fh:  # any zstd decoder reads it whole
        whole = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True).read()
    assert len(whole) == table.size and whole.endswith(b"\n")
    index = [orjson.loads(x) for x in open(os.path.join(traces, "stream.index.jsonl"), "rb")]
    assert len(index) == stream.episodes and [r["line"] for r in index] == list(range(1, len(index) + 1))
    first = [r for r in index if r["chunk"] == 0]
    for r in first[:: max(1, len(first) // 5)]:  # the index points at the records, by uncompressed offset
        rec = orjson.loads(whole[r["offset"]: whole.index(b"\n", r["offset"])])
        assert rec["id"] == r["id"] and [t["id"] for t in rec["traces"]] == r["trace_ids"]
    live = open(stream.live, "rb").read()
    assert not live.endswith(b"\n")  # a half-written last line, with no index row
    run = rd.open_run(stream.run_dir)
    samples = run.samples()
    assert len(samples) == stream.episodes and samples["sample_id"].is_unique
    assert set(samples["trainer_step"].dropna()) == set(range(stream.steps))  # every step shipped
    sid = samples["sample_id"].iloc[len(samples) // 2]
    assert run.episode(sid).ids["episode"] == index[len(samples) // 2]["id"]


def test_the_report_has_its_rows_and_listing_reads_no_stream_bytes(tmp_path, capsys):
    out_json = tmp_path / "r.json"
    code = main(["traces", "--size-mb", "8", "--chunk-mb", "3", "--frame-kb", "512", "--dir", str(tmp_path / "w"),
                 "--json", str(out_json)])
    text = capsys.readouterr().out
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| operation")]
    assert [r.split("|")[1].strip().split(" ")[0] for r in rows] == [
        "baseline:", "list", "list", "open", "of", "open", "open", "stream"]
    assert all(len(r.split("|")) == 7 for r in rows)  # operation, seconds, CPU seconds, ratio, target
    listing = rows[-1].split("|")
    assert listing[2].strip() == "0" and "PASS" in listing[5]
    assert re.search(r"≤ 1/50: (PASS|MISS)", rows[3]) and re.search(r"≤ 1/50: (PASS|MISS)", rows[4])
    data = json.loads(out_json.read_text())
    assert data["results"]["stream_opens_while_listing"] == [] and data["results"]["opens_while_listing"] >= 1
    assert data["results"]["listed"] > 0 and data["checks"]["list_ok"] is True
    assert code == (0 if data["checks"]["open_ok"] else 1)


def test_the_open_counter_sees_a_stream_read(tmp_path):
    """The instrument can fail: opening an episode does open a stream file."""
    stream = bench.write_stream(str(tmp_path), size_mb=3, chunk_mb=1)
    run = rd.open_run(stream.run_dir)
    sid = run.samples()["sample_id"].iloc[0]
    with bench.counting_opens() as opened:
        run.episode(sid)
    assert any(os.sep + "stream" + os.sep in p for p in opened)
