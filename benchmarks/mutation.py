"""Mutation testing of every module that decides money, privacy, identity or a published
number (issues 32 and 40).

    pip install -e ".[mutation,test]"
    python benchmarks/mutation.py --list                 # what is audited, against which tests; what not, and why
    python benchmarks/mutation.py                        # every audited module, then the table (hours on 2 cores)
    python benchmarks/mutation.py --only backend.shards  # some modules (repeatable)
    python benchmarks/mutation.py --report               # the last runs' table, without running

The modules are derived, not chosen: every module under src/rexrank/ is audited unless
EXCLUDED names it (by a pattern) with the reason, so a new module is audited by default.
A module's tests are the files beside it in tests/'s mirror of src/rexrank/
(tests/backend/test_shards.py and tests/backend/test_shards_*.py for backend/shards.py)
unless TESTS names others (with why); PARTS runs parts of a module on their own as well
(with why), before the module: a mutant a part killed, with tests the module also runs, on
the same code, counts as killed for the module, which then runs only the rest.

mutmut 3 (configured in pyproject.toml's [tool.mutmut]) copies the package into mutants/,
makes its mutants with its own operators and runs, for each one, the selected tests that
reach the mutated function. This script runs it once per module, in a working folder
mutants/<module>/ whose pyproject.toml is the project's [tool.mutmut] narrowed to that module
and its tests. It prints per module: mutants, killed, survived, timeouts, equivalents, and
the score = killed / (mutants - equivalent - not run), and lists every survivor that
benchmarks/mutation_equivalents.txt does not record as equivalent (a record names the mutant
and the fingerprint of its change, which the report prints). Slow: not run by CI.
Exit 1 if any survivor is left. Re-running a module keeps its earlier verdicts and tests
the mutants of changed functions and those named by --rerun.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "rexrank"
EQUIVALENTS = ROOT / "benchmarks" / "mutation_equivalents.txt"

# Modules outside the audit, by pattern (relative to src/rexrank), each with its reason: none
# of them decides money, privacy, identity or a published number on its own, or what they
# decide is pinned another way (named). Every other module is audited.
EXCLUDED: dict[str, str] = {
    "__init__.py": "package entry points: re-exports and lazy imports",
    "*/__init__.py": "package entry points: re-exports, and the store's choice of local or Hub repository",
    "__main__.py": "`python -m rexrank`: one call of the command line",
    "cli/*.py": "the command line: parses flags and prints what the audited modules decide",
    "errors.py": "error classes",
    "hub/errors.py": "error classes",
    "file_modes.py": "file permissions from the umask",
    "suggest.py": "'did you mean' spelling hints",
    "catalogue.py": "the metric catalogue's descriptions and links (directions and ranges are in results_schema)",
    "evaluate_*.py": "the `evaluate` module glue: hands inputs to the metrics",
    "metric_space.py": "the metric Spaces' Gradio page",
    "strict_json.py": "the JSON reader's duplicate-key and number refusals (tested as attacks in test_untrusted_files)",
    "sandbox.py": "runs the reader in a forked child, which mutmut's trampoline does not follow; its limits are attacks "
                  "in test_untrusted_files",
    "http_faults.py": "retries of passing network faults",
    "per_study_file.py": "the per-study file's reading and writing (round trips in test_results_feed)",
    "prediction_columns.py": "the accepted column names",
    "refcache.py": "the on-disk cache of reference-side model outputs (cached and fresh numbers compared in the metric tests)",
    **dict.fromkeys([f"hub/{name}.py" for name in ("cards", "deploy", "manifest", "plan", "remote", "requirements",
                                                    "source", "testset_repo", "wheel")],
                    "shipping: the wheel, Spaces, cards and deploy plan (built and run from their files in test_release, "
                    "test_hub_deploy)"),
    "leaderboard/app.py": "the Gradio page's wiring (browser tests at 1,400 and 390 px)",
    "leaderboard/about.py": "the About tab's text",
    "leaderboard/page_style.py": "CSS",
    "leaderboard/view_state.py": "the page address's view state",
    "leaderboard/model_page.py": "the Model page's layout of values the audited tables compute",
    "leaderboard/client.py": "the Space API client: sends the filing the Space checks",
    "leaderboard/source.py": "where the board reads its results (local or Hub)",
    "leaderboard/published.py": "the published ReXrank tables imported as seed data (compared with ../shared's tables)",
    "leaderboard/downloads.py": "the CSV download (formula escaping is a hand-written mutant in tests/mutation_audit.py)",
    "llm/*.py": "transport to the LLM judges (endpoints, replicas, local generation); what an answer means is decided "
                "in the audited *_text modules",
    "models/*.py": "checkpoint download, pinning and loading; torch encoders compared with official outputs (the weights "
                   "tests), each mutant a model load",
    "radgraph/annotator.py": "RadGraph's model inference, compared with the official annotations",
    "radgraph/model.py": "RadGraph's network (state-dict layout of the official checkpoint)",
    "radgraph/tarball.py": "reading the official checkpoint archive",
    "radgraph/preprocess.py": "RadGraph's tokenisation, compared with the official annotations",
    "radgraph/fake.py": "a stand-in annotator for tests and examples",
    "radgraph/reference.py": "the reference annotations' cache",
    "ratescore/models.py": "RaTEScore's encoders and tagger loading",
    "ratescore/rush.py": "sentence splitting, equal to the official sentences of every IU-Xray field (test_ratescore_sentences)",
    "ratescore/sentences.py": "sentence splitting, equal to the official sentences of every IU-Xray field",
    "ratescore/tokens.py": "the tagger's tokenisation, compared with the official spans",
    "ratescore/spans.py": "the tagger's spans, compared with the official spans",
    "metrics/options.py": "option checking (messages tested in test_bad_inputs)",
    "metrics/registry.py": "the metric names",
    "metrics/run_context.py": "models shared between metrics of one run",
    "metrics/llm_common.py": "the LLM judges' shared plumbing (caches, retries)",
    "metrics/crimson_context.py": "CRIMSON's patient context columns",
    "store/hub.py": "storage plumbing: reads and writes; what is stored is decided by the audited modules, its trust "
                    "rules are hand-written mutants in tests/mutation_audit.py",
    "store/local.py": "storage plumbing (the local repository)",
    "store/repo.py": "storage plumbing (snapshots and commits)",
    "store/layout.py": "storage plumbing (paths)",
    "store/index.py": "storage plumbing (the submitters' index)",
    "store/scratch.py": "storage plumbing (a dispatched run's scratch files)",
    "store/config.py": "the store's settings file",
    "store/feed.py": "the results feed the board reads",
    "store/predictions.py": "storage plumbing (the stored predictions)",
    "store/problems.py": "the store's health messages",
    "store/store.py": "storage plumbing; its per-study path rule is a hand-written mutant in tests/mutation_audit.py",
    "store/hub_predictions.py": "downloading a Hub predictions dataset at its commit (hand-written mutants in "
                                "tests/mutation_audit.py)",
    "store/review.py": "the maintainers' release or rejection of held copies",
    "testsets/download.py": "downloading the test sets",
    "testsets/loading.py": "reading the test sets (checked against ../shared's files)",
    "testsets/locations.py": "remembering a test-set folder",
    "testsets/reading.py": "reading the test sets' files",
    "testsets/registry.py": "the test sets' names and sizes",
    "backend/worker.py": "the worker's loop (claim, score, publish); its decisions are the audited policy, door, "
                         "privacy and ledger modules",
    "backend/local_job.py": "a shard run as a local process",
    "backend/shard_job.py": "a Job's entry point: scores its shard through scoring.py",
    "backend/job_environment.py": "what a Job carries (compared with the dispatcher's numbers under `env -i`)",
    "backend/resolved.py": "a request's resolved test set",
    "backend/dispatch_settings.py": "the dispatcher's settings file",
    "backend/metric_set.py": "which metrics a request gets",
    "analysis/io.py": "reading runs for the analysis",
    "analysis/pipeline.py": "the analysis' sequence of the audited steps",
    "analysis/report.py": "the analysis report's HTML",
    "analysis/figures.py": "figures of the audited numbers",
}

# A module's tests where the mirror's files are not the right ones, each group with why: the
# module is tested from another package's files (a scenario, a shared table), or its mirrored
# files also hold slow tests (a model, a served Space, a Job) whose forked run takes a minute a
# mutant, so the fast ones are named (tests/test_mutation_audit.py checks every name exists).
_VIEWS = "tests/leaderboard/test_views.py"
_ANALYSIS_TABLES = ("tests/analysis/test_tables.py",)  # the analysis' tables by their definitions, and scipy
_INPUT_LIMITS_PINS = tuple(f"tests/test_input_limits.py::test_{t}" for t in (
    "what_a_file_that_is_no_regular_file_is_called", "a_file_of_exactly_the_cap_passes_and_one_byte_more_is_refused",
    "a_file_longer_than_it_said_is_refused_at_the_cap", "json_values_are_counted_by_hand", "jsonl_lines_by_hand",
    "row_and_character_messages_by_hand", "the_id_and_prediction_columns_must_be_text_and_a_long_type_is_cut_at_80",
    "a_file_of_the_cap_is_read_whole_and_a_refusal_names_what_it_read",
    "a_file_that_grew_past_the_cap_after_its_size_was_checked_is_refused_with_its_name",
    "a_file_that_cannot_be_opened_or_read_is_one_line", "a_file_swapped_for_a_fifo_after_the_check_is_refused_without_blocking",
    "what_check_regular_says_of_a_missing_file_a_broken_symlink_a_folder_and_a_fifo",
    "a_datasets_folder_of_1000_files_and_20_mib_passes_and_one_more_is_refused", "a_folder_that_cannot_be_listed_is_one_line",
    "decoded_lengths_by_hand_for_each_text_type", "parquet_footer_length_is_the_last_eight_bytes_by_the_format",
    "parquet_metadata_limits_at_and_one_past_each", "read_capped_asks_for_cap_plus_one_bytes_and_no_more",
    "rows_are_counted_over_batches_as_they_arrive", "a_column_of_empty_or_no_values_holds_zero_bytes"))
_RADCLIQ_PINS = ("tests/metrics/test_radcliq.py::test_radcliq_components_read_as_text_from_the_official_csv_give_its_columns",
                 "tests/metrics/test_radcliq.py::test_radcliq_components_of_different_lengths_are_refused_naming_each_shape",
                 "tests/backend/test_privacy.py::test_the_radcliq_range_is_the_formulas_corners_by_hand")
_CRIMSON_PINS = tuple(f"tests/metrics/test_crimson.py::test_crimson_{t}" for t in (
    "prompt_and_messages_default_to_the_full_official_prompt", "reader_tells_structural_quotes_from_prose_by_the_official_rule",
    "reader_escapes_a_stray_quote_up_to_five_characters_before_the_error",
    "reader_never_escapes_a_quote_that_follows_a_backslash", "attribute_error_without_error_types_counts_in_no_type",
    "reader_escapes_a_stray_quote_after_an_escaped_one", "reader_makes_at_most_49_quote_fixes",
    "each_field_the_official_scorer_reads_changes_the_score", "missing_findings_and_error_types_count_but_never_move_the_score",
    "without_weighted_reference_findings_by_the_official_rule",
    "a_matched_benign_finding_with_a_negligible_error_takes_no_credit", "a_missing_section_reads_as_empty",
    "each_repair_of_the_official_reader_reads_the_answer_it_scores",
    "orphan_removal_also_drops_the_middle_of_a_three_item_list", "an_orphan_with_an_invalid_escape_is_unreadable"))
_SRR_BERT_PINS = tuple(f"tests/metrics/test_srr_bert.py::test_srr_bert_{t}" for t in (
    "config_records_radevals_model_labels_and_batches", "keeps_reference_labels_in_the_cache_folder_under_its_namespace",
    "per_study_scores_by_hand", "weighted_scores_of_labels_predicted_or_present_once_by_hand",
    # RadEval's golden outputs through the distinct-sentence passes only: the formulas are the same
    # under either batching, and RadEval's own batching takes a minute a mutant
    "distinct_and_radeval_batches_give_radevals_labels_on_iu_xray[distinct]", "shows_its_progress_bar_unless_told_not_to",
    "of_no_study_is_empty_columns_without_loading_the_model", "reloads_a_local_checkpoint_whose_files_changed",
    "by_default_shows_progress_and_keeps_reference_labels", "batch_size_must_be_a_positive_integer",
    "takes_a_batch_size_of_one"))
# the store's tests without those that start a fake Hub server or a subprocess, or need a mount
# namespace: mutmut's test-mapping run failed on the fake-Hub tests
_STORE_TESTS = ("tests/store/test_store.py",
                *(f"tests/store/test_trust.py::test_{t}" for t in (
                    "odd_request_ids_are_refused_before_any_path_is_built", "a_forged_predictions_path_is_never_read",
                    "a_request_saying_private_false_still_pays_for_a_failed_private_validation",
                    "a_private_filing_with_more_rows_than_the_set_has_studies_is_refused_at_filing",
                    "a_cancelled_request_counts_against_the_quota", "a_request_dated_by_its_writer_still_obeys_the_quota",
                    "a_request_dated_back_does_not_jump_the_queue_and_shows_the_servers_date",
                    "two_backends_whose_clocks_differ_by_15_minutes_score_each_request_once",
                    "a_cancel_just_before_publication_publishes_nothing[local]",
                    "a_request_being_published_can_no_longer_be_cancelled",
                    "a_waiting_request_that_says_it_is_being_published_can_still_be_cancelled")),
                "tests/store/test_queue.py", "tests/store/test_records.py")
_PLAN = tuple(f"tests/backend/test_dispatch_plan.py::test_{t}" for t in (
    "the_planner_knows_the_hubs_hardware_and_nothing_else", "a_multi_gpu_flavour_is_refused_with_its_single_gpu_flavour_named",
    "a_slower_gpu_takes_longer_and_costs_its_own_hours", "prices_come_from_the_hub_when_it_answers_else_from_the_dated_table",
    "configured_prices_win_over_the_hubs_and_the_tables", "job_start_up_is_in_the_makespan_and_the_bill",
    "shards_fit_the_job_timeout_or_the_plan_says_what_to_change", "target_wall_gives_the_jobs_needed",
    "target_wall_and_startup_are_settings"))
_GREEN_TEXT = tuple(f"tests/metrics/test_green.py::test_{t}" for t in (
    "shipped_template_is_the_trained_prompt", "golden_completions_parse_to_recorded_counts_and_scores",
    "prompt_truncates_each_report_to_300_words_and_renders_the_official_chat",
    "prompt_is_filled_in_one_pass_as_the_official_f_string", "parser_adversarial_error_sections",
    "parser_matched_findings_quirks", "each_sub_category_a_to_f_counts_in_the_score",
    "an_omitted_comparison_f_in_a_golden_answer_lowers_the_score", "clean_completion_keeps_text_after_last_explanation",
    "clean_completion_takes_each_official_branch", "make_prompt_truncates_both_reports_to_the_words_asked")) + (
    "tests/metrics/test_green_official.py::test_decoding_cleans_up_spaces_before_parsing",)

# the scoring engine's parts called directly on test metrics: the file's end-to-end runs (the command
# line, a fake LLM server, weights that are not there) took 30 s a mutant
_SCORING_DIRECT = tuple(f"tests/test_scoring.py::test_{t}" for t in (
    "the_texts_fingerprint_is_sha256_of_each_text_in_utf8_ended_by_a_zero_byte",
    "a_metric_summary_counts_the_scored_studies_by_its_primary_column_and_names_failures_by_id",
    "without_a_primary_column_every_study_not_failed_counts_as_scored",
    "a_metric_that_scored_no_study_names_its_three_commonest_reasons",
    "a_failure_record_gives_reason_advice_type_and_seconds",
    "a_run_keeps_going_past_a_failed_metric_and_reports_each_step",
    "a_complete_run_says_so_and_its_provenance_is_the_per_study_files",
    "the_run_gives_a_metric_progress_and_the_run_context_where_it_takes_them_and_options_win",
    "the_results_header_describes_the_predictions_the_references_and_the_statistics",
    "a_metric_that_scored_nothing_fails_the_run_unless_told_otherwise",
    "a_selection_is_its_studies_references_and_per_study_options_cut_alike",
    "a_resolved_test_set_is_described_and_its_header_is_the_runs",
    "score_resolved_validates_the_whole_file_and_scores_the_selection_only",
    "crimsons_context_from_the_test_set_is_one_per_study_in_test_set_order",
    "score_submission_refuses_a_bad_metric_name_before_looking_the_test_set_up",
    "score_submission_looks_the_test_set_up_in_the_folder_given_and_passes_the_options_on",
    "score_resolved_gives_crimson_its_patient_context_from_this_test_set",
    "the_run_shows_a_bar_of_metrics_naming_each_only_when_asked",
    "a_runs_seconds_and_a_failed_metrics_seconds_are_time_spent",
))

TESTS: dict[str, tuple[str, ...]] = {
    # its own files and the give-backs (a dispatcher's stops hand the request back), which its
    # in-process part runs: what that part kills then counts for the whole (see results)
    "backend.dispatch": tuple(f"tests/backend/test_{name}.py" for name in (
        "dispatch", "dispatch_faults", "dispatch_jobs", "dispatch_loop", "dispatch_merge", "dispatch_plan", "giveback")),
    "results_schema": ("tests/test_results_schema.py", "tests/leaderboard/test_tables.py"),
    "leaderboard.progress": (_VIEWS, "tests/leaderboard/test_progress.py"),
    "leaderboard.tiers": (_VIEWS, "tests/leaderboard/test_tiers.py"),
    "store.names": (*(f"tests/backend/test_policy.py::test_{t}" for t in (
                        "a_submitter_name_must_be_a_hub_name", "names_are_normalised_before_comparison",
                        "display_removes_escapes_and_invisible_characters", "a_right_to_left_override_cannot_reverse_a_name_on_the_page",
                        "a_lookalike_submitter_is_no_second_submitter")),
                    *(f"tests/leaderboard/test_public_names_and_page.py::test_{t}" for t in (
                        "every_published_name_stays_valid", "a_lookalike_of_a_published_name_is_marked_and_never_a_takeover",
                        "distinct_names_stay_distinct", "a_new_name_holding_a_default_ignorable_character_is_refused",
                        "no_name_begins_with_a_formula_character_tab_or_return",
                        "a_name_that_a_spreadsheet_runs_or_that_is_outside_the_repertoire_is_refused")),
                    "tests/store/test_names.py"),
    "leaderboard.identity": ("tests/backend/test_policy.py::test_on_the_hub_the_submitter_is_the_tokens_account_never_the_typed_name",
                             "tests/leaderboard/test_identity.py"),
    "testsets.schema": ("tests/testsets/test_loading.py", "tests/testsets/test_schema.py"),
    # without test_private_door's tests that use the Space in its own process: each mutant's run
    # would start a Space of its own (and GREEN's judge in it); the door's rules are reached in
    # this process by the tests named. (Those tests broke mutmut's stats run once: the Space
    # inherited MUTANT_UNDER_TEST=stats; tests/conftest.py now keeps that value from children.)
    "backend.public_door": ("tests/backend/test_coverage.py", "tests/backend/test_public_door.py",
                            *(f"tests/backend/test_private_door.py::test_{t}" for t in (
                                "the_length_probe_learns_no_more_than_epsilon_allows",
                                "the_probes_the_ledger_allows_learn_no_more_than_their_epsilon"))),
    "store.ledger": ("tests/store/test_ledger.py", "tests/backend/test_public_door.py",
                     *(f"tests/backend/test_private_door.py::test_{t}" for t in (
                         "the_length_probe_learns_no_more_than_epsilon_allows",
                         "the_probes_the_ledger_allows_learn_no_more_than_their_epsilon",
                         "a_damaged_ledger_stops_the_charge_and_says_how_to_restore_it"))),
    # its own tests and the policy's (which applies check_approved), without test_identity_attacks.py:
    # its filings through a fake Hub took 35-60 s a mutant (3 h a run), and kill no mutant these leave
    "store.accounts": ("tests/store/test_accounts.py", "tests/store/test_policy.py"),
    "backend.publication_slot": ("tests/backend/test_publication_slot.py",
                                 *(f"tests/backend/test_private_time.py::test_{t}" for t in (
                                     "the_next_slot_is_the_first_multiple_strictly_after", "the_slot_is_the_stores_setting",
                                     "the_scoring_time_of_a_private_request_is_not_public",
                                     "a_bad_slot_setting_stops_the_worker_at_start_and_public_sets_wait_for_no_slot"))),
    "backend.shards": ("tests/backend/test_shards.py", *_PLAN,
                       "tests/backend/test_merge.py::test_radcliq_shards_as_its_components_allow_under_their_options"),
    "scoring": _SCORING_DIRECT,
    "metrics.radcliq_formula": ("tests/metrics/test_radcliq.py::test_formula_reproduces_official_columns",
                                "tests/metrics/test_radcliq.py::test_rexrank_figure_is_one_over_mean_v1",
                                "tests/metrics/test_radcliq.py::test_scalars_and_errors", "tests/test_results_schema.py", *_RADCLIQ_PINS),
    "radgraph.f1": ("tests/radgraph/test_logic.py",),
    # its own tests and its shard rule's, which the merge's tests hold
    "metrics.radcliq": ("tests/metrics/test_radcliq.py", "tests/metrics/test_radcliq_modules.py",
                        "tests/metrics/test_radcliq_weights.py",
                        "tests/backend/test_merge.py::test_radcliq_shards_as_its_components_allow_under_their_options"),
    "metrics.sembscore": ("tests/metrics/test_sembscore.py", "tests/metrics/test_chexbert.py"),
    "ratescore.affinity": ("tests/ratescore/test_parts.py",),
    "ratescore.match": ("tests/ratescore/test_parts.py",),
    "metrics.green_text": _GREEN_TEXT,
    "metrics.fineradscore_text": ("tests/metrics/test_fineradscore.py",),
    "metrics.spec_cxr_text": ("tests/metrics/test_spec_cxr.py",),
    "metrics.json_answers": ("tests/metrics/test_json_answers.py", "tests/metrics/test_fineradscore.py::test_answer_validation",
                             "tests/metrics/test_spec_cxr.py"),
    "metrics.crimson_text": ("tests/metrics/test_crimson_official.py::test_answer_reader_repairs_and_refuses_as_the_official_one",
                             "tests/metrics/test_crimson_official.py::test_score_equals_the_official_on_every_answer",
                             "tests/metrics/test_crimson_official.py::test_prompt_messages_of_the_endpoint_paths_are_the_official_ones",
                             "tests/metrics/test_crimson_official.py::test_prompts_equal_the_reference_prompt_files", *_CRIMSON_PINS),
    "leaderboard.records": ("tests/leaderboard/test_tables.py", "tests/leaderboard/test_public_names_and_page.py",
                            "tests/leaderboard/test_records.py"),
    "store.records": _STORE_TESTS,
    "store.queue": _STORE_TESTS,
    "store.policy": ("tests/backend/test_policy.py", "tests/store/test_store.py", "tests/store/test_policy.py",
                     "tests/store/test_names.py"),
    "backend.privacy": ("tests/backend/test_private_rounding.py", "tests/backend/test_private_attack.py",
                        "tests/backend/test_privacy.py"),
    # without test_the_space_and_the_cli_set_gradios_upload_limit: it imports the Space's app and
    # Gradio (13 s a mutant) to read one module constant, which mutmut does not mutate
    "input_limits": (*(f"tests/test_input_limits.py::test_{t}" for t in (
                         "a_fifo_is_refused_at_once", "dev_zero_and_folders_are_one_line_errors",
                         "a_test_set_file_that_is_a_fifo_or_device_is_one_line", "a_parquet_bomb_is_refused_from_its_metadata",
                         "parquet_metadata_is_limited_before_it_is_parsed", "a_dictionary_bomb_is_refused_before_it_expands",
                         "only_string_id_and_prediction_columns_pass_the_schema_check",
                         "the_command_line_refuses_a_nested_column_bomb_in_one_line", "text_files_are_read_with_a_byte_cap",
                         "rows_values_and_characters_are_limited", "a_datasets_folder_is_limited_before_it_is_loaded",
                         "a_million_duplicates_give_a_short_message", "a_non_string_of_megabytes_is_named_briefly",
                         "the_limits_let_a_10000_study_submission_through")),
                     *_INPUT_LIMITS_PINS),
    # without the views tests that build the Gradio app (each mutant's forked run imported gradio
    # again, about 15 s a mutant); what they check of the tables is in the tables' own tests
    "leaderboard.tables": ("tests/leaderboard/test_tables.py",
                           *(f"{_VIEWS}::test_{t}" for t in (
                               "tiers_are_paired_t_tests_with_holm_against_the_next_model_above",
                               "filters_leave_rows_out_of_ranking_and_say_so",
                               "column_choice_hides_new_metrics_by_default_and_keeps_the_ranking_one",
                               "a_lower_is_better_metric_ranks_lowest_first_and_marks_it",
                               "results_without_the_ranking_metric_say_why", "dates_show_as_years_and_the_csv_keeps_them",
                               "progress_is_the_best_score_by_date", "the_address_holds_the_view",
                               "submit_message_points_to_the_server_option_and_keeps_links_whole",
                               "holm_correction_decides_a_tie_that_raw_p_values_would_split",
                               "about_explains_tiers_and_published_figures",
                               "an_optional_column_ranked_by_gets_tiers_from_its_per_study_scores")),
                           # the first screen's table rules (issue 31), without the legend's test (it
                           # builds the Gradio app) and the command line's
                           *(f"tests/leaderboard/test_first_screen.py::test_{t}" for t in (
                               "rank_model_and_the_ranking_metric_come_first_and_n_only_where_it_exists",
                               "no_tier_column_for_one_row_with_per_study_scores",
                               "tiers_are_numbered_among_rows_with_per_study_scores_and_the_note_names_the_others",
                               "a_row_without_the_ranking_metric_says_why_and_where_it_stands_in_the_row",
                               "the_submit_answer_links_to_the_models_page", "widths_follow_the_columns_of_each_table",
                               "a_search_that_matches_nothing_here_names_the_tabs_where_it_matches",
                               "a_models_link_ranks_by_a_metric_its_result_has",
                               "standings_share_a_place_and_count_ties_as_the_ranking_does"))),
    "analysis.correlation": _ANALYSIS_TABLES,  # analysis.alignment: its own tests, the default
    **{f"analysis.{name}": (*_ANALYSIS_TABLES, f"tests/analysis/test_{name}.py") for name in ("error_rates", "sites", "strata")},
}

# Parts of a module run on their own as well, with faster tests (label -> module, mutmut's
# name pattern, tests): a whole-module run of these takes hours on 2 cores.
PARTS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    # the per-study and corpus formulas against the fast tests (with the model tests each mutant
    # took a minute or more)
    "metrics.srr_bert (formulas)": ("metrics/srr_bert.py", ("rexrank.metrics.srr_bert.x_*_prf__mutmut_*",),
                                    ("tests/metrics/test_srr_bert.py::test_weighted_scores_equal_sklearn_classification_report",
                                     "tests/metrics/test_srr_bert.py::test_per_study_rule_for_reports_without_labels",
                                     *_SRR_BERT_PINS)),
    # the money the dispatcher decides: the prices it reads, the Jobs it lets run at once, the
    # GPU-hour ceiling on the plan and on the hours used, each Job's recorded seconds and cost
    # (the rest of the dispatcher is its loop, tested by scenarios of minutes: its mutants that
    # stop the loop run into the mutation tool's timeout, each minutes under load)
    "backend.dispatch (money)": ("backend/dispatch.py", ("rexrank.backend.dispatch.x_job_prices__mutmut_*",
                                                         "rexrank.backend.dispatch.xǁDispatcherǁ_room_for_a_job__mutmut_*",
                                                         "rexrank.backend.dispatch.xǁDispatcherǁ_over_ceiling__mutmut_*",
                                                         "rexrank.backend.dispatch.xǁDispatcherǁ_plan_or_refusal__mutmut_*",
                                                         "rexrank.backend.dispatch.xǁDispatcherǁ_note__mutmut_*"),
                                 (*_PLAN, "tests/backend/test_dispatch_plan.py::test_no_more_jobs_run_at_once_than_max_jobs",
                                  "tests/backend/test_dispatch_plan.py::test_a_job_starts_only_while_fewer_than_max_jobs_run",
                                  "tests/backend/test_dispatch_plan.py::test_the_plans_ceiling_lets_exactly_its_gpu_hours_through",
                                  "tests/backend/test_dispatch_plan.py::test_each_jobs_record_is_its_seconds_and_cost_at_the_price_of_its_flavour",
                                  "tests/backend/test_dispatch_plan.py::test_a_private_requests_ceiling_refusal_comes_from_the_sets_public_size",
                                  "tests/backend/test_dispatch_plan.py::test_jobs_that_used_more_gpu_hours_than_the_ceiling_fail_the_request_and_stop",
                                  "tests/backend/test_dispatch_plan.py::test_the_used_hours_ceiling_counts_every_recorded_job_and_lets_exactly_the_ceiling_through")),
    # the whole dispatcher against its tests in this process (seconds each); `backend.dispatch`
    # itself then runs only what this part did not kill, through its Job scenarios on the fake Hub
    # and shard processes (minutes a mutant: on 2 cores, all 1,400 mutants would take a day)
    "backend.dispatch (in-process)": ("backend/dispatch.py", ("rexrank.backend.dispatch.*",),
                                      ("tests/backend/test_dispatch_loop.py", "tests/backend/test_dispatch_plan.py",
                                       "tests/backend/test_giveback.py")),
}



def module_files() -> list[str]:
    """Every module under src/rexrank, as a path relative to it."""
    return sorted(p.relative_to(SRC).as_posix() for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def exclusion(path: str) -> str | None:
    """Why `path` is not audited, or None when it is."""
    return next((why for pattern, why in EXCLUDED.items() if fnmatch.fnmatchcase(path, pattern)), None)


def label_of(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def mirrored_tests(path: str) -> tuple[str, ...]:
    """tests/<folder>/test_<name>.py and test_<name>_*.py for src/rexrank/<folder>/<name>.py."""
    folder, _, name = path.removesuffix(".py").rpartition("/")
    where = ROOT / "tests" / folder
    found = sorted({*where.glob(f"test_{name}.py"), *where.glob(f"test_{name}_*.py")})
    return tuple(p.relative_to(ROOT).as_posix() for p in found)


def modules() -> dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """{label: (path under src/rexrank, mutmut's name patterns for its mutants, its tests)} for
    every audited module, then the PARTS."""
    out = {}
    for path in module_files():
        if exclusion(path) is None:
            label = label_of(path)
            out[label] = (path, (f"rexrank.{label}.*",), TESTS.get(label) or mirrored_tests(path))
    return {**out, **PARTS}


# mutmut's exit codes (mutmut/stats.py): 1 and 3 are a failing test run, 0 a passing one
KILLED = {1, 3}
SURVIVED = {0}
# a mutant whose tests ran past mutmut's CPU-time limit: a hang, or a slow machine; counted
# as not killed and listed, to be looked at
TIMEOUT = {36, -24, 24, 152, 255}
NO_TESTS = 33  # no test of the module's list reached the function: after the list grows, a run takes them again


def load_equivalents(path: Path = EQUIVALENTS) -> dict[str, tuple[str | None, str]]:
    """{mutant name: (its change's fingerprint or None, why it changes no observable
    behaviour)}; lines `name  @fingerprint  # reason` (the report prints each survivor's
    fingerprint). mutmut numbers a function's mutants in order, so a changed function
    renumbers them: the fingerprint of the change read keeps a record from naming another
    mutant, which may be a real survivor."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else ():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        head, sep, reason = line.partition("#")
        name, _, pin = head.strip().partition(" ")
        if not sep or not reason.strip():
            raise SystemExit(f"{path.name}: {name} has no reason (write `name  @fingerprint  # why it is equivalent`)")
        pin = pin.strip()
        if pin and not re.fullmatch(r"@[0-9a-f]{10}", pin):
            raise SystemExit(f"{path.name}: {name}: {pin!r} is not a fingerprint (@ and 10 hex digits, as the report prints)")
        out[name] = (pin[1:] or None, reason.strip())
    return out


def mutant_fingerprints(label: str, path: str) -> dict[str, str]:
    """{mutant name: 10 hex digits of its change}: the lines mutmut removed and added in its
    function (read from the mutated module in mutants/<module>/mutants/), whatever else the
    function holds."""
    import ast
    import difflib
    import hashlib

    mutated = workdir(label) / "mutants" / "src" / "rexrank" / path
    if not mutated.exists():
        return {}
    text = mutated.read_text(encoding="utf-8")
    lines = text.splitlines()
    # the whole function, its name left out of the def line (a mutant may change a default there)
    bodies = {node.name: [lines[node.lineno - 1].replace(node.name, "_"), *lines[node.lineno:node.end_lineno]]
              for node in ast.walk(ast.parse(text))
              if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "__mutmut_" in node.name}
    module = "rexrank." + path.removesuffix(".py").replace("/", ".")
    out = {}
    for name, body in bodies.items():
        stem, _, number = name.rpartition("_")
        if not number.isdigit() or f"{stem}_orig" not in bodies:
            continue
        changed = [line.strip() for line in difflib.unified_diff(bodies[f"{stem}_orig"], body, lineterm="", n=0)
                   if line[:1] in "-+" and not line.startswith(("---", "+++"))]
        out[f"{module}.{name}"] = hashlib.sha256("\n".join(changed).encode()).hexdigest()[:10]
    return out


PROJECT_FOLDERS = ("metrics", "spaces", "datasets_scripts", "leaderboard_space")  # the design's top level beside src/


def workdir(label: str) -> Path:
    return ROOT / "mutants" / re.sub(r"[^a-z0-9_.]+", "-", label.lower()).strip("-")


def _toml_list(values) -> str:
    return "[" + ", ".join(json.dumps(str(v)) for v in values) + "]"


def prepare(label: str, path: str, tests: tuple[str, ...]) -> Path:
    """mutants/<module>/: src and tests linked from the checkout, and a pyproject.toml of
    the project's [tool.mutmut] and pytest settings narrowed to `path` and `tests`."""
    import tomllib

    folder = workdir(label)
    folder.mkdir(parents=True, exist_ok=True)
    _drop_a_half_written_mutant_file(folder, path)
    for name in ("src", "tests", *PROJECT_FOLDERS):
        link = folder / name
        if not link.exists():
            link.symlink_to(ROOT / name, target_is_directory=True)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    # mutmut runs a copy of tests/ inside mutants/<module>/mutants/: the folders the tests
    # read beside it (metric cards, Space apps) are copied there too
    settings = {**project["mutmut"], "only_mutate": [f"src/rexrank/{path}"], "pytest_add_cli_args_test_selection": list(tests),
                "also_copy": [*project["mutmut"].get("also_copy", []), *PROJECT_FOLDERS]}
    lines = ["[tool.mutmut]"]
    lines += [f"{k} = {_toml_list(v) if isinstance(v, list) else json.dumps(v)}" for k, v in settings.items()]
    lines += ["", "[tool.pytest.ini_options]"]
    lines += [f"{k} = {_toml_list(v) if isinstance(v, list) else json.dumps(v)}" for k, v in project["pytest"]["ini_options"].items()]
    text = "\n".join(lines) + "\n"
    if not (folder / "pyproject.toml").exists() or (folder / "pyproject.toml").read_text(encoding="utf-8") != text:
        (folder / "pyproject.toml").write_text(text, encoding="utf-8")
    return folder


def _drop_a_half_written_mutant_file(folder: Path, path: str) -> None:
    """mutmut writes a module's mutants into one file and never writes it again while that
    file is newer than the source. A run stopped while it wrote left the file empty or cut
    short: every later run then tested a module without its code (store.records: a module of
    no names, so the stats run failed). Such a file is removed, and mutmut writes it anew."""
    import ast

    written = folder / "mutants" / "src" / "rexrank" / path
    if not written.is_file():
        return
    text = written.read_text(encoding="utf-8", errors="replace")
    try:
        ast.parse(text)
        whole = bool(text.strip()) or not (SRC / path).read_text(encoding="utf-8").strip()
    except SyntaxError:
        whole = False
    if not whole:
        print(f"   {written.relative_to(folder)} was left half written by a stopped run: written again", flush=True)
        written.unlink()


def drop_stale_stats(folder: Path, tests: tuple[str, ...]) -> bool:
    """Remove mutmut's record of which tests call which function when a test file it runs (or
    a shared helper) changed after it: mutmut collects it again only for new tests, so a test
    that starts calling a function in a later edit was never run against that function's
    mutants (its survivors were not survivors). The mutants' results are kept."""
    stats = folder / "mutants" / "mutmut-stats.json"
    if not stats.exists():
        return False
    files = {ROOT / t.split("::")[0] for t in tests} | set((ROOT / "tests" / "support").rglob("*.py"))
    files.add(ROOT / "tests" / "conftest.py")
    if max((f.stat().st_mtime for f in files if f.exists()), default=0.0) <= stats.stat().st_mtime:
        return False
    stats.unlink()
    return True


def _meta(label: str, path: str) -> dict | None:
    meta = workdir(label) / "mutants" / "src" / "rexrank" / f"{path}.meta"
    return json.loads(meta.read_text()) if meta.exists() else None


def _within(part_tests: tuple[str, ...], tests: tuple[str, ...]) -> bool:
    """Every test of the part is among `tests` (by its node id or its whole file)."""
    return all(t in tests or t.split("::")[0] in tests for t in part_tests)


def _function_of(mutant: str) -> str:
    """mutmut's key of the mutated function (as in .meta's hash_by_function_name)."""
    return mutant.rpartition(".")[2].rpartition("__mutmut_")[0]


def _metas_of_parts(label: str, path: str, tests: tuple[str, ...]) -> list[dict]:
    """The .meta of each part of the module `label` whose tests the module also runs."""
    if label in PARTS:
        return []
    return [meta for part, (part_path, _, part_tests) in PARTS.items()
            if part_path == path and _within(part_tests, tests) and (meta := _meta(part, part_path)) is not None]


def results(chosen: dict[str, tuple[str, tuple, tuple]]) -> dict[str, dict[str, int | None] | None]:
    """{module: {mutant name: exit code or None (not run)}, or None when it never ran} from
    mutmut's .meta files. A module's mutant not run on the module itself counts as killed when
    one of its PARTS killed it with tests the module also runs, on the same code (mutmut's hash
    of the function equal in both): a test that fails it is in the module's run too, so the
    module runs only what its parts left."""
    out = {}
    for label, (path, patterns, tests) in chosen.items():
        meta = _meta(label, path)
        if meta is None:
            out[label] = None
            continue
        codes = {k: v for k, v in meta["exit_code_by_key"].items() if any(fnmatch.fnmatchcase(k, p) for p in patterns)}
        hashes = meta.get("hash_by_function_name", {})
        for part in _metas_of_parts(label, path, tests):
            part_codes, part_hashes = part["exit_code_by_key"], part.get("hash_by_function_name", {})
            for k, c in codes.items():
                function = _function_of(k)
                if ((c is None or c == NO_TESTS) and part_codes.get(k) in KILLED
                        and hashes.get(function) is not None and hashes[function] == part_hashes.get(function)):
                    codes[k] = part_codes[k]
        out[label] = codes
    return out


def report(chosen: dict[str, tuple[str, tuple, tuple]], equivalents: dict[str, tuple[str | None, str]]) -> int:
    rows, survivors, never, stale = [], [], [], []
    for label, codes in results(chosen).items():
        if codes is None:
            never.append(label)
            continue
        prints = mutant_fingerprints(label, chosen[label][0])
        # a record counts only for the change it was written for (its fingerprint)
        held = {k for k in codes if k in equivalents and equivalents[k][0] is not None and equivalents[k][0] == prints.get(k)}
        stale += sorted(k for k in codes if k in equivalents and k not in held)
        killed = sum(c in KILLED for c in codes.values())
        # an equivalent mutant leaves the score whether its tests passed or ran out of time
        equivalent = sum(c in SURVIVED | TIMEOUT and k in held for k, c in codes.items())
        left = sorted(k for k, c in codes.items() if c in SURVIVED and k not in held)
        timeouts = sorted(k for k, c in codes.items() if c in TIMEOUT and k not in held)
        other = sum(c is None or c not in KILLED | SURVIVED | TIMEOUT for c in codes.values())
        judged = len(codes) - equivalent - other
        score = f"{100 * killed / judged:.1f} %" if judged else "–"
        rows.append(f"| {label} | {len(codes)} | {killed} | {len(left)} | {len(timeouts)} | {equivalent} | {other} | {score} |")
        survivors += [f"{k}  @{prints.get(k, '?')}" for k in left] + [f"{k}  @{prints.get(k, '?')} (timeout)" for k in timeouts]
    print("| module | mutants | killed | survived | timeout | equivalent | not run / no tests | score |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    if never:
        print(f"\nnot run yet ({len(never)}): {', '.join(never)}")
    print(f"\n{len(survivors)} survivor(s)" + (":" if survivors else ""))
    for name in survivors:
        print(f"  {name}")
    if stale:
        print(f"\n{len(stale)} record(s) in {EQUIVALENTS.name} without the fingerprint of the mutant they name now (its "
              "function changed and mutmut renumbered its mutants, or the record was never pinned): each counts for "
              "nothing; read the mutant again and pin or drop the record:")
        for name in stale:
            print(f"  {name}")
    return 1 if survivors or never or stale else 0


def listing() -> None:
    """The audit's scope: each audited module with its tests, each excluded one with why."""
    for label, (_, _, tests) in modules().items():
        print(f"audit    {label:<40} {' '.join(tests) or 'NO TESTS'}")
    for path in module_files():
        why = exclusion(path)
        if why is not None:
            print(f"exclude  {label_of(path):<40} {why}")


def _not_run_yet(label: str, path: str, patterns: tuple[str, ...], tests: tuple[str, ...] = ()) -> list[str]:
    """The patterns on a first run; after it, the mutants without a result (or without a test
    then), by name. mutmut re-runs every mutant a pattern matches, the killed ones too, so a run
    stopped half way would otherwise start again from the fastest mutants and record nothing
    new for long. A mutant a part of the module killed (see results) is not run again."""
    codes = results({label: (path, patterns, tests)})[label]
    if codes is None:
        return list(patterns)
    left = sorted(k for k, c in codes.items() if c is None or c == NO_TESTS)
    if not left:
        print("   every mutant has a result: --rerun NAME ... runs one again", flush=True)
    return left


def run_as_one_group(command: list[str], **popen) -> int:
    """Run mutmut in a process group of its own and end the whole group when this process is
    stopped (Ctrl-C, or a kill's SIGTERM): mutmut's fork server and the mutant it is testing
    outlived a stopped tool, and a second run of the module then raced them over one results
    file."""

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    process = subprocess.Popen(command, stderr=subprocess.STDOUT, start_new_session=True, **popen)
    try:
        return process.wait()
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


def hangups_reach_the_tests() -> None:
    """`nohup` leaves SIGHUP ignored, and every process mutmut starts inherits that (a local
    Job's too): a mutant that sends SIGHUP where signal 0 only asks would then survive."""
    if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


def main(argv: list[str] | None = None) -> int:
    audited = modules()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", choices=list(audited), metavar="MODULE",
                        help="run these modules only (repeatable; --list names them)")
    parser.add_argument("--list", action="store_true", help="print what is audited against which tests, and what is not and why")
    parser.add_argument("--report", action="store_true", help="print the last runs' table without running")
    parser.add_argument("--rerun", nargs="+", metavar="MUTANT", help="run only these mutants again (e.g. the survivors)")
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2, help="parallel mutants")
    args = parser.parse_args(argv)
    if args.list:
        listing()
        return 0
    chosen = {k: v for k, v in audited.items() if not args.only or k in args.only}
    if not args.report:
        missing = [label for label, (_, _, tests) in chosen.items() if not tests]
        if missing:
            raise SystemExit(f"no tests for {', '.join(missing)}: add tests beside the module (tests/<folder>/test_<name>.py) "
                             "or name them in TESTS of benchmarks/mutation.py")
        # the tests read ../shared beside the checkout; mutmut runs them from mutants/
        env = {**os.environ, "REXRANK_SHARED": os.environ.get("REXRANK_SHARED", str(ROOT.parent / "shared"))}
        # each mutant's run imports torch and transformers afresh: without bytecode written once
        # (a machine may set this; .ci/run unsets it too) it compiles them from source every time
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        hangups_reach_the_tests()
        # a module's parts first: the module then runs only the mutants they did not kill
        for label, (path, patterns, tests) in sorted(chosen.items(), key=lambda item: item[0] not in PARTS):
            print(f"== {label}", flush=True)
            folder = prepare(label, path, tests)
            names = (_not_run_yet(label, path, patterns, tests) if not args.rerun
                     else [n for n in args.rerun if any(fnmatch.fnmatchcase(n, p) for p in patterns)])
            if not names:
                continue
            if drop_stale_stats(folder, tests):
                print("   its tests changed since mutmut mapped them to functions: mapped again", flush=True)
            with (folder / "run.log").open("a", encoding="utf-8") as out:  # mutmut's progress, for a look afterwards
                run_as_one_group([sys.executable, "-m", "mutmut", "run", "--max-children", str(args.max_children), *names],
                                 cwd=folder, env=env, stdout=out)
    return report(chosen, load_equivalents())


if __name__ == "__main__":
    sys.exit(main())
