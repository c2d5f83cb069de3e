"""prime-rl traces (spec 5): samples from the index, one record per `episode()`, checked against an
independent reading of the real-writer sample (whole-file zstd decompression, json, struct)."""
from __future__ import annotations

import json
import math
import shutil
import struct
from pathlib import Path

import pandas as pd
import pytest
import zstandard

import rundash_core as rd
from rundash_core import frames
from rundash_core.io import zst_seekable
from rundash_core.sources.prime_rl import episode as prime_rl_episode
from rundash_core.sources.prime_rl import traces as prime_rl_traces

from helpers import DATA

RUN = DATA / "prime-rl-traces" / "math-python+wiki-search--qwen3-4b--0b45f1ec"
TRACES = RUN / "monitors" / "file" / "traces"


# Independent reading ----------------------------------------------------------------------------------
def _whole(path: Path) -> bytes:
    if path.suffix == ".zst":
        with open(path, "rb") as fh:
            return zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True).read()
    return path.read_bytes()


def _lines_by_offset(folder: Path) -> dict[tuple[int, int], dict]:
    """(chunk, offset) -> record, for every complete line of every chunk."""
    out = {}
    for f in sorted(folder.iterdir()):
        chunk = int(f.name.split(".")[0])
        data, pos = _whole(f), 0
        while (end := data.find(b"\n", pos)) >= 0:
            out[(chunk, pos)] = json.loads(data[pos:end])
            pos = end + 1
    return out


def _index(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _annotations(producer: str) -> dict[str, list[dict]]:
    records = _lines_by_offset(TRACES / "annotations" / producer)
    out: dict[str, list[dict]] = {}
    for row in _index(TRACES / "annotations" / f"{producer}.index.jsonl"):
        out.setdefault(row["trace_id"], []).append(records[(row["chunk"], row["offset"])])
    return out


@pytest.fixture(scope="module")
def truth():
    index = _index(TRACES / "stream.index.jsonl")
    records = _lines_by_offset(TRACES / "stream")
    return index, records, _annotations("orch"), _annotations("trainer")


@pytest.fixture(scope="module")
def run():
    return rd.open_run(RUN)


# Samples ----------------------------------------------------------------------------------------------
def test_samples_are_the_index_rows(run, truth):
    index, _records, orch, _trainer = truth
    s = run.samples()
    assert frames.check(s, frames.SAMPLES) == []
    assert len(s) == len(index) == 117
    assert s["sample_id"].is_unique and all(frames.is_url_safe(x) for x in s["sample_id"])
    for (_, row), ix in zip(s.iterrows(), index):
        assert row["sample_id"].startswith(f"{ix['line']}-")
        assert row["split"] == ix["kind"] and row["env"] == ix["env"] and row["group_id"] == ix["group"]
        assert row["reward"] == pytest.approx(ix["reward"]) if ix["reward"] is not None else pd.isna(row["reward"])
        assert row["ok"] == ix["ok"] and row["truncated"] == ix["truncated"] and (row["status"] if pd.notna(row["status"]) else None) == ix["stop_condition"]
        assert (row["input_tokens"], row["output_tokens"], row["turns"]) == (
            ix["input_tokens"], ix["output_tokens"], ix["turns"])
        assert (None if pd.isna(row["duration_s"]) else row["duration_s"]) == pytest.approx(ix["duration"])
        assert pd.isna(row["error"]) == (ix["num_errors"] == 0)
        ships = [a["info"]["ship"]["step"] for t in ix["trace_ids"] for a in orch.get(t, []) if a["info"].get("effective")]
        assert (pd.isna(row["trainer_step"]) and not ships) or row["trainer_step"] == min(ships)
        if ships:
            assert row["step"] == min(ships)
        advs = [a["info"]["advantage"] for t in ix["trace_ids"] for a in orch.get(t, []) if "advantage" in a["info"]]
        assert row["advantage"] == pytest.approx(advs[-1]) if advs else pd.isna(row["advantage"])
        path, offset, _length = frames.parse_line_locator(row["locator"])
        assert path.endswith(f"stream/{ix['chunk']:05d}.jsonl") and offset == ix["offset"]
    assert s["step"].notna().all()  # unshipped episodes: the batch being collected when they arrived
    steps = run.steps()
    assert steps["samples"].sum() == len(s)


def test_samples_filter_by_split_and_step(run):
    s = run.samples()
    ev = run.samples(split="eval")
    assert len(ev) == (s["split"] == "eval").sum() == 18 and (ev["split"] == "eval").all()
    assert len(run.samples(step=9)) == (s["step"] == 9).sum() > 0
    with pytest.raises(ValueError):
        run.samples(split="val")


def test_unshipped_episodes_get_the_step_being_collected(run, truth):
    index, records, _orch, _trainer = truth
    s = run.samples()
    tail = s[s["trainer_step"].isna()].tail(4)  # the last arrivals, after the last ship of step 8
    assert list(tail["step"]) == [9, 9, 9, 9]
    for sid in tail["sample_id"]:
        assert run.episode(sid).step == 9


# Episodes ---------------------------------------------------------------------------------------------
def _paths(nodes: list[dict]) -> list[list[int]]:
    parents = [n.get("parent") for n in nodes]
    leaves = [i for i in range(len(nodes)) if i not in parents]
    out = []
    for leaf in leaves:
        path = [leaf]
        while parents[path[-1]] is not None:
            path.append(parents[path[-1]])
        out.append(path[::-1])
    return out


def _expected_stream(nodes: list[dict], anns: list[dict], name: str) -> list:
    """Full-length expected column: annotation branch streams walked along each branch path, a node
    taking its masked values when all are known, the newest annotation winning."""
    taken: dict[int, list] = {}
    paths = _paths(nodes)
    for a in anns:
        for b in a["branches"]:
            if name not in b:
                continue
            pos = 0
            for i in paths[b["index"]]:
                part = b[name][pos:pos + len(nodes[i]["token_ids"])]
                pos += len(nodes[i]["token_ids"])
                if all(v is not None for v, m in zip(part, nodes[i]["mask"]) if m):
                    taken[i] = [v if m else None for v, m in zip(part, nodes[i]["mask"])]
    return [v for i, n in enumerate(nodes) for v in taken.get(i, [None] * len(n["token_ids"]))]


def test_every_episode_matches_its_record(run, truth):
    index, records, orch, trainer = truth
    s = run.samples()
    checked_adv = checked_trainer = multi = 0
    for (_, row), ix in zip(s.iterrows(), index):
        rec = records[(ix["chunk"], ix["offset"])]
        ep = run.episode(row["sample_id"])
        assert ep.sample_id == row["sample_id"] and ep.split == ix["kind"] and ep.step == row["step"]
        assert ep.ids["episode"] == rec["id"] and ep.env == rec["env"].get("name", rec["env"]["id"])
        nodes = [n for t in rec["traces"] for n in t["nodes"]]
        assert [m.role for m in ep.messages] == [n["message"]["role"] for n in nodes]
        for m, n in zip(ep.messages, nodes):
            content = n["message"].get("content") or ""
            if isinstance(content, str):
                assert m.content == content
            assert (m.reasoning or None) == (n["message"].get("reasoning_content") or None)
            calls = n["message"].get("tool_calls") or []
            assert [(c.name, c.arguments, c.id) for c in m.tool_calls] == [(c["name"], c["arguments"], c["id"]) for c in calls]
            assert m.tool_call_id == n["message"].get("tool_call_id")
        expected_rewards = {k: v["score"] for t in rec["traces"] for k, v in t["rewards"].items() if v is not None}
        assert ep.rewards == pytest.approx(expected_rewards)
        assert ep.metrics == pytest.approx({k: v for t in rec["traces"] for k, v in t["metrics"].items() if v is not None})
        errors = rec["errors"] + [e for t in rec["traces"] for e in t["errors"]]
        assert (ep.error is None) == (not errors)
        if not nodes:
            assert ep.tokens is None
            continue
        tok = ep.tokens
        assert list(tok["token_id"]) == [x for n in nodes for x in n["token_ids"]]
        assert list(tok["mask"]) == [bool(x) for n in nodes for x in n["mask"]]
        # compact logprobs spread back to full length: values at mask positions, NaN elsewhere
        full = [v for n in nodes for v in _spread(n["logprobs"], n["mask"])]
        _same(tok["logprob"], full)
        trace = rec["traces"][0]
        if len(rec["traces"]) == 1:
            for name, col, source in (("advantages", "advantage", orch), ("trainer_logprobs", "trainer_logprob", trainer)):
                anns = source.get(trace["id"], [])
                if not any(name in b for a in anns for b in a["branches"]):
                    assert col not in tok or tok[col].isna().all()
                    continue
                _same(tok[col], _expected_stream(trace["nodes"], anns, name))
                checked_adv += name == "advantages"
                checked_trainer += name == "trainer_logprobs"
                multi += name == "advantages" and len(_paths(trace["nodes"])) > 1
        ships = [a["info"]["ship"]["step"] for a in orch.get(trace["id"], []) if a["info"].get("effective")]
        if ships:
            assert ep.raw["traces"][0]["info"]["effective"] is True
            assert ep.raw["traces"][0]["info"]["ship"]["step"] == ships[-1]  # the newest wins
    assert checked_adv > 30 and checked_trainer > 30 and multi >= 3


def _spread(compact: list, mask: list) -> list:
    it = iter(compact)
    return [next(it) if m else None for m in mask]


def _same(series: pd.Series, expected: list) -> None:
    assert len(series) == len(expected)
    for got, want in zip(series, expected):
        if want is None:
            assert math.isnan(got)
        else:
            assert got == pytest.approx(want, abs=1e-9)


def test_unknown_sample_is_a_key_error(run):
    with pytest.raises(KeyError):
        run.episode("no-such-sample")
    with pytest.raises(KeyError):
        run.episode("999-deadbeef")


# Seekable zstd ----------------------------------------------------------------------------------------
def _independent_table(path: Path) -> list[tuple[int, int, int, int]]:
    """(c_start, c_size, d_start, d_size) per frame, from the footer by struct."""
    data = path.read_bytes()
    n, desc, magic = struct.unpack("<IBI", data[-9:])
    assert magic == 0x8F92EAB1 and desc == 0
    entries = [struct.unpack_from("<II", data, len(data) - 17 - 8 * n + 8 + 8 * i) for i in range(n)]
    out, c, d = [], 0, 0
    for cs, ds in entries:
        out.append((c, cs, d, ds))
        c, d = c + cs, d + ds
    return out


def test_seek_table_reads_only_the_frames_a_line_spans(truth, monkeypatch):
    index, records, _o, _t = truth
    sealed = TRACES / "stream" / "00000.jsonl.zst"
    table = _independent_table(sealed)
    assert len(table) > 10
    whole = _whole(sealed)
    calls = []
    real = zst_seekable.decompress_frame
    monkeypatch.setattr(zst_seekable, "decompress_frame", lambda data, size: calls.append(size) or real(data, size))
    singles = 0
    for ix in (r for r in index if r["chunk"] == 0):
        zst_seekable.clear_frame_cache()
        calls.clear()
        line = zst_seekable.read_line(str(sealed), ix["offset"])
        end = whole.index(b"\n", ix["offset"])
        assert line == whole[ix["offset"]:end]
        spans = [i for i, (_c, _cs, d, ds) in enumerate(table) if d < end + 1 and d + ds > ix["offset"]]
        assert len(calls) == len(spans) and calls == [table[i][3] for i in spans]
        singles += len(spans) == 1
    assert singles > 10
    # one frame decompressed for one record through the run, never the whole chunk
    zst_seekable.clear_frame_cache()
    calls.clear()
    ix = next(r for r in index if r["chunk"] == 0 and
              sum(1 for _c, _cs, d, ds in table if d <= whole.index(b"\n", r["offset"]) and d + ds > r["offset"]) == 1)
    plain = prime_rl_traces.chunk_path(str(TRACES / "stream"), 0)
    assert json.loads(prime_rl_traces.read_record_line(plain, ix["offset"]))["id"] == ix["id"]
    assert len(calls) == 1


def _seal(data: bytes, dest: Path, frame: int = 32 << 10, checksums: bool = False) -> None:
    """A seekable-format file (frames without content size, as prime-rl's writer makes them)."""
    comp = zstandard.ZstdCompressor(level=3, write_content_size=False)
    frames_, entries = [], []
    for i in range(0, len(data), frame):
        part = data[i:i + frame]
        f = comp.compress(part)
        frames_.append(f)
        entries.append((len(f), len(part)))
    e = 12 if checksums else 8
    table = b"".join(struct.pack("<III", c, d, 0xDEAD) if checksums else struct.pack("<II", c, d) for c, d in entries)
    foot = struct.pack("<IBI", len(entries), 0x80 if checksums else 0, 0x8F92EAB1)
    dest.write_bytes(b"".join(frames_) + struct.pack("<II", 0x184D2A5E, len(entries) * e + 9) + table + foot)


@pytest.mark.parametrize("checksums", [False, True])
def test_seek_table_with_and_without_checksums(tmp_path, checksums):
    data = b"".join(json.dumps({"i": i, "pad": "x" * (i * 37 % 500)}).encode() + b"\n" for i in range(400))
    f = tmp_path / "00000.jsonl.zst"
    _seal(data, f, frame=4096, checksums=checksums)
    table = zst_seekable.seek_table(str(f))
    assert table.size == len(data) and (table.checksums is not None) == checksums
    pos = 0
    for i in range(400):
        end = data.index(b"\n", pos)
        assert json.loads(zst_seekable.read_line(str(f), pos))["i"] == i
        pos = end + 1
    with pytest.raises(KeyError):
        zst_seekable.read_line(str(f), len(data) + 5)


def test_bad_seekable_files_are_refused(tmp_path):
    f = tmp_path / "bad.jsonl.zst"
    f.write_bytes(b"\x00" * 40)
    with pytest.raises(zst_seekable.SeekableError):
        zst_seekable.seek_table(str(f))
    _seal(b"a\nb\n", f)
    raw = bytearray(f.read_bytes())
    raw[-5] = 0x04  # a reserved descriptor bit
    f.write_bytes(bytes(raw))
    with pytest.raises(zst_seekable.SeekableError):
        zst_seekable.seek_table(str(f))
    empty = tmp_path / "empty.jsonl.zst"
    empty.write_bytes(struct.pack("<II", 0x184D2A5E, 9) + struct.pack("<IBI", 0, 0, 0x8F92EAB1))
    assert zst_seekable.seek_table(str(empty)).frames == 0


# Live chunks ------------------------------------------------------------------------------------------
@pytest.fixture()
def copy(tmp_path):
    dest = tmp_path / RUN.name
    shutil.copytree(RUN, dest)
    return dest


def test_a_half_written_live_line_is_skipped(copy, truth):
    index = truth[0]
    traces = copy / "monitors" / "file" / "traces"
    live = traces / "stream" / "00001.jsonl"
    data = live.read_bytes()
    assert not data.endswith(b"\n")  # the sample's live chunk ends in a torn record with no index row
    torn = data.rindex(b"\n") + 1
    run = rd.open_run(copy)
    s = run.samples()
    assert len(s) == len(index) and (s["locator"].str.contains("00001.jsonl")).sum() == 25
    with pytest.raises(KeyError):
        prime_rl_traces.read_record_line(str(live), torn)
    # an index row being written (no newline yet) is not listed either
    with open(traces / "stream.index.jsonl", "ab") as fh:
        fh.write(json.dumps({"line": 118, "chunk": 1, "offset": torn})[:-3].encode())
    assert len(rd.open_run(copy).samples()) == len(index)
    # the last complete live record still reads (its length is unknown: read to its newline)
    last = s.iloc[-1]
    assert last["locator"].endswith(":0")
    assert run.episode(last["sample_id"]).ids["episode"] == index[-1]["id"]


def test_a_chunk_sealed_after_listing_is_found_again(copy):
    run = rd.open_run(copy)
    s = run.samples()
    live_rows = s[s["locator"].str.contains("00001.jsonl")]
    before = {sid: run.episode(sid) for sid in live_rows["sample_id"]}
    stream = copy / "monitors" / "file" / "traces" / "stream"
    plain = stream / "00001.jsonl"
    data = plain.read_bytes()
    _seal(data[:data.rindex(b"\n") + 1], stream / "00001.jsonl.zst", frame=8192)
    plain.unlink()
    for sid, old in before.items():  # same listing (same locators), read from the sealed file now
        ep = run.episode(sid)
        assert ep.ids == old.ids and [m.content for m in ep.messages] == [m.content for m in old.messages]
        assert ep.tokens is None and old.tokens is None or ep.tokens.equals(old.tokens)
    assert list(rd.open_run(copy).samples()["sample_id"]) == list(s["sample_id"])


def test_no_traces_means_no_samples(tmp_path):
    (tmp_path / "r" / "monitors" / "file").mkdir(parents=True)
    run = rd.open_run(tmp_path / "r")
    assert run.samples().empty and frames.check(run.samples(), frames.SAMPLES) == []
    with pytest.raises(KeyError):
        run.episode("1-abc")


def test_fold_cuts_full_length_streams_to_each_node_mask():
    trace = {"id": "t", "info": {"kind": "train"}, "nodes": [
        {"token_ids": [1, 2, 3], "mask": [False, False, False], "logprobs": []},
        {"parent": 0, "token_ids": [4, 5], "mask": [False, False], "logprobs": []},
        {"parent": 1, "token_ids": [6, 7, 8], "mask": [False, True, True], "logprobs": [-0.1, -0.2]},
        {"parent": 1, "token_ids": [9, 10], "mask": [True, True], "logprobs": [-0.3, -0.4]}]}
    anns = [{"info": {"effective": True, "ship": {"step": 3}}, "branches": [
                {"index": 0, "advantages": [0, 0, 0, 0, 0, 0, 0.5, 0.5]},
                {"index": 1, "advantages": [0, 0, 0, 0, 0, 0.7, 0.7]}]},
            {"info": {"ship": {"time": 9.0}}, "branches": [
                {"index": 0, "trainer_logprobs": [None] * 6 + [-0.11, -0.22]},
                {"index": 1, "trainer_logprobs": [None] * 5 + [None, -0.44]}]}]
    prime_rl_episode.fold(trace, anns)
    assert trace["info"] == {"kind": "train", "effective": True, "ship": {"step": 3, "time": 9.0}}
    assert trace["nodes"][2]["advantages"] == [0.5, 0.5] and trace["nodes"][3]["advantages"] == [0.7, 0.7]
    assert trace["nodes"][2]["trainer_logprobs"] == [-0.11, -0.22]
    assert "trainer_logprobs" not in trace["nodes"][3]  # a null at a masked position: not taken
    tok = prime_rl_episode.token_frame([trace])
    assert len(tok) == 10 and list(tok["token_id"]) == list(range(1, 11))
    _same(tok["logprob"], [None] * 6 + [-0.1, -0.2, -0.3, -0.4])
    _same(tok["advantage"], [None] * 6 + [0.5, 0.5, 0.7, 0.7])
    _same(tok["trainer_logprob"], [None] * 6 + [-0.11, -0.22, None, None])


# Older layout: rollouts/step_N/{train,eval}/{all,effective}/traces.jsonl ------------------------------
OLD = DATA / "prime-rl-traces" / "reverse-text--qwen3-0.6b--a7be3ee1"


def _old_truth(root: Path) -> list[tuple[int, str, dict, dict | None]]:
    """(step, kind, record in all/, its copy in effective/ or None), in listing order."""
    out = []
    for step_dir in sorted((root / "rollouts").iterdir(), key=lambda p: int(p.name.split("_")[1])):
        for kind in ("train", "eval"):
            all_f, eff_f = step_dir / kind / "all" / "traces.jsonl", step_dir / kind / "effective" / "traces.jsonl"
            if not all_f.exists():
                continue
            eff = {r["id"]: r for r in map(json.loads, eff_f.read_text().splitlines())} if eff_f.exists() else {}
            out += [(int(step_dir.name[5:]), kind, r, eff.get(r["id"])) for r in map(json.loads, all_f.read_text().splitlines())]
    return sorted(out, key=lambda t: (t[0], t[1]))  # by step, then kind (stable: file order within)


def test_older_rollouts_layout_samples_and_episodes():
    run = rd.open_run(OLD)
    s = run.samples()
    truth = _old_truth(OLD)
    assert frames.check(s, frames.SAMPLES) == [] and len(s) == len(truth) == 19
    assert s["sample_id"].is_unique and all(frames.is_url_safe(x) for x in s["sample_id"])
    for (_, row), (step, kind, rec, eff) in zip(s.iterrows(), truth):
        assert (row["step"], row["split"]) == (step, kind) and row["group_id"] == rec["group"]["id"]
        t = rec["traces"][0]
        assert row["reward"] == pytest.approx(sum(r["score"] * r["weight"] for r in t["rewards"].values()))
        assert (row["input_tokens"], row["output_tokens"]) == (rec["num_input_tokens"], rec["num_output_tokens"])
        assert row["trainer_step"] == step and eff is not None
        adv = eff["traces"][0]["info"].get("advantage")
        assert row["advantage"] == pytest.approx(adv) if adv is not None else pd.isna(row["advantage"])
        ep = run.episode(row["sample_id"])
        assert ep.step == step and ep.ids["episode"] == rec["id"] and ep.reward == pytest.approx(row["reward"])
        nodes = eff["traces"][0]["nodes"]
        assert [m.content for m in ep.messages] == [n["message"]["content"] for n in nodes]
        assert list(ep.tokens["token_id"]) == [x for n in nodes for x in n["token_ids"]]
        _same(ep.tokens["logprob"], [v for n in nodes for v in _spread(n["logprobs"], n["mask"])])
        if any("advantages" in n for n in nodes):
            _same(ep.tokens["advantage"], [v for n in nodes for v in _spread(n.get("advantages", []), n["mask"])])
    assert run.steps()["samples"].sum() == len(s)


def test_older_layout_episode_not_in_effective(tmp_path):
    dest = shutil.copytree(OLD, tmp_path / OLD.name)
    eff = dest / "rollouts" / "step_1" / "train" / "effective" / "traces.jsonl"
    lines = eff.read_text().splitlines(keepends=True)
    dropped = json.loads(lines[0])["id"]
    eff.write_text("".join(lines[1:]))
    run = rd.open_run(dest)
    s = run.samples(step=1)
    row = s[s["locator"].str.contains("/all/")]
    assert len(row) == 1 and pd.isna(row["trainer_step"].iloc[0]) and pd.isna(row["advantage"].iloc[0])
    assert run.episode(row["sample_id"].iloc[0]).ids["episode"] == dropped


def test_garbage_index_lines_are_skipped_and_named(tmp_path):
    """A complete line of the index that is not a JSON object costs that line only; once the samples
    are listed, the run's problems name the file, how many lines and the first one."""
    run_dir = tmp_path / RUN.name
    shutil.copytree(RUN, run_dir)
    index = run_dir / "monitors" / "file" / "traces" / "stream.index.jsonl"
    lines = index.read_bytes().splitlines(keepends=True)
    index.write_bytes(lines[0] + b"\xff\xfe garbage \x00\n" + b"".join(lines[1:]) + b"[1, 2]\n")
    run = rd.open_run(run_dir)
    assert len(run.samples()) == len(rd.open_run(RUN).samples())
    found = [p for p in run.problems() if p.path.endswith("stream.index.jsonl")]
    assert [(p.count, p.line) for p in found] == [(2, 2)] and "not JSON" in found[0].what
    index.write_bytes(b"".join(lines))  # rewritten clean: the problem goes with the next listing
    run.samples()
    assert not [p for p in run.problems() if p.path.endswith("stream.index.jsonl")]


def test_a_growing_index_is_parsed_from_where_the_last_read_ended(tmp_path):
    """A live index: a refresh parses only the complete lines appended since (`keep` is called for
    them alone), a torn last line waits for its newline and is then read once, a bad line is
    counted; a file replaced (even at the same size) or rewritten in place is parsed again whole."""
    import os

    from rundash_core.sources.prime_rl import lines as prime_rl_lines

    path = tmp_path / "stream.index.jsonl"
    seen = []

    def read():
        return prime_rl_lines.objects(str(path), "test-index", lambda off, n, row: seen.append(off) or (off, row["i"]))

    def row(i):
        return json.dumps({"i": i, "pad": "x" * (i % 5)}) + "\n"

    path.write_text("".join(row(i) for i in range(100)))
    assert [i for _, i in read()] == list(range(100)) and len(seen) == 100
    seen.clear()
    with open(path, "a") as fh:
        fh.write(row(100) + "not json\n" + row(101) + '{"i": 10')  # a torn last line
    got = read()
    assert [i for _, i in got] == list(range(102)) and len(seen) == 2
    assert got[100][0] == len("".join(row(i) for i in range(100)))  # offsets are the file's
    real = os.path.realpath(path)
    assert prime_rl_lines.BAD_LINES[real] == (1, 102)
    seen.clear()
    with open(path, "a") as fh:
        fh.write("2}\n")
    assert [i for _, i in read()] == [*range(102), 102] and len(seen) == 1
    size = path.stat().st_size
    other = tmp_path / "other.jsonl"
    text = "".join(row(i + 500) for i in range(103))
    other.write_text(text + " " * (size - len(text)) if len(text) < size else text)
    os.replace(other, path)  # another file at the path
    seen.clear()
    assert [i for _, i in read()] == [i + 500 for i in range(103)] and len(seen) == 103
    assert real not in prime_rl_lines.BAD_LINES
    with open(path, "r+") as fh:  # the last line rewritten in place, nothing appended
        fh.seek(path.stat().st_size - len(row(602)))
        fh.write(row(907))
    os.utime(path, ns=(path.stat().st_mtime_ns + 10**9,) * 2)
    seen.clear()
    assert [i for _, i in read()][-2:] == [601, 907] and len(seen) == 103
