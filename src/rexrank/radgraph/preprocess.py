"""Report -> word list, per RadGraph model type, as radgraph 0.1.18 `utils.preprocess_reports`.

Facts from radgraph 0.1.18 (PyPI, MIT) `radgraph/utils.py` and CXR-Report-Metric (MIT)
`radgraph_inference/inference.py`; reference metrics_nonllm.md §4.1/§4.2. Written anew.

- `radgraph` (RadGraph v1, the model behind RadCliQ): put a space before and after each of
  / , : . ! ? ( ) unless a space is already there, then split on whitespace. The official
  character class is written `[/,-,:,.,!?()]`; its `,-,` is a range from ',' to ',', so
  the hyphen is *not* split off. No lower-casing.
- `radgraph-xl`: undo a few escaped sequences, collapse whitespace, NLTK
  `wordpunct_tokenize` (regex `\\w+|[^\\w\\s]+`, re-implemented here to avoid the nltk
  dependency), then a handful of punctuation fixes.
"""
from __future__ import annotations

import re

from rexrank.errors import MetricError

MODEL_TYPES = ("radgraph", "radgraph-xl")

_PUNCT = "/,:.!?()"
# lookbehind/lookahead on a literal space only (a tab or newline does not count), as officially
_RADGRAPH_SPLIT = re.compile(rf"(?<! )(?=[{re.escape(_PUNCT)}])|(?<=[{re.escape(_PUNCT)}])(?! )")
_WORDPUNCT = re.compile(r"\w+|[^\w\s]+")  # nltk.tokenize.WordPunctTokenizer's pattern
_SPACES = re.compile(r"\s+")


def tokenize_radgraph(report: str) -> list[str]:
    return _RADGRAPH_SPLIT.sub(" ", report).split()


def normalize_radgraph_xl(report: str) -> str:
    """The text radgraph 0.1.18 feeds to the XL model, before the final split."""
    text = report.replace("\\n", "  ")  # literal backslash-n, as left by some CSV exports
    text = text.replace("\\f", "  ")
    text = text.replace("\\u2122", "      ")
    text = text.replace("\n", " ")
    text = text.replace('\\"', "``")
    text = " ".join(_WORDPUNCT.findall(_SPACES.sub(" ", text)))
    for before, after in ((").", ") ."), ("%.", "% ."), (".'", ". '"), ("%,", "% ,"), ("%)", "% )")):
        text = text.replace(before, after)
    return text


def tokenize_radgraph_xl(report: str) -> list[str]:
    return normalize_radgraph_xl(report).split()


def words_for(report: str, model_type: str) -> list[str]:
    if model_type == "radgraph":
        return tokenize_radgraph(report)
    if model_type == "radgraph-xl":
        return tokenize_radgraph_xl(report)
    raise MetricError(f"radgraph: unsupported model_type {model_type!r}; supported: {', '.join(MODEL_TYPES)}")


def reader_word(word: str) -> str:
    """DyGIE's dataset reader feeds '/.' and '/?' to the encoder as '.' and '?' (the
    word list in the output keeps the original)."""
    return word[1:] if word in ("/.", "/?") else word
