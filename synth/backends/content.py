"""The frames a run plans with: the built-in library plus a pipeline's content folders.

A pipeline's ``content: [folders]`` (paths relative to the pipeline file) names folders of
``<domain>.yaml`` files in the ``AddedFile`` format (what ``synth frames draft`` writes): frames
added to the built-in block of that domain and language. The driver reads them once, checks them
with the frame checker and puts the loaded ``Library`` into the run spec, so every worker (a
forked process, a Ray task) plans with exactly the frames the driver read, whatever happens to
the folder during the run, and the module-level loaders of ``frames`` stay the built-in content.
``Library.digest`` (blake2b of the files read, by folder and name) goes into the run's data
settings, so a changed content folder is a changed run.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from ..errors import UserError
from .frame_checks import added_problems
from .frames import AddedFile, Frame, LanguageBlock, block

MAX_FOLDERS = 16
"""Content folders one pipeline may name (``PipelineConfig.content``)."""


@dataclass(frozen=True)
class Library:
    """Built-in frames plus ``added[(domain, language)]``, in folder order then file order."""

    added: dict[tuple[str, str], tuple[Frame, ...]] = field(default_factory=dict)
    digest: str | None = None
    files: tuple[str, ...] = ()

    def block(self, domain: str, language: str) -> LanguageBlock:
        """The built-in block of ``domain`` and ``language`` with the added frames after its own."""
        base = block(domain, language)
        extra = self.added.get((domain, language))
        return base.model_copy(update={"frames": [*base.frames, *extra]}) if extra else base

    def __hash__(self) -> int:  # frozen with a dict field: hash by what it was read from
        return hash((self.digest, self.files))


BUILTIN = Library()
"""The package's frames only (a pipeline without ``content``)."""


def content_files(folder: Path) -> list[Path]:
    """A content folder's domain files: ``*.yaml`` not starting with ``_``, sorted by name."""
    return sorted(p for p in folder.glob("*.yaml") if not p.name.startswith("_"))


def read_added(path: Path, where: str = "") -> AddedFile:
    """A content folder's file, checked: model, domain (the file's stem), speech rules, ids; any
    problem is one line (the first, with a count of the rest)."""
    from ..io.config_files import load_yaml_mapping, validation_message

    try:
        af = AddedFile.model_validate(load_yaml_mapping(path))
    except ValidationError as e:
        raise UserError(where + validation_message(path, e)) from None
    if af.domain != path.stem:
        raise UserError(f"{where}{path}: domain: must equal the file name stem {path.stem!r} (got {af.domain!r})")
    problems = added_problems(af, f"{where}{path}: ")
    if problems:
        more = f" [+{len(problems) - 1} more; python -m synth.backends.frames {path}]" if len(problems) > 1 else ""
        raise UserError(problems[0] + more)
    return af


def load_library(folders: list[str], base: Path, where: str = "content") -> Library:
    """The library of ``folders`` (relative to ``base``); any problem is a ``UserError`` of one
    line naming the file and, for a clash, the frame id."""
    if not folders:
        return BUILTIN
    added: dict[tuple[str, str], list[Frame]] = {}
    owner: dict[tuple[str, str, str], tuple[int, Path]] = {}
    h = hashlib.blake2b(digest_size=16)
    read: list[str] = []
    for i, name in enumerate(folders):
        folder = (base / name).resolve()
        if not folder.is_dir():
            raise UserError(f"{where}[{i}]: {folder} is not a folder (got {name!r})")
        for path in content_files(folder):
            try:
                data = path.read_bytes()
            except OSError as e:
                raise UserError(f"{path}: cannot read: {e.strerror or e}") from None
            af = read_added(path)
            for lang, blk in af.blocks().items():
                for f in blk.frames:
                    first = owner.setdefault((af.domain, lang, f.id), (i, path))
                    if first != (i, path):  # (a file's own repeats are found by the checker)
                        raise UserError(f"{path}: {lang}: frame id {f.id!r} is also a frame of {first[1]}")
                added.setdefault((af.domain, lang), []).extend(blk.frames)
            h.update(f"{i}\0{path.name}\0{len(data)}\0".encode() + data)
            read.append(str(path))
    return Library({k: tuple(v) for k, v in added.items()}, h.hexdigest(), tuple(read))
