""""Did you mean …?" for a name the user mistyped (a metric, a test set, a track, a column):
the closest known names, by difflib's similarity ratio, compared without case."""
from __future__ import annotations

import difflib
from typing import Iterable


def closest(name: str, known: Iterable[str], *, n: int = 1) -> list[str]:
    """Up to `n` of `known` closest to `name` (none when nothing is close)."""
    known = list(dict.fromkeys(str(k) for k in known))
    by_folded = {k.casefold(): k for k in known}
    folded = str(name).strip().casefold()
    if folded in by_folded:  # "BLEU2" for bleu2: only the case differs
        return [by_folded[folded]]
    return [by_folded[m] for m in difflib.get_close_matches(folded, list(by_folded), n=n, cutoff=0.6)]


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """" (did you mean bleu2?)", or "" when no known name is close."""
    found = closest(name, known)
    return f" (did you mean {found[0]}?)" if found else ""


def did_you_mean_all(names: list[str], known: Iterable[str]) -> str:
    """The suggestions for several unknown names: " (did you mean bleu2?)" for one,
    " (did you mean bleu2 for 'bleu', radcliq for 'radclique'?)" for more."""
    known = list(known)
    pairs = [(name, found[0]) for name in names for found in [closest(name, known)] if found]
    if not pairs:
        return ""
    if len(names) == 1:
        return f" (did you mean {pairs[0][1]}?)"
    return " (did you mean " + ", ".join(f"{hit} for {name!r}" for name, hit in pairs) + "?)"
