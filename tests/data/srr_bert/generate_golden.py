"""Regenerates official.json with RadEval's own SRR-BERT pipeline on the tiny random model of
tests/support/srr_bert_tiny.py (not run by the tests):

    pip install --no-deps --target /tmp/side radeval==2.2.1
    PYTHONPATH=/tmp/side:tests .venv/bin/python tests/data/srr_bert/generate_golden.py tests/data/srr_bert/official.json

radeval/metrics/SRRBert/srr_bert.py and radeval/utils.py are loaded on their own (radeval's
package __init__ and its other metrics are not imported). Its hub ids are pointed at the tiny
model's folders, and nltk.sent_tokenize is replaced by tests/support/srr_bert_tiny.py's stand-in
(NLTK's English punkt_tab cannot be fetched here); everything else is RadEval's code.
"""
import importlib.metadata as md
import importlib.util
import json
import sys
import tempfile
import types
from pathlib import Path

import nltk
import pandas as pd

from support import srr_bert_tiny as tiny

SITE = next(Path(p) for p in sys.path if (Path(p) / "radeval").is_dir())


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


nltk.sent_tokenize = tiny.stand_in_sent_tokenize
sys.modules["radeval"] = types.ModuleType("radeval")
sys.modules["radeval"].__path__ = []
load("radeval.utils", SITE / "radeval/utils.py")
official = load("srr_bert_official", SITE / "radeval/metrics/SRRBert/srr_bert.py")

with tempfile.TemporaryDirectory() as tmp:
    model_dir, tokenizer_dir = tiny.build(Path(tmp))
    model_cls, tokenizer_cls = official.BertForSequenceClassification, official.BertTokenizer
    official.BertForSequenceClassification = types.SimpleNamespace(
        from_pretrained=lambda name, **kw: model_cls.from_pretrained(str(model_dir), **kw))
    official.BertTokenizer = types.SimpleNamespace(from_pretrained=lambda name, **kw: tokenizer_cls.from_pretrained(str(tokenizer_dir), **kw))
    scorer = official.SRRBert(model_type="leaves_with_statuses")

    P = pd.read_csv("/work/shared/validation/moerad_iu/preds.csv")
    G = pd.read_csv("/work/shared/validation/moerad_iu/gts.csv")
    assert (P.study_id == G.study_id).all()
    preds, refs = P.report.fillna("nan").tolist(), G.report.fillna("nan").tolist()
    report, precision, recall, f1 = scorer.evaluate(refs, preds)
    weighted = report["weighted avg"]
    out = {"_generated_by": f"radeval {md.version('radeval')} SRRBert(model_type='leaves_with_statuses').evaluate(refs, hyps) "
                            f"(scikit-learn {md.version('scikit-learn')}, torch {md.version('torch')}, transformers "
                            f"{md.version('transformers')}) on the tiny model of tests/support/srr_bert_tiny.py, as "
                            "tests/data/srr_bert/generate_golden.py says; IU-Xray: shared/validation/moerad_iu (NaN read as "
                            "'nan'), only study ids and scores stored (the text is CC BY-NC-ND)",
           "study_ids": P.study_id.tolist(),
           "per_study": {"precision": precision.tolist(), "recall": recall.tolist(), "f1": f1.tolist()},
           "weighted": {"precision": weighted["precision"], "recall": weighted["recall"], "f1": weighted["f1-score"]}}
Path(sys.argv[1]).write_text(json.dumps(out) + "\n")
print(out["weighted"], sum(f1) / len(f1))
