"""RaTEScore sentences: rexrank's splitters against the official pipeline, text by text.

Needs medSpaCy, which pins spaCy < 3.8 and numpy < 2 on Python 3.11, so run it in its own
environment (rexrank's sentence modules need only the standard library):

    python3.11 -m venv /tmp/medspacy && /tmp/medspacy/bin/pip install numpy==1.26.4 spacy==3.7.5 medspacy==1.3.1
    /tmp/medspacy/bin/python benchmarks/ratescore_sentences.py data/ReXRank_MIMICCXR_test.json ...

Every string field named by --fields of every study in the given ReXrank JSON files is
split by the official pipeline (`medspacy.load(medspacy_enable=["medspacy_pyrush",
"medspacy_conte"])`, sentences stripped, blank and < 3-character ones dropped, as
RaTEScore 0.6.0) and by each rexrank splitter; prints the share of texts whose kept
sentences are identical, per file and field, and the time each took. Texts are not
printed unless --show N asks for N differing ones.
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rexrank.ratescore.sentences import get_splitter, keep  # noqa: E402


def official_splitter():
    try:
        from loguru import logger

        logger.remove()  # PyRuSH logs every decision at DEBUG level
    except ImportError:
        pass
    import medspacy

    nlp = medspacy.load(medspacy_enable=["medspacy_pyrush", "medspacy_conte"])
    return lambda text: keep([str(s) for s in nlp(text).sents])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--fields", default="section_findings,section_impression,report")
    parser.add_argument("--splitters", default="pyrush,regex")
    parser.add_argument("--show", type=int, default=0, help="print this many differing texts per splitter")
    args = parser.parse_args()
    fields = args.fields.split(",")
    texts = []
    for path in args.files:
        for study in json.loads(path.read_text()).values():
            texts += [(path.name, f, study[f]) for f in fields if isinstance(study.get(f), str)]
    official = official_splitter()
    start = time.perf_counter()
    expected = [official(text) for _, _, text in texts]
    print(f"{len(texts)} texts; official pipeline {time.perf_counter() - start:.1f} s")
    for name in args.splitters.split(","):
        split = get_splitter(name)
        start = time.perf_counter()
        got = [split(text) for _, _, text in texts]
        seconds = time.perf_counter() - start
        total, same = collections.Counter(), collections.Counter()
        shown = 0
        for (file, field, text), want, have in zip(texts, expected, got):
            total[file, field] += 1
            same[file, field] += want == have
            if want != have and shown < args.show:
                shown += 1
                print(f"  {name} differs ({file} {field}): {text!r}\n    official {want}\n    {name:8s} {have}")
        print(f"splitter {name!r} ({seconds:.2f} s):")
        for key in sorted(total):
            print(f"  {key[0]:32s} {key[1]:20s} {same[key]:6d} / {total[key]:6d} = {100 * same[key] / total[key]:7.3f} %")
        for file in sorted({f for f, _ in total}):
            t = sum(v for k, v in total.items() if k[0] == file)
            s = sum(v for k, v in same.items() if k[0] == file)
            print(f"  {file:32s} {'all fields':20s} {s:6d} / {t:6d} = {100 * s / t:7.3f} %")


if __name__ == "__main__":
    main()
