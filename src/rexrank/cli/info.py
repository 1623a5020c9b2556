"""`rexrank list`: the test sets, tracks and metrics this installation knows."""
from __future__ import annotations

import argparse


def register(subparsers) -> None:
    p = subparsers.add_parser("list", help="list test sets, tracks and metrics")
    p.set_defaults(run=run)


ACCESS = {"public": "public", "dua": "data use agreement: --data-dir", "private": "private to the backend"}

# What each metric runs on, in a user's words; the extra is what `pip install` needs.
RUNS_ON = {
    "bleu2": "text only",
    "rouge": "text only",
    "temporal_f1": "a local NER model (Stanza radiology); ner=keywords: text only",
    "bertscore": "a local encoder (distilroberta)",
    "sembscore": "a local model (CheXbert)",
    "radgraph": "a local model (RadGraph)",
    "radcliq": "BERTScore, SembScore and RadGraph models",
    "ratescore": "local models (RaTE-NER, BioLORD)",
    "srr_bert": "a local model (SRR-BERT)",
    "green": "an LLM judge: the GREEN 7B model (GPU) or an OpenAI-compatible endpoint",
    "crimson": "an LLM judge: the CRIMSON MedGemma model (GPU) or an OpenAI-compatible endpoint",
    "fineradscore": "an LLM judge at an OpenAI-compatible endpoint",
    "spec_cxr": "an LLM judge at an OpenAI-compatible endpoint",
}


def _study_count(spec) -> str:
    if spec.n_studies is not None:
        return f"{spec.n_studies:,} studies"
    if spec.embedded:  # the shipped example: count it (no network, a small file)
        import json

        from rexrank.data import data_path

        return f"{len(json.loads(data_path(spec.embedded).read_text(encoding='utf-8'))):,} studies"
    return "size unknown"


def run(args: argparse.Namespace) -> int:
    from rexrank.metrics.registry import METRICS
    from rexrank.testsets.registry import TEST_SETS, TRACKS

    print("test sets:")
    for spec in TEST_SETS.values():
        print(f"  {spec.name:<14} {spec.title} — {_study_count(spec)}, {ACCESS.get(spec.access, spec.access)}")
    print("tracks: " + ", ".join(TRACKS))
    print("metrics (pip extra; what it runs on — `rexrank weights status` says what is here):")
    for name, (_, extra) in sorted(METRICS.items()):
        install = "core" if extra == "core" else f"rexrank[{extra}]"
        print(f"  {name:<14} {install:<17} {RUNS_ON.get(name, '')}")
    return 0
