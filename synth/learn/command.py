"""``synth learn``: parse the run lists, load, train and score, write the report (JSON + HTML)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..errors import UserError


def split_runs(value: str, option: str) -> list[Path]:
    """``A,B`` -> paths; an empty item is an error naming the option."""
    items = [v.strip() for v in value.split(",")]
    if not value.strip() or any(not v for v in items):
        raise UserError(f"{option}: a comma-separated list of run folders (got {value!r})")
    return [Path(v) for v in items]


def parse_channel_map(value: str | None) -> dict[str, int] | None:
    """``A=0,B=1`` -> ``{"A": 0, "B": 1}``."""
    if not value:
        return None
    out = {}
    for item in value.split(","):
        name, sep, ch = item.partition("=")
        if not sep or ch.strip() not in ("0", "1") or not name.strip():
            raise UserError(f"--channel-map: SPEAKER=0|1 pairs separated by commas (got {item!r})")
        out[name.strip()] = int(ch)
    return out


def require_torch() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise UserError("synth learn needs the learn extra (torch): pip install 'duplexsynth[learn]'") from None


def eval_name(paths: list[Path]) -> str:
    return ",".join(p.name or str(p) for p in paths)


def run_learn(train: str, evals: list[str], eval_real: Path | None, output: Path | None, hours: float | None,
              cfg, cache: Path | None, real_options: dict, say: Callable[[str], None]) -> tuple[dict, Path]:
    """Load everything, :func:`evaluate`, write ``report.json`` and ``report.html``; the report and folder."""
    from .experiment import evaluate, load_runs

    if not evals and eval_real is None:
        raise UserError("--eval: give at least one held-out run folder (--eval RUN[,RUN...]) or --eval-real DIR")
    if hours is not None and not 0.01 <= hours <= 10000:
        raise UserError(f"--hours: must be between 0.01 and 10000 (got {hours})")
    cfg.check()
    require_torch()
    train_paths = split_runs(train, "TRAIN_RUN")
    eval_sets = {eval_name(p): p for p in (split_runs(e, "--eval") for e in evals)}
    from .data import RunSource

    period = _one_period(train_paths + [p for ps in eval_sets.values() for p in ps], RunSource)
    say(f"reading {len(train_paths)} training run(s)")
    train_sessions = load_runs(train_paths, hours=hours, cache_dir=cache)
    loaded = {}
    for name, paths in eval_sets.items():
        say(f"reading eval {name}")
        loaded[name] = load_runs(paths, cache_dir=cache)
    if eval_real is not None:
        from .real import read_real

        loaded[f"real: {eval_real.name}"] = list(read_real(eval_real, period, **real_options))
    report = evaluate(train_sessions, loaded, cfg, train_runs=[str(p) for p in train_paths], progress=say)
    import sys

    report["created_by"] = " ".join(["synth", *sys.argv[1:]])
    out = output or Path("outputs") / "learn" / eval_name(train_paths).replace(",", "+")
    out.mkdir(parents=True, exist_ok=True)
    from .report import write_html, write_json

    write_json(report, out / "report.json")
    write_html(report, out / "report.html")
    return report, out


def _one_period(paths: list[Path], source_cls) -> float:
    periods = {}
    for p in paths:
        periods.setdefault(source_cls.open(p).frame_period_s(), []).append(p)
    if len(periods) > 1:
        desc = "; ".join(f"{', '.join(map(str, ps))}: {k * 1000:g} ms" for k, ps in sorted(periods.items()))
        raise UserError(f"runs with different frame periods ({desc}): train and evaluate at one frame rate")
    period = next(iter(periods))
    if period not in (0.02, 0.04, 0.08):
        raise UserError(f"{paths[0]}: labels.frame_period_ms {period * 1000:g}: synth learn needs 20, 40 or 80 ms "
                        "frames (1 s frames are too coarse for turn-taking)")
    return period
