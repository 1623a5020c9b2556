"""Inputs of the CRIMSON parity tests, shared by the tests and the script that ran the
official crimson-score on them (tests/data/crimson/make_official_golden.py): report pairs
for the prompt ids, and judge answers, hand-written and mutated, for the reader and score.
All text is rexrank's own (synthetic reports)."""
from __future__ import annotations

import json
import random
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "crimson"
GOLDEN = DATA / "official_golden.json"

# (reference, candidate, patient context or None)
PAIRS = [
    ("Small left pleural effusion. Mild cardiomegaly.", "Left pleural effusion, small. Heart size is normal.", None),
    ("No acute cardiopulmonary process.", "", None),
    ("", "Right upper lobe opacity concerning for pneumonia {possible}.", None),
    ("  ETT 4 cm above the carina.\n\nIMPRESSION: Stable   lines.  ", "ETT in place; “unchanged” tubes — no pneumothorax.",
     {"Age": 71, "Indication": "dyspnea, known heart failure"}),
    ("Moderate right pneumothorax with mediastinal shift.", "Small right pneumothorax.", {"Age": "5", "Indication": "fall"}),
]

# the corpus of the tiny tokenizer: the reports and some prompt words
TOKENIZER_CORPUS = [r + " " + c for r, c, _ in PAIRS] + [
    "Objective: Evaluate the accuracy of predicted chest X-ray (CXR) findings compared to reference findings.",
    '{"reference_findings": [{"id": "R1", "finding": "effusion", "clinical_significance": "urgent"}], '
    '"matched_findings": [{"ref_id": "R1", "pred_id": "P1"}], "errors": {"false_findings": [], '
    '"missing_findings": [], "attribute_errors": [{"severity": "significant", "error_types": ["location"]}]}}',
] * 3


def _finding(i: str, text: str, significance) -> dict:
    return {"id": i, "finding": text, "clinical_significance": significance}


def _attr(ref, pred, severity, types, why="differs") -> dict:
    return {"ref_id": ref, "pred_id": pred, "severity": severity, "error_types": types, "explanation": why}


def _evaluation(refs, preds, matched, false=(), missing=(), attrs=()) -> dict:
    return {"reference_findings": refs, "predicted_findings": preds,
            "matched_findings": [{"ref_id": r, "pred_id": p} for r, p in matched],
            "errors": {"false_findings": list(false), "missing_findings": list(missing), "attribute_errors": list(attrs)}}


# Hand-written answers covering each branch of the score
EVALUATIONS = [
    _evaluation([_finding("R1", "small left pleural effusion", "actionable_not_urgent"), _finding("R2", "mild cardiomegaly", "actionable_not_urgent")],
                [_finding("P1", "left pleural effusion, small", "actionable_not_urgent")], [("R1", "P1")], missing=["R2"]),
    _evaluation([_finding("R1", "pneumothorax", "urgent")], [_finding("P1", "pneumothorax", "urgent")], [("R1", "P1")]),
    _evaluation([_finding("R1", "moderate right pneumothorax", "urgent"), _finding("R2", "mediastinal shift", "urgent")],
                [_finding("P1", "small right pneumothorax", "actionable_not_urgent")], [("R1", "P1")], missing=["R2"],
                attrs=[_attr("R1", "P1", "significant", ["severity"]), _attr("R1", "P1", "negligible", ["location", "certainty"])]),
    _evaluation([], [_finding("P1", "right upper lobe pneumonia", "actionable_not_urgent"), _finding("P2", "rib fracture", "urgent")],
                [], false=["P1", "P2"]),
    _evaluation([], [], []),
    _evaluation([], [_finding("P1", "aortic calcification", "benign_expected")], [], false=["P1"]),
    _evaluation([_finding("R1", "bilateral effusions", "actionable_not_urgent"), _finding("R2", "atelectasis", "not_actionable_not_urgent")],
                [_finding("P1", "left effusion", "actionable_not_urgent"), _finding("P2", "right effusion", "actionable_not_urgent"),
                 _finding("P3", "nodule", "somewhat_urgent")],
                [("R1", "P1"), ("R1", "P2"), ("R2", "P9")], false=["P3"],
                attrs=[_attr("R1", "P2", "moderate", ["unspecific", "overinterpretation"]), _attr("R2", "P9", "significant", ["temporal"])]),
    _evaluation([_finding("R1", "granuloma", "benign_expected")], [_finding("P1", "nodule", "actionable_not_urgent")], [], false=["P1"], missing=["R1"]),
    _evaluation([_finding("R1", "effusion", "urgent"), _finding("R1", "effusion again", "not_actionable_not_urgent")],
                [_finding("P1", "effusion", "urgent"), _finding("P2", "edema", "urgent"), _finding("P3", "mass", "urgent")],
                [("R1", "P1")], false=["P2", "P3", "P7"], attrs=[_attr("R1", "P1", "significant", ["descriptor", "measurement"])]),
    _evaluation([_finding("R1", "line", "benign_expected")], [_finding("P1", "line", "benign_expected")], [("R1", "P1")],
                attrs=[_attr("R1", "P1", "negligible", ["location"])]),
    _evaluation([], [_finding("P1", "opacity", "urgent")], [("R1", "P1"), ("R2", "P1")], missing=["R3"]),
]


def _structural_variants(base: dict) -> list:
    """Parsable answers the official scorer may or may not read: wrong types and missing keys."""
    out = []
    e = json.loads(json.dumps(base))
    out.append({k: v for k, v in e.items() if k != "errors"})
    out.append({**e, "errors": []})
    out.append({**e, "errors": None})
    out.append({**e, "matched_findings": {"ref_id": "R1", "pred_id": "P1"}})
    out.append({**e, "matched_findings": [{"pred_id": "P1"}]})
    out.append({**e, "reference_findings": None})
    out.append({**e, "reference_findings": ""})
    out.append({**e, "reference_findings": [{"finding": "no id"}]})
    out.append({**e, "predicted_findings": [{"id": ["P1"], "clinical_significance": "urgent"}]})
    out.append({**e, "reference_findings": [{"id": "R1", "clinical_significance": ["urgent"]}]})
    out.append({**e, "reference_findings": [{"id": 1, "clinical_significance": "urgent"}], "matched_findings": [{"ref_id": 1, "pred_id": 2}]})
    errors = dict(e["errors"])
    out.append({**e, "errors": {**errors, "false_findings": "P1P2"}})
    out.append({**e, "errors": {**errors, "missing_findings": [{"id": "R1"}]}})
    out.append({**e, "errors": {**errors, "attribute_errors": [{"pred_id": "P1", "severity": "significant"}]}})
    out.append({**e, "errors": {**errors, "attribute_errors": [{"ref_id": "R1", "severity": "significant", "error_types": "location, severity"}]}})
    out.append({**e, "errors": {**errors, "attribute_errors": [{"ref_id": "R1", "severity": "significant", "error_types": None}]}})
    out.append({**e, "errors": {**errors, "attribute_errors": [{"ref_id": "R1", "severity": ["significant"], "error_types": []}]}})
    out.append({**e, "errors": {**errors, "attribute_errors": "none"}})
    out.append([e])
    out.append("just a string")
    out.append(3)
    return out


def _text_mutations(text: str, rng: random.Random) -> list[str]:
    """Answer texts with the faults the official reader repairs (or cannot)."""
    out = []
    out.append(text.replace('"differs"', "\u201cdiffers\u201d", 1).replace('"effusion"', "\u2018effusion\u2019", 1))
    out.append(text.replace(', "attribute_errors"', ", attribute_errors\"", 1).replace('{"ref_id"', '{ref_id"', 1))
    out.append(text.replace('"pred_id": "P1"}', '"pred_id": "P1", "pred_old"}', 1))
    out.append(text.replace('{"ref_id"', '{"orphan", "ref_id"', 1))
    out.append(text.replace('"missing_findings": [', '"missing_findings": ["": [', 1) + "")
    out.append(text.replace("effusion", "eff\\_usion", 1).replace("pneumothorax", "pneumo\\Lthorax", 1))
    out.append(text.replace('"differs"', '"called "small" by the reader"', 1))
    out.append(text.replace('"finding": "', '"finding": "the "so-called" ', 1))
    out.append(text.replace("effusion", 'eff\\_usion "quoted"', 1))
    out.append(text[: max(1, len(text) * 3 // 4)])
    out.append("```json\n" + text + "\n```")
    out.append("Here is the evaluation:\n" + text)
    out.append(text + "\nThat is all.")
    out.append(text.replace("{", '{"errors": {"false_findings": ["P1"]}, ', 1))  # a duplicate key: the first wins
    out.append(text.replace('"urgent"', "NaN", 1))
    out.append(text.replace(": [", ": [\n", 2).replace(",", " ,\n", 3))
    cut = rng.randrange(1, len(text))
    out.append(text[:cut] + '"' + text[cut:])
    cut = rng.randrange(1, len(text))
    out.append(text[:cut] + text[cut + 1:])
    return [t for t in out if t != text] + [text]


def answers() -> list[str]:
    """Every judge answer of the parity tests, in a fixed order (seeded)."""
    rng = random.Random(22)
    texts: list[str] = []
    for k, evaluation in enumerate(EVALUATIONS):
        compact = json.dumps(evaluation)
        texts.append(compact)
        texts.append(json.dumps(evaluation, indent=4))
        texts += _text_mutations(compact, rng)
        if k < 3:
            texts += [json.dumps(v) for v in _structural_variants(evaluation)]
    texts += ["", "   ", "{}", "null", "[]", "I cannot evaluate these reports.", '{"errors": {}}']
    return list(dict.fromkeys(texts))
