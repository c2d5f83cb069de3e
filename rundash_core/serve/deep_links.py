"""A page opened by its own URL (/metrics?run=…) finds the server at the first try.

Streamlit's frontend looks for its server relative to the address bar: on /metrics it asks
/metrics/_stcore/health and /metrics/_stcore/host-config first (two 404s in the browser console)
and only then /_stcore/health (streamlit/streamlit#7074). The frontend reads where the server is
from `window.__streamlit.BACKEND_BASE_URL` when a page sets it before the bundle runs, so the HTML
of a page path gets a small script that sets it: the address bar's path without the page's
segments. It is worked out in the browser from the address bar, so a proxy that adds or strips
a prefix in front of the server (or --base-path) still gets the right base.

Plain ASGI (no Streamlit import): `app.py` wraps itself with it (`st.App(middleware=…)`).
"""
from __future__ import annotations

import re
from collections.abc import Callable

# The address bar's path with its last N segments (the page's) removed: the server's base URL.
_SCRIPT = ('<script>window.__streamlit={BACKEND_BASE_URL:(function(n){var u=new URL(location.href),'
           's=u.pathname.replace(/\\/+$/,"").split("/");s.splice(s.length-n,n);u.pathname=s.join("/")+"/";'
           'u.search="";u.hash="";return u.href})(%d)}</script>')
_HEAD = re.compile(rb"<head[^>]*>", re.IGNORECASE)
_NOT_PAGES = ("_stcore", "static", "media", "component", "app", "auth", "oauth2callback")  # Streamlit's own routes
_VALIDATORS = (b"etag", b"last-modified")  # the rewritten page is not the file they describe


def page_depth(path: str, base_path: str) -> int:
    """How many segments of `path` (the request's, from the server's view) name a page under the
    server's `base_path` ('' or 'prefix'): 0 for the main page and for Streamlit's own routes."""
    base = "/" + base_path.strip("/") if base_path.strip("/") else ""
    if base and not (path == base or path.startswith(base + "/")):
        return 0
    tail = [s for s in path[len(base):].split("/") if s]
    if not tail or tail[0] in _NOT_PAGES or "." in tail[-1]:
        return 0
    return len(tail)


def with_base_script(html: bytes, depth: int) -> bytes:
    """The page's HTML with the script that tells the frontend where its server is (first in <head>,
    before Streamlit's bundle); unchanged when there is no <head>."""
    head = _HEAD.search(html)
    if head is None or depth <= 0:
        return html
    return html[:head.end()] + (_SCRIPT % depth).encode() + html[head.end():]


class DeepLinkMiddleware:
    """ASGI middleware: the HTML answered for a page path carries `with_base_script`."""

    def __init__(self, app, base_path: Callable[[], str] = lambda: ""):
        self.app, self.base_path = app, base_path

    async def __call__(self, scope, receive, send):
        depth = page_depth(scope.get("path", ""), self.base_path() or "") if scope["type"] == "http" else 0
        if depth == 0 or scope.get("method") != "GET":
            await self.app(scope, receive, send)
            return
        # the whole file, not encoded, so the script can go in (and no 304 against the file's validators)
        drop = {b"accept-encoding", b"if-none-match", b"if-modified-since", b"range"}
        scope = {**scope, "headers": [(k, v) for k, v in scope.get("headers", []) if k.lower() not in drop],
                 "extensions": {k: v for k, v in (scope.get("extensions") or {}).items() if k != "http.response.pathsend"}}
        start: dict = {}
        body: list[bytes] = []

        async def buffered_send(message):
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body" and start:
                body.append(message.get("body", b""))
                if not message.get("more_body"):
                    await _send_page(send, start, b"".join(body), depth)
                    start.clear()
            else:  # nothing this middleware knows: passed on as it came
                if start:
                    await send(dict(start))
                    start.clear()
                await send(message)

        await self.app(scope, receive, buffered_send)


async def _send_page(send, start: dict, body: bytes, depth: int) -> None:
    headers = [(k, v) for k, v in start.get("headers", []) if k.lower() not in _VALIDATORS]
    kind = next((v for k, v in headers if k.lower() == b"content-type"), b"")
    if start.get("status") == 200 and kind.startswith(b"text/html"):
        body = with_base_script(body, depth)
        headers = [(k, str(len(body)).encode() if k.lower() == b"content-length" else v) for k, v in headers]
    await send({**start, "headers": headers})
    await send({"type": "http.response.body", "body": body})
