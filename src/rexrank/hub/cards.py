"""Dataset cards (README.md with YAML metadata) for the repos deploy creates."""
from __future__ import annotations

import yaml


def card(metadata: dict, body: str) -> bytes:
    front = yaml.safe_dump(metadata, sort_keys=False, allow_unicode=True).strip()
    return f"---\n{front}\n---\n\n{body.strip()}\n".encode()


def requests_card(org: str) -> bytes:
    return card(
        {"pretty_name": "ReXrank requests", "license": "other", "tags": ["rexrank", "leaderboard"]},
        f"""
# ReXrank requests (`{org}/requests`)

The submission queue of the ReXrank leaderboard on `hf://{org}`. **Private**: it holds the
submitted predictions. The leaderboard Space (`{org}/leaderboard`) files requests, the
backend Space (`{org}/backend`) claims, scores and closes them.

| path | content |
|---|---|
| `queue/<id>.json` | one request: submitter (Hub id and name), namespace, model, test set, track, status (PENDING, RUNNING, HELD for review, FINISHED, FAILED) |
| `predictions/<id>/test.parquet` | its predictions (`id`, `prediction`) |
| `copies/` | per-study fingerprints of each filing (who filed which predictions first: `rexrank review`) |

Read it with `rexrank status --store hf://{org}`. Do not edit files by hand while a backend runs:
every write is a commit made against the version read (a stale one is refused).
""")


def results_card(org: str) -> bytes:
    return card(
        {"pretty_name": "ReXrank results", "license": "mit",
         "tags": ["rexrank", "leaderboard", "radiology", "report-generation", "chest-x-ray"]},
        f"""
# ReXrank results (`{org}/results`)

The results behind the ReXrank leaderboard (`{org}/leaderboard`), written by the backend Space
(`{org}/backend`). Public.

| path | content |
|---|---|
| `records/<test_set>/<track>/<id>.json` | one result: model, test set, track, per metric n / mean / 95 % CI, provenance |
| `per_study/<test_set>/<track>/<id>.parquet` | per-study scores (public test sets only) |

Private test sets (ReXGradient) have aggregate numbers only: no per-study scores, ids or texts.
The first deploy seeds the repo with the published ReXrank leaderboard (rajpurkarlab/ReXrank,
branch gh-pages, `results/`, MIT, 2025-09 snapshot; system-level means, no CIs).

Read: `rexrank.store.open_store("hf://{org}").list_results()`, or serve the leaderboard
locally with `rexrank leaderboard --store hf://{org}`.
""")
