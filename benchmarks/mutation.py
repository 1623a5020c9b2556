"""Mutation testing of the modules that decide published numbers and trust (issue 32).

    pip install -e ".[mutation,test]"
    python benchmarks/mutation.py                 # run mutmut over every module, then the table
    python benchmarks/mutation.py --only stats    # some modules (repeatable; names from MODULES)
    python benchmarks/mutation.py --report        # the table of the last run, without running

mutmut 3 (configured in pyproject.toml's [tool.mutmut]) copies the package into mutants/,
makes its mutants with its own operators and runs, for each one, the selected tests that
reach the mutated function. This script runs it once per module of MODULES, in a working
folder mutants/<module>/ whose pyproject.toml is the project's [tool.mutmut] narrowed to
that module and its fast test files (a mutant of `stats` then runs the statistics tests
that reach its function, not every metric test that aggregates scores). For two modules it
asks for one function only: the coverage rule (`public_door.coverage_failure`), the F+I reference builder.

It prints per module: mutants, killed, survived, timeouts, equivalents, and the score =
killed / (mutants - equivalent), and lists every survivor that
benchmarks/mutation_equivalents.txt does not record as equivalent. Slow (an hour or more on
a few cores): not run by CI. Exit 1 if any survivor is left. Re-running a module keeps its
earlier verdicts and tests the mutants of changed functions and those named by --rerun.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENTS = ROOT / "benchmarks" / "mutation_equivalents.txt"

_VIEWS = "tests/leaderboard/test_views.py"
# issue 32's tests written out by hand, where their module's test file also holds slow tests
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
    "parquet_metadata_limits_at_and_one_past_each", "read_capped_asks_for_cap_plus_one_bytes_and_no_more"))
_RADCLIQ_PINS = ("tests/metrics/test_radcliq.py::test_radcliq_components_read_as_text_from_the_official_csv_give_its_columns",
                 "tests/metrics/test_radcliq.py::test_radcliq_components_of_different_lengths_are_refused_naming_each_shape",
                 "tests/backend/test_privacy.py::test_the_radcliq_range_is_the_formulas_corners_by_hand")
_CRIMSON_PINS = tuple(f"tests/metrics/test_crimson.py::test_crimson_{t}" for t in (
    "prompt_and_messages_default_to_the_full_official_prompt", "reader_tells_structural_quotes_from_prose_by_the_official_rule",
    "reader_escapes_a_stray_quote_up_to_five_characters_before_the_error",
    "reader_never_escapes_a_quote_that_follows_a_backslash", "attribute_error_without_error_types_counts_in_no_type",
    "reader_escapes_a_stray_quote_after_an_escaped_one", "reader_makes_at_most_49_quote_fixes"))
_SRR_BERT_PINS = tuple(f"tests/metrics/test_srr_bert.py::test_srr_bert_{t}" for t in (
    "config_records_radevals_model_labels_and_batches", "keeps_reference_labels_in_the_cache_folder_under_its_namespace",
    "per_study_scores_by_hand", "weighted_scores_of_labels_predicted_or_present_once_by_hand",
    "distinct_and_radeval_batches_give_radevals_labels_on_iu_xray", "shows_its_progress_bar_unless_told_not_to",
    "of_no_study_is_empty_columns_without_loading_the_model", "reloads_a_local_checkpoint_whose_files_changed",
    "by_default_shows_progress_and_keeps_reference_labels", "batch_size_must_be_a_positive_integer",
    "takes_a_batch_size_of_one"))
# the store's tests without those that start a fake Hub server or a subprocess, or need a mount
# namespace: mutmut's test-mapping run failed on the fake-Hub tests (see store.names)
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
                # the queue's and the records' tests written out by hand (issue 32)
                "tests/store/test_queue.py", "tests/store/test_records.py")
# name -> (source file under src/rexrank, mutmut's name pattern for its mutants, the fast
# test files (or test ids) its mutants are tried against); in the order they run
MODULES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "stats": ("stats.py", "rexrank.stats.*", ("tests/test_stats.py",)),
    "results_schema": ("results_schema.py", "rexrank.results_schema.*",
                       ("tests/test_results_schema.py", "tests/leaderboard/test_tables.py")),
    "leaderboard.progress": ("leaderboard/progress.py", "rexrank.leaderboard.progress.*", (_VIEWS, "tests/leaderboard/test_progress.py")),
    "leaderboard.tiers": ("leaderboard/tiers.py", "rexrank.leaderboard.tiers.*", (_VIEWS, "tests/leaderboard/test_tiers.py")),
    "hub.eval_results": ("hub/eval_results.py", "rexrank.hub.eval_results.*", ("tests/hub/test_eval_results.py",)),
    "store.names": ("store/names.py", "rexrank.store.names.*",
                    (*(f"tests/backend/test_policy.py::test_{t}" for t in (
                        "a_submitter_name_must_be_a_hub_name", "names_are_normalised_before_comparison",
                        "display_removes_escapes_and_invisible_characters", "a_right_to_left_override_cannot_reverse_a_name_on_the_page",
                        "a_lookalike_submitter_is_no_second_submitter")),
                     *(f"tests/leaderboard/test_public_names_and_page.py::test_{t}" for t in (
                         "every_published_name_stays_valid", "a_lookalike_of_a_published_name_is_the_same_name",
                         "distinct_names_stay_distinct", "a_new_name_holding_a_default_ignorable_character_is_refused",
                         "no_name_begins_with_a_formula_character_tab_or_return",
                         "a_name_that_a_spreadsheet_runs_or_that_is_outside_the_repertoire_is_refused")),
                     "tests/store/test_names.py")),
    "leaderboard.identity": ("leaderboard/identity.py", "rexrank.leaderboard.identity.*",
                             ("tests/backend/test_policy.py::test_on_the_hub_the_submitter_is_the_tokens_account_never_the_typed_name",
                              "tests/leaderboard/test_identity.py")),
    "testsets.schema (F+I reference)": ("testsets/schema.py",
                                        "rexrank.testsets.schema.x_findings_impression_reference__mutmut_*",
                                        ("tests/testsets/test_loading.py", "tests/testsets/test_schema.py")),
    "backend.public_door (coverage rule)": ("backend/public_door.py",
                                            "rexrank.backend.public_door.x_coverage_failure__mutmut_*",
                                            # without test_private_door's tests that start the Space in its own process:
                                            # that process inherits MUTANT_UNDER_TEST=stats and runs in a temporary
                                            # folder, where mutmut's trampoline finds no configuration and fails
                                            # ("failed to collect stats")
                                            ("tests/backend/test_coverage.py",
                                             *(f"tests/backend/test_private_door.py::test_{t}" for t in (
                                                 "the_length_probe_learns_no_more_than_epsilon_allows",
                                                 "the_probes_the_ledger_allows_learn_no_more_than_their_epsilon")))),
    "metrics.radcliq_formula": ("metrics/radcliq_formula.py", "rexrank.metrics.radcliq_formula.*",
                                ("tests/metrics/test_radcliq.py::test_formula_reproduces_official_columns",
                                 "tests/metrics/test_radcliq.py::test_rexrank_figure_is_one_over_mean_v1",
                                 "tests/metrics/test_radcliq.py::test_scalars_and_errors", "tests/test_results_schema.py", *_RADCLIQ_PINS)),
    "metrics.temporal_f1": ("metrics/temporal_f1.py", "rexrank.metrics.temporal_f1.*", ("tests/metrics/test_temporal_f1.py",)),
    "metrics.rouge": ("metrics/rouge.py", "rexrank.metrics.rouge.*", ("tests/metrics/test_rouge.py",)),
    "metrics.bleu2": ("metrics/bleu2.py", "rexrank.metrics.bleu2.*", ("tests/metrics/test_bleu2.py",)),
    "leaderboard.records": ("leaderboard/records.py", "rexrank.leaderboard.records.*",
                            ("tests/leaderboard/test_tables.py", "tests/leaderboard/test_public_names_and_page.py", "tests/leaderboard/test_records.py")),
    "store.records": ("store/records.py", "rexrank.store.records.*", _STORE_TESTS),
    "store.policy": ("store/policy.py", "rexrank.store.policy.*", ("tests/backend/test_policy.py", "tests/store/test_store.py", "tests/store/test_policy.py", "tests/store/test_names.py")),
    "backend.privacy": ("backend/privacy.py", "rexrank.backend.privacy.*",
                        ("tests/backend/test_private_rounding.py", "tests/backend/test_private_attack.py", "tests/backend/test_privacy.py")),
    "metrics.crimson_text": ("metrics/crimson_text.py", "rexrank.metrics.crimson_text.*",
                             ("tests/metrics/test_crimson_official.py::test_answer_reader_repairs_and_refuses_as_the_official_one",
                              "tests/metrics/test_crimson_official.py::test_score_equals_the_official_on_every_answer",
                              "tests/metrics/test_crimson_official.py::test_prompt_messages_of_the_endpoint_paths_are_the_official_ones",
                              "tests/metrics/test_crimson_official.py::test_prompts_equal_the_reference_prompt_files", *_CRIMSON_PINS)),
    "store.queue": ("store/queue.py", "rexrank.store.queue.*", _STORE_TESTS),
    # without test_the_space_and_the_cli_set_gradios_upload_limit: it runs leaderboard_space/app.py,
    # which mutmut does not copy into mutants/ (and it reads a module constant, which mutmut never mutates)
    "input_limits": ("input_limits.py", "rexrank.input_limits.*",
                     (*(f"tests/test_input_limits.py::test_{t}" for t in (
                         "a_fifo_is_refused_at_once", "dev_zero_and_folders_are_one_line_errors",
                         "a_test_set_file_that_is_a_fifo_or_device_is_one_line", "a_parquet_bomb_is_refused_from_its_metadata",
                         "parquet_metadata_is_limited_before_it_is_parsed", "a_dictionary_bomb_is_refused_before_it_expands",
                         "only_string_id_and_prediction_columns_pass_the_schema_check",
                         "the_command_line_refuses_a_nested_column_bomb_in_one_line", "text_files_are_read_with_a_byte_cap",
                         "rows_values_and_characters_are_limited", "a_datasets_folder_is_limited_before_it_is_loaded",
                         "a_million_duplicates_give_a_short_message", "a_non_string_of_megabytes_is_named_briefly",
                         "the_limits_let_a_10000_study_submission_through")),
                      *_INPUT_LIMITS_PINS)),
    "metrics.srr_bert": ("metrics/srr_bert.py", "rexrank.metrics.srr_bert.*", ("tests/metrics/test_srr_bert.py",)),
    # the per-study and corpus formulas alone against the fast tests: with test_srr_bert.py's model
    # tests, each mutant of srr_bert took a minute or more on the shared 2-core machine
    "metrics.srr_bert (formulas)": ("metrics/srr_bert.py", "rexrank.metrics.srr_bert.x_*_prf__mutmut_*",
                                    ("tests/metrics/test_srr_bert.py::test_weighted_scores_equal_sklearn_classification_report",
                                     "tests/metrics/test_srr_bert.py::test_per_study_rule_for_reports_without_labels", *_SRR_BERT_PINS)),
    # without the three views tests that build the Gradio app: each mutant's forked run imported
    # gradio again (about 15 s a mutant); what they check of the tables is in the tables' tests written out by hand
    "leaderboard.tables": ("leaderboard/tables.py", "rexrank.leaderboard.tables.*",
                           ("tests/leaderboard/test_tables.py",
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
                                "an_optional_column_ranked_by_gets_tiers_from_its_per_study_scores")))),
}
# mutmut's exit codes (mutmut/stats.py): 1 and 3 are a failing test run, 0 a passing one
KILLED = {1, 3}
SURVIVED = {0}
# a mutant whose tests ran past mutmut's CPU-time limit: a hang, or a slow machine; counted
# as not killed and listed, to be looked at
TIMEOUT = {36, -24, 24, 152, 255}


def load_equivalents(path: Path = EQUIVALENTS) -> dict[str, str]:
    """{mutant name: why it changes no observable behaviour}; lines `name  # reason`."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else ():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, reason = line.partition("#")
        if not sep or not reason.strip():
            raise SystemExit(f"{path.name}: {name.strip()} has no reason (write `name  # why it is equivalent`)")
        out[name.strip()] = reason.strip()
    return out


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
    for name in ("src", "tests"):
        link = folder / name
        if not link.exists():
            link.symlink_to(ROOT / name, target_is_directory=True)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    settings = {**project["mutmut"], "only_mutate": [f"src/rexrank/{path}"], "pytest_add_cli_args_test_selection": list(tests)}
    lines = ["[tool.mutmut]"]
    lines += [f"{k} = {_toml_list(v) if isinstance(v, list) else json.dumps(v)}" for k, v in settings.items()]
    lines += ["", "[tool.pytest.ini_options]"]
    lines += [f"{k} = {_toml_list(v) if isinstance(v, list) else json.dumps(v)}" for k, v in project["pytest"]["ini_options"].items()]
    text = "\n".join(lines) + "\n"
    if not (folder / "pyproject.toml").exists() or (folder / "pyproject.toml").read_text(encoding="utf-8") != text:
        (folder / "pyproject.toml").write_text(text, encoding="utf-8")
    return folder


def results(modules: dict[str, tuple[str, str]]) -> dict[str, dict[str, int | None]]:
    """{module: {mutant name: exit code or None (not run)}} from mutmut's .meta files."""
    out = {}
    for label, (path, pattern, _) in modules.items():
        meta = workdir(label) / "mutants" / "src" / "rexrank" / f"{path}.meta"
        codes = json.loads(meta.read_text())["exit_code_by_key"] if meta.exists() else {}
        out[label] = {k: v for k, v in codes.items() if fnmatch.fnmatch(k, pattern)}
    return out


def report(modules: dict[str, tuple[str, str]], equivalents: dict[str, str]) -> int:
    rows, survivors = [], []
    for label, codes in results(modules).items():
        killed = sum(c in KILLED for c in codes.values())
        # an equivalent mutant leaves the score whether its tests passed or ran out of time
        equivalent = sum(c in SURVIVED | TIMEOUT and k in equivalents for k, c in codes.items())
        left = sorted(k for k, c in codes.items() if c in SURVIVED and k not in equivalents)
        timeouts = sorted(k for k, c in codes.items() if c in TIMEOUT and k not in equivalents)
        other = sum(c is None or c not in KILLED | SURVIVED | TIMEOUT for c in codes.values())
        judged = len(codes) - equivalent - other
        score = f"{100 * killed / judged:.1f} %" if judged else "–"
        rows.append(f"| {label} | {len(codes)} | {killed} | {len(left)} | {len(timeouts)} | {equivalent} | {other} | {score} |")
        survivors += left + [f"{k} (timeout)" for k in timeouts]
    print("| module | mutants | killed | survived | timeout | equivalent | not run / no tests | score |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\n{len(survivors)} survivor(s)" + (":" if survivors else ""))
    for name in survivors:
        print(f"  {name}")
    return 1 if survivors else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", choices=list(MODULES), metavar="MODULE",
                        help="run these modules only (repeatable)")
    parser.add_argument("--report", action="store_true", help="print the last run's table without running")
    parser.add_argument("--rerun", nargs="+", metavar="MUTANT", help="run only these mutants again (e.g. the survivors)")
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2, help="parallel mutants")
    args = parser.parse_args(argv)
    chosen = {k: v for k, v in MODULES.items() if not args.only or k in args.only}
    equivalents = load_equivalents()
    if not args.report:
        # the tests read ../shared beside the checkout; mutmut runs them from mutants/
        env = {**os.environ, "REXRANK_SHARED": os.environ.get("REXRANK_SHARED", str(ROOT.parent / "shared"))}
        for label, (path, pattern, tests) in chosen.items():
            print(f"== {label}", flush=True)
            folder = prepare(label, path, tests)
            names = [pattern] if not args.rerun else [n for n in args.rerun if fnmatch.fnmatch(n, pattern)]
            if not names:
                continue
            with (folder / "run.log").open("a", encoding="utf-8") as out:  # mutmut's progress, for a look afterwards
                subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(args.max_children), *names],
                               cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    return report(chosen, equivalents)


if __name__ == "__main__":
    sys.exit(main())
