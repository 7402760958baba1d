"""synth.learn.real: real two-speaker conversations (VAP lists, RTTM, TextGrid) as LearnSessions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from synth.errors import UserError
from synth.learn.data import HOLD, RELEASE, TAKE
from synth.learn.real import floor_frames, frame_span, read_real, turns_of

P = 0.08
DUR_S = 8.0
N = 100  # 8 s at 80 ms
# Channel 0 talks 0-4 s (a 0.4 s pause with a 0.25 s backchannel of channel 1 in it), and 7.2-7.8 s;
# channel 1 talks 4.4-6.8 s with a 0.4 s pause. At 80 ms: 2.05 s is in frame 25, 6.8 s ends frame 84.
CH0 = [(0.0, 2.0), (2.4, 4.0), (7.2, 7.8)]
CH1 = [(2.05, 2.3), (4.4, 5.2), (5.6, 6.8)]


def frames(*spans: tuple[int, int]) -> np.ndarray:
    """0/1 over N frames, 1 in each ``[start, end)``."""
    out = np.zeros(N, dtype=np.int8)
    for a, b in spans:
        out[a:b] = 1
    return out


def floor(*turns: tuple[int, int]) -> np.ndarray:
    """Expected floor channel: each turn given by its first and last frame."""
    out = np.zeros(N, dtype=np.int8)
    for first, last in turns:
        out[first + 1:last] = HOLD
        out[last] = RELEASE
        out[first] = TAKE
    return out


# What each channel's labels must be when it plays the system (the other one the user).
EXPECTED = {
    0: {"sys_floor": floor((0, 49), (90, 97)), "sys_vad": frames((0, 25), (30, 50), (90, 98)),
        "usr_vad": frames((25, 29), (55, 65), (70, 85)),
        "contexts": {"user_pause": [(65, 70)], "backchannel": [(25, 29)], "side_talk": [], "background": []}},
    1: {"sys_floor": floor((25, 28), (55, 84)), "sys_vad": frames((25, 29), (55, 65), (70, 85)),
        "usr_vad": frames((0, 25), (30, 50), (90, 98)),
        "contexts": {"user_pause": [(25, 30)], "backchannel": [], "side_talk": [], "background": []}},
}


def write_audio(path: Path, channels: list[list[tuple[float, float]]], sr: int = 16000,
                dur_s: float = DUR_S) -> None:
    """Speech-shaped bursts (noise, 4 Hz syllable envelope) on each channel's segments."""
    rng = np.random.default_rng(7)
    x = np.zeros((int(round(dur_s * sr)), len(channels)), dtype=np.float32)
    for c, segs in enumerate(channels):
        for on, off in segs:
            a, b = int(round(on * sr)), int(round(off * sr))
            t = np.arange(b - a) / sr
            x[a:b, c] = 0.2 * rng.standard_normal(b - a) * (0.6 + 0.4 * np.sin(2 * np.pi * 4 * t))
    sf.write(path, x if len(channels) > 1 else x[:, 0], sr)


def write_vap(path: Path, channels, as_dict: bool = False) -> None:
    vad_list = [[list(s) for s in segs] for segs in channels]
    path.write_text(json.dumps({"vad_list": vad_list} if as_dict else vad_list))


def rttm_lines(name: str, rows: list[tuple[str, str, float, float]]) -> str:
    """``rows`` of ``(speaker, chan, start_s, end_s)`` as RTTM SPEAKER lines."""
    return "".join(f"SPEAKER {name} {ch} {on:.3f} {off - on:.3f} <NA> <NA> {spk} <NA> <NA>\n"
                   for spk, ch, on, off in rows)


def write_rttm(path: Path, channels, chans=("1", "2"), speakers=("spkA", "spkB")) -> None:
    rows = [(speakers[c], chans[c], on, off) for c, segs in enumerate(channels) for on, off in segs]
    rows.sort(key=lambda r: r[2])  # time order, speakers interleaved, as diarization writes it
    path.write_text(";; test conversation\n" + rttm_lines(path.stem, rows))


def write_textgrid(path: Path, tiers: dict[str, list[tuple[float, float]]]) -> None:
    from praatio import textgrid

    tg = textgrid.Textgrid()
    for name, segs in tiers.items():
        tg.addTier(textgrid.IntervalTier(name, [(on, off, "speech") for on, off in segs], 0, DUR_S))
    tg.save(str(path), format="long_textgrid", includeBlankSpaces=True)


def conversation(folder: Path, fmt: str, name: str = "conv1") -> Path:
    """One conversation of CH0/CH1 in ``fmt``: VAP at 16 kHz WAV, RTTM at 8 kHz WAV, TextGrid FLAC."""
    folder.mkdir(exist_ok=True)
    if fmt == "vap":
        write_audio(folder / f"{name}.wav", [CH0, CH1])
        write_vap(folder / f"{name}.json", [CH0, CH1])
    elif fmt == "rttm":
        write_audio(folder / f"{name}.wav", [CH0, CH1], sr=8000)
        write_rttm(folder / f"{name}.rttm", [CH0, CH1])
    else:
        write_audio(folder / f"{name}.flac", [CH0, CH1])
        write_textgrid(folder / f"{name}.TextGrid", {"A": CH0, "B": CH1})
    return folder


def assert_labels(s, system: int) -> None:
    want = EXPECTED[system]
    for key in ("sys_floor", "sys_vad", "usr_vad"):
        np.testing.assert_array_equal(getattr(s, key), want[key], err_msg=f"{s.session_id} {key}")
    assert s.contexts == want["contexts"]


@pytest.mark.parametrize("fmt", ["vap", "rttm", "textgrid"])
def test_each_format_gives_the_same_labels_in_both_directions(tmp_path, fmt):
    folder = conversation(tmp_path / "corpus", fmt)
    sessions = list(read_real(folder, P, language="en"))
    assert [s.session_id for s in sessions] == ["conv1-ch0", "conv1-ch1"]
    for c, s in enumerate(sessions):
        assert_labels(s, c)
        assert (s.run, s.scenario_id, s.language, s.frame_period_s) == ("corpus", "conv1", "en", P)
        assert s.meta == {"source": "real", "format": fmt, "system_channel": c}
        assert s.sys_action is None and s.families == {}
        assert s.user_feat.shape == s.system_feat.shape == (N, 8 * 40)
        # the system's features are its own channel: loud where it speaks, near the log floor elsewhere
        loud = s.system_feat.astype(np.float32).mean(axis=1)
        assert loud[s.sys_vad == 1].mean() > loud[s.sys_vad == 0].mean() + 5
    a, b = sessions
    np.testing.assert_array_equal(a.system_feat, b.user_feat)
    np.testing.assert_array_equal(a.user_feat, b.system_feat)


def test_one_system_channel_and_the_dict_form_of_vap(tmp_path):
    write_audio(tmp_path / "x.wav", [CH0, CH1])
    write_vap(tmp_path / "x.json", [CH0, CH1], as_dict=True)
    sessions = list(read_real(str(tmp_path), P, system_channel=1))
    assert [s.session_id for s in sessions] == ["x-ch1"]
    assert_labels(sessions[0], 1)


def test_rttm_channel_map_overrides_the_chan_field(tmp_path):
    write_audio(tmp_path / "c.wav", [CH0, CH1], sr=8000)
    # speakers on the *other* channels than their audio, all with chan 1 (as diarization writes):
    # the map puts them right
    write_rttm(tmp_path / "c.rttm", [CH0, CH1], chans=("1", "1"), speakers=("carol", "dave"))
    with pytest.raises(UserError, match=r"c\.rttm.*--channel-map"):
        list(read_real(tmp_path, P))
    sessions = list(read_real(tmp_path, P, channel_map={"dave": 1, "carol": 0}))
    for c, s in enumerate(sessions):
        assert_labels(s, c)
    swapped = next(iter(read_real(tmp_path, P, system_channel=0, channel_map={"dave": 0, "carol": 1})))
    np.testing.assert_array_equal(swapped.sys_floor, EXPECTED[1]["sys_floor"])
    np.testing.assert_array_equal(swapped.sys_vad, EXPECTED[1]["sys_vad"])


def test_rttm_chan_field_0_1_and_other_lines(tmp_path):
    write_audio(tmp_path / "c.wav", [CH0, CH1], sr=8000)
    rows = [("B", "0", on, off) for on, off in CH1] + [("A", "1", on, off) for on, off in CH0]
    (tmp_path / "c.rttm").write_text("SPKR-INFO c 1 <NA> <NA> <NA> unknown A <NA> <NA>\n\n" + rttm_lines("c", rows))
    s0, s1 = read_real(tmp_path, P)
    assert_labels(s0, 1)  # chan 0 is B, whose audio is on channel 1 of this file: labels follow the RTTM
    assert_labels(s1, 0)


def test_textgrid_map_picks_tiers_among_others(tmp_path):
    write_audio(tmp_path / "t.flac", [CH0, CH1])
    write_textgrid(tmp_path / "t.TextGrid", {"words": [(0.5, 1.0)], "spk2": CH1, "spk1": CH0})
    with pytest.raises(UserError, match=r"t\.TextGrid: 3 interval tiers.*--channel-map"):
        list(read_real(tmp_path, P))
    for c, s in enumerate(read_real(tmp_path, P, channel_map={"spk1": 0, "spk2": 1})):
        assert_labels(s, c)


def test_annotation_slightly_past_the_end_is_clipped(tmp_path):
    write_audio(tmp_path / "e.wav", [CH0, CH1])
    write_vap(tmp_path / "e.json", [CH0[:2] + [(7.2, 8.6)], CH1])
    s = next(iter(read_real(tmp_path, P, system_channel=0)))
    assert s.n_frames == N and s.sys_floor[90] == TAKE and s.sys_floor[N - 1] == RELEASE


def test_streams_one_conversation_at_a_time(tmp_path):
    conversation(tmp_path, "vap", name="a")
    write_audio(tmp_path / "b.wav", [CH0, CH1])
    write_vap(tmp_path / "b.json", [[(1.0, 0.5)], CH1])
    it = read_real(tmp_path, P)
    assert [next(it).session_id, next(it).session_id] == ["a-ch0", "a-ch1"]
    with pytest.raises(UserError, match=r"b\.json: vad_list\[0\]\[0\]: end 0\.5 s is before start"):
        next(it)


def test_turns_of_overlap_rules():
    # a long segment of the other speaker in the gap ends the turn; a backchannel does not
    assert turns_of([(0, 2), (2.5, 4)], [(2.1, 2.4)]) == [(0, 4)]
    assert turns_of([(0, 2), (3.5, 4)], [(2.1, 3.4)]) == [(0, 2), (3.5, 4)]
    # a barge-in that starts inside the segment and runs on through the gap ends it too
    assert turns_of([(0, 3), (6.5, 8)], [(2.5, 6)]) == [(0, 3), (6.5, 8)]
    # long overlapping talk that stops before the speaker does leaves the turn whole
    assert turns_of([(0, 5), (5.5, 7)], [(2, 3.5)]) == [(0, 7)]


def test_frame_edges():
    assert frame_span(0.24, 0.32, P) == (3, 4)  # exact boundaries despite 0.24 / 0.08 < 3 in floats
    assert frame_span(0.1, 0.1001, P) == (1, 2)
    # a one-frame turn is TAKE; a frame holding one turn's end and the next's start is TAKE
    np.testing.assert_array_equal(floor_frames([(0.1, 0.12)], P, 3), [0, TAKE, 0])
    np.testing.assert_array_equal(floor_frames([(0.0, 0.2), (0.22, 0.4)], P, 5), [TAKE, HOLD, TAKE, HOLD, RELEASE])


def _good_audio(d: Path, name: str = "a") -> None:
    write_audio(d / f"{name}.wav", [CH0, CH1])


def _case_missing_annotation(d):
    _good_audio(d)


def _case_missing_audio(d):
    conversation(d, "vap", name="a")
    write_rttm(d / "b.rttm", [CH0, CH1])


def _case_two_annotations(d):
    conversation(d, "vap", name="a")
    write_rttm(d / "a.rttm", [CH0, CH1])


def _case_mono(d):
    write_audio(d / "a.wav", [CH0])
    write_vap(d / "a.json", [CH0, CH1])


def _case_end_before_start(d):
    _good_audio(d)
    write_vap(d / "a.json", [[(0.0, 1.0), (3.0, 2.5)], CH1])


def _case_past_end(d):
    _good_audio(d)
    write_rttm(d / "a.rttm", [[(0.0, 1.0), (7.0, 9.5)], CH1])


def _case_speaker_not_in_map(d):
    _good_audio(d)
    (d / "a.rttm").write_text(rttm_lines("a", [("spkA", "1", 0.0, 1.0), ("spkC", "1", 2.0, 3.0)]))


def _case_bad_audio(d):
    (d / "a.wav").write_bytes(b"RIFF not really a wave file")
    write_vap(d / "a.json", [CH0, CH1])


def _case_bad_json(d):
    _good_audio(d)
    (d / "a.json").write_text("[[0.0, 1.0], ")


def _case_three_channels_json(d):
    _good_audio(d)
    write_vap(d / "a.json", [CH0, CH1, CH1])


def _case_not_a_pair(d):
    _good_audio(d)
    (d / "a.json").write_text(json.dumps([[[0.1]], []]))


def _case_bad_textgrid(d):
    _good_audio(d)
    (d / "a.TextGrid").write_text("File type = \"ooTextFile\"\nnonsense\n")


def _case_bad_rttm_number(d):
    _good_audio(d)
    (d / "a.rttm").write_text("SPEAKER a 1 zero 1.0 <NA> <NA> spkA <NA> <NA>\n")


BAD_FOLDERS = {
    "missing_annotation": (_case_missing_annotation, {}, ["a.wav", "audio without an annotation", "a.json"]),
    "missing_audio": (_case_missing_audio, {}, ["b.rttm", "annotation without audio", "b.wav"]),
    "two_annotations": (_case_two_annotations, {}, ["a.rttm", "second annotation", "a.json"]),
    "mono": (_case_mono, {}, ["a.wav", "mono audio"]),
    "end_before_start": (_case_end_before_start, {}, ["a.json", "vad_list[0][1]", "end 2.5 s is before start"]),
    "past_end": (_case_past_end, {}, ["a.rttm", "line 6", "end 9.5 s is more than 1 s past the end"]),
    "speaker_not_in_map": (_case_speaker_not_in_map, {"channel_map": {"spkA": 0, "spkB": 1}},
                           ["a.rttm", "line 2", "speaker 'spkC' is not in the channel map"]),
    "bad_audio": (_case_bad_audio, {}, ["a.wav", "unreadable audio"]),
    "bad_json": (_case_bad_json, {}, ["a.json", "unreadable VAP activity JSON"]),
    "three_lists": (_case_three_channels_json, {}, ["a.json", "vad_list must be two lists", "3 items"]),
    "not_a_pair": (_case_not_a_pair, {}, ["a.json", "vad_list[0][0]", "not a [start_s, end_s] pair"]),
    "bad_textgrid": (_case_bad_textgrid, {}, ["a.TextGrid", "unreadable TextGrid"]),
    "bad_rttm_number": (_case_bad_rttm_number, {}, ["a.rttm", "line 1", "'zero'"]),
}


@pytest.mark.parametrize("case", sorted(BAD_FOLDERS))
def test_bad_input_is_one_line_naming_file_and_field(tmp_path, case):
    make, kwargs, fragments = BAD_FOLDERS[case]
    d = tmp_path / "corpus"
    d.mkdir()
    make(d)
    with pytest.raises(UserError) as err:
        list(read_real(d, P, **kwargs))
    msg = str(err.value)
    assert "\n" not in msg
    for fragment in fragments:
        assert fragment in msg, (fragment, msg)


def test_bad_arguments_and_folders(tmp_path):
    with pytest.raises(UserError, match=r"corpus: no conversations"):
        (tmp_path / "corpus").mkdir()
        read_real(tmp_path / "corpus", P)
    with pytest.raises(UserError, match=r"nowhere: not a folder"):
        read_real(tmp_path / "nowhere", P)
    conversation(tmp_path / "ok", "vap")
    with pytest.raises(UserError, match=r"frame period 0.085 s"):
        read_real(tmp_path / "ok", 0.085)
    with pytest.raises(UserError, match=r"system channel 2"):
        read_real(tmp_path / "ok", P, system_channel=2)
    with pytest.raises(UserError, match=r"channel map: 'spkA' goes to channel 2"):
        read_real(tmp_path / "ok", P, channel_map={"spkA": 2})
