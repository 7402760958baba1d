"""The real eSpeak NG engine: word timings, code-switching per language run, determinism."""

import numpy as np

from synth.backends.espeak import EspeakTTS
from synth.backends.scripted_planner import tokenize
from synth.backends.tts import Voice

TTS = EspeakTTS({"en": "en-us", "zh": "cmn"})
V = Voice(variant="m3", rate_wpm=170, pitch=50, pitch_range=60)


def test_english_word_times_are_ordered_and_cover_the_audio():
    words = tokenize("Can you book a table for two tonight?")
    r = TTS.synthesize(words, V, 16000)
    assert [w.word for w in r.words] == [w.text for w in words]
    assert 1.0 < len(r.audio) / 16000 < 4.0
    ons = [w.on for w in r.words]
    assert ons == sorted(ons) and len(set(ons)) == len(ons)
    assert r.words[-1].off <= len(r.audio)
    # audio is trimmed: the first and last 10 ms carry signal
    assert np.abs(r.audio[:160]).max() > 1e-3 and np.abs(r.audio[-160:]).max() > 1e-4


def test_mandarin_words_get_one_time_each():
    words = tokenize("我明天有个会议，帮我订一张机票。")
    assert all(w.lang == "zh" for w in words) and len(words) >= 5
    r = TTS.synthesize(words, V, 16000)
    assert len(r.words) == len(words)
    assert all(a.on < b.on for a, b in zip(r.words, r.words[1:]))


def test_code_switched_text_is_spoken_per_language_run():
    words = tokenize("我明天有个 meeting，帮我 check 一下。")
    assert [w.lang for w in words].count("en") == 2
    mixed = TTS.synthesize(words, V, 16000)
    english = TTS.synthesize([w for w in words if w.lang == "en"][:1], V, 16000)
    seg = next(w for w in mixed.words if w.word.startswith("meeting"))
    # the English word in the mixed utterance has the length of English "meeting", not pinyin-ish
    assert abs((seg.off - seg.on) - len(english.audio)) < 0.15 * 16000


def test_same_input_same_samples_whatever_was_spoken_before():
    words = tokenize("hello there my friend")
    a = TTS.synthesize(words, V, 16000).audio
    TTS.synthesize(tokenize("something else entirely, and longer than before"), V, 16000)
    b = TTS.synthesize(words, V, 16000).audio
    assert np.array_equal(a, b)


def test_24k_output():
    r = TTS.synthesize(tokenize("twenty four kilohertz"), V, 24000)
    assert r.sample_rate == 24000 and len(r.audio) > 24000 * 0.5


def test_default_variants_give_the_same_samples_in_a_fresh_process():
    """Run-to-run determinism (libespeak-ng's breathy variants f2/f3/f5 fail this and are refused)."""
    import subprocess
    import sys

    code = (
        "import hashlib\n"
        "from synth.backends.espeak import EspeakTTS\n"
        "from synth.backends.scripted_planner import tokenize\n"
        "from synth.backends.tts import Voice\n"
        "from synth.schema.config import EspeakConfig\n"
        "t = EspeakTTS({'en': 'en-us', 'zh': 'cmn'})\n"
        "w = tokenize('For a soft yolk, 我明天有个 meeting。')\n"
        "print([hashlib.md5(t.synthesize(w, Voice(v, 180, 40, 50), 16000).audio.tobytes()).hexdigest()"
        " for v in EspeakConfig().variants])\n"
    )
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
            for _ in range(2)]
    assert runs[0] == runs[1]


def test_same_samples_after_another_library_mapped_libespeak():
    """phonemizer (Kokoro's English G2P) keeps libespeak-ng mapped; our per-synthesis fresh
    library must still be fresh, so the samples cannot depend on who loaded it first."""
    import subprocess
    import sys

    code = (
        "import hashlib, sys\n"
        "from synth.backends.espeak import EspeakTTS\n"
        "from synth.backends.scripted_planner import tokenize\n"
        "from synth.backends.tts import Voice\n"
        "if sys.argv[1] == 'phonemizer':\n"
        "    import espeakng_loader\n"
        "    from phonemizer.backend.espeak.wrapper import EspeakWrapper\n"
        "    from phonemizer.backend import EspeakBackend\n"
        "    EspeakWrapper.set_library(espeakng_loader.get_library_path())\n"
        "    EspeakWrapper.set_data_path(espeakng_loader.get_data_path())\n"
        "    EspeakBackend('en-us').phonemize(['hello'])\n"
        "t = EspeakTTS({'en': 'en-us', 'zh': 'cmn'})\n"
        "w = tokenize('Sure, I will check the flights to Shanghai tomorrow.')\n"
        "print([hashlib.md5(t.synthesize(w, Voice('m1', r, 50, 50), 16000).audio.tobytes()).hexdigest()"
        " for r in (150, 170, 150)])\n"
    )
    runs = [subprocess.run([sys.executable, "-c", code, arg], capture_output=True, text=True, check=True).stdout
            for arg in ("alone", "phonemizer")]
    assert runs[0] == runs[1]
    first, _, again = eval(runs[1])
    assert first == again


def test_a_repeated_line_is_read_from_the_cache_and_equals_a_fresh_synthesis():
    from synth.backends.espeak import _SPOKEN, _Library

    _SPOKEN.clear()
    first = _Library.speak("Mm-hm, right.", "en-us+m3", V)
    _Library.speak("Something else in between.", "en-us+m3", V)
    again = _Library.speak("Mm-hm, right.", "en-us+m3", V)
    assert again is first and len(_SPOKEN) == 2
    assert not first[0].flags.writeable  # callers cannot change what later sessions read
    fresh = _Library._speak_fresh("Mm-hm, right.", "en-us+m3", V)
    assert np.array_equal(fresh[0], first[0]) and fresh[1:] == first[1:] and len(first[0]) > 1000
    other = _Library.speak("Mm-hm, right.", "en-us+m3", Voice("m3", 200, 50, 60))  # another rate: its own entry
    assert other is not first and len(other[0]) < len(first[0])
