"""Names of models, submitters and institutions: how they are compared and shown.

Comparison (`name_key`): Unicode NFKC, invisible characters removed (controls, zero-width
and bidirectional formatting characters: categories Cc and Cf), letters that are
confusable with Latin ones (Cyrillic "е" for "e", Unicode TR39 data via
`confusable_homoglyphs`) replaced by them, case folded, whitespace collapsed: "MedVersa",
"medversa", "Med\u200bVersa" and "M\u0435dVersa" are one name.

Display (`display`): ANSI escape sequences and every control or formatting character
removed, so a name can neither recolour a terminal nor reverse itself on a page.
"""
from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from rexrank.errors import SubmissionError

# CSI (ESC [ ... final byte), OSC (ESC ] ... BEL or ESC \) and two-byte ESC sequences,
# plus their 8-bit forms (U+009B CSI, U+009D OSC)
_ANSI = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?|\x1b[@-Z\\-_]")
_INVISIBLE = {"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"}
# Hub user and organisation names: what a submitter is
SUBMITTER_PATTERN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._ -]{0,94}[A-Za-z0-9._-])?")


def _is_invisible(ch: str) -> bool:
    return unicodedata.category(ch) in _INVISIBLE


def display(text, *, keep_newlines: bool = False) -> str:
    """`text` without escape sequences or control/formatting characters (for terminals,
    logs and pages). `keep_newlines` keeps line breaks and tabs (multi-line messages)."""
    text = _ANSI.sub("", str(text))
    keep = {"\n", "\t"} if keep_newlines else set()
    return "".join(ch for ch in text if ch in keep or not _is_invisible(ch))


@lru_cache(maxsize=4096)
def _latin_skeleton(text: str) -> str:
    from confusable_homoglyphs import confusables

    found = confusables.is_confusable(text, greedy=True, preferred_aliases=["latin", "common"]) or []
    mapping = {}
    for entry in found:
        latin = [h["c"] for h in entry["homoglyphs"] if h["n"].startswith("LATIN") or h["c"].isascii()]
        if latin:
            mapping[entry["character"]] = latin[0]
    return "".join(mapping.get(ch, ch) for ch in text)


@lru_cache(maxsize=8192)
def name_key(text: str) -> str:
    """The form names are compared in (see the module docstring)."""
    text = unicodedata.normalize("NFKC", _ANSI.sub("", str(text)))
    text = "".join(ch for ch in text if not _is_invisible(ch) or ch in " \t\n")
    text = _latin_skeleton(text).casefold()
    return " ".join(text.split())


def same_name(a: str, b: str) -> bool:
    return name_key(a) == name_key(b)


def check_visible(label: str, text: str) -> None:
    """Refuse a name that holds escape sequences or invisible characters (they would be
    dropped on display, so two different-looking names could show alike)."""
    for pos, ch in enumerate(text):
        if ch in " " or not _is_invisible(ch):
            continue
        name = unicodedata.name(ch, f"U+{ord(ch):04X}")
        raise SubmissionError(
            f"{label} contains an invisible or control character ({name}, U+{ord(ch):04X}) at position {pos + 1}; "
            "remove it"
        )


def check_submitter(submitter: str) -> None:
    """A submitter is a Hub user or organisation name (ASCII: the quota counts per
    submitter, so lookalike letters must not make a second one)."""
    if SUBMITTER_PATTERN.fullmatch(submitter):
        return
    bad = next((ch for ch in submitter if not (ch.isascii() and (ch.isalnum() or ch in "._- "))), None)
    what = (f"character {bad!r} ({unicodedata.name(bad, f'U+{ord(bad):04X}')}) is not allowed" if bad
            else "it must start with a letter or digit and be at most 96 characters")
    raise SubmissionError(
        f"submitter {submitter!r}: a submitter is a Hugging Face user or organisation name "
        f"(ASCII letters, digits, spaces, '.', '_', '-'); {what}"
    )
