"""Where spaCy 3.7's English tokenizer starts its tokens, as far as sentence splitting needs.

medSpaCy marks RuSH's sentence starts on spaCy tokens (`spacy.blank("en")`'s tokenizer in
RaTEScore's pipeline), so a RuSH boundary that falls inside a token moves to a token edge.
Boundaries inside a whitespace-free chunk are rare (11 of the ~100,000 on the ReXrank
texts checked, all before a "," or ":"), but in other scripts they are not ("clear.Легкие"
is cut at the period), so this reproduces spaCy's whitespace handling and its affix
splitting (prefixes, suffixes, infixes, the dotted abbreviations it keeps whole, Unicode
symbols, URLs; not IP-address URLs) with spaCy's own character classes for every script
it lists (`rexrank/data/spacy_char_classes.json`). Patterns are facts read from spaCy
3.7.5's `lang/punctuation.py`, `lang/char_classes.py`, `lang/tokenizer_exceptions.py` and
`lang/en/tokenizer_exceptions.py` (MIT).
"""
from __future__ import annotations

import json
import re
from importlib import resources

def _char_classes() -> dict:
    # spaCy's character classes (every script it lists: Latin, Greek, Cyrillic, Arabic,
    # Hebrew, Indic, Hangul, CJK, ...) as code-point ranges, read from spaCy by
    # benchmarks/spacy_char_classes.py (source and licence: rexrank/data/README.md)
    with resources.files("rexrank.data").joinpath("spacy_char_classes.json").open(encoding="utf-8") as fh:
        return json.load(fh)


_CC = _char_classes()


def _class(name: str) -> str:
    """The body of a regex character class ("[...]") holding spaCy's class `name`."""
    return "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in _CC["ranges"][name])


def _alternation(entries) -> str:
    return "|".join(map(re.escape, entries))


_ALPHA, _LOWER, _UPPER, _ICONS = (_class(n) for n in ("alpha", "alpha_lower", "alpha_upper", "icons"))
_PUNCT, _QUOTES, _CURRENCY, _UNITS, _HYPHENS = (_CC["lists"][n] for n in ("punct", "quotes", "currency", "units", "hyphens"))
_Q = re.escape("".join(_QUOTES))
# spaCy's English affix rules. A prefix is the first alternative that matches, in spaCy's
# order; its one-character entries are one class here, which changes no outcome (no
# longer entry that could win starts with one of them: "……" comes after "…")
_SINGLES = re.escape("".join(e for e in _PUNCT + _QUOTES + _CURRENCY if len(e) == 1))
_PREFIX = re.compile(rf"[§%=—–{_SINGLES}{_ICONS}]|\+(?![0-9])|\.\.+|{_alternation(e for e in _PUNCT + _QUOTES + _CURRENCY if len(e) > 1)}")
# before a final ".": digits, lower-case letters, "%²-+", and the characters of spaCy's
# PUNCT alternation and quote group as they land in its character class ("|", "(?:)")
_BEFORE_PERIOD = re.escape("%²-+|(?:)" + "".join(_PUNCT)) + _Q
# a suffix ends the string, so which alternative matches first is moot: the one-character
# entries are one class, the rules for a final "." are tried only at a "."
_SUFFIX = re.compile(
    rf"(?:[{re.escape(''.join(e for e in _PUNCT + _QUOTES if len(e) == 1))}{_ICONS}]|{_alternation(e for e in _PUNCT + _QUOTES if len(e) > 1)}|\.\.+|…|'s|'S|’s|’S|—|–"
    rf"|(?<=[0-9])\+|(?<=[0-9])(?:{_alternation(_CURRENCY)}|{_alternation(_UNITS)})"
    rf"|(?=\.)(?:(?<=°[FfCcKk])|(?<=[0-9{_LOWER}{_BEFORE_PERIOD}])|(?<=[{_UPPER}][{_UPPER}]))\.)$"
)
# the rules after the icons all start with one of these characters: tried only there
_INFIX_FIRST = re.escape("+-*^.,:<>=/" + "".join({h[0] for h in _HYPHENS}))
_INFIX = re.compile(
    rf"\.\.+|…|[{_ICONS}]|(?=[{_INFIX_FIRST}])(?:(?<=[0-9])[+\-*^](?=[0-9-])|(?<=[{_LOWER}{_Q}])\.(?=[{_UPPER}{_Q}])"
    rf"|(?<=[{_ALPHA}]),(?=[{_ALPHA}])|(?<=[{_ALPHA}0-9])(?:{_alternation(_HYPHENS)})(?=[{_ALPHA}])"
    rf"|(?<=[{_ALPHA}0-9])[:<>=/](?=[{_ALPHA}]))"
)


# spaCy's English special cases that hold punctuation (kept as one token; "10a.m." and the
# like are split by spaCy into number + "a.m.", which starts no token at a sentence edge)
_SPECIALS = frozenset(
    "Adm. Ak. Ala. Apr. Ariz. Ark. Aug. Bros. Calif. Co. Colo. Conn. Corp. D.C. Dec. Del. Dr. E.G. E.g. Feb. "
    "Fla. Ga. Gen. Gov. I.E. I.e. Ia. Id. Ill. Inc. Ind. Jan. Jr. Jul. Jun. Kan. Kans. Ky. La. Ltd. Mar. Mass. "
    "Md. Messrs. Mich. Minn. Miss. Mo. Mont. Mr. Mrs. Ms. Mt. N.C. N.D. N.H. N.J. N.M. N.Y. Neb. Nebr. Nev. "
    "Nov. Oct. Okla. Ore. Pa. Ph.D. Prof. Rep. Rev. S.C. Sen. Sep. Sept. St. Tenn. Va. Wash. Wis. a.m. co. "
    "e.g. i.e. p.m. v.s. vs. °C. °F. °K. °c. °f. °k. ä. ö. ü.".split()
    + [f"{c}." for c in "abcdefghijklmnopqrstuvwxyz"]
    # emoticons and the like, kept whole
    + r"""
    ' '' (*_*) (-8 (-: (-; (-_-) (: (; (= (>_<) (^_^) (o: (¬_¬) (ಠ_ಠ) (╯°□°）╯︵┻━┻ )-: ): -_- -__-
    0_0 0_o 8) 8-) 8-D :'( :') :'-( :'-) :( :(( :((( :() :) :)) :))) :* :-( :-(( :-((( :-) :-))
    :-))) :-* :-/ :-0 :-3 :-> :-D :-O :-P :-X :-] :-o :-p :-x :-| :-} :/ :0 :1 :3 :> :D :O :P :X :]
    :o :o) :p :x :| :} :’( :’) :’-( :’-) ;) ;-) ;-D ;D ;_; </3 <3 <33 <333 =( =) =/ =3 =D =[ =] =|
    >:( >:o ><(((*> @_@ C++ O_O O_o V_V [-: [: [= \") \n \t ]= ^_^ ^__^ ^___^ and/or o_0 o_O o_o
    v_v w/o ¯\(ツ)/¯ ಠ_ಠ ಠ︵ಠ — ‘S ‘s ’ ’’
""".split()
)
# special cases that spaCy writes as several tokens ("°C." is "°" "C" "."): the offsets
# inside them where a token starts
_SPECIAL_SPLITS = {f"°{unit}.": (1, 2) for unit in "CFKcfk"}


# spaCy's URL_MATCH (host labels, a lower-case top-level domain, port, path; its IP-address
# branch is left out): a URL is one token, never split at infixes
_URL_PATTERN = re.compile(
    r"(?:[\w+\-.]{2,}://)?(?:\S+(?::\S*)?@)?"
    r"(?:(?:[A-Za-z0-9\u00a1-\uffff][A-Za-z0-9\u00a1-\uffff_-]{0,62})?[A-Za-z0-9\u00a1-\uffff]\.)+"
    rf"[{_LOWER}]{{2,63}}(?::\d{{2,5}})?(?:[/?#]\S*)?"
)
_URL_MAX_CHARS = 2048  # longer chunks are not tried (bounded time on pathological input)


def _url(text: str) -> bool:
    return len(text) <= _URL_MAX_CHARS and _URL_PATTERN.fullmatch(text) is not None


_SUFFIX_WINDOW = 16  # suffixes are looked for in the last characters first (linear time on long chunks)
_LONGEST_SPECIAL = max(map(len, _SPECIALS))


def _special(chunk: str, begin: int, end: int, specials: frozenset = _SPECIALS) -> bool:
    return end - begin <= _LONGEST_SPECIAL and chunk[begin:end] in specials


def _suffix_len(chunk: str, begin: int, end: int) -> int:
    # on a slice, as spaCy searches the string left after the prefix (lookbehinds see
    # nothing before it); only a run of dots can be longer than the window
    window = max(begin, end - _SUFFIX_WINDOW)
    found = _SUFFIX.search(chunk[window:end])
    if found is not None and found.start() == 0 and window > begin:
        found = _SUFFIX.search(chunk[begin:end])
    return len(found.group()) if found else 0


def _chunk_starts(chunk: str) -> list[int]:
    """Token start offsets inside one whitespace-free chunk: spaCy's affix splitting, then
    its special-case pass, which joins tokens that spell a special case as the affix rules
    cut it ("a.m" + "." in "a.m.,FINDINGS"; ")" + ":" in "(3):")."""
    return _join_special_runs(chunk, _affix_starts(chunk, _SPECIALS))


def _join_special_runs(chunk: str, starts: list[int]) -> list[int]:
    bounds = [*starts, len(chunk)]
    tokens = [chunk[a:b] for a, b in zip(bounds, bounds[1:])]
    found = [
        (size, i)
        for size in _SPECIAL_RUN_SIZES
        for i in range(len(tokens) - size + 1)
        if tuple(tokens[i : i + size]) in _SPECIAL_RUNS
    ]
    if not found:
        return starts
    taken: set[int] = set()
    joined: set[int] = set()
    split: list[int] = []  # a joined run becomes the special's own tokens
    for size, i in sorted(found, reverse=True):  # longest first, then the later one, as spaCy filters
        if i in taken or i + size - 1 in taken:
            continue
        taken.update(range(i, i + size))
        joined.update(range(i + 1, i + size))
        split += [starts[i] + offset for offset in _SPECIAL_SPLITS.get(_SPECIAL_RUNS[tuple(tokens[i : i + size])], ())]
    return sorted({start for k, start in enumerate(starts) if k not in joined} | set(split))


def _affix_starts(chunk: str, specials: frozenset) -> list[int]:
    """Token start offsets of spaCy's affix loop: strip a prefix and a suffix per round
    until nothing changes or a special case is left, then split the middle at infixes."""
    begin, end = 0, len(chunk)
    prefix_ends: list[int] = []  # a token starts after each prefix ...
    suffix_starts: list[int] = []  # ... and at each suffix
    last = -1
    while begin < end and end - begin != last and not _special(chunk, begin, end, specials):
        last = end - begin
        pre = _PREFIX.match(chunk, begin, end)
        pre_len = pre.end() - begin if pre else 0
        if pre_len and _special(chunk, begin + pre_len, end, specials):
            begin += pre_len
            prefix_ends.append(begin)
            break
        suf_len = _suffix_len(chunk, begin + pre_len, end) if begin + pre_len < end else 0
        if suf_len and _special(chunk, begin, end - suf_len, specials):
            end -= suf_len
            suffix_starts.append(end)
            break
        if pre_len and suf_len and pre_len + suf_len <= end - begin:
            begin += pre_len
            end -= suf_len
            prefix_ends.append(begin)
            suffix_starts.append(end)
        elif pre_len:
            begin += pre_len
            prefix_ends.append(begin)
        elif suf_len:
            end -= suf_len
            suffix_starts.append(end)
    starts = [0, *prefix_ends]
    middle = chunk[begin:end]
    starts += [begin + offset for offset in _SPECIAL_SPLITS.get(middle, ()) if middle in specials]
    if middle and not _special(chunk, begin, end, specials) and not _url(middle):
        for infix in _INFIX.finditer(middle):
            infix_start, infix_end = infix.span()
            if infix_start > 0:  # spaCy ignores an infix at the very start
                starts += [begin + infix_start, begin + infix_end]
    starts.extend(suffix_starts)
    return sorted({s for s in starts if s < len(chunk)})


def _special_runs() -> dict[tuple[str, ...], str]:
    """Special cases as the affix rules alone cut them, when that gives several tokens."""
    runs = {}
    for special in _SPECIALS:
        bounds = [*_affix_starts(special, frozenset()), len(special)]
        if len(bounds) > 2:
            runs[tuple(special[a:b] for a, b in zip(bounds, bounds[1:]))] = special
    return runs


_SPECIAL_RUNS = _special_runs()
_SPECIAL_RUN_SIZES = sorted({len(run) for run in _SPECIAL_RUNS})


def token_starts(text: str) -> list[tuple[int, bool]]:
    """(offset, is whitespace) of every spaCy token. Whitespace as spaCy splits it: one
    ASCII space after a token belongs to that token; any other whitespace run (or what is
    left of it) is a token of its own."""
    out: list[tuple[int, bool]] = []
    for run in re.finditer(r"\s+|\S+", text):
        start, piece = run.start(), run.group()
        if piece[0].isspace():
            if start > 0 and piece[0] == " ":
                if len(piece) > 1:
                    out.append((start + 1, True))
            else:
                out.append((start, True))
        else:
            out.extend((start + offset, False) for offset in _chunk_starts(piece))
    return out
