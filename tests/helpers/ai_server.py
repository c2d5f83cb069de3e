"""A small OpenAI-compatible server for the AI tests: `POST /v1/chat/completions`, plain JSON or
SSE chunks (`stream: true`), that records every request (headers, lower-cased, and body) and can answer with an
error status instead (500, 401, 429, a 400 "context length" error)."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from helpers.serving import free_port

CONTEXT_ERROR = "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."


class _Handler(BaseHTTPRequestHandler):
    server: ChatServer

    def log_message(self, *args) -> None:  # keep the test output clean
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.requests.append({"path": self.path, "headers": headers, "body": body})
        if self.path != "/v1/chat/completions":
            return self._error(404, "not found")
        if self.server.status != 200:
            message = CONTEXT_ERROR if self.server.status == 400 else f"error {self.server.status}"
            return self._error(self.server.status, message)
        if body.get("stream"):
            return self._stream(body)
        answer = {"id": "chatcmpl-1", "object": "chat.completion", "created": int(time.time()),
                  "model": body.get("model"),
                  "choices": [{"index": 0, "finish_reason": "stop",
                               "message": {"role": "assistant", "content": self.server.answer}}],
                  "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        self._send(200, "application/json", json.dumps(answer).encode())

    def _stream(self, body: dict) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        text = self.server.answer
        pieces = [text[i:i + 7] for i in range(0, len(text), 7)]  # chunks that cut words and syntax
        for i, piece in enumerate(pieces):
            delta = {"content": piece} | ({"role": "assistant"} if i == 0 else {})
            chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": int(time.time()),
                     "model": body.get("model"), "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _error(self, status: int, message: str) -> None:
        payload = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
        self._send(status, "application/json", json.dumps(payload).encode())

    def _send(self, status: int, ctype: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class ChatServer(ThreadingHTTPServer):
    """Set `answer` and `status` (200 or an error code) before a request; read `requests` after."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict] = []
        self.answer = "All good."
        self.status = 200
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self) -> ChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()


def dead_base_url() -> str:
    """A 127.0.0.1 URL where nothing listens (connection refused)."""
    return f"http://127.0.0.1:{free_port()}/v1"
