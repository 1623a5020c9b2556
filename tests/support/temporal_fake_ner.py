"""A stand-in for Stanza's radiology NER with the same interface (`pipeline(text).entities`,
each with `.text` and `.type`), deterministic, that tags words the keyword search can miss:
it splits on every non-letter, so "new/increased" gives "new" and "increased" where the
official clean-up joins them into "newincreased". Shared by tests/metrics/test_temporal_f1.py and
tests/data/temporal_f1/generate_golden.py (which feeds it to RadEval's own code)."""
from __future__ import annotations

import re
from dataclasses import dataclass

TYPES = ("OBSERVATION", "OBSERVATION_MODIFIER", "ANATOMY")  # the third must be ignored

# Our own strings (no IU-Xray text), where the clean-up and the NER disagree or edge cases bite
ADVERSARIAL = [
    ("New/increased effusion.", "Increased effusion."),
    ("Stable\ncardiomegaly; worsened edema", "stable cardiomegaly, WORSENED edema"),
    ("no change", ""),
    ("", "No change."),
    ("", ""),
    ("Unchanged_appearance, well-improved", "unchanged appearance. improved"),
    ("Worsening* edema and \"new\" opacity", "worsening edema"),
    ("Résolved? NEW-onset", "new onset, resolved"),
    ("larger than before (increase)", "smaller, decrease"),
]


@dataclass
class Entity:
    text: str
    type: str


@dataclass
class Doc:
    entities: list


class FakeNER:
    def __call__(self, text: str) -> Doc:
        words = re.findall(r"[A-Za-z]+", text)
        return Doc([Entity(w, TYPES[len(w) % 3]) for w in words])
