"""Which names and values are secrets: the rules `rundash_core.safety.redact` applies (hiding is there).

NAMES. A name is secret when one of its segments (split at `.` `/` `:`) is. A segment is split into
lower-case words (camelCase, `-`, `_`, spaces; digits dropped, but `@1` kept); trailing `value`,
`str`, `b64`, `header`, ... (and `id` after key/cookie) are skipped; the last word is the head:
  * secret, password, passwd, passphrase, pwd, credential(s), creds, auth, authorization, bearer,
    cookie, or a head ending in apikey/accesstoken/secretkey/privatekey/password/secret/...:
    `clientSecret`, `db_password`, `secrets`, `auth_header`, `Authorization`, `openaiapikey`;
  * `key`/`keys` alone (`key`: TOML `[wandb] key = ...`, `wandb.key`) or after a qualifier (api,
    access, secret, private, auth, ssh, client, a provider: openai, wandb, hf, aws, ...): `api_key`,
    `wandbApiKey`, `openai_key`, `aws_secret_access_key`, `access_key_id`, `api_keys`;
  * `token` alone or after a qualifier (`hf_token`, `HF_TOKEN`, `access_token`, `id_token`); `tokens`
    only after a qualifier (`api_tokens`): `max_tokens`, `num_tokens`, `tokenizer` stay visible;
  * `pass` unless it means a step or a test outcome (`db_pass`, `pass`; not `forward_pass`, SWE-bench
    `FAIL_TO_PASS`); `pass_at_k`, `pass@1`,
    `num_passes` stay visible; `session` alone (`session_name`, `num_sessions` stay visible).
AMBIGUOUS names hide only a value that looks like a credential (one token with a run of >= 16
letters and digits, >= 4 of each): key/token after another word (`sort_key`, `prompt_key`,
`pad_token`, `chi2_token`) and `session_id` (an agent trajectory's id stays visible). `key` not last
(`key_path`, `api_key_var`) is plain.

VALUES that are credentials by shape (SHAPE_PREFIXES): `sk-...` (OpenAI, Anthropic, OpenRouter),
`hf_...`, `gh[pousr]_...`, `github_pat_...`, `glpat-...`, Slack `xox?-`/`xapp-` tokens and webhook
paths, Stripe `sk_live_`/`rk_live_`/`whsec_`, Groq `gsk_`, Google `AIza`, JWTs, `AKIA`/`ASIA` key ids, the token after `Bearer`, PEM `PRIVATE KEY` blocks, a
40-hex string (a W&B key; not under a commit/sha/hash name), a 40-character AWS-style secret.
"""
from __future__ import annotations

import re
from functools import lru_cache

# names ----------------------------------------------------------------------------------------------
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|@?[0-9]+")
_SEGMENTS = re.compile(r"[./:]")
_STRONG = frozenset("secret password passwd passphrase pwd credential cred creds auth authorization bearer cookie "
                    "apikey apitoken authtoken accesstoken refreshtoken accesskey secretkey privatekey sessionkey "
                    "sessiontoken".split())
_COMPOUND_TAILS = ("apikey", "apitoken", "authtoken", "accesstoken", "accesskey", "secretkey", "privatekey",
                   "password", "passwd", "passphrase", "secret", "credential")
_QUALIFIERS = frozenset(
    "api access secret private auth client service signing sign encryption ssh gpg pgp master license app admin "
    "root account user db database redis s3 storage session refresh bearer login deploy webhook bot oauth jwt hmac "
    "personal llm judge provider openai anthropic claude wandb hf huggingface hub github gh gitlab aws gcp google "
    "azure gemini mistral cohere groq together deepseek fireworks replicate openrouter perplexity xai pinecone "
    "stripe slack discord telegram comet neptune mlflow clearml modal runpod serper tavily exa brave bing serpapi "
    "jina voyage firecrawl e2b daytona prime vllm sglang docker npm pypi ngrok cloudflare vercel supabase".split())
_PASS_NOT = frozenset("forward backward fwd bwd single multi one two first second final last each per num max min "
                      "extra eval train grad full partial to".split())  # `FAIL_TO_PASS`: SWE-bench test lists
_SUFFIXES = frozenset("value values str string b64 base64 raw plain plaintext hex bytes header headers".split())
_COMMITISH = frozenset("commit sha sha1 sha256 md5 hash revision rev digest checksum uuid etag ref fingerprint "
                       "version git".split())
PLAIN, AMBIGUOUS, SECRET = 0, 1, 2


def _singular(w: str) -> str:
    return w[:-1] if w.endswith("s") and not w.endswith("ss") else w


@lru_cache(maxsize=65536)
def name_words(segment: str) -> tuple[str, ...]:
    """The lower-case words of a name (camelCase, `-`, `_` split; digits dropped)."""
    return tuple(w.lower() for w in _WORD.findall(segment) if not w.isdigit())


def _segment_kind(segment: str) -> int:
    words = list(name_words(segment))
    while len(words) > 1 and words[-1] in _SUFFIXES:
        words.pop()
    if len(words) > 1 and words[-1] in ("id", "ids") and _singular(words[-2]) in ("key", "cookie"):
        words.pop()
    if not words:
        return PLAIN
    head, mod = words[-1], (words[-2] if len(words) > 1 else None)
    one = _singular(head)
    if head in _STRONG or one in _STRONG or one.endswith(_COMPOUND_TAILS):
        return SECRET
    if one == "key":
        return SECRET if mod is None or mod in _QUALIFIERS or _singular(mod) in _STRONG else AMBIGUOUS
    if head == "token":  # `chi2_token`, `pad_token` name LLM tokens: hide only credential-looking values
        return SECRET if mod is None or mod in _QUALIFIERS or mod in ("id", "csrf", "xsrf") else AMBIGUOUS
    if head == "tokens":
        return SECRET if mod in _QUALIFIERS else PLAIN
    if head == "pass":
        return SECRET if mod not in _PASS_NOT else PLAIN
    if one == "session":
        return SECRET if mod is None else PLAIN
    if head == "sessionid" or (head in ("id", "ids") and mod == "session"):
        return AMBIGUOUS  # a web session id is a credential; an agent's trajectory id is not
    return PLAIN


@lru_cache(maxsize=65536)
def name_kind(name) -> int:
    """SECRET (hide the value), AMBIGUOUS (hide it only if it looks like a credential) or PLAIN."""
    kinds = [_segment_kind(s) for s in _SEGMENTS.split(str(name).lstrip("-")) if s]
    return max(kinds, default=PLAIN)


def is_secret_name(name) -> bool:
    return name_kind(name) == SECRET


def is_commitish_name(name) -> bool:
    """Does a name say its value is a commit or a digest (a 40-hex value there is not a W&B key)?"""
    return any(w in _COMMITISH for s in _SEGMENTS.split(str(name)) for w in name_words(s))


# values ---------------------------------------------------------------------------------------------
HEX40 = re.compile(r"[ \t]*+[0-9a-fA-F]{40}[ \t]*+")
_AWS40 = re.compile(r"[A-Za-z0-9/+]{40}")
_CREDENTIAL = re.compile(r"[A-Za-z0-9_\-+/=.]{16,512}")
_RANDOM_RUN = re.compile(r"[A-Za-z0-9]{16,}+")
# Issuer shapes after gitleaks' rules (config/gitleaks.toml: openai, anthropic, gcp-api-key, huggingface,
# github-*, gitlab-*, slack-*, stripe-access-token, aws-access-token, groq, sendgrid, npm, pypi, jwt) and
# detect-secrets' plugins (aws.py, github_token.py, slack.py, stripe.py, jwt.py, private_key.py).
SHAPE_PREFIXES = ("sk-", "hf_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "xapp-", "bearer",
                  "akia", "asia", "aiza", "glpat-", "glrt-", "gldt-", "glptt-", "glsoat-", "hooks.slack.com/services/",
                  "sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_", "gsk_", "eyj", "sg.", "lsv2_", "r8_",
                  "npm_", "pypi-", "tvly-")
VALUE_SHAPE = re.compile(r"(?P<v>sk-[\w\-]{16,}+|hf_[A-Za-z0-9]{16,}+|gh[pousr]_[A-Za-z0-9]{20,}+|github_pat_\w{20,}+|"
                         r"xox[abposre]-[A-Za-z0-9\-]{10,}+|xapp-[A-Za-z0-9\-]{20,}+|"
                         r"(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Za-z])|AIza[\w\-]{35}(?![\w\-])|"
                         r"gl(?:pat|rt|dt|ptt|soat)-[\w\-]{20,}+|hooks\.slack\.com/services/[A-Za-z0-9/_\-]{20,}+|"
                         r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}+|whsec_[A-Za-z0-9+/=]{20,}+|gsk_[A-Za-z0-9]{20,}+|"
                         r"eyJ[\w\-]{10,}+\.eyJ[\w\-]{10,}+\.?[\w\-]*+|SG\.[\w\-]{16,}+\.[\w\-]{16,}+|"
                         r"lsv2_(?:pt|sk)_[0-9a-f]{32}_[0-9a-f]{10}|r8_[A-Za-z0-9]{30,}+|npm_[A-Za-z0-9]{36}|"
                         r"pypi-AgEIcHlwaS5vcmc[\w\-]{50,}+|tvly-[A-Za-z0-9]{20,}+)|"
                         r"(?i:bearer)[ \t]++(?P<b>[A-Za-z0-9._~+/=\-]{8,}+)")
PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")


def looks_credential(s: str) -> bool:
    """One token with a random-looking run: >= 16 letters and digits, >= 4 of each (not `prompt`,
    `pytest-dev__pytest-14655-07b4c762` or a UUID)."""
    run = _RANDOM_RUN.search(s) if _CREDENTIAL.fullmatch(s) else None
    return run is not None and sum(c.isdigit() for c in run.group()) >= 4 and sum(c.isalpha() for c in run.group()) >= 4


def aws_shaped(s: str) -> bool:
    return bool(_AWS40.fullmatch(s)) and not s.isupper() and not s.islower() and any(c.isdigit() for c in s)


# command lines whose password flag has no secret name: `sshpass -p X`, `mysql -pX`, `docker login -p X`,
# `redis-cli -a X`, `curl -u user:X`
CMD_PASSWORD = re.compile(
    r"(?<![\w-])(?:sshpass[ \t]++-p[ \t]*+|(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n|;&]{0,200}?[ \t]-p(?=[^\s-])|"
    r"(?:docker|podman|helm|oras)[ \t]++(?:registry[ \t]++)?login\b[^\n|;&]{0,200}?[ \t]-p[ \t]++|"
    r"redis-cli\b[^\n|;&]{0,200}?[ \t]-a[ \t]++|(?:-u|--user)[ \t]++[\"']?[^\s:\"']{1,64}+:)"
    r"[\"']?(?P<v>[^\s\"']++)")


def literal_trie(words) -> str:
    """An alternation of literals as a trie (`a(?:ws|uth)`), so `re` tries one branch per position."""
    if "" in words and len(words) == 1:
        return ""
    heads = sorted({w[0] for w in words if w})
    alt = "|".join(re.escape(h) + literal_trie({w[1:] for w in words if w[:1] == h}) for h in heads)
    return f"(?:{alt})" + ("?" if "" in words else "") if len(heads) > 1 or "" in words else alt
