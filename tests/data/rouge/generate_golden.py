"""Regenerates moerad_iu_official.json with the official code (not run by the tests):

    pip install --no-deps --target /tmp/side rouge-score==0.1.2 absl-py six
    PYTHONPATH=/tmp/side .venv/bin/python tests/data/rouge/generate_golden.py tests/data/rouge/moerad_iu_official.json

(nltk 3.10.4 from rexrank's environment provides the Porter stemmer rouge_score uses.)
"""
import json, sys
import pandas as pd, nltk, importlib.metadata as md
from rouge_score import rouge_scorer
P = pd.read_csv("/work/shared/validation/moerad_iu/preds.csv"); G = pd.read_csv("/work/shared/validation/moerad_iu/gts.csv")
assert (P.study_id == G.study_id).all()
sc = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)  # RadEval's RougeMetric setting
rows = []
for sid, h, r in zip(P.study_id, P.report.fillna("nan"), G.report.fillna("nan")):
    s = sc.score(r, h)  # RadEval: score(ref, hyp)
    rows.append([sid, s["rouge1"].fmeasure, s["rouge2"].fmeasure, s["rougeL"].fmeasure])
out = {"_generated_by": ("rouge_score.rouge_scorer.RougeScorer(['rouge1','rouge2','rougeL'], use_stemmer=True).score(reference, prediction) "
                         f"with rouge-score {md.version('rouge-score')}, nltk {nltk.__version__}, on shared/validation/moerad_iu preds.csv "
                         "(predictions) and gts.csv (references), NaN texts read as 'nan' as in test_bleu2; only study ids and F1 values "
                         "are stored (IU-Xray text is CC BY-NC-ND). Command: tests/data/rouge/generate_golden.py"),
       "columns": ["study_id", "rouge1", "rouge2", "rougeL"], "rows": rows}
with open(sys.argv[1], "w") as fh:  # one study a line
    fh.write(json.dumps({k: v for k, v in out.items() if k != "rows"})[:-1] + ', "rows": [\n')
    fh.write(",\n".join(json.dumps(r) for r in rows) + "\n]}\n")
