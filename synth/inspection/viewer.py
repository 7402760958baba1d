"""``synth view``: a small local web server (127.0.0.1 only) to browse and listen to a run.

``/`` lists the sessions, filtered by language, scenario and phenomenon and paged on the server
(``?lang=&scenario=&phen=&page=&per=``), from a light catalogue that holds no audio or label
arrays; ``/session/<id>`` is one session's page (stereo player with mute/solo per channel, timeline
with a playhead, clickable transcript: :mod:`.viewer_pages`); ``/audio/<id>/mix.flac`` is the
stereo mix built on request (ch0 user side left, ch1 system right), ``/audio/<id>/<user|system>.flac``
the stored FLAC bytes as they are (all with single byte ranges, so the player can seek);
``/preview/<id>.png`` draws the picture on first request; ``/report`` serves the HTML report;
``/static/`` the page's script and style. Standard library ``http.server`` (threaded) is enough:
this is a single-user local tool, not a service. Recent sessions, mixes and pictures are kept in
small LRU caches, so memory stays bounded on a run of any size.
"""

from __future__ import annotations

import re
import sys
import threading
from collections import OrderedDict
from functools import partial
from html import escape
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from urllib.parse import parse_qs

from .runfolder import RunFolder
from .viewer_data import Catalogue, Filters, stereo_flac

_ID = r"([A-Za-z0-9][A-Za-z0-9_-]*)"
_AUDIO = re.compile(rf"^/audio/{_ID}/(user|system|mix)\.flac$")
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
_PREVIEW = re.compile(rf"^/preview/{_ID}\.png$")
_SESSION = re.compile(rf"^/session/{_ID}$")
_STATIC = {"viewer.js": "text/javascript; charset=utf-8", "viewer.css": "text/css; charset=utf-8"}
PER_PAGE, MAX_PER_PAGE = 50, 500


class _Lru(OrderedDict):
    """A tiny LRU map: the last ``size`` items."""

    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def put(self, key, value):
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)
        return value


class _State:
    """What the handler threads share: the run, its catalogue and caches (guarded by one lock)."""

    def __init__(self, run: RunFolder):
        self.run = run
        self.catalogue = Catalogue.of(run)
        self.lock = threading.Lock()
        self.sessions = _Lru(32)
        self.with_audio = _Lru(4)
        self.mixes = _Lru(4)
        self.pictures = _Lru(16)
        self.report: bytes | None = None

    def known(self, sid: str) -> bool:
        return sid in self.catalogue.by_id

    def session(self, sid: str, with_audio: bool = False):
        """A session from the caches, else from its shard (records and audio are cached apart:
        a page needs no audio, and reading a shard's audio column is the slow part)."""
        cache = self.with_audio if with_audio else self.sessions
        with self.lock:
            if sid in cache:
                cache.move_to_end(sid)
                return cache[sid]
            return cache.put(sid, self.catalogue.session(sid, with_audio))

    def audio(self, sid: str, channel: str) -> bytes:
        s = self.session(sid, with_audio=True)
        if channel != "mix":
            return s.user_flac if channel == "user" else s.system_flac
        with self.lock:
            if sid not in self.mixes:
                self.mixes.put(sid, stereo_flac(s))
            return self.mixes[sid]

    def picture(self, sid: str) -> bytes:
        import tempfile

        from .preview import draw

        s = self.session(sid, with_audio=True)
        with self.lock:
            if sid not in self.pictures:
                with tempfile.TemporaryDirectory() as tmp:
                    self.pictures.put(sid, draw(s, Path(tmp) / "p.png").read_bytes())
            return self.pictures[sid]

    def index(self, query: str) -> bytes:
        from .viewer_pages import index_page

        q = {k: v[-1] for k, v in parse_qs(query).items()}
        f = Filters(q.get("lang", ""), q.get("scenario", ""), q.get("phen", ""))
        per = min(max(1, _int(q.get("per"), PER_PAGE)), MAX_PER_PAGE)
        page = self.catalogue.select(f, _int(q.get("page"), 1), per)
        return index_page(self.catalogue, self.run.name, f, page).encode()

    def session_page(self, sid: str) -> bytes:
        from .viewer_pages import session_page

        return session_page(self.session(sid), self.catalogue).encode()

    def report_page(self) -> bytes:
        from .report import build_report, figures, render_html

        with self.lock:
            if self.report is None:
                rep = build_report(self.run)
                self.report = render_html(rep, figures(self.run, rep)).encode()
            return self.report


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


def static_file(name: str) -> bytes:
    return resources.files("synth").joinpath("data", "viewer", name).read_bytes()


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
        path, _, query = self.path.partition("?")
        st = self.state
        html = "text/html; charset=utf-8"
        try:
            if path in ("/", "/index.html"):
                return self._send(st.index(query), html)
            if path == "/report":
                return self._send(st.report_page(), html)
            if path.startswith("/static/") and path[8:] in _STATIC:
                return self._send(static_file(path[8:]), _STATIC[path[8:]])
            m = _SESSION.match(path)
            if m and st.known(m.group(1)):
                return self._send(st.session_page(m.group(1)), html)
            m = _AUDIO.match(path)
            if m and st.known(m.group(1)):
                return self._send(st.audio(m.group(1), m.group(2)), "audio/flac")
            m = _PREVIEW.match(path)
            if m and st.known(m.group(1)):
                return self._send(st.picture(m.group(1)), "image/png")
        except (BrokenPipeError, ConnectionResetError):
            return None
        except Exception as e:  # noqa: BLE001 - a session that cannot be shown is an error page; the server goes on
            return self._failed(path, e)
        self._send(b"not found", "text/plain", HTTPStatus.NOT_FOUND)

    def _failed(self, path: str, e: Exception) -> None:
        """One line on stderr and a 500 page naming what could not be shown and why."""
        from ..errors import short_error

        line = short_error(e)
        sys.stderr.write(f"view: {path}: {line}\n")
        body = (f"<!doctype html><meta charset=utf-8><title>cannot show {escape(path)}</title>"
                f"<p>{escape(path)} cannot be shown: {escape(line)}</p><p><a href='/'>all sessions</a></p>")
        self._send(body.encode("utf-8"), "text/html; charset=utf-8", HTTPStatus.INTERNAL_SERVER_ERROR)


def make_server(run_dir: str | Path, port: int = 0, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """A server bound to ``host:port`` (port 0 picks a free one); call ``serve_forever``."""
    state = _State(RunFolder(run_dir))
    server = ThreadingHTTPServer((host, port), partial(_Handler, state=state))
    server.daemon_threads = True
    return server
