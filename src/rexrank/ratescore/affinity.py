"""RaTEScore type-affinity matrices and negation penalties.

Numbers from RaTEScore 0.6.0 (PyPI `RaTEScore`, MAGIC-AI4Med/RaTEScore, MIT licence):
`DEFAULT_MATRIX_LONG` / `DEFAULT_MATRIX_SHORT` in `RaTEScore/scorer.py`, also shipped as
`affinity_matrix/{long,short}_weight.json`. W[(a, b)] weighs an entity of type a whose
best match on the other side has type b; `neg_weight` multiplies the similarity when the
pair is a negation mismatch (e.g. DISEASE matched to NON-DISEASE).

A user JSON uses the official key format: "<row>_<col>" in lower case (e.g.
"non-disease_abnormality") for all 25 pairs, plus "neg_weight".
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from rexrank.errors import MetricError

ENTITY_TYPES = ("ABNORMALITY", "ANATOMY", "DISEASE", "NON-ABNORMALITY", "NON-DISEASE")

# (type of the entity being scored, type of its best match) pairs that flip polarity.
NEGATION_PAIRS = frozenset(
    {
        ("NON-DISEASE", "DISEASE"),
        ("NON-ABNORMALITY", "ABNORMALITY"),
        ("DISEASE", "NON-DISEASE"),
        ("ABNORMALITY", "NON-ABNORMALITY"),
        ("NON-DISEASE", "ABNORMALITY"),
        ("NON-ABNORMALITY", "DISEASE"),
        ("DISEASE", "NON-ABNORMALITY"),
        ("ABNORMALITY", "NON-DISEASE"),
    }
)


@dataclass(frozen=True)
class Affinity:
    name: str
    weights: Mapping[tuple[str, str], float]
    neg_weight: float

    def weight(self, scored_type: str, match_type: str) -> float:
        try:
            return self.weights[(scored_type, match_type)]
        except KeyError:
            raise MetricError(
                f"ratescore: affinity matrix {self.name!r} has no weight for entity types "
                f"({scored_type}, {match_type}); it covers {sorted({a for a, _ in self.weights})}"
            ) from None

    def penalty(self, scored_type: str, match_type: str) -> float:
        return self.neg_weight if (scored_type, match_type) in NEGATION_PAIRS else 1.0

    def types(self) -> set[str]:
        return {a for a, _ in self.weights} | {b for _, b in self.weights}

    def provenance(self) -> dict:
        return {
            "name": self.name,
            "neg_weight": self.neg_weight,
            "weights": {f"{a.lower()}_{b.lower()}": w for (a, b), w in sorted(self.weights.items())},
        }


def _table(rows: list[list[float]]) -> dict[tuple[str, str], float]:
    return {(a, b): rows[i][j] for i, a in enumerate(ENTITY_TYPES) for j, b in enumerate(ENTITY_TYPES)}


# Rows: scored entity type; columns: type of its best match; order ENTITY_TYPES.
LONG = Affinity(
    "long",
    _table(
        [
            [0.4276119164393705, 0.6240929990607657, 0.0034478181112993847, 0.5431049700217344, 0.27005425386213877],
            [0.7487824274337533, 0.2856134859160784, 0.4592143222158069, 0.02097055139911715, 0.00013736314126696204],
            [0.8396510075734789, 0.9950209388542061, 0.8460555030578727, 0.9820689020512646, 0.3789136708096537],
            [0.16546764653692908, 0.018670610691852826, 0.719397354576018, 0.0009357166071730684, 0.0927333564267591],
            [0.7759420231214385, 0.1839139293714062, 0.10073046076318157, 0.03860183811876373, 0.34065681486566446],
        ]
    ),
    0.8716553966489615,
)

SHORT = Affinity(
    "short",
    _table(
        [
            [0.4070293318365468, 0.6952639610605605, 0.28342529466226446, 0.9479148658006686, 0.23875064111146294],
            [0.5829759950441763, 0.7709590751917746, 0.0006059634829551632, 0.794672584951181, 0.27982942400798977],
            [0.8840397619834857, 0.9637659445696822, 0.19018958438059513, 0.6962283914800402, 0.943727057946997],
            [0.1712744286898638, 0.4485149671497294, 0.00045065329822896076, 0.0007887930317199857, 0.8555432840895761],
            [0.9555801066212176, 0.13122106162635216, 0.6072996585919443, 0.05650711141169969, 0.3214769399791204],
        ]
    ),
    0.3611577852354489,
)

BUILTIN = {"long": LONG, "short": SHORT}


def load_affinity(spec: str | Path | Mapping) -> Affinity:
    """"long" (official default), "short" (sentence-level input), a JSON file path, or a
    mapping in the official key format."""
    if isinstance(spec, Affinity):
        return spec
    if isinstance(spec, str) and spec.lower() in BUILTIN:
        return BUILTIN[spec.lower()]
    if isinstance(spec, Mapping):
        return _from_mapping(dict(spec), "custom")
    path = Path(spec)
    if not path.is_file():
        raise MetricError(f"ratescore: affinity_matrix={str(spec)!r} is neither 'long', 'short' nor an existing JSON file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise MetricError(f"ratescore: cannot read affinity matrix {path}: {exc}") from None
    if not isinstance(data, dict):
        raise MetricError(f"ratescore: affinity matrix {path} must be a JSON object")
    return _from_mapping(data, str(path))


def _from_mapping(data: dict, name: str) -> Affinity:
    if "neg_weight" not in data:
        raise MetricError(f"ratescore: affinity matrix {name} has no 'neg_weight' entry (needed since RaTEScore 0.6.0)")
    weights: dict[tuple[str, str], float] = {}
    for key, value in data.items():
        if key == "neg_weight":
            continue
        parts = key.split("_")
        if len(parts) != 2 or not all(parts):
            raise MetricError(f"ratescore: affinity matrix {name}: key {key!r} is not '<row type>_<column type>'")
        weights[(parts[0].upper(), parts[1].upper())] = _number(value, f"{name}: {key!r}")
    missing = [f"{a.lower()}_{b.lower()}" for a in ENTITY_TYPES for b in ENTITY_TYPES if (a, b) not in weights]
    if missing:
        raise MetricError(f"ratescore: affinity matrix {name} lacks {len(missing)} pair(s): {', '.join(missing[:5])}")
    return Affinity(name, weights, _number(data["neg_weight"], f"{name}: 'neg_weight'"))


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise MetricError(f"ratescore: affinity matrix {where} must be a finite number, got {value!r}")
    return float(value)
