"""Tables per stratum of any study-level attribute (normal vs abnormal, site, sex, ...).

Normal vs abnormal: the test set's own label (`is_abnormal`, ReXGradient) when present.
Otherwise it is *derived* from the reference report with a labeller returning CheXbert's
"No Finding" flag (normal = "No Finding" positive) — an approximation, recorded in the
output's notes: CheXbert's "No Finding" is positive when no condition is mentioned as
present, which is not the same as a radiologist's normal/abnormal call. The labeller is
injectable (`labeller=`: texts -> sequence of bools, True = "No Finding"); by default it
is CheXbert via `rexrank.models.chexbert` (see `chexbert_no_finding_labeller`).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd

from rexrank.analysis.io import AnalysisError, RunSet
from rexrank.analysis.uncertainty import DEFAULT_RESAMPLES, bootstrap_means, complete_cases, rank_intervals, summary_row

NoFindingLabeller = Callable[[Sequence[str]], Sequence[bool]]
ALL = "all"
MISSING = "(missing)"
ABNORMAL_ATTRIBUTE = "normal_abnormal"


def chexbert_no_finding_labeller(**options) -> NoFindingLabeller:
    """CheXbert's "No Finding" head (`rexrank.models.chexbert.CheXbert`, the labeller behind
    SembScore and CheXbert F1): True when it says *positive* ("No Finding" has only blank /
    positive). `options` go to `CheXbert(...)` (e.g. checkpoint_path= for a local
    chexbert.pth). The model is loaded on first call; offline without the checkpoint that
    fails with CheXbert's own message."""

    def labeller(texts: Sequence[str]) -> list[bool]:
        try:
            from rexrank.models.chexbert import CLASSES, CONDITIONS, CheXbert  # heavy (torch)
        except ImportError as exc:
            raise AnalysisError(
                "normal vs abnormal: the test set has no `is_abnormal` label and the CheXbert labeller "
                f"is not available ({exc}); install rexrank[models] or give an attributes CSV with an "
                "`is_abnormal` column"
            ) from exc
        model = CheXbert(**options)
        column, positive = CONDITIONS.index("No Finding"), CLASSES.index("positive")
        return [int(labels[column]) == positive for _, labels in model.encode(list(texts), progress=True)]

    return labeller


def normal_abnormal(
    attrs: pd.DataFrame | None,
    references: pd.Series | None = None,
    *,
    labeller: NoFindingLabeller | None = None,
) -> tuple[pd.Series, str]:
    """("normal" / "abnormal" per study, how it was obtained)."""
    if attrs is not None and "is_abnormal" in attrs.columns:
        flags = attrs["is_abnormal"]
        if flags.isna().any():
            bad = flags.index[flags.isna()][:5].tolist()
            raise AnalysisError(f"is_abnormal is missing for {int(flags.isna().sum())} studies (e.g. {bad})")
        values = flags.map(_as_bool)
        return values.map({True: "abnormal", False: "normal"}).rename(ABNORMAL_ATTRIBUTE), "test set label `is_abnormal`"
    if references is None:
        raise AnalysisError("normal vs abnormal: no `is_abnormal` attribute and no reference texts to label")
    labeller = labeller or chexbert_no_finding_labeller()
    texts = references.fillna("").astype(str).tolist()
    no_finding = list(labeller(texts))
    if len(no_finding) != len(texts):
        raise AnalysisError(f"labeller returned {len(no_finding)} labels for {len(texts)} reports")
    series = pd.Series(["normal" if bool(v) else "abnormal" for v in no_finding], index=references.index,
                       name=ABNORMAL_ATTRIBUTE)
    return series, "derived from the reference report: CheXbert \"No Finding\" positive = normal (approximation)"


def _as_bool(value) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.strip().lower() in ("true", "1", "yes")
    raise AnalysisError(f"is_abnormal: cannot read {value!r} as true/false")


def stratum_labels(attrs: pd.DataFrame, by: str) -> pd.Series:
    if by not in attrs.columns:
        from rexrank.suggest import did_you_mean

        known = list(map(str, attrs.columns))
        raise AnalysisError(f"no study attribute {by!r}{did_you_mean(by, known)}; available: {', '.join(known)}")
    values = attrs[by]
    return values.astype(object).where(values.notna(), MISSING).astype(str)


def summary_table(
    runs: RunSet,
    *,
    strata: pd.Series | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    metrics: Sequence[str] | None = None,
) -> pd.DataFrame:
    """One row per (stratum, metric, system): n, mean, normal and bootstrap CIs, rank and
    bootstrap rank interval. `strata` maps study id -> stratum label (None = all studies)."""
    groups = [(ALL, runs.ids)] if strata is None else [
        (str(label), ids) for label, ids in strata.loc[runs.ids].groupby(strata.loc[runs.ids]).groups.items()
    ]
    rows = []
    for label, ids in groups:
        for metric in metrics or runs.metrics:
            frame = runs.matrix(metric, ids)
            complete, n_excluded = complete_cases(frame)
            boot = {}
            if resamples and len(frame) >= 2:
                if not n_excluded:  # one draw of the studies for all systems
                    means = bootstrap_means(frame.to_numpy(), resamples=resamples, seed=seed)
                    low, high = np.quantile(means, [0.025, 0.975], axis=0)
                    boot = {s: (lo, hi) for s, lo, hi in zip(runs.systems, low, high)}
                else:  # each system on the studies it scored
                    for s in runs.systems:
                        col = frame[s].dropna().to_numpy()
                        if col.size >= 2:
                            means = bootstrap_means(col, resamples=resamples, seed=seed)[:, 0]
                            boot[s] = np.quantile(means, [0.025, 0.975])
            ranks = None
            if resamples and len(complete) >= 2 and len(runs.systems) > 1:
                ranks = rank_intervals(complete, higher_is_better=runs.higher_is_better(metric),
                                       resamples=resamples, seed=seed).set_index("system")
            for s in runs.systems:
                low, high = boot.get(s, (None, None))
                row = {"stratum": label, "metric": metric, "system": s,
                       **summary_row(frame[s].to_numpy(), boot_low=low, boot_high=high)}
                if ranks is not None:
                    row.update(rank=int(ranks.at[s, "rank"]), rank_low=int(ranks.at[s, "rank_low"]),
                               rank_high=int(ranks.at[s, "rank_high"]), n_ranked=len(ranks))  # systems ranked
                rows.append(row)
    return pd.DataFrame(rows)
