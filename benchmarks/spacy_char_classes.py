"""Writes `rexrank/data/spacy_char_classes.json`: the character classes of spaCy 3.7.5's
tokenizer (`spacy.lang.char_classes`, MIT) that RaTEScore's official sentence pipeline
cuts tokens with, as code-point ranges and symbol lists (facts, no spaCy code).

Run it where spaCy 3.7.5 is installed (the environment of benchmarks/ratescore_sentences.py):

    /tmp/medspacy/bin/python benchmarks/spacy_char_classes.py src/rexrank/data/spacy_char_classes.json

Each class is read by testing every code point against `[CLASS]` with Python's `re`, as
spaCy compiles its affix patterns, so escapes and ranges count as spaCy's regexes see them.
"""
from __future__ import annotations

import json
import re
import sys

import spacy
import spacy.lang.char_classes as cc
from tqdm import tqdm

CLASSES = {"alpha": cc.ALPHA, "alpha_lower": cc.ALPHA_LOWER, "alpha_upper": cc.ALPHA_UPPER, "icons": cc.ICONS}
LISTS = {"currency": cc.LIST_CURRENCY, "units": cc.LIST_UNITS, "punct": cc.LIST_PUNCT, "quotes": cc.LIST_QUOTES, "hyphens": cc.LIST_HYPHENS}


def ranges(pattern: str) -> list[list[int]]:
    match = re.compile(f"[{pattern}]").match
    out: list[list[int]] = []
    for code in range(sys.maxunicode + 1):
        if match(chr(code)):
            if out and out[-1][1] == code - 1:
                out[-1][1] = code
            else:
                out.append([code, code])
    return out


def main() -> None:
    classes = {name: ranges(pattern) for name, pattern in tqdm(CLASSES.items(), desc="classes")}
    # the lists hold regex-escaped entries ("\\$", "US\\$"): unescaped to the literal text;
    # blank entries are left out, as spaCy's compile_*_regex leave them out
    lists = {name: [re.sub(r"\\(.)", r"\1", e) for e in entries if e.strip()] for name, entries in LISTS.items()}
    data = {
        "source": f"spaCy {spacy.__version__} spacy/lang/char_classes.py (MIT), read by benchmarks/spacy_char_classes.py",
        "ranges": classes,
        "lists": lists,
    }
    with open(sys.argv[1], "w", encoding="utf-8") as fh:
        json.dump(data, fh, ensure_ascii=False, separators=(",", ":"))
        fh.write("\n")


if __name__ == "__main__":
    main()
