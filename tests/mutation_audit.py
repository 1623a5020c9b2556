"""Mutation audit: deliberate small bugs in code whose numbers or rules reach users, each with
the tests that must catch it (issue 24).

    python tests/mutation_audit.py            # every mutant: make it, run its tests, restore
    python tests/mutation_audit.py --only ID  # one mutant
    python tests/mutation_audit.py --list     # the table, without running

Since issue 32 the mutation tool (mutmut, `python benchmarks/mutation.py`) decides what the
tests pin in the modules that decide published numbers and trust. This audit keeps what the
tool cannot make: constants outside any function (mutmut 3 mutates function bodies only),
changes that replace or add code rather than swap an operator or a constant, and code in
modules outside the tool's list, or not yet reached by a recorded run of it
(benchmarks/MUTATION.md). The entries the tool's operators make at the same place (issue 24's
inverted CI, bootstrap level, coverage boundary and guard (again after the rule moved to
`public_door.coverage_failure`), range upper bound; the skeleton's dashes; the inverted tier
step; ROUGE's stemmer default; the ranking direction, which mutmut inverts and sets to None in
`tables.ranked`; the request id's format check, whose `and` mutmut turns into `or`) were dropped.

A mutant is one exact text replacement in one source file. The runner applies it in the
working tree, runs the named tests (they must FAIL), and always restores the file. It prints
a Markdown table: mutant, where, the tests that ran, caught or MISSED. Exit 1 if any mutant
was missed. `tests/test_mutation_audit.py` keeps the table valid: every `find` text stands
exactly once in its file, so a refactor cannot leave a mutant that mutates nothing.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    id: str
    what: str  # the bug, in a reader's words
    file: str  # relative to the project root
    find: str  # exact text, present once
    replace: str
    tests: tuple[str, ...]  # pytest node ids or files that must fail

    def line(self) -> int:
        text = (ROOT / self.file).read_text(encoding="utf-8")
        return text[: text.index(self.find)].count("\n") + 1


MUTANTS: tuple[Mutant, ...] = ()  # filled in below, grouped by the code they mutate


def _register(*mutants: Mutant) -> None:
    global MUTANTS
    MUTANTS = MUTANTS + mutants


# ---- issue 32: constants outside any function, which mutmut 3 never mutates ---------------
_register(
    Mutant("paper-z", "the CI half-width as 1.645 x SEM (a 90 % interval) instead of the papers' 1.96",
           "src/rexrank/stats.py", "PAPER_Z = 1.96", "PAPER_Z = 1.645",
           ("tests/test_stats.py::test_aggregate_by_hand_with_none_and_nan_as_missing",)),
    Mutant("tier-alpha", "tiers split at a neighbour test's p < 0.1 instead of 0.05",
           "src/rexrank/leaderboard/tiers.py", "ALPHA = 0.05", "ALPHA = 0.1",
           ("tests/leaderboard/test_tiers.py::test_table_tiers_walk_by_hand",)),
    Mutant("quota-default-days", "the default quota window 1 day instead of 7",
           "src/rexrank/store/policy.py", "    days: float = 7.0", "    days: float = 1.0",
           ("tests/store/test_policy.py::test_the_quota_setting",)),
    Mutant("privacy-epsilon", "a private set's numbers published with epsilon 5 (10x less noise) instead of 0.5",
           "src/rexrank/backend/privacy.py", "EPSILON = 0.5  #", "EPSILON = 5.0  #",
           ("tests/backend/test_privacy.py::test_private_noise_is_calibrated_on_the_fewest_studies_a_mean_is_taken_over",)),
)


# ---- issue 19 (i19): push, then submit: the commit read, the submitter, whose token reads ----
_register(
    Mutant("hub-sha-pinning", "a Hub predictions dataset downloaded at the revision asked for (the branch's head "
           "at download time), not at the commit it resolved to",
           "src/rexrank/store/hub_predictions.py", "revision=dataset.sha,", "revision=dataset.revision,",
           ("tests/leaderboard/test_submit_hub.py::test_a_push_while_the_space_reads_changes_nothing",)),
    Mutant("whoami-identity", "on a Hub store, a typed submitter name stands in for the token's account",
           "src/rexrank/leaderboard/submit.py", "    if is_hub_store(store) or (token and not typed):\n",
           "    if not typed and (is_hub_store(store) or token):\n",
           ("tests/leaderboard/test_submit_hub.py::test_python_submit_uploads_a_local_file_through_the_same_api",)),
    Mutant("space-token-fallback", "the Space reads a submitter's dataset with its own HF_TOKEN (which can read "
           "the organisers' private requests repo)",
           "src/rexrank/leaderboard/submit.py", "hub_token=token or False,", "hub_token=None,",
           ("tests/leaderboard/test_submit_hub.py::test_the_space_reads_a_dataset_with_the_submitters_token_never_its_own",)),
    Mutant("hub-size-before-download", "a predictions dataset's size not checked from the Hub's metadata "
           "(downloaded first)",
           "src/rexrank/store/hub_predictions.py", "    if total > max_bytes():", "    if False:",
           ("tests/leaderboard/test_submit_hub.py::test_sizes_are_checked_from_the_metadata_before_any_download",)),
)


# ---- issue 20 (i20b): lookalike names, CSV formulas, result ranges, per-study path ------------
_PUBLIC = "tests/leaderboard/test_public_names_and_page.py"
_register(
    Mutant("csv-formula-escape", "CSV cells beginning with = + - @ tab CR written raw",
           "src/rexrank/leaderboard/downloads.py",
           """lambda v: "'" + v if isinstance(v, str) and v.startswith(FORMULA_START) else v""", "lambda v: v",
           (f"{_PUBLIC}::test_every_csv_cell_that_a_spreadsheet_would_run_is_escaped",)),
    Mutant("per-study-path-from-record", "the per-study file read from the path the record names",
           "src/rexrank/store/store.py",
           'path = R.per_study_path(str(record["test_set"]), str(record["track"]), str(record["id"]))',
           'path = record.get("per_study_path") or R.per_study_path(record["test_set"], record["track"], record["id"])',
           (f"{_PUBLIC}::test_a_per_study_path_in_a_record_is_never_read",)),
)


# ---- issue 19/20 (i19s): the server owns time and leases; cancel; request ids ----------------
_register(
    Mutant("quota-time-source", "an open request dated by its writer's submitted_time, not the server's register",
           "src/rexrank/store/records.py", 'out["submitted_time"] = out["received_time"] = when',
           'out["received_time"] = when',
           ("tests/store/test_trust.py::test_a_request_dated_by_its_writer_still_obeys_the_quota",)),
    Mutant("lease-clock", "a lease judged expired by comparing its holder's lease_expires with this host's clock",
           "src/rexrank/store/queue.py", "return self.observe(req) >= duration",
           'return (req.get("lease_expires") or 0) < time.time()',
           ("tests/store/test_trust.py::test_two_backends_whose_clocks_differ_by_15_minutes_score_each_request_once",)),
    Mutant("cancel-check", "the worker publishes without its conditional publishing step (only the lease flag)",
           "src/rexrank/backend/worker.py", "if keeper.lost.is_set() or not self.store.begin_publish(rid, self.worker_id):",
           "if keeper.lost.is_set():",
           ("tests/store/test_trust.py::test_a_cancel_just_before_publication_publishes_nothing",)),
)


# ---- issue 20 (i20a): input limits and the private noise ----------------------------------
_register(
    Mutant("privacy-noise-scale", "Laplace noise on a private mean 10x too small (sensitivity w / 10n)",
           "src/rexrank/backend/privacy.py", 'return {"mean": width / n, "ci95"', 'return {"mean": width / n / 10, "ci95"',
           ("tests/backend/test_private_attack.py::test_the_boundary_attack_does_no_better_than_epsilon_allows",
            "tests/backend/test_private_attack.py::test_the_noise_is_calibrated_and_unpredictable")),
    Mutant("privacy-ci-sensitivity", "CI half-width's sensitivity without the 1.96 (noise too small for the CI)",
           "src/rexrank/backend/privacy.py", '"ci95": CI_FACTOR * width / math.sqrt(n * (n - 1))}',
           '"ci95": width / math.sqrt(n * (n - 1))}',
           ("tests/backend/test_private_attack.py::test_the_noise_is_calibrated_and_unpredictable",)),
    Mutant("input-row-limit", "row limit checked at 1000x MAX_ROWS (a parquet bomb's rows are read)",
           "src/rexrank/input_limits.py", "    if n > MAX_ROWS:\n", "    if n > MAX_ROWS * 1000:\n",
           ("tests/test_input_limits.py::test_a_parquet_bomb_is_refused_from_its_metadata",
            "tests/test_input_limits.py::test_rows_values_and_characters_are_limited")),
    Mutant("input-byte-cap", "byte cap checked at 4x the limit before opening (the file is opened and read)",
           "src/rexrank/input_limits.py", "    if st.st_size > cap:\n", "    if st.st_size > cap * 4:\n",
           ("tests/test_input_limits.py::test_text_files_are_read_with_a_byte_cap",)),
)


# ---- issue 22 (i22m): ROUGE, Temporal F1 and SRR-BERT formulas ----------------------------------
_register(
    Mutant("temporal-empty-reference", "Temporal F1 gives 0 instead of epsilon when only the prediction has temporal words",
           "src/rexrank/metrics/temporal_f1.py", "return 1.0 if not prediction else epsilon",
           "return 1.0 if not prediction else 0.0",
           ("tests/metrics/test_temporal_f1.py::test_per_study_equals_radeval_where_cleanup_and_ner_disagree",)),
    Mutant("srr-bert-per-study-f1", "SRR-BERT per-study F1 without RadEval's eps in the denominator",
           "src/rexrank/metrics/srr_bert.py", "2 * tp / (2 * tp + fp + fn + eps)", "2 * tp / np.maximum(2 * tp + fp + fn, 1)",
           ("tests/metrics/test_srr_bert.py::test_per_study_and_corpus_equal_radeval_on_iu_xray",)),
    Mutant("srr-bert-weighted-by-predictions", "SRR-BERT corpus F1 weighted by predicted instead of reference label counts",
           "src/rexrank/metrics/srr_bert.py", "weights = support / support.sum()", "weights = predicted / max(predicted.sum(), 1)",
           ("tests/metrics/test_srr_bert.py::test_weighted_scores_equal_sklearn_classification_report",)),
)


# ---- issue 23 (i23): GREEN's official batches and template, spaCy's scripts, no-section studies ----
_register(
    Mutant("green-resume-batches", "GREEN's runner told nothing of the official batches (cached answers and duplicates dropped)",
           "src/rexrank/metrics/green.py",
           'batches = [i // self.settings.batch_size for i in sent] if self.batching == "official" else None',
           "batches = None",
           ("tests/metrics/test_green_official.py::test_resumed_run_with_duplicates_generates_the_official_batches",)),
    Mutant("green-template-chained", "GREEN's template filled by chained replace (a reference's {CANDIDATE_REPORT} filled too)",
           "src/rexrank/metrics/green_text.py",
           "return _PLACEHOLDER.sub(lambda m: reports[m.group(1)], prompt_template())",
           'return prompt_template().replace("{REFERENCE_REPORT}", reports["REFERENCE_REPORT"])'
           '.replace("{CANDIDATE_REPORT}", reports["CANDIDATE_REPORT"])',
           ("tests/metrics/test_green.py::test_prompt_is_filled_in_one_pass_as_the_official_f_string",)),
    Mutant("ratescore-latin-only", "spaCy's character classes cut to Latin (no Greek, Cyrillic, CJK letters)",
           "src/rexrank/ratescore/tokens.py", 'for a, b in _CC["ranges"][name])',
           'for a, b in _CC["ranges"][name] if b < 0x250)',
           ("tests/ratescore/test_sentences.py",)),
    Mutant("neither-section-refused", "a study with neither findings nor impression refused again",
           "src/rexrank/testsets/schema.py",
           "    findings_impression = findings_impression_reference(raw_findings, raw_impression)",
           "    if findings is None and impression is None:\n        raise TestSetError(f\"{where}: has neither findings nor impression\")\n"
           "    findings_impression = findings_impression_reference(raw_findings, raw_impression)",
           ("tests/testsets/test_loading.py::test_study_with_neither_section_is_kept_as_the_evaluation_script_keeps_it",)),
)


# ---- issue 22 (i22c): CRIMSON's score formula, answer reader and prompt ----------------------
_register(
    Mutant("crimson-partial-credit", "CRIMSON: a matched finding with attribute errors earns the credit factor, not weight x factor",
           "src/rexrank/metrics/crimson_text.py", "correct += base * share", "correct += share",
           ("tests/metrics/test_crimson_official.py",)),
    Mutant("crimson-negative-branch", "CRIMSON: a negative S kept as the score instead of -d/(1+d)",
           "src/rexrank/metrics/crimson_text.py", "value = -1 * excess / (1 + excess) if excess > 0 else 0", "value = s",
           ("tests/metrics/test_crimson_official.py",)),
    Mutant("crimson-last-key-wins", "CRIMSON answer reader: a repeated JSON key keeps its last value, not its first",
           "src/rexrank/metrics/crimson_text.py", "out.setdefault(key, value)", "out[key] = value",
           ("tests/metrics/test_crimson_official.py",)),
    Mutant("crimson-guidelines", "CRIMSON prompt: guideline sections sent to the fine-tuned judge, which was trained without them",
           "src/rexrank/metrics/crimson.py", "return (not self.fine_tuned_judge) if self.guidelines is None else self.guidelines",
           "return True if self.guidelines is None else self.guidelines",
           ("tests/metrics/test_crimson_official.py",)),
)


# ---- issue 21 (i21): tiers on the board and the ranking's direction ----------------------------
_VIEWS = "tests/leaderboard/test_views.py"
_register(
    Mutant("tier-without-holm", "tiers from the raw neighbour p-values, without the Holm correction",
           "src/rexrank/leaderboard/tiers.py", "    adjusted = holm(p_values)\n", "    adjusted = p_values\n",
           (f"{_VIEWS}::test_holm_correction_decides_a_tie_that_raw_p_values_would_split",)),
)



# ---- issue 23: one joint pass, huge pages ------------------------------------------------
_register(
    Mutant("two-passes-again", "predictions through the model in a second pass, apart from the uncached references",
           "src/rexrank/refcache.py",
           "    todo = list(dict.fromkeys([*missing, *(text for text in predictions if text not in values)]))\n    if todo:",
           "    extra = [t for t in dict.fromkeys(predictions) if t not in values and t not in missing]\n"
           "    if extra:\n        values.update(zip(extra, compute(extra)))\n    todo = list(dict.fromkeys(missing))\n    if todo:",
           ("tests/models/test_run_sharing.py::test_both_sides_go_through_the_model_in_one_pass",)),
    Mutant("huge-pages-override", "rexrank overrides a user's THP_MEM_ALLOC_ENABLE=0",
           "src/rexrank/models/huge_pages.py", "os.environ.setdefault(VARIABLE, \"1\")", "os.environ[VARIABLE] = \"1\"",
           ("tests/models/test_huge_pages.py",)),
)


# ---- issue 28: the private set behind one door, the ledger ---------------------------------
_register(
    Mutant("exact-coverage-decision", "the private coverage rule decided without its noise (exact, as before)",
           "src/rexrank/backend/public_door.py", "min(gaps) + float(rng.laplace(0.0, 1.0 / P.EPSILON_DECISION))",
           "min(gaps) + 0 * float(rng.laplace(0.0, 1.0 / P.EPSILON_DECISION))",
           ("tests/backend/test_private_door.py::test_the_length_probe_learns_no_more_than_epsilon_allows",)),
    Mutant("ledger-never-refuses", "the ledger charges but never refuses",
           "src/rexrank/store/ledger.py", "if spent + cost > limit.total + 1e-9:", "if False:",
           ("tests/backend/test_public_door.py::test_the_ledger_charges_each_request_once_within_its_window",
            "tests/backend/test_public_door.py::test_the_worker_refuses_a_private_request_over_budget_before_scoring")),
    Mutant("track-ids-on-private", "a private set's predictions validated against the track's ids again",
           "src/rexrank/backend/public_door.py", "every_id = sorted({*studies.ids, *studies.outside_ids})",
           "every_id = sorted(studies.ids)",
           ("tests/backend/test_private_door.py::test_leaving_out_a_study_does_not_say_whether_it_has_findings",)),
)

# ---- issue 29: the backend as a dispatcher over Jobs ----------------------------------------
_D = "tests/backend/test_dispatch.py::"
_KILLED_VANISHED_ADOPTED = (_D + "test_killed_and_vanished_jobs_are_started_again_and_a_restarted_dispatcher_adopts"
                            "_the_running_ones")
_register(
    Mutant("shard-boundaries", "shard boundaries anywhere, not between the LLM judges' official batches",
           "src/rexrank/backend/shards.py", "align = math.lcm(*(rule.align for rule in rules.values()))",
           "align = 1", (_D + "test_shard_boundaries_fall_between_the_official_llm_batches",)),
    Mutant("adopt-nothing", "a restarted dispatcher ignores the Jobs it finds by their labels",
           "src/rexrank/backend/dispatch.py", "found = self.jobs.list({LABEL_REQUEST: rid})\n        recorded",
           "found = []\n        recorded", (_KILLED_VANISHED_ADOPTED,)),
    Mutant("token-in-env", "the store token passed in the Job's environment instead of as a secret",
           "src/rexrank/backend/dispatch.py", '            secrets["HF_TOKEN"] = token\n',
           '            env["HF_TOKEN"] = token\n', (_D + "test_the_store_token_is_a_job_secret_only",)),
    Mutant("cancel-leaves-jobs", "a cancelled request's Jobs go on running",
           "src/rexrank/backend/dispatch.py", "                    self.jobs.cancel(job.job_id)\n",
           "                    pass\n", (_D + "test_cancel_mid_run_cancels_every_job_and_publishes_nothing",)),
    Mutant("no-shard-retry", "a failed shard Job is not started again",
           "src/rexrank/backend/dispatch.py", "if shard.failures >= self.settings.shard_attempts:",
           "if shard.failures >= 1:", (_KILLED_VANISHED_ADOPTED,)),
)

# ---- issue 38: scale-out on the real Hub (and issue 40's held-out bugs 2-4) ---------------------
_P, _F = "tests/backend/test_dispatch_plan.py::", "tests/backend/test_dispatch_faults.py::"
_register(
    Mutant("speed-multiplies", "a flavour's relative speed multiplies the reference time (a slower GPU estimated faster)",
           "src/rexrank/backend/shards.py", "    return h100 / factor\n", "    return h100 * factor\n",
           (_P + "test_a_slower_gpu_takes_longer_and_costs_its_own_hours",)),
    Mutant("jobs-cap-off-by-one", "max_jobs + 1 Jobs run at once",
           "src/rexrank/backend/dispatch.py", "return running < self.settings.max_jobs",
           "return running <= self.settings.max_jobs", (_P + "test_no_more_jobs_run_at_once_than_max_jobs",
                                                        _P + "test_a_job_starts_only_while_fewer_than_max_jobs_run")),
    Mutant("prices-over-config", "the price table merged over the store's flavor_prices instead of under them",
           "src/rexrank/backend/shards.py", "PriceList({**self.per_hour, **prices},",
           "PriceList({**prices, **self.per_hour},", (_P + "test_configured_prices_win_over_the_hubs_and_the_tables",)),
    Mutant("takeover-cancels", "a dispatcher that lost its lease cancels the Jobs the new holder adopted",
           "src/rexrank/backend/dispatch.py", "            if holder == GONE:\n                return self._let_go(rid)\n",
           "            if holder == GONE:\n                self._stop_jobs(rid)\n                return self._let_go(rid)\n",
           (_F + "test_a_dispatcher_that_lost_its_lease_leaves_the_running_jobs_to_the_new_holder",)),
    Mutant("private-plan-by-track", "a private request planned (K, ceiling) from its track's size",
           "src/rexrank/backend/dispatch.py",
           "public = len(studies.ids) + len(studies.outside_ids) if resolved.private else None",
           "public = None", (_P + "test_a_private_requests_ceiling_refusal_comes_from_the_sets_public_size",
                             _P + "test_a_private_requests_jobs_labels_and_logs_do_not_depend_on_its_track")),
)

def run_one(mutant: Mutant, *, timeout: float) -> tuple[bool, float, str]:
    """(caught, seconds, last line of pytest's output)."""
    path = ROOT / mutant.file
    original = path.read_text(encoding="utf-8")
    if original.count(mutant.find) != 1:
        raise SystemExit(f"{mutant.id}: the text to mutate stands {original.count(mutant.find)} times in {mutant.file}")
    path.write_text(original.replace(mutant.find, mutant.replace), encoding="utf-8")
    started = time.monotonic()
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "datasets_scripts"),
                                                             os.environ.get("PYTHONPATH", "")])}
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *mutant.tests],
                              cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
        tail = (done.stdout.strip().splitlines() or [""])[-1]
        caught = done.returncode not in (0, 5)  # 5: no test collected is no catch
    except subprocess.TimeoutExpired:
        caught, tail = False, f"timed out after {timeout:.0f} s"
    finally:
        path.write_text(original, encoding="utf-8")
    return caught, time.monotonic() - started, tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help="run this mutant id (repeatable)")
    parser.add_argument("--list", action="store_true", help="print the table without running")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per mutant (default 900)")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.only or m.id in args.only]
    unknown = set(args.only or ()) - {m.id for m in MUTANTS}
    if unknown:
        raise SystemExit(f"unknown mutant(s): {', '.join(sorted(unknown))}")
    print("| mutant | deliberate bug | where | caught by | result |")
    print("|---|---|---|---|---|")
    missed = 0
    for m in chosen:
        where = f"`{m.file}:{m.line()}`"
        tests = ", ".join(f"`{t}`" for t in m.tests)
        if args.list:
            print(f"| {m.id} | {m.what} | {where} | {tests} | |", flush=True)
            continue
        caught, seconds, tail = run_one(m, timeout=args.timeout)
        missed += not caught
        print(f"| {m.id} | {m.what} | {where} | {tests} | {'caught' if caught else 'MISSED'} ({seconds:.0f} s: {tail}) |",
              flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
