"""Load YAML configs and seeds into models, with one-line errors naming file, field and value."""

from __future__ import annotations

import glob
import math
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ..errors import UserError
from ..schema.config import PipelineConfig
from ..schema.seed import ScenarioSeed

M = TypeVar("M", bound=BaseModel)


def _format_loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def validation_message(path: Path | str, err: ValidationError) -> str:
    """First error of ``err`` as ``file: field: message (got value)``, plus a count of the rest."""
    first = err.errors()[0]
    loc = tuple(p for p in first["loc"] if not (isinstance(p, str) and p in _UNION_TAGS))
    msg = first["msg"].removeprefix("Value error, ")
    value = first.get("input")
    shown = ascii(value) if isinstance(value, str) and not value.isprintable() else repr(value)
    if isinstance(value, dict) and len(shown) > 120:
        shown = "a mapping"
    elif len(shown) > 120:  # a long value: its start, its length
        shown = f"{shown[:60]}... ({len(value) if isinstance(value, (str, list)) else len(shown)} long)"
    more = len(err.errors()) - 1
    tail = f" [+{more} more]" if more > 0 else ""
    if msg.endswith(")") and "(got " in msg:  # the message names the value it refuses: not the whole mapping again
        return f"{path}: {_format_loc(loc)}: {msg}{tail}"
    return f"{path}: {_format_loc(loc)}: {msg} (got {shown}){tail}"


# pydantic puts the discriminator tag of a union member in the error location; drop it.
_UNION_TAGS = {"fixed", "uniform", "normal", "lognormal", "gamma", "int_uniform"}


class _StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """``yaml.SafeLoader`` (libyaml's parser where PyYAML has it: 4x faster on seeds) that refuses
    a key given twice in one mapping (PyYAML keeps the last)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False):
    seen: set = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            dup = key in seen
            seen.add(key)
        except TypeError:  # an unhashable key: the constructor below says so
            continue
        if dup:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is given twice", key_node.start_mark)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


MAX_YAML_VALUES = 200_000
"""Values a configuration file may hold once its aliases are expanded (a seed holds ~500; an alias
bomb of 1.3 KB holds billions, and every reader of the parsed data would walk them all)."""


def _check_aliases(path: Path, root) -> None:
    """Refuse a document whose aliases refer to a node that contains them (a recursive
    structure) or expand it past ``MAX_YAML_VALUES`` values. Walks the composed node graph once,
    each shared node once (depth-first with an explicit stack: no recursion limit)."""
    if root is None:
        return
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        kids = _children(node)
        if finished:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            if size[key] > MAX_YAML_VALUES:
                raise UserError(f"{path}: line {node.start_mark.line + 1}: aliases expand to more than "
                                f"{MAX_YAML_VALUES} values (got an alias bomb?)")
            continue
        if key in size:
            continue
        on_path.add(key)
        stack.append((node, True))
        for k in kids:
            if id(k) in on_path:
                raise UserError(f"{path}: line {k.start_mark.line + 1}: an alias refers to a node that contains "
                                "it (a recursive structure)")
            if id(k) not in size:
                stack.append((k, False))


def _children(node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [x for pair in node.value for x in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _non_finite(data, loc: tuple = ()) -> tuple[tuple, float] | None:
    """The first NaN or infinite number in parsed YAML, with where it is."""
    if isinstance(data, float) and not math.isfinite(data):
        return loc, data
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for k, v in items:
        found = _non_finite(v, (*loc, k))
        if found is not None:
            return found
    return None


def load_yaml_mapping(path: Path | str):
    """The parsed mapping of a YAML file; anything unreadable, not YAML, not a mapping, with a
    duplicate key or a non-finite number is a ``UserError`` naming the file (and line or field)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise UserError(f"{path}: cannot read: {e.strerror or e}") from None
    if b"\x00" in raw:
        nul = raw.index(0)
        raise UserError(f"{path}: byte {nul}: not a YAML text file (got a NUL byte)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: byte {e.start}: not UTF-8 text (got {raw[e.start:e.start + 1]!r})") from None
    try:
        loader = _StrictLoader(text)
        try:
            node = loader.get_single_node()
            _check_aliases(path, node)
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "?"
        problem = " ".join(str(getattr(e, "problem", None) or e).split())
        raise UserError(f"{path}: {where}: not valid YAML ({problem})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: (top level): expected a mapping (got {type(data).__name__})")
    bad = _non_finite(data)
    if bad is not None:
        raise UserError(f"{path}: {_format_loc(bad[0])}: must be a finite number (got {bad[1]!r})")
    return data


def load_yaml_model(path: Path | str, model: type[M]) -> M:
    data = load_yaml_mapping(path)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise UserError(validation_message(path, e)) from None


def load_seed(path: Path | str) -> ScenarioSeed:
    seed = load_yaml_model(path, ScenarioSeed)
    if Path(path).stem != seed.id:
        raise UserError(f"{path}: id: must equal the file name stem {Path(path).stem!r} (got {seed.id!r})")
    return seed


def load_pipeline(path: Path | str) -> PipelineConfig:
    return load_yaml_model(path, PipelineConfig)


def resolve_seed_paths(config: PipelineConfig, pipeline_path: Path | str) -> list[Path]:
    """Seed files matched by the pipeline's globs, relative to the pipeline file, sorted."""
    base = Path(pipeline_path).resolve().parent
    found: set[Path] = set()
    for i, pattern in enumerate(config.seeds):
        matches = [Path(p) for p in glob.glob(str(base / pattern))]
        if not matches:
            raise UserError(f"{pipeline_path}: seeds[{i}]: matches no file (got {pattern!r})")
        for p in matches:
            try:
                found.add(p.resolve(strict=True))
            except (OSError, RuntimeError) as e:  # RuntimeError: a symlink loop (Python < 3.13)
                why = "a symlink loop" if isinstance(e, RuntimeError) or getattr(e, "errno", 0) == 40 else (
                    getattr(e, "strerror", None) or str(e))
                raise UserError(f"{pipeline_path}: seeds[{i}]: {p}: cannot be read ({why})") from None
    return sorted(found)


def load_seed_files(config: PipelineConfig, pipeline_path: Path | str) -> list[tuple[Path, ScenarioSeed]]:
    """The pipeline's seeds with the file each came from, sorted by path; ids must be unique."""
    pairs = [(p, load_seed(p)) for p in resolve_seed_paths(config, pipeline_path)]
    ids = [s.id for _, s in pairs]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise UserError(f"{pipeline_path}: seeds: duplicate seed id {sorted(dup)[0]!r}")
    return pairs


def load_seeds(config: PipelineConfig, pipeline_path: Path | str) -> list[ScenarioSeed]:
    return [s for _, s in load_seed_files(config, pipeline_path)]
