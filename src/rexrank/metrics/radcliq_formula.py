"""RadCliQ-v0 and RadCliQ-v1 from their four components (reference metrics_nonllm.md §5).

Source of the numbers: the pickles of rajpurkarlab/CXR-Report-Metric (MIT, Stanford ML Group),
read at commit 8495627 ("Updated composite metric computation to RadCliQ-v1"):
- v0: `normalizer.pkl` (StandardScaler) + `composite_metric_model.pkl` (LinearRegression):
  v0 = ((x - mean) / scale) @ coef + intercept;
- v1: `radcliq-v1.pkl` (`CompositeMetric`): v1 = [(x - mean) / scale, 1] @ coefs.
x = [radgraph_combined, bertscore (rescaled F), semb_score, bleu_score (BLEU-2)], in that
order. Lower is better; ReXrank shows 1 / mean(per-study RadCliQ-v1).

The operations follow sklearn's order (subtract the mean, divide by the scale, then the dot
product), which reproduces the official per-study columns to < 1e-7.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

FEATURES = ("radgraph", "bertscore", "semb", "bleu2")  # official COLS order

V0_MEAN = np.array([0.5398376019082272, 0.6312549595000001, 0.7716797866672277, 0.4607372064809605])
V0_SCALE = np.array([0.3018344440559102, 0.22466950746141123, 0.24750333805236252, 0.30336670936092264])
V0_COEF = np.array([-0.4796252644863446, -0.6762170542369337, -0.46366575161751994, 0.2165861905287535])
V0_INTERCEPT = 1.641666666666666

V1_MEAN = np.array([0.5379231241355762, 0.6175725628125001, 0.7647942121140658, 0.44738335396242174])
V1_SCALE = np.array([0.3028258411486429, 0.22430938459304575, 0.2539439110169773, 0.2989271671041838])
# the last entry multiplies the constant 1 (intercept)
V1_COEFS = np.array(
    [-0.37708368261038905, -0.37030009974480316, -0.25261621789593225, 4.3150484050247560e-12, 2.4665525613232559e-10]
)

VERSIONS = ("v0", "v1")


def _features(radgraph, bertscore, semb, bleu2) -> tuple[np.ndarray, bool]:
    columns = [np.asarray(v, dtype=np.float64) for v in (radgraph, bertscore, semb, bleu2)]
    scalar = all(c.ndim == 0 for c in columns)
    columns = [np.atleast_1d(c) for c in columns]
    lengths = {len(c) for c in columns}
    if len(lengths) != 1 or any(c.ndim != 1 for c in columns):
        shapes = ", ".join(f"{n}={c.shape}" for n, c in zip(FEATURES, columns))
        raise ValueError(f"radcliq_from_components: components must be floats or 1-d sequences of one length; got {shapes}")
    return np.stack(columns, axis=1), scalar


def radcliq_from_components(
    *, radgraph: float | Sequence[float], bertscore: float | Sequence[float], semb: float | Sequence[float],
    bleu2: float | Sequence[float], version: str = "v1",
) -> float | np.ndarray:
    """Per-study RadCliQ (`version` "v1" or "v0") from radgraph_combined, rescaled BERTScore
    F, SembScore and BLEU-2. Floats in -> float out; sequences in -> numpy array out."""
    if version not in VERSIONS:
        raise ValueError(f"radcliq_from_components: version must be one of {VERSIONS}, got {version!r}")
    x, scalar = _features(radgraph, bertscore, semb, bleu2)
    if version == "v0":
        values = ((x - V0_MEAN) / V0_SCALE) @ V0_COEF + V0_INTERCEPT
    else:
        normed = (x - V1_MEAN) / V1_SCALE
        values = np.concatenate([normed, np.ones((len(x), 1))], axis=1) @ V1_COEFS
    return float(values[0]) if scalar else values


def radcliq_v1_extremes(*, radgraph: tuple[float, float], bertscore: tuple[float, float],
                        semb: tuple[float, float], bleu2: tuple[float, float]) -> tuple[float, float]:
    """The lowest and highest RadCliQ-v1 when each component lies in its (low, high) range:
    the formula is linear in its components, so the extremes lie at the corners."""
    import itertools

    corners = [radcliq_from_components(radgraph=g, bertscore=b, semb=s, bleu2=u, version="v1")
               for g, b, s, u in itertools.product(radgraph, bertscore, semb, bleu2)]
    return min(corners), max(corners)
