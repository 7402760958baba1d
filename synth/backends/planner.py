"""The planner interface and the one place that builds a planner from the config."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np

from ..schema.config import PlannerConfig
from ..schema.plan import Plan
from ..schema.seed import ScenarioSeed


class Planner(Protocol):
    """Turns a seed into a relational plan; expected failures raise ``SessionReject``."""

    name: str

    def check_seed(self, seed: ScenarioSeed, source: str = "") -> None: ...

    def plan(self, seed: ScenarioSeed, session_id: str, rng: np.random.Generator) -> Plan: ...


def make_planner(cfg: PlannerConfig, cache_dir: Path | str | None = None, content=None) -> Planner:
    """The scripted planner, or the LLM planner (``openai`` is imported only then); ``content``
    is the run's ``Library`` (None: the built-in frames), used wherever frames are planned from."""
    from .content import BUILTIN

    content = content or BUILTIN
    if cfg.kind == "llm":
        from .llm.planner import LLMPlanner

        return LLMPlanner(cfg.llm, cache_dir, content)
    from .scripted_planner import ScriptedPlanner

    return ScriptedPlanner(content)
