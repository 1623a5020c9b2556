"""RaTEScore's sentence splitting: the default "pyrush" splitter against the official
pipeline's sentences (medSpaCy 1.3.1 / PyRuSH 1.0.13 on spaCy 3.7.5), the RuSH engine's
quirks, and inputs it must survive. The MIMIC-CXR / CheXpert Plus comparison needs the
official pipeline and their text, so it is a script (benchmarks/ratescore_sentences.py)."""
from __future__ import annotations

import csv
import json
import random

import pytest

from support.paths import shared_path
from rexrank.metrics.registry import get_metric
from rexrank.ratescore.rush import default_rules, parse_rules, sentence_spans
from rexrank.ratescore.sentences import DEFAULT_SPLITTER, get_splitter, keep, split_pyrush
from rexrank.ratescore.tokens import token_starts


def test_every_iu_xray_text_gets_the_official_sentences():
    official = json.loads(shared_path("validation", "ratescore_sentences", "iu_official_sentences.json").read_text())
    split = get_splitter("pyrush")
    compared, differing = 0, []
    for part in ("test", "valid"):
        studies = json.loads(shared_path("data", "iu_xray", f"ReXRank_IUXray_{part}.json").read_text())
        for study_id, study in studies.items():
            for field, expected in official["sentences"][f"{part}/{study_id}"].items():
                compared += 1
                if split(study[field]) != expected:
                    differing.append(f"{part}/{study_id} {field}")
    assert compared == 2658
    assert differing == []


def test_pyrush_is_the_default_splitter_of_the_metric():
    assert DEFAULT_SPLITTER == "pyrush"
    metric = get_metric("ratescore", ner_path="/nonexistent", embedding_path="/nonexistent")
    assert metric.config()["sentence_splitter"] == "pyrush"
    assert metric._splitter()("No pneumothorax!  Mild cardiomegaly.") == ["No pneumothorax!  Mild cardiomegaly."]


# Made-up texts, one or more per behaviour listed in issue 11, and the earlier splitter's
# cases. Expected: what the official pipeline (medspacy.load(medspacy_enable=
# ["medspacy_pyrush", "medspacy_conte"]), medSpaCy 1.3.1, spaCy 3.7.5, numpy 1.26.4) gave
# for them, after RaTEScore's strip / length filter, run in a separate environment.
OFFICIAL = [
    ('Portable AP chest radiograph was obtained. ___. The lungs are clear.', ['Portable AP chest radiograph was obtained. ___.', 'The lungs are clear.']),
    ('Frontal view was obtained. ___. The lungs are well expanded.', ['Frontal view was obtained. ___.', 'The lungs are well expanded.']),
    ('Patient is status post sternotomy. ___ The mediastinal contours are stable.', ['Patient is status post sternotomy.', '___ The mediastinal contours are stable.']),
    ('Opacity at the right base, atelectasis vs. pneumonia. No effusion.', ['Opacity at the right base, atelectasis vs.', 'pneumonia.', 'No effusion.']),
    ('Right basilar opacity, pneumonia vs. Atelectasis. No effusion.', ['Right basilar opacity, pneumonia vs.', 'Atelectasis.', 'No effusion.']),
    ('Findings suggest fluid overload, i.e. Pulmonary edema. Heart size is normal.', ['Findings suggest fluid overload, i.e.', 'Pulmonary edema.', 'Heart size is normal.']),
    ('Findings were discussed at 3 p.m. The patient was stable.', ['Findings were discussed at 3 p.m.', 'The patient was stable.']),
    ('Findings were discussed with Dr. Smith at 10 a.m. Lines are unchanged.', ['Findings were discussed with Dr. Smith at 10 a.m.', 'Lines are unchanged.']),
    ('1. INTERVAL PLACEMENT OF A RIGHT INTERNAL JUGULAR CENTRAL VENOUS\nCATHETER WITH TIP IN THE SVC. NO PNEUMOTHORAX.\n2. LOW LUNG VOLUMES WITH\nBIBASILAR ATELECTASIS.', ['INTERVAL PLACEMENT OF A RIGHT INTERNAL JUGULAR CENTRAL VENOUS\nCATHETER WITH TIP IN THE SVC. NO PNEUMOTHORAX.', '2. LOW LUNG VOLUMES WITH\nBIBASILAR ATELECTASIS.']),
    ('No pneumothorax!  Mild cardiomegaly.', ['No pneumothorax!  Mild cardiomegaly.']),
    ('Increased interstitial markings (? edema). No effusion.', ['Increased interstitial markings (? edema).', 'No effusion.']),
    ('Lines and tubes:\n- ETT terminates 4 cm above the carina.\n- NG tube ends in the stomach.', ['Lines and tubes:', '- ETT terminates 4 cm above the carina.', '- NG tube ends in the stomach.']),
    ('THE LUNGS ARE OTHERWISE CLEAR, \nWITH NORMAL HEART SIZE.', ['THE LUNGS ARE OTHERWISE CLEAR, \nWITH NORMAL HEART SIZE.']),
    ('The referring physician, ___. ___ was paged at 3:18 p.m. on ___ and the findings were discussed.', ['The referring physician, ___. ___ was paged at 3:18 p.m.', 'on ___ and the findings were discussed.']),
    ('Results were communicated with Dr. ___ at 11:10 a.m. on ___ via telephone.', ['Results were communicated with Dr. ___ at 11:10 a.m.', 'on ___ via telephone.']),
    ('Heart size is normal. Lungs are clear. No pneumothorax.', ['Heart size is normal.', 'Lungs are clear.', 'No pneumothorax.']),
    ('1. Mild cardiomegaly. 2. Small left effusion.', ['Mild cardiomegaly.', '2. Small left effusion.']),
    ('Impression: 1. Mild cardiomegaly. 2. Small left effusion.', ['Impression: 1.', 'Mild cardiomegaly.', '2. Small left effusion.']),
    ('No effusion. .', ['No effusion.']),
    ('Nodule measures 3.5 mm. Stable.', ['Nodule measures 3.5 mm.', 'Stable.']),
    ('Is there effusion? No effusion!', ['Is there effusion?', 'No effusion!']),
    ('Heart normal\nLungs clear.', ['Heart normal', 'Lungs clear.']),
    ('FINDINGS:\nHeart normal. Lungs clear.\n\nIMPRESSION:\nNo acute process.', ['FINDINGS:', 'Heart normal.', 'Lungs clear.', 'IMPRESSION:', 'No acute process.']),
    ('Heart is normal in size and\ncontour. Lungs clear.', ['Heart is normal in size and\ncontour.', 'Lungs clear.']),
    ('No effusion.  Heart normal.', ['No effusion.', 'Heart normal.']),
    ('', []),
    ('ok', []),
    ('Tip :) of the line.\nNo change.', ['Tip :) of the line.', 'No change.']),
    ('Clear lungs.\x00 No effusion.\x07\x1b Stable\u2028heart.\x0cNormal.', ['Clear lungs.\x00 No effusion.\x07\x1b Stable\u2028heart.\x0cNormal.']),
    # other scripts (issue 23): spaCy's classes hold Cyrillic, Greek, CJK, ... letters
    ('Lungs clear.Легкие', ['Lungs clear.', 'Легкие']),
    ('Lungs clear.肺', ['Lungs clear.']),
    ('É-μ', []),
    ('Сердце норма.Легкие чистые. No effusion.', ['Сердце норма.Легкие чистые.', 'No effusion.']),
    ('No effusion\u200b.Heart normal.', ['No effusion\u200b.Heart normal.']),
]


@pytest.mark.parametrize("text, expected", OFFICIAL)
def test_pyrush_splitter_gives_the_official_sentences(text, expected):
    assert get_splitter("pyrush")(text) == expected


def test_the_regex_splitter_stays_available_and_differs():
    regex = get_splitter("regex")
    assert regex("Heart size is normal. Lungs are clear.") == ["Heart size is normal.", "Lungs are clear."]
    differing = [text for text, expected in OFFICIAL if regex(text) != expected]
    assert len(differing) >= 5  # why it is no longer the default


# Token starts of spaCy 3.7.5's `spacy.blank("en")` tokenizer (recorded in a separate
# environment): PyRuSH can only start a sentence where a token starts.
SPACY_TOKEN_STARTS = [
    ('CLEAR, \nWITH', [0, 5, 7, 8]),
    ('HOURS:\n1.', [0, 5, 6, 7, 8]),
    ('(? edema).', [0, 1, 3, 8, 9]),
    ('a.m.,FINDINGS:', [0, 4, 13]),
    ('Tubes (3):', [0, 6, 7, 8]),
    ('effusion.The lungs', [0, 8, 9, 13]),
    ('___. The', [0, 1, 2, 3, 5]),
    ('Dr. Smith', [0, 4]),
    ('e.g.Y', [0, 4]),
    ('1.5cm.', [0, 3, 5]),
    ('pneumothorax!  Mild', [0, 12, 14, 15]),
    ('tip :)\nx', [0, 4, 6, 7]),
    ('left°right', [0, 4, 5]),
    ('a  \n b', [0, 2, 5]),
    (' lead', [0, 1]),
    ('x\xa0\xa0y', [0, 1, 3]),
    ('mild-to-moderate', [0, 4, 5, 7, 8]),
    ('C++ 1+', [0, 4, 5]),
    ('L1-L2', [0, 2, 3]),
    ('10:30am', [0]),
    ('clear.Легкие', [0, 5, 6]),
    ('clear.肺', [0, 5, 6]),
    ('É-μ', [0, 1, 2]),
    ('5°C.…mild', [0, 1, 2, 3, 4, 5]),  # "°C." is three tokens in spaCy's special cases
    ('a\u200b.B', [0]),
]


@pytest.mark.parametrize("text, starts", SPACY_TOKEN_STARTS)
def test_token_starts_are_spacys(text, starts):
    assert [offset for offset, _ in token_starts(text)] == starts


def test_plus_tries_no_repetition_and_the_longest_run_only():
    # FastCNER semantics, checked against PyRuSH 1.0.13 with these rules: `\s+ ` before Y
    # matches two spaces (one \s, then the literal space) but not three (neither "no more
    # repetition" nor "the longest run" leaves a space for the literal).
    rules = parse_rules(["x\\s+ (Y\t0\tstbegin", "\\c(.)\\s\t2\tstend", "q\\c(.)\\s\t3\tstend"])
    assert sentence_spans("ab. x  Yes it is. qa. Done.", rules) == [(0, 5), (7, 17), (18, 27)]
    assert sentence_spans("ab. x   Yes it is. qa. Done.", rules) == [(0, 28)]
    # score 3 (odd) is a pseudo rule: its end marker removes the one after "qa." instead of adding one


def test_rules_file_is_read_whole_and_unknown_syntax_is_refused():
    from rexrank.data import data_path

    with open(data_path("rush_rules.tsv"), newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.reader(fh, delimiter="\t") if len(r) >= 3 and not r[0].startswith(("#", "@"))]
    assert default_rules().n_rules == len(rows) == 780
    for bad in ("a[b|c]\t0\tstbegin", "a\\+\t0\tstbegin", "x\t0\tstmiddle"):
        with pytest.raises(ValueError, match="RuSH rule"):
            parse_rules([bad])


NOISE = ["\x00", "\x07", "\x1b", "\x0b", "\x0c", "\r", "\u2028", "\xa0", "\\", "+", "(", ")", ".", "\n", "  ", "°", "·", "é"]


def test_control_characters_and_odd_text_are_split_without_loss():
    rng = random.Random(11)
    words = "No pneumothorax. Mild cardiomegaly! Lines and tubes: ETT (? edema) 1. 2) vs. Dr. ___ XXXX".split()
    for _ in range(300):
        text = "".join(rng.choice(words + NOISE) + rng.choice(["", " ", "\n"]) for _ in range(rng.randint(0, 40)))
        raw = split_pyrush(text)
        assert "".join(raw) == text  # every character lands in exactly one sentence, in order
        assert keep(raw) == get_splitter("pyrush")(text)


def test_one_megabyte_of_text_is_split():
    rng = random.Random(1)
    report = "FINDINGS: Heart size is normal. No pneumothorax!  Mild cardiomegaly (? edema).\nLines and tubes:\n- ETT. "
    text = "".join(report if rng.random() < 0.9 else rng.choice(NOISE) * 50 for _ in range(12_000))[:1_000_000]
    raw = split_pyrush(text)
    assert "".join(raw) == text and len(keep(raw)) > 10_000


def test_empty_and_blank_texts_have_no_sentences():
    # the documented rule: no kept sentence, so RaTEScore gives the study 0.5
    for splitter in ("pyrush", "regex"):
        assert get_splitter(splitter)("") == [] and get_splitter(splitter)(" \n\t ") == []
    assert split_pyrush("") == [] and split_pyrush("  ") == ["  "]
