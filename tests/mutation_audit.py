"""Mutation audit: deliberate small bugs in code whose numbers or rules reach users, each with
the tests that must catch it (issue 24).

    python tests/mutation_audit.py            # every mutant: make it, run its tests, restore
    python tests/mutation_audit.py --only ID  # one mutant
    python tests/mutation_audit.py --list     # the table, without running

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


# ---- issue 24: the five bugs that passed the whole suite before ---------------------------
_register(
    Mutant("inverted-ci", "CI of 1/RadCliQ-v1 and 1/FineRadScore as ci/mean instead of ci/mean²",
           "src/rexrank/results_schema.py", '"ci95": (ci / mean**2)', '"ci95": (ci / mean)',
           ("tests/test_results_schema.py",)),
    Mutant("bootstrap-level", "bootstrap CI at level 0.95 computed with alpha = 1 − level (a 90 % interval)",
           "src/rexrank/stats.py", "alpha = (1 - level) / 2", "alpha = 1 - level",
           ("tests/test_stats.py::test_bootstrap_interval_has_the_asked_level",
            "tests/test_stats.py::test_bootstrap_default_level_is_95_percent")),
    Mutant("coverage-boundary", "coverage rule with <= for < (exactly the share fails the request)",
           "src/rexrank/backend/worker.py", "if n and scored / n < self.min_coverage:",
           "if n and scored / n <= self.min_coverage:",
           ("tests/test_coverage.py::test_a_metric_exactly_at_the_coverage_share_passes",)),
    Mutant("coverage-not-run", "coverage rule's guard for a metric of the set that did not run disabled",
           "src/rexrank/backend/worker.py", "            if name not in results[\"metrics\"]:\n                short.append",
           "            if False:\n                short.append",
           ("tests/test_coverage.py::test_a_metric_of_the_set_that_did_not_run_fails_the_coverage_rule",)),
)


# ---- issue 23 (i23): GREEN's official batches and template, spaCy's scripts, no-section studies ----
_register(
    Mutant("green-resume-batches", "GREEN's runner told nothing of the official batches (cached answers and duplicates dropped)",
           "src/rexrank/metrics/green.py",
           'batches = [i // self.settings.batch_size for i in sent] if self.batching == "official" else None',
           "batches = None",
           ("tests/test_green_official.py::test_resumed_run_with_duplicates_generates_the_official_batches",)),
    Mutant("green-template-chained", "GREEN's template filled by chained replace (a reference's {CANDIDATE_REPORT} filled too)",
           "src/rexrank/metrics/green_text.py",
           "return _PLACEHOLDER.sub(lambda m: reports[m.group(1)], prompt_template())",
           'return prompt_template().replace("{REFERENCE_REPORT}", reports["REFERENCE_REPORT"])'
           '.replace("{CANDIDATE_REPORT}", reports["CANDIDATE_REPORT"])',
           ("tests/test_green.py::test_prompt_is_filled_in_one_pass_as_the_official_f_string",)),
    Mutant("ratescore-latin-only", "spaCy's character classes cut to Latin (no Greek, Cyrillic, CJK letters)",
           "src/rexrank/ratescore/tokens.py", 'for a, b in _CC["ranges"][name])',
           'for a, b in _CC["ranges"][name] if b < 0x250)',
           ("tests/test_ratescore_sentences.py",)),
    Mutant("neither-section-refused", "a study with neither findings nor impression refused again",
           "src/rexrank/testsets/schema.py",
           "    findings_impression = findings_impression_reference(raw_findings, raw_impression)",
           "    if findings is None and impression is None:\n        raise TestSetError(f\"{where}: has neither findings nor impression\")\n"
           "    findings_impression = findings_impression_reference(raw_findings, raw_impression)",
           ("tests/test_testsets.py::test_study_with_neither_section_is_kept_as_the_evaluation_script_keeps_it",)),
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
