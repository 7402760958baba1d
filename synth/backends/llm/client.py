"""A chat-completions client for any OpenAI-compatible server, with a reply cache on disk.

Structured-output modes, tried in order until a server accepts one, then remembered for the
rest of the task (per client, i.e. per ``base_url``):

- ``json_schema``: ``response_format={"type": "json_schema", "json_schema": {...}}`` (OpenAI,
  vLLM, SGLang, Ollama, llama.cpp's own ``llama-server``);
- ``json_object``: ``{"type": "json_object", "schema": ...}`` with the schema also in the prompt
  (llama-cpp-python's server answers HTTP 500 to ``json_schema`` and takes this);
- ``plain``: no ``response_format``; the schema is in the prompt and the JSON is extracted.

The cache key is a blake2b hash of the whole request (model, messages, response format,
sampling parameters; not the URL or the key), so a resumed or repeated run asks nothing twice.
HTTP retries with backoff on 429, 5xx, timeouts and connection errors are the ``openai``
client's own (``max_retries``, ``timeout``).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ...errors import SessionReject, UserError
from ...io.files import write_text_atomic
from ...schema.config import LLMConfig

MODES = ("json_schema", "json_object", "plain")


class EndpointError(UserError):
    """The endpoint cannot be used at all (unreachable, key refused): the run stops, resumable."""


@dataclass(frozen=True)
class Reply:
    content: str
    finish_reason: str
    mode: str
    cached: bool
    max_tokens: int = 0


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "duplexsynth" / "llm"


def request_key(request: dict) -> str:
    blob = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.blake2b(blob.encode("utf-8"), digest_size=20).hexdigest()


class ReplyCache:
    """One JSON file per request hash: ``<dir>/<key[:2]>/<key>.json``, written atomically."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        try:
            return json.loads(self._path(key).read_text("utf-8"))
        except (OSError, ValueError):
            return None

    def put(self, key: str, entry: dict) -> None:
        try:
            write_text_atomic(self._path(key), json.dumps(entry, ensure_ascii=False, sort_keys=True))
        except OSError as e:
            raise UserError(f"planner.llm.cache_dir: cannot write {self.folder} ({e.strerror})") from None


class ChatClient:
    """Thread-safe; at most ``max_concurrency`` requests in flight; counts usage."""

    def __init__(self, cfg: LLMConfig, cache_dir: Path | None = None):
        self.cfg = cfg
        self.cache = ReplyCache(Path(cache_dir) if cache_dir else (Path(cfg.cache_dir) if cfg.cache_dir else default_cache_dir()))
        self.mode: str | None = None if cfg.response_format == "auto" else cfg.response_format
        self.usage = {"requests": 0, "cache_hits": 0, "prompt_tokens": 0, "completion_tokens": 0,
                      "mode_fallbacks": 0}
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(cfg.max_concurrency)
        self._client = None

    @property
    def client(self):
        if self._client is None:
            import openai

            key = os.environ.get(self.cfg.api_key_env) or "no-key"  # local servers take any key
            self._client = openai.OpenAI(base_url=self.cfg.base_url, api_key=key,
                                         timeout=self.cfg.timeout_s, max_retries=self.cfg.max_retries)
        return self._client

    def _count(self, **kw: int) -> None:
        with self._lock:
            for k, v in kw.items():
                self.usage[k] = self.usage.get(k, 0) + int(v or 0)

    def request(self, mode: str, messages: list[dict], schema: dict, seed: int, max_tokens: int,
                name: str = "plan") -> dict:
        """The request body; ``max_tokens`` is the request's own (derived from what it asks for)."""
        cfg = self.cfg
        if not cfg.schema_string_lengths:
            schema = _without_lengths(schema)
        req = {"model": cfg.model, "messages": messages, "temperature": cfg.temperature,
               "top_p": cfg.top_p, "max_tokens": min(max_tokens, cfg.max_tokens), "seed": seed}
        if mode == "json_schema":
            req["response_format"] = {"type": "json_schema",
                                      "json_schema": {"name": name, "schema": schema,
                                                      "strict": cfg.json_schema_strict}}
        elif mode == "json_object":
            req["response_format"] = {"type": "json_object", "schema": schema}
        return req

    def complete(self, messages_for: Callable[[str], list[dict]], schema: dict, seed: int, max_tokens: int,
                 name: str = "plan") -> Reply:
        """One reply; ``messages_for(mode)`` builds the conversation for a mode (schema in prompt or not)."""
        modes = [self.mode] if self.mode else list(MODES)
        requests = [(m, self.request(m, messages_for(m), schema, seed, max_tokens, name)) for m in modes]
        for mode, req in requests:  # any cached mode first: a repeated run sends nothing
            hit = self.cache.get(request_key(req))
            if hit is not None:
                self._count(cache_hits=1)
                self.mode = self.mode or mode
                return Reply(hit["content"], hit.get("finish_reason") or "stop", mode, True,
                             req["max_tokens"])
        for i, (mode, req) in enumerate(requests):
            last = i == len(requests) - 1
            try:
                return self._send(mode, req, probing=not last and self.mode is None, name=name)
            except _ModeRefused as e:
                if last:
                    raise SessionReject("plan", "llm_request_refused", str(e)[:300]) from None
                self._count(mode_fallbacks=1)
        raise AssertionError("unreachable")

    def _send(self, mode: str, req: dict, probing: bool, name: str = "plan") -> Reply:
        import openai

        # a mode not known to work is probed with one retry, so a server that refuses it (llama-cpp-python
        # answers 500) falls back quickly; a busy or slow server then gets the full retry budget
        client = self.client.with_options(max_retries=min(1, self.cfg.max_retries)) if probing else self.client
        with self._slots:
            try:
                resp = client.chat.completions.create(**req)
            except (openai.RateLimitError, openai.APIConnectionError) as e:  # also timeouts
                if not probing:
                    raise self._unavailable(e) from None
                resp = None
            except (openai.BadRequestError, openai.UnprocessableEntityError, openai.NotFoundError,
                    openai.InternalServerError) as e:
                if isinstance(e, openai.InternalServerError) and not probing:
                    raise self._unavailable(e) from None
                raise _ModeRefused(f"{mode}: HTTP {e.status_code}: {_short(e)}") from None
            except (openai.AuthenticationError, openai.PermissionDeniedError) as e:
                raise EndpointError(f"planner.llm.base_url: {self.cfg.base_url} refused the API key "
                                    f"(HTTP {e.status_code}; set ${self.cfg.api_key_env})") from None
            except openai.APIStatusError as e:
                raise self._unavailable(e) from None
            except openai.APIError as e:  # a 200 whose body is not a chat completion: a bad reply
                raise SessionReject("plan", "llm_bad_response", _short(e)) from None
            except ValueError as e:  # a 200 with cut or broken JSON
                raise SessionReject("plan", "llm_bad_response", f"the reply is not valid JSON ({_short(e)})") from None
        if resp is None:
            return self._send(mode, req, probing=False, name=name)
        if not isinstance(getattr(resp, "choices", None), list):  # HTML or text: openai hands back a str
            raise SessionReject("plan", "llm_bad_response",
                                f"the reply is not a chat completion (got {str(resp)[:60]!r})")
        if not resp.choices or resp.choices[0].message is None:  # never cached: a later run asks again
            raise SessionReject("plan", "llm_no_choices", "the reply has no choices")
        self.mode = self.mode or mode
        u = getattr(resp, "usage", None)
        pt, ct = getattr(u, "prompt_tokens", 0) or 0, getattr(u, "completion_tokens", 0) or 0
        choice = resp.choices[0] if resp.choices else None
        finish = (choice.finish_reason if choice else None) or "stop"
        self._count(requests=1, prompt_tokens=pt, completion_tokens=ct,
                    **{f"{name}_requests": 1, f"{name}_prompt_tokens": pt, f"{name}_completion_tokens": ct,
                       f"{name}_cut": int(finish == "length")})
        content = (choice.message.content if choice and choice.message else None) or ""
        self.cache.put(request_key(req), {"content": content, "finish_reason": finish, "mode": mode,
                                          "model": self.cfg.model})
        return Reply(content, finish, mode, False, req["max_tokens"])

    def _unavailable(self, e: Exception) -> EndpointError:
        return EndpointError(f"planner.llm.base_url: {self.cfg.base_url}: {type(e).__name__} after "
                             f"{self.cfg.max_retries} retries ({_short(e)})")


def _without_lengths(node):
    """The schema less ``maxLength``/``minLength`` (the reply is checked for lengths anyway)."""
    if isinstance(node, dict):
        return {k: _without_lengths(v) for k, v in node.items() if k not in ("maxLength", "minLength")}
    if isinstance(node, list):
        return [_without_lengths(v) for v in node]
    return node


class _ModeRefused(Exception):
    """The server refused this structured-output mode (or this request in it)."""


def _short(e: Exception) -> str:
    return " ".join(str(e).split())[:200]


def _models_reply(base_url: str) -> str:
    """What ``GET /models`` gave when it was no model list: its content type and first characters
    (openai's own error for an HTML page is an internal AttributeError)."""
    import urllib.request

    try:
        with urllib.request.urlopen(base_url.rstrip("/") + "/models", timeout=5) as r:
            kind, head = r.headers.get_content_type(), r.read(80).decode("utf-8", "replace")
    except Exception as e:  # noqa: BLE001 - only a detail of the message
        return f"no readable reply ({type(e).__name__})"
    return f"{kind}, {' '.join(head.split())[:60]!r}"


def check_endpoint(cfg: LLMConfig) -> None:
    """Fail early, with one line, when the endpoint cannot be reached or refuses the key.

    ``GET /models`` is tried once with a short timeout; a server without that route (404) passes.
    """
    import openai

    key = os.environ.get(cfg.api_key_env) or "no-key"
    client = openai.OpenAI(base_url=cfg.base_url, api_key=key, timeout=min(10.0, cfg.timeout_s), max_retries=1)
    try:
        client.models.list()
    except (openai.NotFoundError, openai.BadRequestError):
        return
    except (openai.AuthenticationError, openai.PermissionDeniedError) as e:
        raise EndpointError(f"planner.llm.base_url: {cfg.base_url} refused the API key "
                            f"(HTTP {e.status_code}; set ${cfg.api_key_env})") from None
    except openai.APIStatusError as e:
        if e.status_code >= 500:
            raise EndpointError(f"planner.llm.base_url: {cfg.base_url} answers HTTP {e.status_code}") from None
    except openai.APIError as e:
        raise EndpointError(f"planner.llm.base_url: cannot reach {cfg.base_url} ({type(e).__name__}: "
                            f"{_short(e)})") from None
    except (ValueError, TypeError, AttributeError):  # a 200 that is not JSON (an HTML page)
        raise EndpointError(f"planner.llm.base_url: {cfg.base_url} does not answer like an OpenAI-compatible "
                            f"server (GET {cfg.base_url.rstrip('/')}/models: {_models_reply(cfg.base_url)})") from None


def check_cache_dir(folder: Path) -> None:
    """The reply cache folder can be created and written (checked before a run starts)."""
    import tempfile

    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-"):
            pass
    except OSError as e:
        raise UserError(f"planner.llm.cache_dir: cannot write {folder} ({e.strerror or e})") from None
