"""Secrets in configs and launch commands never reach the page."""
from __future__ import annotations

import json

from rundash_core.configview import compile_search, search_config
from rundash_core.redact import HIDDEN, redact, redact_text

SECRET = "abcdef0123456789SECRET"


def test_secret_named_keys_are_hidden_anywhere_in_the_tree():
    cfg = {"wandb": {"api_key": SECRET, "project": "p"}, "client": [{"password": SECRET, "url": "u"}],
           "max_tokens": 1024, "tokenizer": "Qwen", "token": None, "num_tokens": 5}
    out = redact(cfg)
    assert SECRET not in json.dumps(out)
    assert out["wandb"] == {"api_key": HIDDEN, "project": "p"}
    assert out["client"][0] == {"password": HIDDEN, "url": "u"}
    assert (out["max_tokens"], out["tokenizer"], out["token"], out["num_tokens"]) == (1024, "Qwen", None, 5)
    assert cfg["wandb"]["api_key"] == SECRET  # the parsed config itself is not changed


def test_credential_shaped_values_and_assignments_in_text():
    text = (f"uv run rl --wandb.api_key={SECRET} --max-tokens 512 OPENAI_API_KEY=sk-{SECRET} "
            f"--api-key {SECRET} --hub hf_{SECRET}\nmax_tokens = 300\n")
    out = redact_text(text)
    assert SECRET not in out
    assert out.count(HIDDEN) == 4
    assert "--max-tokens 512" in out and "max_tokens = 300" in out


def test_search_shows_hidden_values_and_cannot_find_secrets():
    cfg = {"wandb": {"api_key": SECRET}, "model": {"name": "m"}}
    text, lang, hits = search_config(cfg, None)
    assert SECRET not in text and HIDDEN in text and lang == "json"
    pattern, _ = compile_search("SECRET")
    text, _, hits = search_config(cfg, pattern)
    assert hits == 0 and SECRET not in text
    text, _, hits = search_config(f"--api-key {SECRET}\n", compile_search("api")[0])
    assert hits == 1 and SECRET not in text


def test_md_code_shows_run_text_literally():
    from rundash_core.present import md_code

    assert md_code("qwen2.5-3b") == "`qwen2.5-3b`"
    assert md_code("a`b") == "``a`b``"  # a backtick inside cannot close the span
    assert md_code("`x") == "`` `x ``"
    assert md_code("line1\nline2") == "`line1 line2`"
