"""Regenerates official.json with RadEval's own Temporal F1 code (not run by the tests):

    pip install --no-deps --target /tmp/side radeval==2.2.1
    PYTHONPATH=/tmp/side:tests .venv/bin/python tests/data/temporal_f1/generate_golden.py tests/data/temporal_f1/official.json

radeval/metrics/f1temporal/f1temporal.py builds a Stanza pipeline when imported; Stanza's
radiology model cannot be fetched here, so the pipeline is replaced by tests/support/temporal_fake_ner.py
("fake_ner") or by one that finds nothing ("no_ner"). The file is loaded on its own, so
radeval's package __init__ (and its other metrics' dependencies) is not imported.
"""
import importlib.metadata as md
import importlib.util
import json
import sys
import types
from pathlib import Path

import pandas as pd

from support.temporal_fake_ner import ADVERSARIAL, Doc, FakeNER

SITE = next(Path(p) for p in sys.path if (Path(p) / "radeval").is_dir())


def official(pipeline):
    sys.modules["stanza"] = types.SimpleNamespace(Pipeline=lambda **kwargs: pipeline)
    spec = importlib.util.spec_from_file_location("f1temporal", SITE / "radeval/metrics/f1temporal/f1temporal.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.F1Temporal


P = pd.read_csv("/work/shared/validation/moerad_iu/preds.csv")
G = pd.read_csv("/work/shared/validation/moerad_iu/gts.csv")
assert (P.study_id == G.study_id).all()
preds, refs = P.report.fillna("nan").tolist(), G.report.fillna("nan").tolist()
out = {"_generated_by": f"radeval {md.version('radeval')} f1temporal.F1Temporal(predictions, references), Stanza replaced as "
                        "tests/data/temporal_f1/generate_golden.py says; IU-Xray: shared/validation/moerad_iu preds.csv / gts.csv "
                        "(NaN read as 'nan'), only study ids and scores stored (the text is CC BY-NC-ND)",
       "study_ids": P.study_id.tolist()}
for label, pipeline in (("fake_ner", FakeNER()), ("no_ner", lambda text: Doc([]))):
    f1 = official(pipeline)
    out[label] = {"iu_xray": f1(predictions=preds, references=refs)["sample_scores"],
                  "adversarial": f1(predictions=[p for p, _ in ADVERSARIAL], references=[r for _, r in ADVERSARIAL])["sample_scores"]}
Path(sys.argv[1]).write_text(json.dumps(out) + "\n")
