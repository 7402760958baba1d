"""Every pipeline the project ships loads, with all its seeds: a bound added to a schema must
not refuse our own files (the long-session seed has 80 exchanges)."""

from pathlib import Path

import pytest

from synth.io.config_files import load_pipeline, load_seeds

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", sorted((ROOT / "pipelines").glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_pipeline_and_its_seeds_load(path):
    config = load_pipeline(path)
    seeds = load_seeds(config, path)
    assert seeds, f"{path.name} matches no seed"
    assert all(s.exchanges is not None for s in seeds)
