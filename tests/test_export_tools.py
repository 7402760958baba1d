"""synth export --format textgrid|rttm|audacity on a small real run, read back by independent readers."""

import json

import numpy as np
import pytest
import soundfile as sf

from inspect_helpers import run_dir, sessions, small_run, synth  # noqa: F401  (run_dir, sessions: shared fixtures)
from synth.export.tools import AUDIBLE, Span, event_label, lanes
from synth.schema.labels import FLOORS, SYS_ACTIONS


def export(run_dir, tmp_path_factory, fmt):
    out = tmp_path_factory.mktemp(fmt)
    synth("export", run_dir, "--format", fmt, "-o", out)
    return out


def _events(rec, spk):
    return sorted((e for e in rec.events if e.speaker == spk and e.off_sample > e.on_sample),
                  key=lambda e: (e.on_sample, e.off_sample))


def _tier_entries(tg, name):
    """Entries of a tier and of its overflow lanes (``name 2``, ``name 3``...), by start."""
    names = [n for n in tg.tierNames if n == name or (n.startswith(name + " ") and n[len(name) + 1:].isdigit())]
    return sorted((e for n in names for e in tg.getTier(n).entries), key=lambda e: (e[0], e[1]))


def test_textgrid_reads_back_with_praatio(run_dir, sessions, tmp_path_factory):
    from praatio import textgrid

    out = export(run_dir, tmp_path_factory, "textgrid")
    assert sorted(p.stem for p in out.glob("*.TextGrid")) == sorted(sessions)
    for sid, s in sessions.items():
        rec, sr = s.record, s.record.sample_rate
        tg = textgrid.openTextgrid(str(out / f"{sid}.TextGrid"), includeEmptyIntervals=False)
        assert tg.maxTimestamp == pytest.approx(rec.num_samples / sr, abs=1e-9)
        heard = [spk for spk in AUDIBLE if _events(rec, spk)]
        for tier in ("sys_action", "sys_floor", "usr_floor", "work", "markers"):
            assert tier in tg.tierNames
        for spk in heard:
            evs = _events(rec, spk)
            got = _tier_entries(tg, f"{spk} events")
            assert len(got) == len(evs)
            for (a, b, lab), e in zip(got, evs):
                assert a == pytest.approx(e.on_sample / sr, abs=1e-9) and b == pytest.approx(e.off_sample / sr, abs=1e-9)
                assert lab == event_label(e) and lab.startswith(f"{e.act}: ")
            words = sorted((w.on_sample, w.off_sample) for e in evs for w in e.words if w.off_sample > w.on_sample)
            got_w = _tier_entries(tg, f"{spk} words")
            assert [(round(a * sr), round(b * sr)) for a, b, _ in got_w] == words
        assert not [n for n in tg.tierNames if n.split(" ")[0] in AUDIBLE and n.split(" ")[0] not in heard]
        _check_frames(tg, rec)


def _check_frames(tg, rec):
    """The floor and action tiers give back every frame value (sampled at each frame's middle)."""
    sr = rec.sample_rate
    period = round(rec.frame_period_s * sr)
    for tier, values, names in (("sys_floor", rec.sys_floor, FLOORS), ("usr_floor", rec.usr_floor, FLOORS),
                                ("sys_action", rec.sys_action, SYS_ACTIONS)):
        entries = tg.getTier(tier).entries
        starts = np.array([a for a, _, _ in entries])
        for k, v in enumerate(values):
            mid = min((k + 0.5) * period, (k * period + rec.num_samples) / 2) / sr
            i = np.searchsorted(starts, mid, side="right") - 1
            inside = i >= 0 and entries[i][0] <= mid < entries[i][1]
            assert (entries[i][2] if inside else names[0]) == names[v], (tier, k)
    points = tg.getTier("markers").entries
    want = sorted({m.frame for m in rec.markers})
    assert [round(t * sr) for t, _ in points] == [f * period for f in want]
    assert sum(len(lab.split("; ")) for _, lab in points) == len(rec.markers)


def test_rttm_ctm_and_manifest_as_nemo_writes_them(run_dir, sessions, tmp_path_factory):
    out = export(run_dir, tmp_path_factory, "rttm")
    manifest = [json.loads(line) for line in (out / "manifest.json").read_text().splitlines()]
    assert len(manifest) == len(sessions)
    for m in manifest:
        sid = m["audio_filepath"].rsplit("/", 1)[1][:-4]
        rec = sessions[sid].record
        sr = rec.sample_rate
        info = sf.info(m["audio_filepath"])
        assert (info.channels, info.frames, info.samplerate) == (1, rec.num_samples, sr)
        rows = [line.split() for line in open(m["rttm_filepath"], encoding="utf-8")]
        evs = sorted((e for e in rec.events if e.speaker in AUDIBLE and e.off_sample > e.on_sample),
                     key=lambda e: (e.on_sample, e.off_sample))
        assert len(rows) == len(evs)
        for r, e in zip(rows, evs):
            assert r[:3] == ["SPEAKER", sid, "1"] and r[5:7] == ["<NA>", "<NA>"] and r[7] == e.speaker
            assert abs(float(r[3]) - e.on_sample / sr) <= 5e-4 + 1e-9
            assert abs(float(r[4]) - (e.off_sample - e.on_sample) / sr) <= 1e-3 + 1e-9
        assert m["num_speakers"] == len({e.speaker for e in evs})
        ctm = [line.split() for line in open(m["ctm_filepath"], encoding="utf-8")]
        words = [w for e in evs for w in e.words if w.off_sample > w.on_sample]
        assert len(ctm) == len(words) > 0
        # RT-09 8-field form; NeMo's reader takes the speaker from field 8
        assert all(len(c) == 8 and c[0] == sid and c[1] == "1" and c[5] == "NA" and c[7] in AUDIBLE for c in ctm)
        assert all(c[6] == ("non-lex" if c[4].startswith("[") and c[4].endswith("]") else "lex") for c in ctm)
        starts = [float(c[2]) for c in ctm]
        assert starts == sorted(starts)
        assert sorted(c[4] for c in ctm) == sorted("_".join(w.word.split()) for w in words)
        by_speaker = sorted((c[7], c[4]) for c in ctm)
        assert by_speaker == sorted((e.speaker, "_".join(w.word.split())) for e in evs for w in e.words
                                    if w.off_sample > w.on_sample)


def test_audacity_label_tracks(run_dir, sessions, tmp_path_factory):
    out = export(run_dir, tmp_path_factory, "audacity")
    for sid, s in sessions.items():
        rec, sr = s.record, s.record.sample_rate
        audio, got_sr = sf.read(out / f"{sid}.wav", dtype="float32")
        user, _ = s.decode("user")
        system, _ = s.decode("system")
        assert got_sr == sr and audio.shape == (rec.num_samples, 2)
        assert np.abs(audio[:, 0] - user).max() < 1e-3 and np.abs(audio[:, 1] - system).max() < 1e-3
        for spk in AUDIBLE:
            evs = _events(rec, spk)
            path = out / f"{sid}.{spk}-events.txt"
            assert path.exists() == bool(evs)
            if not evs:
                continue
            rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()]
            assert [(round(float(a) * sr), round(float(b) * sr), lab) for a, b, lab in rows] == \
                [(e.on_sample, e.off_sample, event_label(e)) for e in evs]
            n_words = sum(1 for e in evs for w in e.words if w.off_sample > w.on_sample)
            assert len((out / f"{sid}.{spk}-words.txt").read_text(encoding="utf-8").splitlines()) == n_words
        markers = [line.split("\t") for line in (out / f"{sid}.markers.txt").read_text().splitlines()]
        assert all(a == b for a, b, _ in markers) and sum(len(m[2].split("; ")) for m in markers) == len(rec.markers)


def test_unknown_format_is_one_line_exit_2(run_dir, tmp_path):
    r = synth("export", run_dir, "--format", "praat", "-o", tmp_path, check=False)
    assert r.returncode == 2 and "--format" in r.stderr and "textgrid" in r.stderr and "Traceback" not in r.stderr


def test_overlapping_spans_go_to_a_second_lane():
    spans = [Span(0, 10, "a"), Span(5, 8, "laugh"), Span(10, 20, "b"), Span(12, 14, "c")]
    got = lanes(spans)
    assert [[s.label for s in lane] for lane in got] == [["a", "b"], ["laugh", "c"]]
    assert lanes([]) == [[]]
