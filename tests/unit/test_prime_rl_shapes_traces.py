"""Odd but possible prime-rl trace folders (spec 5): stream index rows that point at chunks that do
not exist or past their end, sealed chunks that are truncated or corrupt, garbage in-flight files;
built from copies of the real samples and checked through the public API (listing, `episode()`,
`problems()`): a bad record is a RunError naming its file for that episode (KeyError is for an id
the run does not list) and a `Problem` naming the file."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import rundash_core as rd

from helpers import DATA, copy_run

TRACES_RUN = DATA / "prime-rl-traces" / "math-python+wiki-search--qwen3-4b--0b45f1ec"
LIVE = DATA / "prime-rl-live" / "live"
T = Path("monitors/file/traces")
SEALED = T / "stream" / "00000.jsonl.zst"
PLAIN = T / "stream" / "00001.jsonl"
INDEX = T / "stream.index.jsonl"


@pytest.fixture
def traces_run(tmp_path) -> Path:
    return copy_run(TRACES_RUN, tmp_path / "out")


def _index(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / INDEX).read_text().splitlines()]


def _append_index(run: Path, *rows: dict) -> None:
    with open(run / INDEX, "a") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)


def _opened(run) -> tuple[list[str], list[str]]:
    """(sample ids that open, listed sample ids that cannot be read: RunError naming the trace file);
    any other exception fails."""
    ok, refused = [], []
    for sid in run.samples()["sample_id"]:
        try:
            run.episode(sid)
            ok.append(sid)
        except rd.RunError as e:
            assert "/traces/" in str(e) and sid in str(e), e
            refused.append(sid)
    return ok, refused


def _problems(run, path: Path) -> list[str]:
    return [p.what for p in run.problems() if p.path == str(path)]


def test_the_sample_opens_whole(traces_run):
    run = rd.open_run(traces_run)
    ok, refused = _opened(run)
    assert len(ok) == len(_index(traces_run)) and not refused
    assert not [p for p in run.problems() if "traces" in p.path]


def test_index_rows_for_a_missing_chunk_or_past_the_end_are_problems(traces_run):
    """Bug: such rows were listed and refused on click, with no problem named."""
    last = _index(traces_run)[-1]
    _append_index(traces_run, {**last, "line": 900, "id": "a" * 32, "chunk": 7, "offset": 0},
                  {**last, "line": 901, "id": "b" * 32, "offset": 10 ** 9})
    run = rd.open_run(traces_run)
    ok, refused = _opened(run)
    assert len(ok) == len(_index(traces_run)) - 2 and len(refused) == 2
    assert any("00007.jsonl" in w and "does not exist" in w for w in _problems(run, traces_run / INDEX))
    assert any("outside its" in w for w in _problems(run, traces_run / PLAIN))


def test_a_wrong_next_offset_does_not_hide_a_complete_record(traces_run):
    """Bug: the last complete record of the live chunk (a torn record after it) was refused when
    the next index row's offset lay past it: the read took `length` bytes and wanted them to end in
    a newline."""
    index = _index(traces_run)
    _append_index(traces_run, {**index[-1], "line": 900, "id": "c" * 32, "offset": index[-1]["offset"] + 10 ** 6})
    run = rd.open_run(traces_run)
    last = run.samples().iloc[len(index) - 1]
    assert run.episode(last["sample_id"]).sample_id == last["sample_id"]


@pytest.mark.parametrize("shape", ["truncated", "no footer", "empty", "folder"])
def test_unreadable_sealed_chunk_is_a_problem(traces_run, shape):
    """Bug: a truncated or empty sealed chunk made every episode in it refuse to open, with no
    problem naming the chunk."""
    path = traces_run / SEALED
    data = path.read_bytes()
    if shape == "folder":
        path.unlink()
        path.mkdir()
    else:
        path.write_bytes({"truncated": data[: len(data) // 2], "no footer": data[:-7], "empty": b""}[shape])
    run = rd.open_run(traces_run)
    in_sealed = sum(1 for r in _index(traces_run) if r["chunk"] == 0)
    ok, refused = _opened(run)
    assert len(refused) == in_sealed and len(ok) == len(_index(traces_run)) - in_sealed
    assert any(f"{in_sealed} indexed records" in w for w in _problems(run, path))


def test_corrupt_frame_behind_an_intact_seek_table_is_a_key_error(traces_run):
    """Bug: zstandard.ZstdError ("Data corruption detected") escaped `episode()` as a traceback."""
    path = traces_run / SEALED
    data = bytearray(path.read_bytes())
    for i in range(20, 400):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    run = rd.open_run(traces_run)
    ok, refused = _opened(run)
    assert refused and len(ok) + len(refused) == len(_index(traces_run))


def test_plain_chunk_cut_short(traces_run):
    path = traces_run / PLAIN
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    run = rd.open_run(traces_run)
    past = sum(1 for r in _index(traces_run) if r["chunk"] == 1 and r["offset"] >= len(data) // 2)
    ok, refused = _opened(run)
    assert len(refused) >= past > 0
    assert any(f"{past} records cannot be opened" in w for w in _problems(run, path))


def test_unsigned_64_bit_ints_in_an_index_row(traces_run):
    """Bug: orjson reads ints up to 2**64 - 1; one in `line`, `input_tokens` or `turns` made
    `samples()` raise OverflowError (the Int64 columns)."""
    last = _index(traces_run)[-1]
    _append_index(traces_run, {**last, "line": 2 ** 64 - 1, "id": "d" * 32, "input_tokens": 2 ** 64 - 1,
                               "turns": 2 ** 63})
    run = rd.open_run(traces_run)
    listed = run.samples()
    assert len(listed) == len(_index(traces_run)) - 1  # (a row with no usable line number is no episode)
    assert listed["input_tokens"].max() < 2 ** 63
    _append_index(traces_run, {**last, "line": 902, "id": "e" * 32, "input_tokens": 2 ** 63 - 1})
    assert len(run.samples()) == len(listed) + 1  # (2**63 - 1 overflowed too: pandas went through float64)


def test_rollouts_step_folder_with_a_huge_number(tmp_path):
    """Bug: `rollouts/step_<21 digits>/` made `samples()` raise OverflowError."""
    run_dir = copy_run(next((DATA / "prime-rl-legacy").glob("*--*")), tmp_path / "out")
    huge = run_dir / "rollouts" / ("step_" + "9" * 21)
    huge.mkdir()
    (huge / "train_rollouts.jsonl").write_text('{"reward": 1.0}\n')
    run = rd.open_run(run_dir)
    listed = run.samples()
    assert len(listed) and listed["step"].max() < 10 ** 18
    for sid in listed["sample_id"]:
        assert run.episode(sid).sample_id == sid


def test_index_that_is_a_folder_is_a_problem(traces_run):
    """Bug: a folder named stream.index.jsonl gave an empty listing and no problem."""
    (traces_run / INDEX).unlink()
    (traces_run / INDEX).mkdir()
    run = rd.open_run(traces_run)
    assert run.samples().empty
    assert any("not a regular file" in w for w in _problems(run, traces_run / INDEX))


def test_index_garbage_crlf_and_duplicates(traces_run):
    index = (traces_run / INDEX).read_bytes()
    first = index.splitlines(keepends=True)[0]
    (traces_run / INDEX).write_bytes(index.replace(b"\n", b"\r\n") + b"garbage\x00\xff\n[1]\n" + first + b"\x00" * 50)
    run = rd.open_run(traces_run)
    ok, refused = _opened(run)
    assert len(ok) == len(index.splitlines()) and not refused  # the duplicate row shows once
    assert any("not JSON objects" in w for w in _problems(run, traces_run / INDEX))


def test_annotation_index_pointing_nowhere(traces_run):
    ann = traces_run / T / "annotations"
    trainer = [json.loads(line) for line in (ann / "trainer.index.jsonl").read_text().splitlines()]
    with open(ann / "trainer.index.jsonl", "a") as fh:
        fh.write(json.dumps({**trainer[0], "chunk": 99}) + "\n")
    run = rd.open_run(traces_run)
    ok, refused = _opened(run)
    assert not refused
    assert any("00099.jsonl" in w for w in _problems(run, ann / "trainer.index.jsonl"))


def test_garbage_in_flight_files(traces_run):
    """Bug: garbage lines of an in-flight trace, and a pending dispatch that is not JSON, were
    skipped without a word."""
    live = traces_run / T / "live"
    shutil.copytree(LIVE, live)
    before = rd.open_run(traces_run).live_samples()
    trace = next(live.glob("*.jsonl"))
    with open(trace, "ab") as fh:
        fh.write(b'garbage\x00\xff\n[1]\n{"discard": 99999}\n{"discard": ["a", -1]}\n{"nodes": "x", "set": [1]}\n')
    (live / "torn.jsonl").write_bytes(b'{"dispatch": {"id": "x"')
    (live / "pending" / "bad.json").write_bytes(b"\x00\xff")
    (live / "pending" / "typed.json").write_bytes(b'{"started": "x", "step": "x", "kind": 5, "env": [1]}')
    os.mkfifo(live / "pending" / "fifo.json")
    (live / "dir.jsonl").mkdir()
    (live / "broken.jsonl").symlink_to("nowhere")
    run = rd.open_run(traces_run)
    rows = run.live_samples()
    assert len(rows) == len(before) + 1  # typed.json: a dispatch with odd values still shows
    for sid in rows["sample_id"]:
        assert run.episode(sid).sample_id == sid
    assert any("2 complete lines not a JSON object" in w for w in _problems(run, trace))
    assert _problems(run, live / "pending" / "bad.json")


def test_live_folder_that_is_a_file(traces_run):
    (traces_run / T / "live").write_text("x")
    run = rd.open_run(traces_run)
    assert run.live_samples().empty and len(run.samples()) == len(_index(traces_run))


@pytest.mark.parametrize("field, value", [("token_ids", ["a", 1]), ("token_ids", [None, {}]),
                                          ("logprobs", ["x", {}]), ("id", ["not", "hashable"])])
def test_odd_types_in_an_episode_record(tmp_path, field, value):
    """Bug: a token stream with strings/dicts/None (ValueError, TypeError) or a list trace id
    (unhashable) escaped `episode()` as a traceback."""
    run_dir = copy_run(next((DATA / "verifiers-eval").glob("*--*")), tmp_path / "out")
    path = run_dir / "traces.jsonl"
    record = json.loads(path.read_bytes().splitlines()[0])
    trace = record["traces"][0]
    if field == "id":
        trace["id"] = value
    else:
        node = next(n for n in trace["nodes"] if n.get("token_ids"))
        node[field] = value * (len(node["token_ids"]) // 2 if field == "logprobs" else 1)
    path.write_text(json.dumps(record) + "\n")
    run = rd.open_run(run_dir)
    episode = run.episode(run.samples()["sample_id"][0])
    assert episode.messages
