"""Names of models, submitters and institutions: what they may hold, how they are compared
and how they are shown.

Repertoire (`check_name`): a model name or an institution holds letters, digits, spaces
and the punctuation in NAME_PUNCTUATION (combining marks only after a letter), mixes no two
of the Latin, Greek and Cyrillic scripts, and does not begin with a character a spreadsheet
reads as a formula (`= + - @`). Every name of the published ReXrank tables is valid.

Comparison (`name_key`, a confusables skeleton in the manner of Unicode TR39): Unicode NFKC;
ANSI escapes, invisible characters (categories Cc, Cf, ...) and every Default_Ignorable
code point removed (also those outside Cf: U+034F, variation selectors, Hangul, Khmer and
Mongolian fillers); combining marks removed; every dash variant read as "-"; each
character replaced by the representative of its TR39 confusables class (the data of
`confusable_homoglyphs`, which is Unicode's confusables.txt), before and after case
folding, so that l, I, 1 and | are one letter and Cyrillic "е" is "e"; the sequences the
data lists ("rn" for "m") folded; "*" (ReXrank's "trained on this test set" marker)
dropped; whitespace collapsed. "MedVersa", "medversa", "Med\u200bVersa", "M\u0435dVersa",
"MedVersa\ufe0f" are one name, and so are "MAIRA-2", "MAlRA\u20102" and "MAIRA\u20132".

Comparison decides which filings are one model within a namespace (identical
resubmissions), and which names the board marks as lookalikes of each other across
namespaces (rexrank.leaderboard.tables.lookalikes); it never makes a name anyone's.

Display (`display`): ANSI escape sequences and every control or formatting character
removed, so a name can neither recolour a terminal nor reverse itself on a page. A
submitted model is shown as "namespace / name" (`model_title`).
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

# Default_Ignorable_Code_Point (Unicode DerivedCoreProperties.txt, 15.1): shown as nothing,
# whatever their category (U+034F is Mn, U+115F a letter, U+FE0F a variation selector)
_DEFAULT_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)


def _is_invisible(ch: str) -> bool:
    return unicodedata.category(ch) in _INVISIBLE


def display(text, *, keep_newlines: bool = False) -> str:
    """`text` without escape sequences or control/formatting characters (for terminals,
    logs and pages). `keep_newlines` keeps line breaks and tabs (multi-line messages)."""
    text = _DEFAULT_IGNORABLE.sub("", _ANSI.sub("", str(text)))
    keep = {"\n", "\t"} if keep_newlines else set()
    return "".join(ch for ch in text if ch in keep or not _is_invisible(ch))


# dash variants read as "-": Pd is the dash category (U+2010, U+2013, U+2014, ...); the
# others are minus signs and hyphen-like symbols outside it
_DASHES = {"\u2212", "\u2043", "\u02d7", "\u2796", "\ufe63", "\uff0d", "\u00af"}
NAME_KEY_VERSION = 2  # the index files are named by name_key: a store indexed with another version is re-indexed


def _is_dash(ch: str) -> bool:
    return ch in _DASHES or (ch != "-" and unicodedata.category(ch) == "Pd")


@lru_cache(maxsize=1)
def _confusable_classes() -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    """(character -> its class's representative, (ASCII sequence, representative) pairs)
    from the TR39 confusables data that confusable_homoglyphs ships. A class is every
    string linked to another by the data; its representative is an upper-case ASCII
    letter when it has one (so that case folding afterwards makes "l", "I" and "i" one
    letter), else an ASCII character, else an ASCII string ("rs" for U+20A8), else its
    smallest member."""
    from confusable_homoglyphs import confusables

    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def clean(text: str) -> str:  # the data wraps right-to-left letters in LRM marks
        return text.replace("\u200e", "").replace("\u200f", "")

    for char, homoglyphs in confusables.confusables_data.items():
        for h in homoglyphs:
            a, b = find(clean(char)), find(clean(h["c"]))
            if a != b:
                parent[a] = b
    classes: dict[str, list[str]] = {}
    for member in list(parent):
        classes.setdefault(find(member), []).append(member)
    chars: dict[str, str] = {}
    sequences = []
    for members in classes.values():
        rep = min(members, key=lambda m: (not (len(m) == 1 and m.isascii() and m.isupper()),
                                          not (len(m) == 1 and m.isascii()), not m.isascii(), len(m), m))
        chars.update({m: rep for m in members if len(m) == 1 and m != rep})
        if len(rep) == 1 and rep.isascii():  # "rn" -> "m": a sequence read as one letter
            sequences += [(m, rep) for m in members if len(m) > 1 and m.isascii()]
    return chars, tuple(sorted(sequences, key=lambda p: (-len(p[0]), p[0])))


def _fold(text: str) -> str:
    chars, _ = _confusable_classes()
    return "".join(chars.get(ch, ch) for ch in text)


@lru_cache(maxsize=8192)
def name_key(text: str) -> str:
    """The form names are compared in (see the module docstring)."""
    text = unicodedata.normalize("NFKC", _ANSI.sub("", str(text)))
    text = _DEFAULT_IGNORABLE.sub("", text)
    text = "".join(ch for ch in text if not _is_invisible(ch) or ch in " \t\n")
    text = "".join(ch for ch in unicodedata.normalize("NFD", text) if unicodedata.category(ch) not in ("Mn", "Me"))
    text = "".join("-" if _is_dash(ch) else ch for ch in text).replace("*", "")
    text = _fold(_fold(text).casefold()).casefold()
    for sequence, rep in _confusable_classes()[1]:
        text = text.replace(sequence.casefold(), rep.casefold())
    return " ".join(text.split())


def same_name(a: str, b: str) -> bool:
    return name_key(a) == name_key(b)


def check_visible(label: str, text: str) -> None:
    """Refuse a name that holds escape sequences or invisible characters (they would be
    dropped on display, so two different-looking names could show alike)."""
    for pos, ch in enumerate(text):
        if ch == " " or not (_is_invisible(ch) or _DEFAULT_IGNORABLE.match(ch)):
            continue
        name = unicodedata.name(ch, f"U+{ord(ch):04X}")
        raise SubmissionError(
            f"{label} contains an invisible or control character ({name}, U+{ord(ch):04X}) at position {pos + 1}; "
            "remove it"
        )


# what a model name or institution may hold besides letters, digits and spaces (every name
# of the published ReXrank tables fits: "RadPhi3.5Vision", "BiomedGPT_iu_xray*", "MAIRA-2")
NAME_PUNCTUATION = "-_.,'()&/+:*"
# a spreadsheet reads a cell that starts with one of these as a formula (OWASP, CSV injection)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_CONFUSABLE_SCRIPTS = ("LATIN", "GREEK", "CYRILLIC")


def _script(ch: str) -> str | None:
    word = unicodedata.name(ch, "").split(" ")[0]
    return word if word in _CONFUSABLE_SCRIPTS else None


def _char_name(ch: str) -> str:
    return f"{unicodedata.name(ch, 'U+%04X' % ord(ch))}, U+{ord(ch):04X}"


def check_name(label: str, text: str) -> None:
    """Refuse a model name or institution outside the visible repertoire (module
    docstring; mixed scripts: `check_one_script`); the message names the character and
    its position."""
    check_visible(label, text)
    if text[:1] in FORMULA_START:
        raise SubmissionError(f"{label} {display(text)!r} begins with {text[0]!r}, which spreadsheets read as a formula; "
                              "begin it with a letter or digit")
    for pos, ch in enumerate(text):
        cat = unicodedata.category(ch)
        if cat[0] in "L" or cat == "Nd" or ch == " " or ch in NAME_PUNCTUATION:
            continue
        if cat[0] == "M" and pos and unicodedata.category(text[pos - 1])[0] in "LM":
            continue
        raise SubmissionError(
            f"{label} {display(text)!r}: character {ch!r} ({_char_name(ch)}) at position {pos + 1} is not allowed; "
            f"names hold letters, digits, spaces and {' '.join(NAME_PUNCTUATION)}"
        )


def check_one_script(label: str, text: str) -> None:
    """Refuse a name that mixes Latin, Greek and Cyrillic letters (they look alike)."""
    scripts = sorted({s for s in map(_script, text) if s})
    if len(scripts) > 1:
        raise SubmissionError(f"{label} {display(text)!r} mixes {' and '.join(s.title() for s in scripts)} letters "
                              "(they look alike); write it in one of them")


def check_url(label: str, url: str) -> None:
    """A model URL is empty or a plain http(s) address with a host."""
    from urllib.parse import urlsplit

    check_visible(label, url)
    if not url:
        return
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise SubmissionError(f"{label} {display(url)!r} is not a URL ({exc})") from None
    bad = next((ch for ch in url if ch.isspace() or ch in '"<>\\^`{|}'), None)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc or bad is not None:
        why = f"character {bad!r} is not allowed" if bad is not None else "it must start with http:// or https:// and name a host"
        raise SubmissionError(f"{label} {display(url)!r}: {why}")


def check_submitter(submitter: str, *, label: str = "submitter") -> None:
    """A submitter (or a namespace) is a Hub user or organisation name (ASCII: on a local
    store, where the typed name is the identity, lookalike letters must not make a second
    one)."""
    if SUBMITTER_PATTERN.fullmatch(submitter):
        return
    bad = next((ch for ch in submitter if not (ch.isascii() and (ch.isalnum() or ch in "._- "))), None)
    what = (f"character {bad!r} ({unicodedata.name(bad, f'U+{ord(bad):04X}')}) is not allowed" if bad
            else "it must start with a letter or digit and be at most 96 characters")
    raise SubmissionError(
        f"{label} {submitter!r}: a {label} is a Hugging Face user or organisation name "
        f"(ASCII letters, digits, spaces, '.', '_', '-'); {what}"
    )


def model_title(namespace: str, model_name: str) -> str:
    """How the board names a model: "namespace / name" (a published ReXrank entry, which
    has no namespace, by its name)."""
    return f"{namespace} / {model_name}" if namespace else model_name
