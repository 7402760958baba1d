"""The assistant's system prompt: from the seed's persona, scenario and tools, in the session's language."""

import glob

import pytest

from helpers import ROOT
from synth.io.config_files import load_seed
from synth.persona import system_prompt
from synth.text import HAN

SEEDS = sorted(glob.glob(str(ROOT / "scenario_seeds" / "*.yaml")))


@pytest.mark.parametrize("path", SEEDS, ids=lambda p: p.rsplit("/", 1)[1][:-5])
def test_every_seed_gets_a_prompt_in_its_language_naming_its_tools(path):
    seed = load_seed(path)
    text = system_prompt(seed)
    assert all(t.name in text for t in seed.tools) and 40 < len(text) < 2000
    latin_words = [w for w in text.split() if w.isascii() and w.isalpha()]
    if seed.language == "zh":
        assert HAN.search(text) and text.startswith("你是")
        assert seed.description not in text and len(latin_words) < 3  # no English sentences, tool names aside
        name = seed.personas.system.name
        assert name in text or name == "assistant"
    else:
        assert text.startswith("You are") and seed.personas.system.role in text
        assert seed.description.rstrip(".") in text
        assert ("answer in the same mix" in text) == (seed.language == "en-zh")
