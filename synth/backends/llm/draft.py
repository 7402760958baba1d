"""``synth frames draft``: a chat model writes new frames, the frame checker accepts or rejects each.

The request shows the model the frames format (the relevant parts of
``synth/data/frames/README.md``), two frames of the domain and language as examples, the ids and
topics the block already has (built-in and the content folder's), and asks for a batch of new
frames as ``{"frames": [...]}`` under a JSON schema derived from the ``Frame`` model (inlined in
the prompt where the server does not enforce it). Each frame of a reply is judged on its own:
the model's validators, the speech rules of its language (``speech_problems``), a slug id used by
no other frame, a topic no other frame has, tools of the domain. A reply that is not JSON, has no
frames or none that passes is sent back with its errors (``converse``); a reply cut at
``max_tokens`` is asked again for fewer frames. Accepted frames are appended to
``FOLDER/<domain>.yaml`` (``frames.AddedFile``), rejected ones to ``FOLDER/rejected.jsonl`` with
their reasons.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml
from pydantic import ValidationError

from ...errors import SessionReject
from ...io.files import write_text_atomic
from ...schema.config import LLMConfig
from ..content import read_added
from ..frame_checks import SLUG_ID, speech_problems
from ..frames import AddedFile, Frame, block, domain_tools
from . import budget
from .client import ChatClient, Reply
from .converse import converse
from .planner import extract_json
from .prompt import repair_prompt, schema_block, template

PROMPT = "draft-v1"
MAX_FRAMES = 50
"""Frames one command drafts (``-n``)."""
EXAMPLES = 2
LANGUAGE_RULE = {
    "en": "English only, no Chinese characters.",
    "zh": "Mandarin in Simplified characters only, natural spoken register (了, 吧, 呢, 嗯), no Latin letters: "
          "names, brands and numbers written in Chinese as a speaker says them.",
    "en-zh": "Mandarin is the main language, with English words where bilingual speakers really switch (product "
             "names, work and tech terms, short phrases such as OK, sorry, by the way): at least 40 % of a frame's "
             "lines have English in them, and every line has Chinese.",
}


@dataclass
class Drafted:
    """What a draft ended with: the frames accepted and the rejected ones with their reasons."""

    accepted: list[Frame] = field(default_factory=list)
    rejected: list[dict] = field(default_factory=list)  # {"id", "reasons", "frame", "attempt"}
    requests: int = 0
    failure: list[str] = field(default_factory=list)  # the last errors of a request that never gave a frame


@lru_cache(maxsize=None)
def format_text() -> str:
    """The frames README from "How the planner uses a file" to the example, less the language
    block's own keys (a draft writes frames only)."""
    text = resources.files("synth.data.frames").joinpath("README.md").read_text("utf-8")
    body = text.split("## How the planner uses a file", 1)[1].split("## Example", 1)[0]
    head, rest = body.split("Per language block", 1)
    rules = rest.split("## Rules", 1)[1].replace("(checked by the command above)", "(checked on every frame)")
    return (head + "## Rules" + rules).strip() + "\n"


def frames_schema(k: int) -> dict:
    """``{"frames": [Frame, ...]}`` (1..k items) from the ``Frame`` model's own JSON schema."""
    one = Frame.model_json_schema(by_alias=True)
    defs = one.pop("$defs", {})
    return {"type": "object", "properties": {"frames": {"type": "array", "items": {"$ref": "#/$defs/Frame"},
                                                        "minItems": 1, "maxItems": k}},
            "required": ["frames"], "additionalProperties": False, "$defs": {**defs, "Frame": one}}


def frame_json(f: Frame) -> str:
    return json.dumps(f.model_dump(mode="json", exclude_defaults=True), ensure_ascii=False, separators=(",", ":"))


def frame_tokens(domain: str, language: str) -> int:
    """``max_tokens`` one frame may take: the largest built-in frame of the block, with headroom."""
    largest = max(block(domain, language).frames, key=lambda f: len(frame_json(f)))
    return math.ceil(budget.estimate_tokens(frame_json(largest)) * budget.HEADROOM)


class Taken:
    """The frames a new one must differ from: ids and topics, built-in and drafted."""

    def __init__(self, domain: str, language: str, added: list[Frame]):
        self.domain, self.language = domain, language
        self.frames = [*block(domain, language).frames, *added]
        self.ids = {f.id: f for f in self.frames}
        self.topics = {_norm(f.topic): f.id for f in self.frames}

    def add(self, f: Frame) -> None:
        self.frames.append(f)
        self.ids[f.id] = f
        self.topics[_norm(f.topic)] = f.id

    def problems(self, raw) -> tuple[Frame | None, list[str]]:
        """``(frame, [])`` when ``raw`` is a frame the block may take, else ``(None, reasons)``."""
        if not isinstance(raw, dict):
            return None, [f"a frame is a JSON object (got {type(raw).__name__})"]
        try:
            f = Frame.model_validate(raw)
        except ValidationError as e:
            return None, [_error_line(err) for err in e.errors()]
        out = []
        if not SLUG_ID.match(f.id):
            out.append(f"id: {f.id!r} is not a slug (lower-case letters, digits, _)")
        if f.id in self.ids:
            out.append(f"id: {f.id!r} is already a frame of {self.domain} ({self.language})")
        elif _norm(f.topic) in self.topics:
            out.append(f"topic: {f.topic!r} is the topic of frame {self.topics[_norm(f.topic)]!r}")
        tools = domain_tools(self.domain)
        out += [f"delegations: tool {d.tool!r} is not a tool of {self.domain} (known: {', '.join(sorted(tools))})"
                for d in f.delegations if d.tool not in tools]
        out += [re.sub(r"^frames\[[^\]]*\]\.", "", p) for p in speech_problems({"frames": [f.model_dump()]}, self.language)]
        return (None, out) if out else (f, [])


def _norm(topic: str) -> str:
    return " ".join(re.sub(r"^(the|a|an)\s+", "", topic.strip().lower()).split())


def _error_line(err: dict) -> str:
    where = ".".join(str(x) for x in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    return f"{where}: {msg}" if where else msg


class _DraftRequest:
    """One batch of ``k`` frames (``converse``): good frames are kept; a reply without any is sent
    back with its errors; a cut one is asked again for fewer frames."""

    def __init__(self, client: ChatClient, lib: Taken, k: int, per_frame: int, request_seed: int):
        self.client, self.lib, self.k, self.per_frame, self.seed = client, lib, k, per_frame, request_seed
        self.history: list[dict] = []
        self.rejected: list[dict] = []
        self.attempt = 0

    def messages(self, mode: str) -> list[dict]:
        lib = self.lib
        shown = _examples(lib.domain, lib.language)
        system = template(PROMPT, "en").substitute(
            domain=lib.domain, language=lib.language, format=format_text(), language_rule=LANGUAGE_RULE[lib.language],
            tools=", ".join(sorted(domain_tools(lib.domain))),
            existing="\n".join(f"- {f.id}: {f.topic}" for f in lib.frames),
            examples="\n".join(frame_json(f) for f in shown),
            schema_block=schema_block(None if mode == "json_schema" else frames_schema(self.k), "en"))
        user = (f"Write {self.k} new frame{'s' if self.k > 1 else ''} for {lib.domain} ({lib.language}), each about "
                f"a different situation from the frames above and from each other. Reply with JSON only.")
        return [{"role": "system", "content": system}, {"role": "user", "content": user}, *self.history]

    def ask(self) -> Reply:
        self.attempt += 1
        return self.client.complete(self.messages, frames_schema(self.k), self.seed,
                                    self.per_frame * self.k, "draft")

    def judge(self, reply: Reply):
        if reply.finish_reason == "length":
            return None, [f"reply: cut at max_tokens ({reply.max_tokens}) after {len(reply.content)} characters"]
        obj, err = extract_json(reply.content)
        if obj is None:
            return None, [f"reply: {err}"]
        items = obj.get("frames") if isinstance(obj, dict) else obj
        if not isinstance(items, list) or not items:
            return None, ['reply: expected one JSON object {"frames": [frame, ...]} with at least one frame']
        accepted, errors = [], []
        for i, raw in enumerate(items[: self.k]):
            f, reasons = self.lib.problems(raw)
            if f is not None:
                self.lib.add(f)
                accepted.append(f)
                continue
            fid = raw.get("id") if isinstance(raw, dict) else None
            self.rejected.append({"id": fid, "reasons": reasons, "frame": raw, "attempt": self.attempt})
            errors += [f"frames[{i}] ({fid}): {r}" for r in reasons]
        return (accepted, []) if accepted else (None, errors)

    def shorter(self, reply: Reply) -> None:
        self.k, self.history = max(1, self.k - max(1, self.k // 3)), []

    def repair(self, reply: Reply, errors: list[str]) -> None:
        self.history = [{"role": "assistant", "content": reply.content},
                        {"role": "user", "content": repair_prompt(errors, "en", "frames")}]


def _examples(domain: str, language: str) -> list[Frame]:
    """The block's first frame with a delegation and its first without (or its first two)."""
    frames = block(domain, language).frames
    with_task = [f for f in frames if f.delegations]
    without = [f for f in frames if not f.delegations]
    shown = (with_task[:1] + without[:1]) if with_task and without else frames[:EXAMPLES]
    return shown[:EXAMPLES]


def draft_frames(domain: str, language: str, n: int, folder: Path, cfg: LLMConfig,
                 cache_dir: Path | None = None) -> Drafted:
    """Ask for ``n`` new frames in batches that fit ``cfg.max_tokens``; write what was accepted
    to ``folder/<domain>.yaml`` and what was rejected to ``folder/rejected.jsonl``."""
    path = folder / f"{domain}.yaml"
    added = read_added(path, "-o: ") if path.exists() else None
    lib = Taken(domain, language, list(added.blocks()[language].frames) if added and language in added.blocks()
                  else [])
    client = ChatClient(cfg, cache_dir)
    per_frame = frame_tokens(domain, language)
    batch = max(1, min(MAX_FRAMES, cfg.max_tokens // per_frame))
    before = _rows(folder / "rejected.jsonl")
    out, left, batches = Drafted(), n, 0
    while left > 0 and batches < 2 * math.ceil(n / batch):
        k = min(left, batch)
        # the request depends on what the folder holds (ids listed) and on the rejections so far: drafting
        # again after rejections asks anew instead of replaying the cached reply
        key = f"{domain}|{language}|{batches}|{len(before) + len(out.rejected)}"
        seed = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=4).digest(), "big") & 0x7FFFFFFF
        asking = _DraftRequest(client, lib, k, per_frame, seed)
        try:
            done = converse(asking, cfg.max_attempts)
        except SessionReject as r:  # a reply that is no chat completion at all (an HTML page, no choices)
            out.rejected += asking.rejected
            out.failure = [f"{r.reason}: {r.detail}"]
            break
        out.requests += done.attempts
        out.rejected += asking.rejected
        batches += 1
        if done.result is None:
            out.failure = done.errors
            break
        out.accepted += done.result
        left -= asking.k  # what the last request asked for (fewer after a cut): rejected frames are not asked again
    _write(folder, domain, language, added, out, cfg.model)
    return out


def _rows(path: Path) -> list[str]:
    try:
        return [line for line in path.read_text("utf-8").splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def _write(folder: Path, domain: str, language: str, added: AddedFile | None, out: Drafted, model: str) -> None:
    if out.accepted:
        data = added.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True) if added \
            else {"domain": domain}
        data["domain"] = domain
        blk = data.setdefault(language, {"frames": []})
        blk["frames"] = [*blk.get("frames", []), *(f.model_dump(mode="json", exclude_defaults=True)
                                                    for f in out.accepted)]
        text = yaml.dump(data, Dumper=_Dumper, allow_unicode=True, sort_keys=False, width=4096)
        write_text_atomic(folder / f"{domain}.yaml", _HEADER + text)
    if out.rejected:
        rows = _rows(folder / "rejected.jsonl") + [
            json.dumps({"domain": domain, "language": language, "model": model, **r}, ensure_ascii=False)
            for r in out.rejected]
        write_text_atomic(folder / "rejected.jsonl", "\n".join(rows) + "\n")


class _Dumper(yaml.SafeDumper):
    """Short lists of short strings on one line (slot values, split pairs), as the built-in files write them."""


def _list(dumper: yaml.SafeDumper, items: list):
    flow = all(isinstance(x, str) for x in items) and sum(len(x) + 4 for x in items) <= 100
    return dumper.represent_sequence("tag:yaml.org,2002:seq", items, flow_style=flow)


_Dumper.add_representer(list, _list)

_HEADER = ("# Frames added to the built-in domain (synth frames draft; format: synth/data/frames/README.md).\n"
           "# Check: python -m synth.backends.frames FILE. Use: a pipeline's content: [this folder].\n")
