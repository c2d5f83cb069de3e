"""A corpus of secrets spelled as real runs carry them (configs, command lines, log lines, report
Markdown, model outputs, tool calls, exception messages): what every redaction test plants; and the
timing helpers the redaction tests share (a ratio to a floor timed in the same run).

Each `Spelling` is one way a secret is written; `secret` is the substring that must never appear in
anything rundash shows. Secrets are generated (a seeded generator, so the corpus is the same on every
run), unique across the corpus and long and random enough not to occur by accident; a multi-line
spelling's `secret` is one of its lines (the one a line-by-line redactor would show). Issuer shapes
follow gitleaks' rules (config/gitleaks.toml) and detect-secrets' plugins.
"""
from __future__ import annotations

import gc
import random
import re
import string
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Spelling:
    family: str  # "openai", "anthropic", ..., "password", "named-key", "url-credential"
    syntax: str  # "env", "flag", "json", "yaml", "toml", "python-repr", "header", "url", ...
    text: str  # the text as written (may be several lines)
    secret: str  # never appears in anything rundash shows (unique per spelling)


_R = random.Random(24)
_LOW, _UP, _DIG = string.ascii_lowercase, string.ascii_uppercase, string.digits
ALNUM = _LOW + _UP + _DIG
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
_seen: set[str] = set()


def rnd(n: int, alphabet: str = ALNUM) -> str:
    """n random characters; with at least 4 digits and 4 letters when the alphabet has both and n >= 16
    (a credential, not a word)."""
    mixed = n >= 16 and any(c.isdigit() for c in alphabet) and any(c.isalpha() for c in alphabet)
    while True:
        s = "".join(_R.choice(alphabet) for _ in range(n))
        ok = not mixed or (sum(c.isdigit() for c in s) >= 4 and sum(c.isalpha() for c in s) >= 4)
        if ok and s not in _seen:
            _seen.add(s)
            return s


def pw() -> str:
    """A typed password: letters, digits and a few punctuation marks."""
    return rnd(6, _LOW) + rnd(4, _DIG + "!-_") + rnd(8)


def jwt() -> str:
    return "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + "eyJ" + rnd(60, URLSAFE) + "." + rnd(43, URLSAFE)


def aws_secret() -> str:
    return rnd(40, B64)


def aws_id(prefix: str = "AKIA") -> str:
    return prefix + rnd(16, _UP + "234567")


def pem_body(lines: int = 4) -> list[str]:
    return ["MII" + rnd(61, B64)] + [rnd(64, B64) for _ in range(lines - 1)]


_out: list[Spelling] = []


def add(family: str, syntax: str, template: str, secret: str) -> None:
    """`template` with its `§` replaced by `secret`."""
    assert "§" in template, template
    _out.append(Spelling(family, syntax, template.replace("§", secret), secret))


def _pem(family: str, syntax: str, kind: str, prefix: str = "", body_prefix: str = "") -> None:
    body = pem_body()
    lines = [f"{prefix}-----BEGIN {kind}-----"] + [body_prefix + b for b in body] + [f"{body_prefix}-----END {kind}-----"]
    _out.append(Spelling(family, syntax, "\n".join(lines), body[0]))


# openai ------------------------------------------------------------------------------------------
def oa() -> str:
    return "sk-proj-" + rnd(56, URLSAFE)


add("openai", "env", "OPENAI_API_KEY=§", oa())
add("openai", "env", 'export OPENAI_API_KEY="§"', oa())
add("openai", "flag", "python eval.py --openai-api-key § --model gpt-4o", oa())
add("openai", "log", "openai.AuthenticationError: Error code: 401 - {'error': {'message': 'Incorrect API key "
    "provided: §. You can find your API key at https://platform.openai.com/account/api-keys.', 'type': "
    "'invalid_request_error', 'code': 'invalid_api_key'}}", "sk-" + rnd(48))
add("openai", "log", "AuthenticationError: Incorrect API key provided: §", oa())
add("openai", "python-repr", "{'api_key': '§', 'model': 'gpt-4o-mini', 'temperature': 0.7}", oa())
add("openai", "prose", "I called the API with § and it answered 401.", "sk-" + rnd(48))
add("openai", "json", '{"judge": {"openai_api_key": "§", "model": "gpt-4.1"}}', oa())
add("openai", "header", "Authorization: Bearer §", oa())

# anthropic ---------------------------------------------------------------------------------------
def ant() -> str:
    return "sk-ant-api03-" + rnd(93, URLSAFE) + "AA"


add("anthropic", "env", "ANTHROPIC_API_KEY=§", ant())
add("anthropic", "header", "x-api-key: §", ant())
add("anthropic", "prose", "You can use the key § for the judge.", ant())
add("anthropic", "yaml", "anthropic_api_key: §", ant())
add("anthropic", "log", "anthropic.AuthenticationError: invalid x-api-key (key=§)", ant())

# google ------------------------------------------------------------------------------------------
def gk() -> str:
    return "AIza" + rnd(35, URLSAFE)


add("google", "url", "POST https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent?key=§", gk())
add("google", "env", "GOOGLE_API_KEY=§", gk())
add("google", "json", '{"apiKey": "§", "authDomain": "demo.firebaseapp.com"}', gk())
add("google", "log", "request failed for § with 403 PERMISSION_DENIED", gk())

# hugging face ------------------------------------------------------------------------------------
def hf() -> str:
    return "hf_" + rnd(34, _LOW + _UP)[:30] + rnd(4, _DIG)


add("hf", "env", "HF_TOKEN=§", hf())
add("hf", "flag", "huggingface-cli login --token § --add-to-git-credential", hf())
add("hf", "python-repr", "login(token='§')", hf())
add("hf", "prose", "the model was pushed with § yesterday", hf())
add("hf", "yaml", "hub:\n  token: §", hf())

# github ------------------------------------------------------------------------------------------
add("github", "url", "git clone https://§@github.com/org/private-repo.git", "ghp_" + rnd(36))
add("github", "url", "remote: https://x-access-token:§@github.com/org/repo", "ghs_" + rnd(36))
add("github", "env", "GITHUB_TOKEN=§", "ghp_" + rnd(36))
add("github", "prose", "Here is a fine-grained token: §", "github_pat_" + rnd(22) + "_" + rnd(59))
add("github", "header", "Authorization: token §", "gho_" + rnd(36))
add("github", "log", "fatal: could not read Username: token § rejected", "ghu_" + rnd(36))

# gitlab ------------------------------------------------------------------------------------------
add("gitlab", "log", "remote: § is not valid", "glpat-" + rnd(20, URLSAFE))
add("gitlab", "url", "git push https://oauth2:§@gitlab.com/group/project.git", "glpat-" + rnd(20, URLSAFE))
add("gitlab", "header", "PRIVATE-TOKEN: §", "glpat-" + rnd(20, URLSAFE))
add("gitlab", "prose", "the runner registered with § on the shared host", "glrt-" + rnd(20, URLSAFE))

# slack -------------------------------------------------------------------------------------------
add("slack", "url", "https://hooks.slack.com/services/T0" + rnd(8, _UP + _DIG) + "/B0" + rnd(8, _UP + _DIG) + "/§",
    rnd(24))
add("slack", "json", '{"webhook_url": "https://hooks.slack.com/services/T0' + rnd(8, _UP + _DIG) + '/B0'
    + rnd(8, _UP + _DIG) + '/§", "channel": "#runs"}', rnd(24))
add("slack", "log", "posting with §", "xoxb-" + rnd(12, _DIG) + "-" + rnd(13, _DIG) + "-" + rnd(24))
add("slack", "env", "SLACK_USER_TOKEN=§", "xoxp-" + rnd(12, _DIG) + "-" + rnd(12, _DIG) + "-" + rnd(13, _DIG) + "-" + rnd(32, HEX))
add("slack", "prose", "the app token § opens the socket", "xapp-1-A0" + rnd(9, _UP + _DIG) + "-" + rnd(13, _DIG) + "-" + rnd(64, HEX))

# stripe ------------------------------------------------------------------------------------------
add("stripe", "env", "STRIPE_SECRET_KEY=§", "sk_live_" + rnd(99))
add("stripe", "prose", "charged the card with § in live mode", "sk_live_" + rnd(24))
add("stripe", "json", '{"restricted": "§"}', "rk_live_" + rnd(24))
add("stripe", "log", "stripe: webhook signed with §", "whsec_" + rnd(32))

# aws ---------------------------------------------------------------------------------------------
add("aws", "env", "AWS_ACCESS_KEY_ID=§", aws_id())
add("aws", "env", "AWS_SECRET_ACCESS_KEY=§", aws_secret())
_aid = aws_id()
add("aws", "multiline", f"[default]\naws_access_key_id = {_aid}\naws_secret_access_key = §\nregion = us-east-1", aws_secret())
add("aws", "flag", "aws configure set aws_secret_access_key §", aws_secret())
add("aws", "log", f"credentials {aws_id()} / § loaded from env", aws_secret())
add("aws", "prose", "the temporary key id is § (expires in 1h)", aws_id("ASIA"))
add("aws", "env", "AWS_SESSION_TOKEN=§", "IQoJb3JpZ2luX2Vj" + rnd(200, B64))

# groq --------------------------------------------------------------------------------------------
add("groq", "log", "groq client ready: §", "gsk_" + rnd(52))
add("groq", "env", "GROQ_API_KEY=§", "gsk_" + rnd(52))

# openrouter --------------------------------------------------------------------------------------
add("openrouter", "env", "OPENROUTER_API_KEY=§", "sk-or-v1-" + rnd(64, HEX))
add("openrouter", "prose", "routing through § works", "sk-or-v1-" + rnd(64, HEX))
add("openrouter", "header", "Authorization: Bearer §", "sk-or-v1-" + rnd(64, HEX))

# wandb -------------------------------------------------------------------------------------------
add("wandb", "flag", "wandb login §", rnd(40, HEX))
add("wandb", "env", "WANDB_API_KEY=§", rnd(40, HEX))
add("wandb", "multiline", "machine api.wandb.ai\n  login user\n  password §", rnd(40, HEX))
add("wandb", "env", "WANDB_API_KEY=§", "local-" + rnd(40, HEX))
add("wandb", "log", "wandb: Appending key for api.wandb.ai to your netrc file: §", rnd(40, HEX))

# jwt ---------------------------------------------------------------------------------------------
add("jwt", "log", "session restored from § ok", jwt())
add("jwt", "header", "Authorization: Bearer §", jwt())
add("jwt", "header", "Cookie: session=§; theme=dark", jwt())
add("jwt", "prose", "The id token was §.", jwt())
add("jwt", "json", '{"id_token": "§"}', jwt())

# pem ---------------------------------------------------------------------------------------------
_pem("pem", "multiline", "RSA PRIVATE KEY")
_pem("pem", "multiline", "OPENSSH PRIVATE KEY")
_pem("pem", "multiline", "EC PRIVATE KEY", prefix="key file: ")
_pem("pem", "multiline", "ENCRYPTED PRIVATE KEY")
_pem("pem", "multiline", "PGP PRIVATE KEY BLOCK")
_pem("pem", "log", "PRIVATE KEY", prefix="(TaskRunner pid=77) ", body_prefix="(TaskRunner pid=77) ")
_gcp = "MII" + rnd(61, B64)
add("pem", "json", '{"type": "service_account", "private_key_id": "' + rnd(40, HEX) + '", "private_key": '
    '"-----BEGIN PRIVATE KEY-----\\n§\\n' + rnd(64, B64) + '\\n-----END PRIVATE KEY-----\\n", '
    '"client_email": "sa@demo.iam.gserviceaccount.com"}', _gcp)
_pem("pem", "yaml", "RSA PRIVATE KEY", prefix="ssh_key: |\n  ", body_prefix="  ")

# passwords ---------------------------------------------------------------------------------------
add("password", "flag", "sshpass -p '§' ssh root@10.0.3.11", pw())
add("password", "flag", "sshpass -p § scp ckpt.pt user@gpu-node:/data", rnd(18))
add("password", "flag", "mysql -u root -p§ -h db.internal training", rnd(18))
add("password", "flag", "mysql --user=root --password=§ metrics", pw())
add("password", "prose", "the password is §", pw())
add("password", "prose", "The admin password was § until Monday.", pw())
add("password", "yaml", "password: §", pw())
add("password", "env", "PGPASSWORD=§ psql -h db -U app", pw())
add("password", "flag", "redis-cli -h cache -a § ping", rnd(20))
add("password", "flag", "curl -u admin:§ https://registry.internal/v2/", pw())
add("password", "json", '{"user": "admin", "passwd": "§"}', pw())
add("password", "flag", "docker login -u bot -p § registry.example.com", pw())
add("password", "python-repr", "Namespace(db_password='§', lr=0.001, seed=42)", pw())
add("password", "flag", "python serve.py --password §", pw())
add("password", "flag", "kubectl create secret generic db --from-literal=password=§", pw())

# url credentials ---------------------------------------------------------------------------------
add("url-credential", "url", "postgresql://trainer:§@db.internal:5432/runs", rnd(20, URLSAFE))
add("url-credential", "url", "REDIS_URL=redis://:§@redis:6379/0", rnd(20))
add("url-credential", "url", "amqp://guest:§@rabbit.internal:5672//", rnd(20))
add("url-credential", "url", "mongodb+srv://admin:§@cluster0.ab1cd.mongodb.net/?retryWrites=true", rnd(20))
add("url-credential", "url", "GET https://api.example.com/v1/search?q=llm&api_key=§&page=2", rnd(32))
add("url-credential", "url", "https://example.com/callback#access_token=§&token_type=bearer", rnd(40, URLSAFE))
add("url-credential", "log", 'DEBUG:urllib3.connectionpool:https://api.serper.dev:443 "GET /search?token=§ HTTP/1.1" 200 None',
    rnd(32))

# other issuers (gitleaks rules) ------------------------------------------------------------------
add("pypi", "toml", '[pypi]\nusername = "__token__"\npassword = "§"', "pypi-AgEIcHlwaS5vcmc" + rnd(70, URLSAFE))
add("npm", "log", "//registry.npmjs.org/:_authToken=§", "npm_" + rnd(36))
add("sendgrid", "prose", "mail goes out with §", "SG." + rnd(22, URLSAFE) + "." + rnd(43, URLSAFE))
add("tavily", "env", "TAVILY_API_KEY=§", "tvly-" + rnd(32))
add("langsmith", "log", "tracing with §", "lsv2_pt_" + rnd(32, HEX) + "_" + rnd(10, HEX))
add("replicate", "prose", "run it with §", "r8_" + rnd(37))

# named keys in every syntax ----------------------------------------------------------------------
add("named-key", "env", "SERPER_API_KEY=§", rnd(40))
add("named-key", "env", "export JUDGE_API_KEY='§'", rnd(32))
add("named-key", "env", 'MY_SERVICE_SECRET="§"', rnd(28))
add("named-key", "env", "environ({'PATH': '/usr/bin', 'HF_HUB_TOKEN': '§'})", rnd(30))
add("named-key", "flag", "python -m judge --api-key § --port 8000", rnd(32))
add("named-key", "flag", "python -m judge --api_key=§", rnd(32))
add("named-key", "flag", "docker run -e WANDB_API_KEY=§ -e FOO=bar trainer:latest", rnd(40))
add("named-key", "flag", "uv run rl --orchestrator.client.api-key §", rnd(32))
add("named-key", "flag", "trainer.logger.secret_key=§ trainer.total_epochs=3", rnd(32))
add("named-key", "json", '{"api_key": "§"}', rnd(32))
add("named-key", "json", '{"client": {"apiKey":"§", "base_url": "http://localhost:8000/v1"}}', rnd(32))
add("named-key", "json", '{"env": {"OPENAI_API_KEY": "§", "PYTHONPATH": "src"}}', rnd(32))
add("named-key", "json", '{"name": "API_KEY", "value": "§"}', rnd(32))
add("named-key", "json", '[{"name": "HF_TOKEN", "value": "§"}, {"name": "MODE", "value": "train"}]', rnd(32))
add("named-key", "json", '{\n  "name": "WANDB_API_KEY",\n  "value": "§"\n}', rnd(36))
add("named-key", "json", '{"Name": "DB_PASSWORD", "Value": "§"}', rnd(24))
add("named-key", "json", '{"headers": [{"key": "Authorization", "value": "Token §"}]}', rnd(32))
add("named-key", "json", '{"headers": {"X-API-Key": "§"}}', rnd(32))
add("named-key", "yaml", "api_key: §", rnd(32))
add("named-key", "yaml", 'judge:\n  api_key: "§"\n  model: gpt-4o', rnd(32))
add("named-key", "yaml", "api_key:\n  §", rnd(32))
add("named-key", "yaml", "api_key: |\n  §", rnd(32))
add("named-key", "yaml", "secrets:\n  judge: §\n  search: " + rnd(20), rnd(32))
add("named-key", "yaml", "access_token: >-\n    §", rnd(32))
add("named-key", "k8s", "env:\n- name: API_KEY\n  value: §", rnd(32))
add("named-key", "k8s", '        env:\n        - name: OPENAI_API_KEY\n          value: "§"', rnd(32))
add("named-key", "k8s", "stringData:\n  api-token: §", rnd(32))
add("named-key", "k8s", "- name: HF_TOKEN\n  value: >\n    §", rnd(32))
add("named-key", "toml", 'api_key = "§"', rnd(32))
add("named-key", "toml", '[secrets]\nopenai = "§"\nserper = "' + rnd(24) + '"', rnd(32))
add("named-key", "toml", '[wandb]\nproject = "rl"\nkey = "§"', rnd(40, HEX))
add("named-key", "toml", 'token = """\n§\n"""', rnd(40))
add("named-key", "toml", "private_key = '''\n§\n'''", rnd(48, B64))
add("named-key", "toml", '[[providers]]\nname = "judge"\napi_key = "§"', rnd(32))
add("named-key", "toml", 'judge = { model = "gpt-4o", api_key = "§" }', rnd(32))
add("named-key", "toml", '[orchestrator.client]\napi_key = "§"', rnd(32))
add("named-key", "python-repr", "{'client': {'api_key': '§', 'timeout': 30}}", rnd(32))
add("named-key", "python-repr", "JudgeConfig(model='gpt-4o', api_key='§', retries=3)", rnd(32))
add("named-key", "python-repr", 'client = OpenAI(api_key="§", base_url=BASE)', rnd(32))
add("named-key", "python-repr", 'os.environ["SERPAPI_KEY"] = "§"', rnd(32))
add("named-key", "python-repr", "{'name': 'API_KEY', 'value': '§'}", rnd(32))
add("named-key", "header", "X-API-Key: §", rnd(32))
add("named-key", "header", "Authorization: Basic §", rnd(32, B64) + "==")
add("named-key", "header", "Authorization: Token §", rnd(40, HEX))
add("named-key", "header", "api-key: §", rnd(32, HEX))
add("named-key", "header", "curl -H 'Authorization: Bearer §' https://api.internal/v1/models", rnd(32))
add("named-key", "header", "Cookie: sessionid=§", rnd(32))
add("named-key", "header", "Proxy-Authorization: Basic §", rnd(24, B64) + "=")
add("named-key", "url", "https://api.search.example/v1?apikey=§", rnd(32))
add("named-key", "url", "wss://stream.example.com/socket?access_token=§", rnd(40))
add("named-key", "name-value", "name: API_KEY\nvalue: §", rnd(32))
add("named-key", "name-value", "Key: OPENAI_API_KEY\nValue: §", rnd(32))
add("named-key", "log", "2025-01-01 12:00:00 INFO Using api_key=§ for judge", rnd(32))
add("named-key", "log", 'level=info msg="judge ready" token=§ retries=3', rnd(32))
add("named-key", "log", "Using API key: § (from env)", rnd(32))
add("named-key", "prose", "The API key is §.", rnd(32))
add("named-key", "prose", "my token is § so please keep it", rnd(32))
add("named-key", "prose", "Here is your secret: §", rnd(32))
add("named-key", "prose", "I set WANDB_API_KEY to § and reran.", rnd(40, HEX))
add("named-key", "tsv", "OPENAI_API_KEY\t§", rnd(32))
add("named-key", "tsv", "api_key\t§\tactive", rnd(32))
add("named-key", "table", "| name | value |\n|---|---|\n| api_key | § |", rnd(32))
add("named-key", "fullwidth", "API_KEY：§", rnd(32))
add("named-key", "fullwidth", "api_key ： §", rnd(32))
add("named-key", "fullwidth", "密码：§", pw())
add("named-key", "ansi", "\x1b[1mOPENAI_API_KEY\x1b[0m=\x1b[32m§\x1b[0m", rnd(32))
add("named-key", "ansi", "api_key: \x1b[33m'§'\x1b[0m", rnd(32))
add("named-key", "ansi", "\x1b[36m(TaskRunner pid=9)\x1b[0m token=\x1b[1m§\x1b[0m", rnd(32))
add("hf", "ansi", "\x1b[32m§\x1b[0m", hf())
add("named-key", "multiline", "--api-key \\\n  §", rnd(32))
add("named-key", "netrc", "machine api.example.com login bot password §", pw())

SPELLINGS: tuple[Spelling, ...] = tuple(_out)


def by_syntax(*syntaxes: str) -> tuple[Spelling, ...]:
    return tuple(s for s in SPELLINGS if s.syntax in syntaxes)


def by_family(*families: str) -> tuple[Spelling, ...]:
    return tuple(s for s in SPELLINGS if s.family in families)


assert len(SPELLINGS) > 120
assert len({s.secret for s in SPELLINGS}) == len(SPELLINGS)
assert all(s.secret in s.text and "\n" not in s.secret and len(s.secret) >= 16 for s in SPELLINGS)
assert not any(a.secret in b.secret for a in SPELLINGS for b in SPELLINGS if a is not b)


# timing ---------------------------------------------------------------------------------------------
def times_floor(fn, floor, rounds: int = 3) -> float:
    """How many times slower `fn` is than `floor` (a plain pass over the same text), each round timing
    the two back to back, the best round kept: load on a shared machine slows both alike, so the ratio
    holds where absolute seconds do not. The collector is off while timing (as `timeit` does)."""
    best, was_on = float("inf"), gc.isenabled()
    gc.disable()
    try:
        for _ in range(rounds):
            t0 = time.perf_counter()
            floor()
            t1 = time.perf_counter()
            fn()
            t2 = time.perf_counter()
            best = min(best, (t2 - t1) / max(t1 - t0, 1e-9))
    finally:
        if was_on:
            gc.enable()
    return best


_WORD = re.compile(r"[A-Za-z]+")


def word_pass(text: str):
    """The floor for redacting `text`: a regex pass calling Python once per word of it (redaction looks
    at each candidate word in Python; `text.split()` does no Python work per word)."""
    return lambda: _WORD.sub(lambda m: m.group(), text)
