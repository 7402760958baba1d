"""``synth view``: a small local web server (127.0.0.1 only) to browse a run.

``/`` lists the sessions (id, scenario, language, duration, phenomena) with an audio player per
channel and the session picture; ``/audio/<id>/<user|system>.flac`` serves the stored FLAC bytes
as they are (with single byte ranges, so the players can seek); ``/preview/<id>.png`` draws the picture on first request and caches it in memory;
``/report`` serves the HTML report. Standard library ``http.server`` (threaded) is enough: this
is a single-user local tool, not a service.
"""

from __future__ import annotations

import html
import re
import threading
from functools import partial
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .runfolder import RunFolder

_AUDIO = re.compile(r"^/audio/([A-Za-z0-9][A-Za-z0-9_-]*)/(user|system)\.flac$")
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
_PREVIEW = re.compile(r"^/preview/([A-Za-z0-9][A-Za-z0-9_-]*)\.png$")


class _State:
    """What the handler threads share: the run and caches (guarded by one lock)."""

    def __init__(self, run: RunFolder):
        self.run = run
        self.lock = threading.Lock()
        self.audio: dict[tuple[str, str], bytes] = {}
        self.pictures: dict[str, bytes] = {}
        self.page: bytes | None = None
        self.report: bytes | None = None

    def session_ids(self) -> set[str]:
        return {r.session_id for r in self.run.records}

    def load_audio(self, sid: str, channel: str) -> bytes:
        with self.lock:
            if (sid, channel) not in self.audio:
                s = self.run.session(sid)
                self.audio[(sid, "user")], self.audio[(sid, "system")] = s.user_flac, s.system_flac
            return self.audio[(sid, channel)]

    def picture(self, sid: str) -> bytes:
        import tempfile

        from .preview import draw

        with self.lock:
            if sid not in self.pictures:
                with tempfile.TemporaryDirectory() as tmp:
                    p = draw(self.run.session(sid), Path(tmp) / "p.png")
                    self.pictures[sid] = p.read_bytes()
            return self.pictures[sid]

    def index(self) -> bytes:
        with self.lock:
            if self.page is None:
                self.page = index_page(self.run).encode()
            return self.page

    def report_page(self) -> bytes:
        from .report import build_report, figures, render_html

        with self.lock:
            if self.report is None:
                rep = build_report(self.run)
                self.report = render_html(rep, figures(self.run, rep)).encode()
            return self.report


def index_page(run: RunFolder) -> str:
    rows = []
    for r in run.records:
        sid = html.escape(r.session_id)
        phen = ", ".join(sorted({h.id for h in r.phenomena}))
        rows.append(
            f'<section class="session" id="{sid}" data-session="{sid}">'
            f"<h2>{sid}</h2><p>{html.escape(r.scenario_id)} · {r.language} · {r.duration_s:.1f} s · "
            f"{len(r.events)} events · {len(r.delegations)} work items</p>"
            f'<p class="phen">{html.escape(phen)}</p>'
            f'<div class="players"><label>ch0 user side <audio controls preload="metadata" data-channel="user" '
            f'src="/audio/{sid}/user.flac"></audio></label>'
            f'<label>ch1 system <audio controls preload="metadata" data-channel="system" '
            f'src="/audio/{sid}/system.flac"></audio></label></div>'
            f'<details><summary>picture</summary><img loading="lazy" alt="{sid}" src="/preview/{sid}.png"></details>'
            "</section>"
        )
    style = ("body{font-family:sans-serif;max-width:1400px;margin:1em auto}section{border-bottom:1px solid #ddd;"
             "padding:.5em 0}.players{display:flex;gap:2em}img{max-width:100%}.phen{color:#666;font-size:12px}")
    return (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>{html.escape(run.name)} sessions</title>"
            f"<style>{style}</style></head><body><h1>{html.escape(run.name)}: {len(rows)} sessions</h1>"
            f'<p><a href="/report">statistics report</a></p>{"".join(rows)}</body></html>')


class _Handler(BaseHTTPRequestHandler):
    server_version = "duplexsynth-view"

    def __init__(self, *args, state: _State, **kw):
        self.state = state
        super().__init__(*args, **kw)

    def log_message(self, fmt, *args):  # quiet: the CLI prints the address once
        pass

    def _send(self, body: bytes, ctype: str, status: int = 200) -> None:
        headers = {"Content-Type": ctype, "Cache-Control": "no-store", "Accept-Ranges": "bytes"}
        rng = _RANGE.match(self.headers.get("Range", "")) if status == 200 else None
        if rng:  # a single byte range, so that <audio> can seek
            start = int(rng.group(1)) if rng.group(1) else max(0, len(body) - int(rng.group(2) or 0))
            end = min(int(rng.group(2)), len(body) - 1) if rng.group(1) and rng.group(2) else len(body) - 1
            if start >= len(body) or start > end:
                status, body, headers = HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE, b"", {
                    "Content-Range": f"bytes */{len(body)}"}
            else:
                headers["Content-Range"] = f"bytes {start}-{end}/{len(body)}"
                status, body = HTTPStatus.PARTIAL_CONTENT, body[start:end + 1]
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):  # noqa: N802 - http.server naming
        self.do_GET()

    def do_GET(self):  # noqa: N802 - http.server naming
        path = self.path.split("?", 1)[0]
        st = self.state
        try:
            if path in ("/", "/index.html"):
                return self._send(st.index(), "text/html; charset=utf-8")
            if path == "/report":
                return self._send(st.report_page(), "text/html; charset=utf-8")
            m = _AUDIO.match(path)
            if m and m.group(1) in st.session_ids():
                return self._send(st.load_audio(m.group(1), m.group(2)), "audio/flac")
            m = _PREVIEW.match(path)
            if m and m.group(1) in st.session_ids():
                return self._send(st.picture(m.group(1)), "image/png")
        except BrokenPipeError:
            return None
        self._send(b"not found", "text/plain", HTTPStatus.NOT_FOUND)


def make_server(run_dir: str | Path, port: int = 0, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """A server bound to ``host:port`` (port 0 picks a free one); call ``serve_forever``."""
    state = _State(RunFolder(run_dir))
    server = ThreadingHTTPServer((host, port), partial(_Handler, state=state))
    server.daemon_threads = True
    return server
