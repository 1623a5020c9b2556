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

_VIEWS = "tests/test_leaderboard_views.py"
_PINS = "tests/test_pins.py"
_PINS_BOARD = "tests/test_pins_leaderboard.py"
_PINS_METRICS = "tests/test_pins_metrics.py"  # the metric modules' and the coverage rule's pins
# the store's tests without those that start a fake Hub server or a subprocess, or need a mount
# namespace: mutmut's test-mapping run failed on the fake-Hub tests (see store.names)
_STORE_TESTS = ("tests/test_store.py",
                *(f"tests/test_store_trust.py::test_{t}" for t in (
                    "odd_request_ids_are_refused_before_any_path_is_built", "a_forged_predictions_path_is_never_read",
                    "a_request_saying_private_false_still_pays_for_a_failed_private_validation",
                    "a_private_filing_with_more_rows_than_the_set_has_studies_is_refused_at_filing",
                    "a_cancelled_request_counts_against_the_quota", "a_request_dated_by_its_writer_still_obeys_the_quota",
                    "a_request_dated_back_does_not_jump_the_queue_and_shows_the_servers_date",
                    "two_backends_whose_clocks_differ_by_15_minutes_score_each_request_once",
                    "a_cancel_just_before_publication_publishes_nothing[local]",
                    "a_request_being_published_can_no_longer_be_cancelled",
                    "a_waiting_request_that_says_it_is_being_published_can_still_be_cancelled")),
                # of test_pins.py only the queue's tests: the others never reach the store, and
                # mapping them (input limits, metrics) took most of the 12-minute test-mapping run
                *(f"{_PINS}::test_{t}" for t in (
                    "a_lease_expires_after_its_own_duration_on_this_processes_clock",
                    "a_new_lease_is_a_fresh_16_hex_digit_token_and_the_duration_asked",
                    "a_transition_sets_the_status_dates_a_settled_request_and_appends_its_history",
                    "arrivals_are_open_queue_requests_not_yet_received_and_get_the_servers_time",
                    "each_queue_operation_follows_the_state_machine_written_out",
                    "finish_keeps_notes_and_a_cancel_without_reason_says_only_who",
                    "a_request_interrupted_max_attempts_times_fails_with_the_count_in_its_message",
                    "a_release_gives_back_only_the_released_attempt")),
                "tests/test_pins_store.py")
# name -> (source file under src/rexrank, mutmut's name pattern for its mutants, the fast
# test files (or test ids) its mutants are tried against); in the order they run
MODULES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "stats": ("stats.py", "rexrank.stats.*", ("tests/test_stats.py", _PINS)),
    "results_schema": ("results_schema.py", "rexrank.results_schema.*",
                       ("tests/test_results_schema.py", "tests/test_leaderboard_tables.py", _PINS)),
    "leaderboard.progress": ("leaderboard/progress.py", "rexrank.leaderboard.progress.*", (_VIEWS, _PINS)),
    "leaderboard.tiers": ("leaderboard/tiers.py", "rexrank.leaderboard.tiers.*", (_VIEWS, _PINS)),
    "hub.eval_results": ("hub/eval_results.py", "rexrank.hub.eval_results.*", ("tests/test_eval_results.py", _PINS)),
    "store.names": ("store/names.py", "rexrank.store.names.*",
                    (*(f"tests/test_backend_policy.py::test_{t}" for t in (
                        "a_submitter_name_must_be_a_hub_name", "names_are_normalised_before_comparison",
                        "display_removes_escapes_and_invisible_characters", "a_right_to_left_override_cannot_reverse_a_name_on_the_page",
                        "a_lookalike_submitter_is_no_second_submitter")),
                     *(f"tests/test_public_names_and_page.py::test_{t}" for t in (
                         "every_published_name_stays_valid", "a_lookalike_of_a_published_name_is_the_same_name",
                         "distinct_names_stay_distinct", "a_new_name_holding_a_default_ignorable_character_is_refused",
                         "no_name_begins_with_a_formula_character_tab_or_return",
                         "a_name_that_a_spreadsheet_runs_or_that_is_outside_the_repertoire_is_refused")),
                     _PINS)),
    "leaderboard.identity": ("leaderboard/identity.py", "rexrank.leaderboard.identity.*",
                             ("tests/test_backend_policy.py::test_on_the_hub_the_submitter_is_the_tokens_account_never_the_typed_name",
                              _PINS)),
    "testsets.schema (F+I reference)": ("testsets/schema.py",
                                        "rexrank.testsets.schema.x_findings_impression_reference__mutmut_*",
                                        ("tests/test_testsets.py", _PINS)),
    "backend.public_door (coverage rule)": ("backend/public_door.py",
                                            "rexrank.backend.public_door.x_coverage_failure__mutmut_*",
                                            # without test_private_door's tests that start the Space in its own process:
                                            # that process inherits MUTANT_UNDER_TEST=stats and runs in a temporary
                                            # folder, where mutmut's trampoline finds no configuration and fails
                                            # ("failed to collect stats")
                                            ("tests/test_coverage.py",
                                             *(f"tests/test_private_door.py::test_{t}" for t in (
                                                 "the_length_probe_learns_no_more_than_epsilon_allows",
                                                 "the_probes_the_ledger_allows_learn_no_more_than_their_epsilon")),
                                             _PINS, _PINS_METRICS)),
    "metrics.radcliq_formula": ("metrics/radcliq_formula.py", "rexrank.metrics.radcliq_formula.*",
                                ("tests/test_radcliq.py::test_formula_reproduces_official_columns",
                                 "tests/test_radcliq.py::test_rexrank_figure_is_one_over_mean_v1",
                                 "tests/test_radcliq.py::test_scalars_and_errors", "tests/test_results_schema.py", _PINS, _PINS_METRICS)),
    "metrics.temporal_f1": ("metrics/temporal_f1.py", "rexrank.metrics.temporal_f1.*", ("tests/test_temporal_f1.py", _PINS, _PINS_METRICS)),
    "metrics.rouge": ("metrics/rouge.py", "rexrank.metrics.rouge.*", ("tests/test_rouge.py", _PINS, _PINS_METRICS)),
    "metrics.bleu2": ("metrics/bleu2.py", "rexrank.metrics.bleu2.*", ("tests/test_bleu2.py", _PINS, _PINS_METRICS)),
    "leaderboard.records": ("leaderboard/records.py", "rexrank.leaderboard.records.*",
                            ("tests/test_leaderboard_tables.py", "tests/test_public_names_and_page.py", _PINS, _PINS_BOARD)),
    "store.records": ("store/records.py", "rexrank.store.records.*", _STORE_TESTS),
    "store.policy": ("store/policy.py", "rexrank.store.policy.*", ("tests/test_backend_policy.py", "tests/test_store.py", _PINS)),
    "backend.privacy": ("backend/privacy.py", "rexrank.backend.privacy.*",
                        ("tests/test_private_rounding.py", "tests/test_private_attack.py", _PINS)),
    "metrics.crimson_text": ("metrics/crimson_text.py", "rexrank.metrics.crimson_text.*",
                             ("tests/test_crimson_official.py::test_answer_reader_repairs_and_refuses_as_the_official_one",
                              "tests/test_crimson_official.py::test_score_equals_the_official_on_every_answer",
                              "tests/test_crimson_official.py::test_prompt_messages_of_the_endpoint_paths_are_the_official_ones",
                              "tests/test_crimson_official.py::test_prompts_equal_the_reference_prompt_files", _PINS, _PINS_METRICS)),
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
                      _PINS)),
    "metrics.srr_bert": ("metrics/srr_bert.py", "rexrank.metrics.srr_bert.*", ("tests/test_srr_bert.py", _PINS, _PINS_METRICS)),
    # the per-study and corpus formulas alone against the fast tests: with test_srr_bert.py's model
    # tests, each mutant of srr_bert took a minute or more on the shared 2-core machine
    "metrics.srr_bert (formulas)": ("metrics/srr_bert.py", "rexrank.metrics.srr_bert.x_*_prf__mutmut_*",
                                    ("tests/test_srr_bert.py::test_weighted_scores_equal_sklearn_classification_report",
                                     "tests/test_srr_bert.py::test_per_study_rule_for_reports_without_labels", _PINS_METRICS)),
    # without the three views tests that build the Gradio app: each mutant's forked run imported
    # gradio again (about 15 s a mutant); what they check of the tables is in test_pins_leaderboard
    "leaderboard.tables": ("leaderboard/tables.py", "rexrank.leaderboard.tables.*",
                           ("tests/test_leaderboard_tables.py",
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
                            _PINS_BOARD)),
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
