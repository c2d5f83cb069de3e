"""Every spelling of the secret corpus (tests/helpers/secret_corpus.py) is hidden by `redact_text` as written,
as a log line, joined with all the others, and in its parsed form through `redact`; a hidden block
keeps its lines; ordinary run text stays as it is; redaction stays linear on adversarial text."""
from __future__ import annotations

import ast
import json
import pprint
import tomllib

import pytest
import yaml

from rundash_core.safety.redact import HIDDEN, redact, redact_text

from helpers.secret_corpus import SPELLINGS, by_syntax, times_floor, word_pass

IDS = [f"{i}-{s.family}-{s.syntax}" for i, s in enumerate(SPELLINGS)]


@pytest.mark.parametrize("s", SPELLINGS, ids=IDS)
def test_each_spelling_is_hidden_and_keeps_its_lines(s):
    for text in (s.text, "\x1b[2m14:23:20\x1b[0m INFO planted: " + s.text, "Step 3: the run printed " + s.text + "\n"):
        out = redact_text(text)
        assert s.secret not in out, out
        assert HIDDEN in out and out.count("\n") == text.count("\n")


def test_all_spellings_joined_as_one_block():
    """A log file's block (what the Logs page redacts at once) and a command line of the one-line ones."""
    block = "\n".join(s.text for s in SPELLINGS)
    out = redact_text(block)
    assert [s.family for s in SPELLINGS if s.secret in out] == []
    assert out.count("\n") == block.count("\n")
    line = " ".join(s.text for s in SPELLINGS if "\n" not in s.text)
    assert [s.syntax for s in SPELLINGS if s.secret in redact_text(line)] == []


def test_all_spellings_joined_as_one_error_message():
    """An episode's `error` (prime-rl: its errors joined as `type: message; type: message`): each
    spelling follows another on the same line, so what one hides to its line's end runs into the next."""
    text = "; ".join(f"AuthenticationError: {s.text}" for s in SPELLINGS)
    out = redact_text(text)
    assert [f"{s.family}/{s.syntax}" for s in SPELLINGS if s.secret in out] == []
    assert out.count("\n") == text.count("\n")


ESCAPED = {  # a spelling as a tool call's arguments (a JSON string) inside a record, as a log or a raw view shows it
    "arguments in a JSON record": lambda t: json.dumps({"arguments": json.dumps({"command": f"echo {t}"})}),
    "that record as a JSON string": lambda t: json.dumps(json.dumps({"arguments": json.dumps({"command": t})})),
    "arguments in a Python repr": lambda t: repr({"function": {"arguments": json.dumps({"command": f"echo {t}"})}}),
    "a repr of a repr": lambda t: repr(repr({"content": f"output: {t}"})),
    "a verl config print": lambda t: "".join(  # pprint continues a long string on the next (Ray-prefixed) line
        f"\x1b[36m(TaskRunner pid=4242)\x1b[0m {line}\n"
        for line in pprint.pformat({"planted": {"note": t, "other": "x" * 90}}, width=60).splitlines()),
}


@pytest.mark.parametrize("form", ESCAPED)
def test_all_spellings_escaped_twice(form):
    """Each form as a reader sees it. Escapes are read up to three levels deep (two backslashes then `uff1a` read once are a backslash
    and `uff1a`, read twice a full-width colon): no spelling shows, raw or JSON-escaped."""
    shown = [(s.family, s.syntax) for s in SPELLINGS
             if any(f in redact_text(ESCAPED[form](s.text)) for f in (s.secret, json.dumps(s.secret)[1:-1]))]
    assert shown == []


A, B = "PMH4ZlOx69fyBEzKbKtS4KdA6XVUw1Se", "4vUi6HsIPcGcDXa7mg31rlj4HVYd3qd2"


@pytest.mark.parametrize("text", [
    # a table cell hides its cell only: a name after it on the line is still read (full-width colon, CJK name)
    f"| api_key | {A} |; AuthenticationError: API_KEY：{B}",
    f"| api_key | {A} |; AuthenticationError: api_key ： {B}",
    f"| api_key | {A} |; AuthenticationError: 密码：{B}",
    f"api_key\t{A}\tactive; err: API_KEY：{B}",
    # a label inside a value hidden to its line's end still names the `Value:` on the next line
    f"name: API_KEY\nvalue: {A}; AuthenticationError: Key: OPENAI_API_KEY\nValue: {B}",
    f"Cookie: sessionid={A}; Key: OPENAI_API_KEY\nValue: {B}",
    # a `[secrets]` table header on a line that continues a YAML block after a prefix
    f"Error: - name: HF_TOKEN\n  value: >\n    {A}; AuthenticationError: [secrets]\nopenai = \"{B}\"\n",
    f"err: api_key:\n  {A}; [secrets]\nserper = \"{B}\"",
])
def test_a_secret_after_another_on_the_same_line(text):
    out = redact_text(text)
    assert A not in out and B not in out, out
    assert out.count("\n") == text.count("\n")


def _parsed(s):
    """The spelling's parsed form, when its syntax has one."""
    parsers = {"json": json.loads, "python-repr": ast.literal_eval, "toml": tomllib.loads, "yaml": yaml.safe_load,
               "k8s": yaml.safe_load, "name-value": yaml.safe_load}
    try:
        return parsers[s.syntax](s.text)
    except (KeyError, ValueError, SyntaxError, tomllib.TOMLDecodeError, yaml.YAMLError):
        return None


STRUCTURED = [s for s in by_syntax("json", "python-repr", "toml", "yaml", "k8s", "name-value")
              if isinstance(_parsed(s), (dict, list))]


@pytest.mark.parametrize("s", STRUCTURED, ids=[f"{s.family}-{s.syntax}-{s.secret[:6]}" for s in STRUCTURED])
def test_parsed_spellings_through_redact(s):
    value = _parsed(s)
    out = redact(value)
    assert s.secret not in repr(out) and s.secret not in json.dumps(out, default=str)
    assert s.secret in repr(value)  # (the argument is not changed)


def test_structured_pairs_keep_their_labels():
    cfg = {"headers": [{"key": "Authorization", "value": "Token abc123SECRETxyz789"}],
           "env": [{"name": "HF_TOKEN", "value": "hf_abcdefabcdef1234567890"}, {"name": "MODE", "value": "train"}],
           "args": ["--api-key", "k3y9SECRET2x8w7", "--lr", "1e-6"]}
    out = redact(cfg)
    assert out["headers"] == [{"key": "Authorization", "value": HIDDEN}]
    assert out["env"] == [{"name": "HF_TOKEN", "value": HIDDEN}, {"name": "MODE", "value": "train"}]
    assert out["args"] == ["--api-key", HIDDEN, "--lr", "1e-6"]
    text = '{"headers": [{"key": "Authorization", "value": "Token abc123SECRETxyz789"}]}'
    assert redact_text(text) == '{"headers": [{"key": "Authorization", "value": "[hidden]"}]}'
    assert redact_text("the password is hunter2x9 now") == "the password is [hidden] now"


ORDINARY = [
    "commit 3f9c2a1b8e7d6c5b4a3928170615f4e3d2c1b0a9 (HEAD -> main)",
    "step 1200/5000 | loss 0.4312 | reward/mean 0.71 | lr 1.0e-06 | max_tokens 4096",
    "model: Qwen/Qwen2.5-7B-Instruct  tokenizer: Qwen/Qwen3-4B",
    "/data/runs/reverse-text--qwen3-0.6b--a7be3ee1/checkpoints/step_100/model.safetensors",
    "Visit https://github.com/PrimeIntellect-ai/prime-rl/blob/main/README.md for details.",
    "The key idea is to pass the reward through the critic; a password manager is not needed.",
    "metrics: pass@1 0.42 pass_at_k 0.55 num_tokens 1234 pad_token <|endoftext|> sort_key prompt",
    "git_sha = 0123456789abcdef0123456789abcdef01234567",
    "docker run -u 1000:1000 -p 8000:8000 vllm/vllm-openai --model Qwen/Qwen2.5-7B",
    "ssh -p 2222 user@gpu-node  # the port, not a password",
    "The tokenizer is Qwen2TokenizerFast and the session is over.",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_run_text_is_unchanged(text):
    assert redact_text(text) == text


def test_adversarial_text_redacts_in_linear_time():
    """2 MB of near-misses (key-ish runs, 100k `=`, deep brackets, unterminated PEM and quotes, prefixes
    without a body, `mysql` with no `-p`): redaction's time over a word pass of the same text does not
    grow with the size (2 MB vs 200 KB: a quadratic scan would grow it 10 times)."""
    unit = ("api_key=" + "=" * 50 + " sk-short ghp_ AIza eyJx. -----BEGIN PRIVATE KEY----- " + "[{" * 40
            + ' "name": "API_KEY", "key": "Authorization" token is a ' + "k" * 60 + " mysql -u root " + "key" * 30
            + " password: '" + "a1" * 30 + " sshpass -p\n")
    small, big = (times_floor(lambda: redact_text(text), word_pass(text), rounds)
                  for text, rounds in ((unit * (200_000 // len(unit)), 3), (unit * (2_000_000 // len(unit)), 2)))
    assert big < 10 and big < 3 * small, (small, big)
    eq = "=" * 100_000 + "token" + "=" * 100_000  # (a quadratic scan: 10^10 steps)
    assert times_floor(lambda: redact_text(eq), word_pass(eq)) < 50
