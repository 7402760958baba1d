"""``synth report`` on group runs: addressee shares, the system's takes on speech meant for others,
each person's speech time and overlap, group phenomenon coverage per language (issue 33); a dyadic
run's report has no group section (tests/test_inspect.py)."""

import json

import numpy as np
import pytest

from synth.inspection.group_measures import CLASSES, group_statistics
from synth.inspection.runfolder import RunFolder
from synth.schema.seed import GROUP_PHENOMENA

from helpers import synth
from test_group import group_run  # noqa: F401  (the module's 3-session group run)


@pytest.mark.slow
def test_report_of_a_group_run_reads_the_addressees_back_from_the_shards(group_run, tmp_path):  # noqa: F811
    _, out = group_run
    r = synth("report", out, "-o", tmp_path / "report.html")
    rep = json.loads((tmp_path / "report.json").read_text())
    recs = RunFolder(out).records
    group = rep["group"]
    assert sorted(group) == sorted({rec.language for rec in recs})
    assert "whom the user side speaks to" in (tmp_path / "report.html").read_text()
    assert "group phenomena" in r.stdout and "takes on others' speech" in r.stdout
    for lang, g in group.items():
        mine = [rec for rec in recs if rec.language == lang]
        assert g["sessions"] == len(mine)
        assert g["system_takes_on_other_addressed"] == 0 and g["system_answers_who_did_not_ask"] == 0
        to_system = sum(1 for rec in mine for e in rec.events if e.speaker == "user" and e.addressee == "system")
        assert g["utterances"]["system"] == to_system and g["utterances"]["person"] > 0
        assert sum(g["utterance_share"].values()) == pytest.approx(1, abs=1e-3)
        assert sum(g["speech_time_share"].values()) == pytest.approx(1, abs=1e-3)
        vad = {}
        for rec in mine:
            for p, frames in rec.person_vad.items():
                vad[p] = vad.get(p, 0.0) + sum(frames) * rec.frame_period_s
        assert g["person_speech_s"] == pytest.approx({p: round(s, 2) for p, s in vad.items()}, abs=0.01)
        both = sum(int((np.array(list(rec.person_vad.values())).sum(axis=0) >= 2).sum()) * rec.frame_period_s
                   for rec in mine)
        assert g["people_overlap_s"] == pytest.approx(both, abs=0.01)
        hits = {pid: sum(h.id == pid for rec in mine for h in rec.phenomena) for pid in GROUP_PHENOMENA}
        assert g["phenomena"] == hits and g["phenomena"]["human_exchange"] > 0


@pytest.mark.slow
def test_a_system_answer_to_speech_meant_for_others_is_counted(group_run):  # noqa: F811
    _, out = group_run
    rec = RunFolder(out).records[0]
    other = next(e for e in rec.events if e.speaker == "user" and e.addressee not in (None, "system"))
    answer = next(e for e in rec.events if e.speaker == "system" and e.relation == "responds_to"
                  and e.floor_intent == "take" and e.on_sample > other.off_sample)
    bad = rec.model_copy(update={"events": [e.model_copy(update={"attach_to": other.id}) if e is answer else e
                                            for e in rec.events]})
    before = group_statistics([rec])[rec.language]
    after = group_statistics([bad])[rec.language]
    assert before["system_takes_on_other_addressed"] == 0 and after["system_takes_on_other_addressed"] == 1
    assert set(after["utterances"]) == set(CLASSES)


def test_dyadic_records_make_no_group_section():
    assert group_statistics([]) == {}
