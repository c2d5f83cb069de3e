"""Secrets in configs, launch commands and text never reach the page: one rule (rundash_core.safety.redact)
for parsed configs and free text, in time linear in the text."""
from __future__ import annotations

import copy
import json
import re

import pytest

from rundash_core.safety.redact import HIDDEN, is_secret_name, redact, redact_text
from rundash_core.views.config_search import compile_search, search_config

from helpers import DATA
from helpers.secret_corpus import times_floor, word_pass

SECRET = "abcdef0123456789SECRET"
WANDB = "0123456789abcdef0123456789abcdef01234567"  # 40 hex: the shape of a W&B API key (or a git commit)
AWS_ID, AWS_SECRET = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # AWS's documented examples


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
    """The Config search runs on a gated value (`Run.configs()`, i.e. `redact`): it cannot find a secret."""
    cfg = redact({"wandb": {"api_key": SECRET}, "model": {"name": "m"}})
    text, lang, hits = search_config(cfg, None)
    assert SECRET not in text and HIDDEN in text and lang == "json"
    pattern, _ = compile_search("SECRET")
    text, _, hits = search_config(cfg, pattern)
    assert hits == 0 and SECRET not in text
    text, _, hits = search_config(redact(f"--api-key {SECRET}\n"), compile_search("api")[0])
    assert hits == 1 and SECRET not in text


def test_md_code_shows_run_text_literally():
    from rundash_core.views.display_text import md_code

    assert md_code("qwen2.5-3b") == "`qwen2.5-3b`"
    assert md_code("a`b") == "``a`b``"  # a backtick inside cannot close the span
    assert md_code("`x") == "`` `x ``"
    assert md_code("line1\nline2") == "`line1 line2`"


# the name rule ------------------------------------------------------------------------------------
SECRET_NAMES = [
    "wandbApiKey", "api-key", "api_key", "apiKey", "APIKEY", "openai_key", "OPENAI_API_KEY", "WANDB_API_KEY",
    "aws_secret_access_key", "AWS_ACCESS_KEY_ID", "access_key", "secret_key", "private_key", "privateKey", "ssh_key",
    "key", "keys", "api_keys", "wandb.key", "wandb.api_key", "--api-key", "--openai-api-key", "X-Api-Key", "API Key",
    "password", "Password", "db_password", "passwd", "db_pass", "pass", "pwd", "password2", "dbPassword",
    "secret", "secrets", "client_secret", "clientSecret", "token", "tokens.secret", "hf_token", "HF_TOKEN",
    "access_token", "refresh_token", "id_token", "sessionToken", "github_token", "api_tokens", "x-auth-token",
    "auth", "Authorization", "auth_header", "basic_auth", "bearer", "bearer_token", "credentials", "creds",
    "credential", "cookie", "cookies", "session", "openaiapikey", "secrets.anything",
]
VISIBLE_NAMES = [  # (name, a typical value): shown as is
    ("max_tokens", 1024), ("num_tokens", 5), ("max_new_tokens", 256), ("tokenizer", "Qwen/Qwen3-4B"),
    ("tokenizer_name", "Qwen/Qwen3-4B"), ("pad_token", "<|endoftext|>"), ("eos_token_id", 2),
    ("token_ids", [1, 2, 3]), ("chi2_token", 0.0090), ("pass_at_k", 8), ("pass@1", 0.5), ("num_passes", 2),
    ("FAIL_TO_PASS", ["tests/test_a.py::t"]), ("PASS_TO_PASS", ["tests/test_b.py::u"]),
    ("forward_pass", "fused"), ("num_keys", 3), ("key_path", "/etc/keys/x.pem"), ("sort_key", "name"),
    ("prompt_key", "prompt"), ("reward_key", "score"), ("api_key_var", "OPENAI_API_KEY"),
    ("api_key_env", "WANDB_API_KEY"), ("monkey", "x"), ("hotkeys", "y"), ("session_name", "s1"),
    ("num_sessions", 4), ("session_id", "pytest-dev__pytest-14655-07b4c762"), ("author", "me"),
    ("passage", "text"), ("bypass", "yes"), ("credentials_path", "/home/u/.config/creds.json"),
    ("git_commit", WANDB), ("commit", WANDB), ("model.name", "Qwen/Qwen3-4B"), ("keyboard_layout", "us"),
]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_names_hide_their_value(name):
    assert is_secret_name(name)
    assert redact({name: SECRET}) == {name: HIDDEN}
    assert redact({name: 12345}) == {name: HIDDEN}  # numbers too: a password may be digits
    assert redact({name: None, "x": {name: True}}) == {name: None, "x": {name: True}}  # nothing to hide
    if " " not in name:
        for text in (f"{name}={SECRET}", f'{name} = "{SECRET}"', f'{{"{name}": "{SECRET}"}}', f"{name}: {SECRET}\n"):
            out = redact_text(text)
            assert SECRET not in out and HIDDEN in out, text


@pytest.mark.parametrize("name, value", VISIBLE_NAMES)
def test_names_that_are_not_secrets_stay_visible(name, value):
    assert not is_secret_name(name)
    assert redact({name: value}) == {name: value}
    text = f"{name} = {json.dumps(value)}\n--{name} {json.dumps(value)}\n"
    assert redact_text(text) == text


def test_ambiguous_names_hide_credential_looking_values():
    random = "a8Fk2Lq9Zx7Rm3Tn5Vb1Wc4"
    cfg = {"sort_key": random, "prompt_key": "prompt", "pad_token": random, "session_id": random, "my_token": random}
    assert redact(cfg) == {"sort_key": HIDDEN, "prompt_key": "prompt", "pad_token": HIDDEN, "session_id": HIDDEN,
                           "my_token": HIDDEN}
    assert redact_text(f"sort_key={random} prompt_key=prompt my_token: '{random}'") == \
        f"sort_key={HIDDEN} prompt_key=prompt my_token: '{HIDDEN}'"


# whole values under a secret name -----------------------------------------------------------------
def test_secret_containers_hide_every_leaf():
    cfg = {"secrets": {"a": 1, "b": [SECRET, None], "c": {"d": SECRET, "on": True}, "e": ""},
           "api_keys": [SECRET, SECRET], "credentials": [{"user": "bob", "pass": SECRET}],
           "wandb": {"key": SECRET, "project": "p", "entity": "team"}, "model": {"name": "m"}}
    assert redact(cfg) == {
        "secrets": {"a": HIDDEN, "b": [HIDDEN, None], "c": {"d": HIDDEN, "on": True}, "e": ""},
        "api_keys": [HIDDEN, HIDDEN], "credentials": [{"user": HIDDEN, "pass": HIDDEN}],
        "wandb": {"key": HIDDEN, "project": "p", "entity": "team"}, "model": {"name": "m"}}
    assert redact([{"token": SECRET}, "plain", 3]) == [{"token": HIDDEN}, "plain", 3]
    assert redact("plain text") == "plain text" and redact(5) == 5 and redact(None) is None


def test_dict_keys_shaped_like_secrets_are_hidden():
    out = redact({f"sk-{SECRET}": "team-a", f"hf_{SECRET}": "team-b", "ok": 1})
    assert SECRET not in json.dumps(out) and len(out) == 3 and out["ok"] == 1


# values by their shape ----------------------------------------------------------------------------
@pytest.mark.parametrize("value, shown", [
    (f"sk-{SECRET}", HIDDEN), (f"sk-proj-{SECRET}", HIDDEN), (f"sk-ant-api03-{SECRET}", HIDDEN),
    (f"hf_{SECRET}", HIDDEN), (f"ghp_{SECRET}", HIDDEN), (f"github_pat_{SECRET}", HIDDEN),
    (f"xoxb-{SECRET}", HIDDEN), (AWS_ID, HIDDEN), (WANDB, HIDDEN), (f"Bearer {SECRET}", f"Bearer {HIDDEN}"),
    (f"curl -H 'Authorization: Bearer {SECRET}' x", f"curl -H 'Authorization: {HIDDEN}' x"),
    (f"see sk-{SECRET} here", f"see {HIDDEN} here"), (f"postgres://bob:{SECRET}@db:5432/x", f"postgres://bob:{HIDDEN}@db:5432/x"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----\n",
     f"-----BEGIN RSA PRIVATE KEY-----\n{HIDDEN}\n{HIDDEN}\n-----END RSA PRIVATE KEY-----\n"),  # (lines kept)
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn", f"-----BEGIN OPENSSH PRIVATE KEY-----\n{HIDDEN}"),
    # not secrets
    ("sk-short", "sk-short"), ("task-0123456789abcdefghij", "task-0123456789abcdefghij"), ("Qwen/Qwen3-4B", "Qwen/Qwen3-4B"),
    ("bearer tokens expire", "bearer tokens expire"), ("https://api.openai.com/v1", "https://api.openai.com/v1"),
    ("-----BEGIN CERTIFICATE-----\nMIIB", "-----BEGIN CERTIFICATE-----\nMIIB"),
])
def test_values_by_shape(value, shown):
    assert redact({"x": value}) == {"x": shown}
    assert redact_text(value) == shown


def test_hex_and_aws_keys_in_context():
    assert redact({"git_commit": WANDB, "sha": WANDB, "wandb_key": WANDB, "run": WANDB}) == \
        {"git_commit": WANDB, "sha": WANDB, "wandb_key": HIDDEN, "run": HIDDEN}
    text = f"commit:\n{WANDB}\nwandb login {WANDB}\nmachine api.wandb.ai login user password {WANDB}\n{WANDB}\n"
    assert redact_text(text) == f"commit:\n{WANDB}\nwandb login {HIDDEN}\nmachine api.wandb.ai login user password " \
                                f"{HIDDEN}\n{HIDDEN}\n"
    assert redact_text(f"git checkout {WANDB}") == f"git checkout {WANDB}"  # no secret-ish word near it
    assert redact({"aws": {"region": "us-east-1", "s": AWS_SECRET}}) == {"aws": {"region": "us-east-1", "s": HIDDEN}}
    assert redact_text(f"aws id {AWS_ID} secret {AWS_SECRET}") == f"aws id {HIDDEN} secret {HIDDEN}"
    assert redact_text(f"aws_secret_access_key = {AWS_SECRET}") == f"aws_secret_access_key = {HIDDEN}"


# text files as they are shown ---------------------------------------------------------------------
def test_command_txt():
    cmd = (f"OPENAI_API_KEY=sk-proj-{SECRET} WANDB_API_KEY={WANDB} HF_TOKEN=hf_{SECRET} CUDA_VISIBLE_DEVICES=0,1 "
           f"uv run rl @ rl.toml --run.name qwen3-4b --max-tokens 512 --token {SECRET} --openai-api-key {SECRET} "
           f"--wandb.api_key={SECRET} --password '{SECRET} x' --tokenizer Qwen/Qwen3-4B --pass-at-k 8 "
           f"-H 'Authorization: Bearer {SECRET}' --header \"X-Api-Key: {SECRET}\" --auth-token={SECRET} "
           f"--db-url postgres://bob:{SECRET}@db:5432/runs --use-auth-token --resume\n")
    h = HIDDEN
    assert redact_text(cmd) == (
        f"OPENAI_API_KEY={h} WANDB_API_KEY={h} HF_TOKEN={h} CUDA_VISIBLE_DEVICES=0,1 "
        f"uv run rl @ rl.toml --run.name qwen3-4b --max-tokens 512 --token {h} --openai-api-key {h} "
        f"--wandb.api_key={h} --password '{h}' --tokenizer Qwen/Qwen3-4B --pass-at-k 8 "
        f"-H 'Authorization: {h}' --header \"X-Api-Key: {h}\" --auth-token={h} "
        f"--db-url postgres://bob:{h}@db:5432/runs --use-auth-token --resume\n")


def test_toml_text():
    toml = (f'max_steps = 10\n[model]\nname = "Qwen/Qwen3-4B"\n[wandb]\nproject = "rl"\nkey = "{WANDB}"\n'
            f'[orchestrator.sampling]\nmax_tokens = 1024\n[secrets]\nopenai = "sk-{SECRET}"\nlist = [\n  "{SECRET}",\n]\n'
            f'[[api_keys]]\nvalue = "{SECRET}"\n[client]\napi_key = \'{SECRET}\'\napi_key_var = "OPENAI_API_KEY"\n'
            f'args = [token]\n')
    h = HIDDEN
    assert redact_text(toml) == (
        f'max_steps = 10\n[model]\nname = "Qwen/Qwen3-4B"\n[wandb]\nproject = "rl"\nkey = "{h}"\n'
        f'[orchestrator.sampling]\nmax_tokens = 1024\n[secrets]\nopenai = {h}\nlist = {h}\n  {h}\n{h}\n'
        f'[[api_keys]]\nvalue = {h}\n[client]\napi_key = \'{h}\'\napi_key_var = "OPENAI_API_KEY"\nargs = [token]\n')


def test_yaml_text():
    yaml = (f"model:\n  name: Qwen/Qwen3-4B\nwandb:\n  key: {WANDB}\n  project: rl\nsecrets:\n  a: 1\n  b: {SECRET}\n"
            f"api_keys:\n- {SECRET}\n- {SECRET}\npass_at_k: 8\ndb_pass: {SECRET}\nprivate_key: |\n  -----BEGIN KEY\n"
            f"  abc\nauth: null\ncookie: session={SECRET}\n")
    h = HIDDEN
    assert redact_text(yaml) == (
        f"model:\n  name: Qwen/Qwen3-4B\nwandb:\n  key: {h}\n  project: rl\nsecrets:\n  a: {h}\n  b: {h}\n"
        f"api_keys:\n- {h}\n- {h}\npass_at_k: 8\ndb_pass: {h}\nprivate_key: |\n  {h}\n  {h}\nauth: null\ncookie: {h}\n")


def test_json_text():
    text = json.dumps({"api_keys": [SECRET, "b"], "secrets": {"a": {"b": SECRET}}, "tokenizer": "Q", "pass_at_k": 3,
                       "db_pass": SECRET, "wandb": {"key": WANDB}, "token": None}, indent=1)
    out = redact_text(text)
    assert SECRET not in out and WANDB not in out
    assert out.count("\n") == text.count("\n")  # a hidden array or table keeps its lines
    out = re.sub(r"\[hidden\](?:\s*\[hidden\])*", HIDDEN, out)
    assert json.loads(out.replace(f'"{HIDDEN}"', '"H"').replace(HIDDEN, '"H"')) == {"api_keys": "H", "secrets": "H", "tokenizer": "Q",
                                                      "pass_at_k": 3, "db_pass": "H", "wandb": {"key": "H"},
                                                      "token": None}


def test_sample_run_configs_have_nothing_hidden():
    """No false positives on real configs, commands and logs (they hold no secret)."""
    files = [p for p in DATA.rglob("*") if p.is_file() and p.suffix in (".json", ".toml", ".txt", ".log", ".yaml")]
    assert len(files) > 20
    for path in files:
        text = path.read_text(errors="replace")
        assert redact_text(text) == text, path
        if path.suffix == ".json":
            value = json.loads(text)
            assert redact(value) == value, path


# linear time ----------------------------------------------------------------------------------------
# Each is a ratio to a floor timed in the same round (`times_floor`), never absolute seconds.
def test_16mb_config_text_is_redacted_in_linear_time():
    """The issue's 16 MB config (a key in one section of ten, long runs of `a=` and hex, 1% of dense
    `--token ` flags): compared with a word pass over the same text (about 2x; `text.split()` about 17x)."""
    def section(i):
        cfg = {"max_tokens": i, "learning_rate": 1e-6, "name": f"model-{i}", "tokenizer": "Qwen/Qwen3-4B",
               "path": f"/data/run_{i}/ckpt", "list": list(range(5)), "pass_at_k": [1, 2], "git_commit": WANDB,
               "sampling": {"temperature": 1.0, "top_p": 0.95, "max_new_tokens": 512, "stop": ["</answer>"]}}
        if i % 10 == 0:
            cfg.update({"api_key": f"sk-{SECRET}{i}", "wandb": {"key": WANDB}, "env": {"HF_TOKEN": f"hf_{SECRET}"}})
        return cfg
    block = json.dumps({f"section_{i}": section(i) for i in range(2_000)}, indent=2)
    adversarial = "a=" * 20_000 + "0123456789abcdef" * 2_000 + "--token " * 1_500
    text = "\n".join([block, adversarial] * (16_000_000 // (len(block) + len(adversarial)) + 1))
    assert len(text) >= 16_000_000
    out = redact_text(text)
    assert SECRET not in out and f'"key": "{WANDB}"' not in out and f'"git_commit": "{WANDB}"' in out
    assert times_floor(lambda: redact_text(text), word_pass(text), rounds=2) <= 10


ADVERSARIAL = [  # each repeated into a whole command.txt: the shapes that made the old pattern quadratic, and more
    "--token ", "a=", "0123456789abcdef", "sort_key=sort_key=", 'token="\\"', 'x_key="""', "aws/" * 10, "Bearer ",
    "wandb ", "token" + " " * 50, "api_keys=[", "secrets:\n ", "--api-key --x ", f"aws {AWS_ID} ", "key",
    "-----BEGIN PRIVATE KEY-----", "password: '", "://a:b", "keykeykey_", "[secrets]\n", "A" * 39 + " ",
    "secrets:\n  secrets: |\n", "| api_key | x |", "Cookie: a\nKey: api_key\n", "a: >\n  [secrets]\n",
    "key\\\\uff1a ", 'token=\\\\\\"x ', "\\\\u001b[1mkey ", "a = [secrets]\n", "x: [token]\n",
]


@pytest.mark.parametrize("unit", ADVERSARIAL)
def test_adversarial_command_txt_is_linear(unit):
    """48 KB of adversarial text (the issue's command.txt took 23 s), then 8 times more: redaction's
    time over a word pass of the same text (`word_pass`) stays under 40 at both sizes (today 0.1-20;
    a scan of the rest of the text per candidate measured 2,277 at 384 KB)."""
    for size in (48_000, 384_000):
        text = unit * (size // len(unit))
        ratio = times_floor(lambda: redact_text(text), word_pass(text))
        assert ratio <= 40, (unit, size, ratio)


def test_redact_of_a_large_parsed_config_is_linear():
    """35,000 values: `redact` is a few times `copy.deepcopy` of the same config (today 3-11 on a loaded
    machine; a pass over the whole config per value would be thousands)."""
    cfg = {f"group_{i}": {"max_tokens": i, "api_key": SECRET, "name": f"m{i}", "tags": ["a", "b"],
                          "nested": {"password": SECRET, "lr": 1e-6}} for i in range(5_000)}
    out = redact(cfg)
    assert SECRET not in json.dumps(out)
    assert times_floor(lambda: redact(cfg), lambda: copy.deepcopy(cfg), rounds=3) <= 25


def test_a_value_nested_too_deeply_to_check_is_hidden_whole():
    from rundash_core.safety.redact import HIDDEN, redact

    deep = inner = []
    for _ in range(3000):
        inner.append([])
        inner = inner[0]
    inner.append("sk-live-abcdefghijklmnopqrstuvwx")
    out = redact({"a": deep})
    assert isinstance(out, str) and out.startswith(HIDDEN) and "sk-live" not in out


def test_file_names_in_tracebacks_and_listings_are_not_settings():
    """`sessions.py:914:` (a tool result, a traceback) names a file and a line, not a session secret;
    the same word as a setting still hides its value."""
    listing = "/testbed/requests/sessions.py:914:    def resolve_redirects(self, *args, **kwargs):"
    trace = 'File "auth.py", line 3\nsecrets.toml: not found'
    assert redact_text(listing) == listing and redact_text(trace) == trace
    assert "abcdef" not in redact_text("session: abcdef0123456789abcdef")
