"""Exporters of a written run into the layouts trainers and benchmarks read.

Every exporter recomputes what it needs from each session's timeline (events, words, work
items) at its own frame period, never by resampling the stored 80 ms arrays:

- ``minicpm``: MiniCPM-o duplex 1 s units (``synth.export.minicpm``)
- ``moshi``: moshi-finetune stereo WAV + ``alignments`` JSON + manifest (``synth.export.moshi``)
- ``fdb``: Full-Duplex-Bench v1 / v1.5 style sample folders per task (``synth.export.fdb``)
- ``textgrid``, ``rttm`` (+ CTM), ``audacity``: files for Praat, diarization tools and Audacity
  beside each session's audio (``synth.export.tools``)
"""

from __future__ import annotations

from pathlib import Path

FORMATS = ("minicpm", "moshi", "fdb", "textgrid", "rttm", "audacity")


def export_run(run_dir: str | Path, fmt: str, out_dir: str | Path, **options) -> dict:
    """Export every session of ``run_dir`` into ``out_dir`` as ``fmt``; returns a summary dict."""
    from ..errors import UserError
    from ..inspection.runfolder import RunFolder

    if fmt not in FORMATS:
        raise UserError(f"--format: must be one of {', '.join(FORMATS)} (got {fmt!r})")
    run = RunFolder(run_dir)
    run.require_unique_ids("export")
    out = Path(out_dir)
    if (out / "run.json").exists():
        raise UserError(f"-o: {out} is a run folder; export into a folder of its own")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"-o: cannot create {out} ({e.strerror})") from None
    if fmt == "minicpm":
        from .minicpm import export
    elif fmt == "moshi":
        from .moshi import export
    elif fmt == "fdb":
        from .fdb import export
    else:
        from . import tools

        export = getattr(tools, f"export_{fmt}")
    return export(run, out, **options)
