"""A real chat-completions HTTP server on 127.0.0.1 for tests, scripted per request.

``ChatServer(responder)`` runs ``http.server.ThreadingHTTPServer`` in a thread. ``responder``
gets the parsed request body and the request's index and returns a ``Reply`` (status, content,
delay, headers). Every request body is kept in ``server.requests``.

    with ChatServer(lambda body, i: Reply(content='{"alternatives": []}')) as srv:
        OpenAI(base_url=srv.url, api_key="x").chat.completions.create(...)
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


@dataclass
class Reply:
    content: str = ""
    status: int = 200
    delay_s: float = 0.0
    headers: dict = field(default_factory=dict)
    finish_reason: str = "stop"
    prompt_tokens: int = 100
    completion_tokens: int = 50


class ChatServer:
    def __init__(self, responder: Callable[[dict, int], Reply]):
        self.responder = responder
        self.requests: list[dict] = []
        self.models_calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output clean
                pass

            def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                    pass

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    server.models_calls += 1
                    self._send(200, {"object": "list", "data": [{"id": "test-model", "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self):
                n = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": "not found"}})
                    return
                with server._lock:
                    index = len(server.requests)
                    server.requests.append(body)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                r = server.responder(body, index)
                if r.delay_s:
                    time.sleep(r.delay_s)
                with server._lock:
                    server.in_flight -= 1
                if r.status != 200:
                    self._send(r.status, {"error": {"message": f"scripted HTTP {r.status}", "type": "test"}},
                               r.headers)
                    return
                self._send(200, {
                    "id": f"chatcmpl-{index}", "object": "chat.completion", "created": 0,
                    "model": body.get("model", ""),
                    "choices": [{"index": 0, "finish_reason": r.finish_reason,
                                 "message": {"role": "assistant", "content": r.content}}],
                    "usage": {"prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
                              "total_tokens": r.prompt_tokens + r.completion_tokens},
                }, r.headers)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> "ChatServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


class Replay:
    """A responder that replays a recorded case folder: request ``i`` gets reply ``i``.

    ``NN.request.json`` is the planner's exact request body; ``NN.reply.json`` (or ``NN.reply.txt``
    for a reply that is not JSON) is the content a model wrote for it from the request alone;
    ``NN.cut`` marks a reply that ended at ``max_tokens`` (``finish_reason`` ``length``). A request
    that differs from the recorded one is kept in ``mismatches`` (the replies answer those requests
    only). With ``record=True`` new or changed requests are written, and a request without a reply
    is answered HTTP 401 and named in ``missing``: write its reply, then record again.
    """

    def __init__(self, folder, record: bool = False):
        from pathlib import Path

        self.folder = Path(folder)
        self.record = record
        self.mismatches: list[str] = []
        self.missing: str | None = None

    def __call__(self, body: dict, index: int) -> Reply:
        f = self.folder / f"{index:02d}.request.json"
        text = json.dumps(body, ensure_ascii=False, indent=1, sort_keys=True) + "\n"
        if not f.exists() or f.read_text("utf-8") != text:
            if not self.record:
                self.mismatches.append(f"{f.name}: the planner's request differs from the recorded one")
                return Reply(status=400)
            f.write_text(text, "utf-8")
        for name in (f"{index:02d}.reply.json", f"{index:02d}.reply.txt"):
            reply = self.folder / name
            if reply.exists():
                cut = (self.folder / f"{index:02d}.cut").exists()
                content = reply.read_text("utf-8").rstrip("\n")
                return Reply(content, finish_reason="length" if cut else "stop",
                             prompt_tokens=len(body["messages"][0]["content"]) // 4,
                             completion_tokens=len(content) // 4)
        self.missing = str(self.folder / f"{index:02d}.reply.json")
        return Reply(status=401)  # stops the planner at once (no retry, no fallback)


def respond_from(replays: list[Replay]) -> Callable[[dict, int], Reply]:
    """A responder for several sessions' cases at once: each request is answered by the case and
    turn whose recorded request it is, byte for byte; an unknown request is a 400."""
    def respond(body: dict, i: int) -> Reply:
        text = json.dumps(body, ensure_ascii=False, indent=1, sort_keys=True) + "\n"
        for rep in replays:
            for f in sorted(rep.folder.glob("*.request.json")):
                if f.read_text("utf-8") == text:
                    return rep(body, int(f.name[:2]))
        return Reply(status=400)

    return respond
