import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"

os.environ.setdefault("RAY_AUTH_MODE", "disabled")


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


# --- the fast tier: `pytest -m "not slow"` -------------------------------------------------------
# Whole modules that run the command line in subprocesses, start clusters, or load neural engines
# (Kokoro, Coqui, Piper, Whisper, torch training), and the slow tests of otherwise quick modules,
# from `pytest --durations` on the 2-core machine. `make test` (CI) still runs everything.
SLOW_MODULES = {
    "test_scale", "test_hostile2", "test_kokoro", "test_coqui", "test_learn", "test_learn_real", "test_asr",
    "test_damaged", "test_errors_cli", "test_signals", "test_e2e", "test_aligner", "test_store",
    "test_piper", "test_export", "test_export_trainers", "test_export_tools", "test_inspect", "test_publish",
    "test_viewer", "test_dequant", "test_timing",
}
SLOW_TESTS = {
    "test_written_sessions_never_clip_and_record_their_scene", "test_a_run_with_a_corrupt_bank_file_finishes_and_reports_it",
    "test_bank_builder_is_deterministic", "test_run_with_every_session_rejected_fails_with_the_reasons",
    "test_default_variants_give_the_same_samples_in_a_fresh_process",
    "test_same_samples_after_another_library_mapped_libespeak", "test_outline_sampling_follows_probabilities",
    "test_run_with_llm_plans_writes_sessions_and_reuses_cache", "test_cli_plan_prints_validated_plans",
    "test_fill_mode_end_to_end_through_synth_run_and_validate", "test_prefetch_keeps_to_the_concurrency_limit",
    "test_cli_unreachable_endpoint_is_one_line_exit_2",
    # test_render: the tests on a run made by the command line, and Kokoro's
    "test_rerender_from_the_record_alone_is_byte_identical", "test_render_without_run_json_needs_the_bank_folders",
    "test_render_spec_holds_every_draw", "test_an_edited_draw_is_what_gets_rendered",
    "test_kokoro_session_rerenders_byte_identical", "test_plans_file_round_trips_to_the_same_shards",
    "test_bad_plans_become_rejects_and_a_bad_file_is_one_line",
    "test_plan_text_prints_the_scale_aware_figures",  # test_diversity: plans 1,000 sessions in a subprocess
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.module.__name__.rsplit(".", 1)[-1] in SLOW_MODULES or item.originalname in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
