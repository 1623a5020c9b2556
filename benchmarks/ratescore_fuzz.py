"""RaTEScore sentences on mixed-script fuzz text: rexrank's "pyrush" splitter against the
official pipeline (medSpaCy's PyRuSH on spaCy's English tokenizer), text by text.

Run it in the medSpaCy environment of benchmarks/ratescore_sentences.py:

    /tmp/medspacy/bin/python benchmarks/ratescore_fuzz.py --texts 13000 --seed 0

The texts (seeded, made here, no patient data) are report sentences with words of other
scripts (Greek, Cyrillic, CJK, kana, Hangul, Arabic, Hebrew, Devanagari), emoji, symbols,
units and currencies, joined by punctuation with invisible characters (zero-width space
and joiners, word joiner, BOM, soft hyphen, direction marks) next to it. Half are
"mostly-English" (English sentences, now and then one foreign word or symbol), half "mixed"
(any fragment next to any punctuation). Prints the share of texts with identical kept
sentences for each kind; --show N prints N differing texts.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

ENGLISH = ("heart", "size", "is", "normal", "lungs", "are", "clear", "no", "pleural", "effusion", "mild",
           "cardiomegaly", "Left", "Right", "basilar", "atelectasis", "ETT", "tip", "SVC", "PICC", "stable",
           "FINDINGS", "IMPRESSION", "pneumothorax", "unchanged", "vs", "Dr", "e.g", "i.e", "p.m", "a.m")
FOREIGN = ("Легкие", "чистые", "Сердце", "норма", "плевральный", "выпот", "Πνεύμονες", "καθαροί", "μ", "Δ", "λ", "É",
           "é", "ß", "Ωmega", "肺", "心脏", "正常", "胸腔积液", "無", "はい", "カタカナ", "폐", "정상", "الرئتين", "طبيعي",
           "ריאות", "תקין", "फेफड़े", "सामान्य", "ไทย", "ქართ", "Ճ")
SYMBOLS = ("😀", "🫁", "❤️", "👍🏽", "🇺🇸", "°", "©", "™", "→", "±", "✓", "★", "☺", "½", "µ", "§", "%", "#")
NUMBERS = ("3.5", "2cm", "5мм", "10км", "4 cm", "1.2.3", "12:30", "3-4", "L1-L2", "$5", "₽100", "US$3", "5°C.", "100%")
INVISIBLE = ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u200e", "\u200f", "\u034f", "\u0301")
PUNCT = (".", ". ", ",", ", ", ":", ": ", ";", "-", "–", "—", "--", "/", "!", "? ", "(", ")", '"', "'", "…", "..",
         "。", "，", "、", "・", "=", "<", ">", "+", "*", "~", "&", "_", "¿", "«", "»", "“", "”", "’s")
BREAKS = (" ", "  ", "\n", "\n\n", "", " \n", "\t", "\u00a0", "\u3000")


def _sentence(rng: random.Random, mixed: bool) -> str:
    words = []
    for _ in range(rng.randint(1, 7)):
        pool = rng.random()
        if not mixed:
            word = rng.choice(ENGLISH) if pool < 0.85 else rng.choice(FOREIGN + SYMBOLS + NUMBERS)
        else:
            word = rng.choice(ENGLISH if pool < 0.3 else FOREIGN if pool < 0.65 else SYMBOLS if pool < 0.8 else NUMBERS)
        words.append(word)
    out = words[0]
    for word in words[1:]:
        glue = " "
        if mixed and rng.random() < 0.5:
            glue = rng.choice(PUNCT)
        if rng.random() < (0.3 if mixed else 0.05):
            invisible = rng.choice(INVISIBLE)
            glue = rng.choice((invisible + glue, glue + invisible, invisible))
        out += glue + word
    if rng.random() < 0.3:
        out = out[:1].upper() + out[1:]
    end = rng.choice((".", ".", ".", "!", "?", "", "。", "..", ":", ".\u200b", "\u200b."))
    return out + end


def fuzz_texts(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """n (kind, text) pairs, kind "mostly-English" or "mixed", alternating."""
    rng = random.Random(seed)
    texts = []
    for i in range(n):
        mixed = i % 2 == 1
        sentences = [_sentence(rng, mixed) for _ in range(rng.randint(1, 6))]
        text = sentences[0]
        for sentence in sentences[1:]:
            text += (rng.choice(BREAKS) if mixed else rng.choice((" ", " ", "  ", "\n", "\n\n"))) + sentence
        texts.append(("mixed" if mixed else "mostly-English", text))
    return texts


def main() -> None:
    from ratescore_sentences import official_splitter
    from rexrank.ratescore.rush import sentence_spans
    from rexrank.ratescore.sentences import get_splitter
    from rexrank.ratescore.tokens import token_starts
    from tqdm import tqdm

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=13000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", type=int, default=0, help="print this many differing texts")
    args = parser.parse_args()
    texts = fuzz_texts(args.texts, args.seed)
    official, ours = official_splitter(), get_splitter("pyrush")
    official_spans = _official_rush()
    import spacy

    tokenizer = spacy.blank("en").tokenizer  # the pipeline's tokenizer
    same_tokens = 0
    total: dict[str, int] = {}
    same: dict[str, int] = {}
    shown = 0
    engine = 0  # differing texts whose RuSH character spans already differ (not the tokens)
    start = time.perf_counter()
    for kind, text in tqdm(texts, desc="fuzz texts", unit="text"):
        want, have = official(text), ours(text)
        total[kind] = total.get(kind, 0) + 1
        same[kind] = same.get(kind, 0) + (want == have)
        same_tokens += [t.idx for t in tokenizer(text)] == [offset for offset, _ in token_starts(text)]
        if want == have:
            continue
        engine += official_spans(text) != sentence_spans(text)
        if shown < args.show:
            shown += 1
            print(f"  differs ({kind}): {text!r}\n    official {want}\n    pyrush   {have}")
    print(f"{len(texts)} fuzz texts (seed {args.seed}), {time.perf_counter() - start:.1f} s")
    for kind in sorted(total):
        print(f"  {kind:14s} {same[kind]:6d} / {total[kind]:6d} = {100 * same[kind] / total[kind]:7.3f} % identical")
    n_same, n = sum(same.values()), sum(total.values())
    print(f"  {'all':14s} {n_same:6d} / {n:6d} = {100 * n_same / n:7.3f} % identical")
    print(f"  token starts identical to spaCy's: {same_tokens} / {n} = {100 * same_tokens / n:7.3f} %")
    print(f"  of the {n - n_same} differing, {engine} already differ in RuSH's character spans (rule engine), "
          f"{n - n_same - engine} only in where the tokens put them (or in PyRuSH's run-to-run variation)")


def _official_rush():
    """PyRuSH's own character spans, with medSpaCy's rules (to say where a difference arises)."""
    from pathlib import Path as P

    import medspacy
    from PyRuSH import RuSH

    rules = next(P(medspacy.__file__).parents[1].glob("resources/en/rush_rules.tsv"))
    rush = RuSH(str(rules))
    return lambda text: [(s.begin, s.end) for s in rush.segToSentenceSpans(text)]


if __name__ == "__main__":
    main()
