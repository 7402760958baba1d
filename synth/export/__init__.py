"""Exporters of a written run into the layouts trainers and benchmarks read.

Every exporter recomputes what it needs from each session's timeline (events, words, work
items) at its own frame period, never by resampling the stored 80 ms arrays:

- ``lhotse``: cuts (or Shar shards) as NeMo's duplex S2S dataset reads them (``synth.export.lhotse_cuts``)
- ``minicpm`` (experimental): MiniCPM-o duplex 1 s units (``synth.export.minicpm``)
- ``moshi``: moshi-finetune stereo WAV + ``alignments`` JSON + manifest (``synth.export.moshi``)
- ``fdb``: Full-Duplex-Bench v1 / v1.5 style sample folders per task (``synth.export.fdb``)
- ``textgrid``, ``rttm`` (+ CTM), ``audacity``: files for Praat, diarization tools and Audacity
  beside each session's audio (``synth.export.tools``)
"""

from __future__ import annotations

from pathlib import Path

FORMATS = ("lhotse", "moshi", "minicpm", "fdb", "textgrid", "rttm", "audacity")
CHECKED = ("lhotse", "moshi", "textgrid", "rttm")  # formats whose consumer's reader --check runs
WRITTEN_AS = {"minicpm": "minicpm-duplex", "fdb": "full-duplex-bench"}  # export.json "format", where it differs
SOUND_TAGS = ("drop", "keep")
OTHERS = ("label", "drop")


def export_run(run_dir: str | Path, fmt: str, out_dir: str | Path, check: bool = False, **options) -> dict:
    """Export every session of ``run_dir`` into ``out_dir`` as ``fmt``; returns a summary dict.
    With ``check``, the export is read back by its consumer's reader (``synth.export.check``) and
    what it read is the summary's ``check``. ``None`` (or ``False``) means the format's default; an
    option the format does not take is refused, naming the options it takes."""
    from ..errors import UserError
    from ..inspection.runfolder import RunFolder

    if fmt not in FORMATS:
        raise UserError(f"--format: must be one of {', '.join(FORMATS)} (got {fmt!r})")
    if check and fmt not in CHECKED:
        raise UserError(f"--check: no reader to check {fmt} with (checked: {', '.join(CHECKED)})")
    for name, allowed in (("sound_tags", SOUND_TAGS), ("others", OTHERS)):
        if options.get(name) is not None and options[name] not in allowed:
            raise UserError(f"--{name.replace('_', '-')}: must be {' or '.join(allowed)} (got {options[name]!r})")
    options = {k: v for k, v in options.items() if v is not None and v is not False}
    _takes_every_option(fmt, options)
    run = RunFolder(run_dir)
    run.require_unique_ids("export")
    out = Path(out_dir)
    if (out / "run.json").exists():
        raise UserError(f"-o: {out} is a run folder; export into a folder of its own")
    _require_own_folder(out, fmt)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"-o: cannot create {out} ({e.strerror})") from None
    if fmt == "lhotse":
        from .lhotse_cuts import export
    elif fmt == "minicpm":
        from .minicpm import export
    elif fmt == "moshi":
        from .moshi import export
    elif fmt == "fdb":
        from .fdb import export
    else:
        from . import tools

        export = getattr(tools, f"export_{fmt}")
    meta = export(run, out, **options)
    if check:
        from .check import check_export

        meta["check"] = check_export(fmt, out, meta)
    return meta


TAKES = {
    "lhotse": ("target_sample_rate", "shar", "sound_tags"), "moshi": ("sample_rate", "others", "sound_tags", "text_conditions",
                                                                 "voice_prompts"),
    "minicpm": ("decision_lag",), "fdb": (), "textgrid": (), "rttm": ("sound_tags",), "audacity": (),
}
"""The options each format takes (the keyword arguments of its exporter that the command line sets)."""


def _takes_every_option(fmt: str, options: dict) -> None:
    """An option the format would ignore is refused: the user meant something it does not do."""
    from ..errors import UserError

    ignored = [k for k in options if k not in TAKES[fmt]]
    if ignored:
        takes = ", ".join(f"--{k.replace('_', '-')}" for k in TAKES[fmt]) or "none"
        raise UserError(f"--{ignored[0].replace('_', '-')}: --format {fmt} does not take it (its options: {takes})")


def _require_own_folder(out: Path, fmt: str) -> None:
    """An export goes into a new or empty folder, or over an earlier export of the same format."""
    import json

    from ..errors import UserError

    if not out.is_dir() or not any(out.iterdir()):
        return
    try:
        earlier = json.loads((out / "export.json").read_text(encoding="utf-8")).get("format")
    except (OSError, ValueError, AttributeError):
        earlier = None
    if earlier != WRITTEN_AS.get(fmt, fmt):
        names = {v: k for k, v in WRITTEN_AS.items()}
        what = f"a {names.get(earlier, earlier)} export" if isinstance(earlier, str) else "files that are not an export"
        raise UserError(f"-o: {out} is not empty (it holds {what}); export {fmt} into an empty folder")
