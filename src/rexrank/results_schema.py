"""The leaderboard's columns and how a scoring run's results map onto them.

Shared by the backend (which writes result records), `import-published` (which seeds the
published ReXrank tables) and the leaderboard Space (which renders them).

A result record (one model on one test set and track) is a JSON object:
    {"id", "model_name", "institution", "model_url", "submitter", "date",
     "namespace" (a submitted model's Hub namespace: the board shows "namespace / model_name"),
     "model_repo" (a linked Hub model repo of that namespace's, when one was linked),
     "test_set", "track", "source": "rexrank" | "published",
     "trained_on": [test set names], "per_study_available": bool,
     "values": {column key: {"mean": float, "ci95": float | None, "n": int | None}},
     "provenance": {...}}
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Column:
    key: str  # key in a record's "values"
    display: str  # header on the ReXrank site and in its published CSVs
    metric: str  # rexrank metric that produces it
    higher_is_better: bool = True
    # not a column of the published ReXrank tables: never the default ranking, and hidden by
    # default once the leaderboard lets users choose columns
    optional: bool = False
    # the per-study column rexrank.scoring writes for it ("" = the key), and whether the board
    # shows 1 / mean of it (tests on per-study scores use the scores themselves)
    per_study: str = ""
    inverted: bool = False

    @property
    def per_study_column(self) -> str:
        return self.per_study or self.key


# In the order the ReXrank site shows them.
LEADERBOARD_COLUMNS: tuple[Column, ...] = (
    Column("bleu2", "BLEU", "bleu2"),
    Column("bertscore", "BertScore", "bertscore"),
    Column("sembscore", "SembScore", "sembscore"),
    Column("radgraph", "RadGraph", "radgraph"),
    Column("radcliq_v1_inv", "1/RadCliQ-v1", "radcliq", per_study="radcliq_v1", inverted=True),
    Column("ratescore", "RaTEScore", "ratescore"),
    Column("green", "GREEN", "green"),
    Column("fineradscore_inv", "1/FineRadScore", "fineradscore", per_study="fineradscore", inverted=True),
    # RadEval's metrics that ReXrank does not publish
    Column("rouge", "ROUGE-L", "rouge", optional=True),
    Column("temporal_f1", "Temporal F1", "temporal_f1", optional=True),
    Column("srr_bert", "SRR-BERT F1", "srr_bert", optional=True),
    Column("crimson", "CRIMSON", "crimson", optional=True),
)
COLUMNS_BY_KEY = {c.key: c for c in LEADERBOARD_COLUMNS}
DEFAULT_RANK_KEY = "radcliq_v1_inv"

# Published CSV file stems (shared/data/published/current) -> (test set, track)
PUBLISHED_FILES = {
    "findings_result_iu_xray": ("iu_xray", "findings"),
    "findings_result_mimiccxr": ("mimic_cxr", "findings"),
    "findings_result_chexpertplus": ("chexpert_plus", "findings"),
    "findings_result_gradienthealth": ("rexgradient", "findings"),
    "result_iu_xray": ("iu_xray", "findings_impression"),
    "result_mimiccxr": ("mimic_cxr", "findings_impression"),
    "result_chexpertplus": ("chexpert_plus", "findings_impression"),
    "result_gradienthealth": ("rexgradient", "findings_impression"),
}


# The smallest rescaled BERTScore F: cosine F1 is at least -1, rescaled (x - b) / (1 - b)
# with the distilroberta-base layer-5 baseline b (rexrank.metrics.bertscore)
BERTSCORE_F_BASELINE = 0.8473319
BERTSCORE_MIN = (-1.0 - BERTSCORE_F_BASELINE) / (1.0 - BERTSCORE_F_BASELINE)
FINERADSCORE_MAX = 4.0  # a report's FineRadScore is its largest line severity, 0 (none) to 4 (emergent)


@lru_cache(maxsize=1)
def _radcliq_v1_bounds() -> tuple[float, float]:
    """The smallest and largest mean RadCliQ-v1 (radgraph, BLEU-2 0..1; SembScore -1..1;
    BERTScore BERTSCORE_MIN..1)."""
    from rexrank.metrics.radcliq_formula import radcliq_v1_extremes

    return radcliq_v1_extremes(radgraph=(0.0, 1.0), bertscore=(BERTSCORE_MIN, 1.0), semb=(-1.0, 1.0), bleu2=(0.0, 1.0))


# a per-study column that repeats another column's number: `rouge`'s primary value is ROUGE-L,
# which the metric also reports as `rougeL` beside ROUGE-1 and ROUGE-2. Shown once, as the primary.
SAME_AS = {"rougeL": "rouge"}


# per-study scores that are no leaderboard column: the ROUGE module's other F1s, and the
# per-study RadCliQ-v1 and FineRadScore whose means the board shows inverted
SCORE_LABELS = {"rouge1": "ROUGE-1", "rouge2": "ROUGE-2",
                **{c.per_study_column: c.display.removeprefix("1/") for c in LEADERBOARD_COLUMNS if c.inverted}}


def metric_label(key: str) -> str:
    """The one name a metric's key (a leaderboard column or a per-study score column) is shown
    under: the leaderboard's header, in `score`'s table, `analyze`'s tables, report and figures;
    an unknown key is its own label. The key stays the identifier (`--metrics`, per-study
    columns, file names)."""
    key = SAME_AS.get(key, key)
    if key in COLUMNS_BY_KEY:
        return COLUMNS_BY_KEY[key].display
    return SCORE_LABELS.get(key, key)


def repeated_columns(columns) -> set[str]:
    """The columns among `columns` that repeat another of them (SAME_AS): left out of tables and figures."""
    columns = set(columns)
    return {c for c, primary in SAME_AS.items() if c in columns and primary in columns}


def value_in_range(key: str, mean: float) -> tuple[bool, str]:
    """Whether a leaderboard column's mean is one its metric can produce, and the range in
    words (the leaderboard ranks no value outside it)."""
    if key in ("bleu2", "radgraph", "ratescore", "green", "rouge", "temporal_f1", "srr_bert"):
        return 0.0 <= mean <= 1.0, "0 to 1"
    if key == "crimson":  # a significance-weighted score in (-1, 1]
        return -1.0 < mean <= 1.0, "above -1, at most 1"
    if key == "sembscore":
        return -1.0 <= mean <= 1.0, "-1 to 1"
    if key == "bertscore":
        return BERTSCORE_MIN <= mean <= 1.0, f"{BERTSCORE_MIN:.2f} to 1"
    if key == "fineradscore_inv":  # 1 / mean severity, the mean being 0..4
        return mean >= 1.0 / FINERADSCORE_MAX, f"at least {1 / FINERADSCORE_MAX:g}"
    if key == "radcliq_v1_inv":  # 1 / mean RadCliQ-v1: the mean lies between the formula's extremes
        low, high = _radcliq_v1_bounds()
        return mean != 0 and low <= 1.0 / mean <= high, f"1/x for x from {low:.3f} to {high:.3f}"
    return True, "any"


def _summary(results: dict, metric: str, column: str) -> dict | None:
    entry = results.get("metrics", {}).get(metric)
    if not entry:
        return None
    return entry.get("scores", {}).get(column)


def _inverse(summary: dict | None) -> dict | None:
    """1 / mean with a delta-method CI half-width (ci / mean²): how ReXrank shows
    RadCliQ-v1 and FineRadScore (1 / mean of per-study scores)."""
    if not summary or not summary.get("mean"):
        return None
    mean = summary["mean"]
    ci = summary.get("ci95")
    return {"mean": 1.0 / mean, "ci95": (ci / mean**2) if ci is not None else None, "n": summary.get("n")}


def leaderboard_values(results: dict) -> dict[str, dict]:
    """Leaderboard values from a scoring run's results JSON (see rexrank.scoring)."""
    values: dict[str, dict] = {}
    for key, metric, column in (
        ("bleu2", "bleu2", "bleu2"),
        ("bertscore", "bertscore", "bertscore"),
        ("sembscore", "sembscore", "sembscore"),
        ("radgraph", "radgraph", "radgraph"),
        ("ratescore", "ratescore", "ratescore"),
        ("green", "green", "green"),
        ("rouge", "rouge", "rouge"),
        ("temporal_f1", "temporal_f1", "temporal_f1"),
        ("srr_bert", "srr_bert", "srr_bert"),
        ("crimson", "crimson", "crimson"),
    ):
        s = _summary(results, metric, column)
        if s is not None:
            values[key] = {"mean": s["mean"], "ci95": s.get("ci95"), "n": s.get("n")}
    # RadCliQ is also computed inside `radcliq`, FineRadScore inside `fineradscore`
    for key, metric, column in (("radcliq_v1_inv", "radcliq", "radcliq"), ("fineradscore_inv", "fineradscore", "fineradscore")):
        inv = _inverse(_summary(results, metric, column))
        if inv is not None:
            values[key] = inv
    return values
