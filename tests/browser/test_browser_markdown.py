"""A real Chromium on `rundash ROOT`: an AI answer (from the OpenAI-compatible test server) and a
report, both holding every image trick of test_inert_markdown pointed at a second local HTTP
server that counts requests; the browser sends it none (the links are there, unclicked)."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import expect

import rundash_core as rd

from helpers import NEW_RUN, copy_run
from helpers.ai_server import ChatServer
from helpers.hostile import HOSTILE_MARKDOWN
from helpers.serving import launched_rundash

TIMEOUT = 90_000  # ms: two shared cores


class _Counter(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        self.server.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.end_headers()


@pytest.fixture(scope="module")
def counter():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Counter)
    server.hits = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def _payload(port: int) -> str:
    here = f"http://127.0.0.1:{port}/p.png?d=secret"
    return "\n\n".join(s.replace("http://evil.example/p.png?d=secret", here).replace("http://evil.example", f"http://127.0.0.1:{port}")
                       for s in HOSTILE_MARKDOWN.values()) + f"\n\n[control link]({here})\n"


def test_no_image_from_an_ai_answer_or_a_report_is_fetched(tmp_path: Path, browser, counter, monkeypatch):  # noqa: F811
    port = counter.server_address[1]
    root = tmp_path / "root"
    run = copy_run(NEW_RUN, root, name="md-run")
    (run / "reports").mkdir(exist_ok=True)
    (run / "reports" / "hostile.md").write_text("# Hostile images\n\n" + _payload(port))
    run_id = rd.discover([root])["run_id"].iloc[0]
    with ChatServer() as chat:
        chat.answer = _payload(port)
        monkeypatch.setenv("OPENAI_BASE_URL", chat.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-0000")
        monkeypatch.setenv("RUNDASH_AI_MODEL", "test-model")
        with launched_rundash(tmp_path, [str(root), "--yes"]) as (app_port, _log):
            ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
            page = ctx.new_page()
            seen: list[str] = []
            page.on("request", lambda r: seen.append(r.url) if f":{port}/" in r.url else None)
            base = f"http://127.0.0.1:{app_port}"
            page.goto(f"{base}/reports?run={quote(run_id)}&report=hostile")
            expect(page.get_by_role("heading", name="Hostile images")).to_be_visible(timeout=TIMEOUT)
            expect(page.get_by_role("link", name="control link")).to_be_visible(timeout=TIMEOUT)
            page.goto(f"{base}/ai_analysis?run={quote(run_id)}")
            page.get_by_role("button", name="Ask").click(timeout=TIMEOUT)
            expect(page.get_by_role("link", name="control link")).to_be_visible(timeout=TIMEOUT)
            assert len(chat.requests) == 1  # the answer really came from the endpoint
            page.wait_for_timeout(1500)  # any late image load
            assert page.locator(f'img[src*=":{port}/"], image, svg [href*=":{port}/"]').count() == 0
            ctx.close()
    assert counter.hits == [] and seen == []
