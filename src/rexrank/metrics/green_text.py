"""GREEN's prompt, chat rendering, completion cleaning and parser.

Facts from Stanford-AIMI/GREEN (`green_score/green.py`, `green_score/utils.py`, HEAD
d72c195; MIT per setup.py), written anew here:
- each report is whitespace-normalised and cut to its first 300 words;
- the checkpoint's chat template renders [human: prompt, gpt: ""] with the generation
  prompt as "<|user|>\\n{prompt}</s>\\n<|assistant|>\\n</s>\\n<|assistant|>\\n" and the
  tokenizer (add_eos_token=True) appends one more EOS;
- the score parses the "Clinically Significant Errors" and "Matched Findings" sections
  with the regexes reproduced below (behaviour, including quirks, kept identical).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

MAX_WORDS = 300
EOS = "</s>"

SIGNIFICANT = "Clinically Significant Errors"
INSIGNIFICANT = "Clinically Insignificant Errors"
MATCHED = "Matched Findings"

SUB_CATEGORIES = (
    "(a) False report of a finding in the candidate",
    "(b) Missing a finding present in the reference",
    "(c) Misidentification of a finding's anatomic location/position",
    "(d) Misassessment of the severity of a finding",
    "(e) Mentioning a comparison that isn't in the reference",
    "(f) Omitting a comparison detailing a change from a prior study",
)
SUB_KEYS = ("a", "b", "c", "d", "e", "f")


@lru_cache(maxsize=1)
def prompt_template() -> str:
    return resources.files("rexrank.data").joinpath("green_prompt_template.txt").read_text(encoding="utf-8")


def truncate_words(text: str, max_words: int = MAX_WORDS) -> str:
    return " ".join(text.split()[:max_words])


_PLACEHOLDER = re.compile(r"\{(REFERENCE_REPORT|CANDIDATE_REPORT)\}")


def make_prompt(reference: str, candidate: str, max_words: int = MAX_WORDS) -> str:
    """The template filled in one pass, as the official f-string fills it: text inside a
    report ("{CANDIDATE_REPORT}", braces) is never filled again."""
    reports = {"REFERENCE_REPORT": truncate_words(reference, max_words), "CANDIDATE_REPORT": truncate_words(candidate, max_words)}
    return _PLACEHOLDER.sub(lambda m: reports[m.group(1)], prompt_template())


def render_model_input(prompt: str) -> str:
    """The exact text the checkpoint sees (before the tokenizer's BOS): the official chat
    rendering plus the EOS that `add_eos_token=True` appends, written as the literal
    "</s>" so that a completions endpoint (vLLM) and a local tokenizer both turn it
    into the EOS id."""
    return f"<|user|>\n{prompt}{EOS}\n<|assistant|>\n{EOS}\n<|assistant|>\n{EOS}"


# transformers' `clean_up_tokenization` (4.x and 5.x), which the official decoding applies
# (`tokenizer.clean_up_tokenization_spaces = True`): in this order, every occurrence
_CLEAN_UP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
             (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


def clean_up_tokenization(text: str) -> str:
    """The official decoding's space clean-up ("errors: 2 . x" -> "errors: 2. x"), applied
    once to the decoded text."""
    for old, new in _CLEAN_UP:
        text = text.replace(old, new)
    return text


def clean_completion(text: str) -> str:
    """Official `clean_responses`, net behaviour: keep what follows the last
    "[Explanation]:" (and the last "<|assistant|>"), drop "</s>" and "<unk>"."""
    if "[Explanation]:" in text:
        if "<|assistant|>" in text:
            text = text.split("<|assistant|>")[-1]
        # official quirk: only this literal is tested (an `or` of two strings in the source)
        if "[Explanation]:\n    <Explanation>\n" in text:
            text = text.split("[Explanation]:")[1]
        else:
            text = text.split("[Explanation]:")[-1]
    if "<|assistant|>" in text:
        text = text.split("<|assistant|>")[-1]
    return text.replace("</s>", "").replace("<unk>", "")


_LETTER_LINE = re.compile(r"\([a-f]\) .*")
_DIGIT_LINE = re.compile(r"\([1-6]\) .*")
_COUNT_AFTER_COLON = re.compile(r"(?<=: )\b\d+\b(?=\.)")
_LEADING_COUNT = re.compile(r"^\b\d+\b(?=\.)")  # no MULTILINE: only at the section's very start


def section_body(text: str, category: str) -> str | None:
    """The section's text up to the first blank line, or None if the header is absent."""
    found = re.search(rf"\[{re.escape(category)}\]:\s*(.*?)(?:\n\s*\n|\Z)", text, re.DOTALL)
    return found.group(1) if found else None


def parse_counts(text: str, category: str) -> tuple[int, list[int]]:
    """(total, six sub-category counts) of an error section, or (matched, zeros) for
    Matched Findings. An absent section or one starting with "No" counts 0."""
    zeros = [0] * 6
    body = section_body(text, category)
    if body is None or body.startswith("No"):
        return 0, zeros
    if category == MATCHED:
        hits = _LEADING_COUNT.findall(body)
        return (int(hits[0]) if hits else 0), zeros
    lines = sorted(_LETTER_LINE.findall(body))
    prefixes = [f"({k}) " for k in SUB_KEYS]
    if not lines:  # GPT-4-style numbered sub-categories
        lines = sorted(_DIGIT_LINE.findall(body))
        prefixes = [f"({i}) " for i in range(1, 7)]
    counts = list(zeros)
    for position, prefix in enumerate(prefixes):
        for line in lines:
            if line.startswith(prefix):
                numbers = _COUNT_AFTER_COLON.findall(line)
                if numbers:
                    counts[position] = int(numbers[0])  # a later matching line overwrites, as officially
    return sum(counts), counts


@dataclass
class GreenParse:
    score: float
    matched: int
    significant: list[int] = field(default_factory=list)
    insignificant: list[int] = field(default_factory=list)
    complete: bool = True  # False: no [Matched Findings] section, so the score is undefined (officially 0)


def score_completion(completion: str) -> GreenParse:
    """Parse a cleaned completion. GREEN = matched / (matched + significant errors), 0 when
    matched = 0 (even with no errors); insignificant errors are not in the score."""
    sig_total, sig = parse_counts(completion, SIGNIFICANT)
    _, insig = parse_counts(completion, INSIGNIFICANT)
    matched, _ = parse_counts(completion, MATCHED)
    complete = section_body(completion, MATCHED) is not None
    score = 0.0 if matched == 0 else matched / (matched + sig_total)
    return GreenParse(score, matched, sig, insig, complete)
