"""Where spaCy 3.7's English tokenizer starts its tokens, as far as sentence splitting needs.

medSpaCy marks RuSH's sentence starts on spaCy tokens (`spacy.blank("en")`'s tokenizer in
RaTEScore's pipeline), so a RuSH boundary that falls inside a token moves to a token edge.
Boundaries inside a whitespace-free chunk are rare (11 of the ~100,000 on the ReXrank
texts checked, all before a "," or ":"), so this reproduces spaCy's whitespace handling
exactly and its affix splitting (prefixes, suffixes, infixes, the dotted abbreviations
it keeps whole, Unicode symbols, URLs) in reduced form: Latin script, no IP-address
URLs. Patterns are facts read from spaCy 3.7.5's `lang/punctuation.py`,
`lang/char_classes.py`, `lang/tokenizer_exceptions.py` and `lang/en/tokenizer_exceptions.py`
(MIT).
"""
from __future__ import annotations

import re
import unicodedata

_QUOTES = "'\"”“`‘´’‚,„»«「」『』（）〔〕【】《》〈〉⟦⟧"  # spaCy counts "," among its quotes
_PUNCT = "…,:;!?¿¡()[]{}<>_#*&。？！，、；：～·।،۔؛٪"
_CURRENCY = "$£€¥"
_PREFIX = re.compile(rf"[§%=—–{re.escape(_PUNCT + _QUOTES + _CURRENCY)}]|\+(?![0-9])|\.\.+")
_UNITS = (
    "km|km²|km³|m|m²|m³|dm|dm²|dm³|cm|cm²|cm³|mm|mm²|mm³|ha|µm|nm|yd|in|ft|kg|g|mg|µg|t|lb|oz|m/s|km/h|kmh|mph|"
    "hPa|Pa|mbar|mb|MB|kb|KB|gb|GB|tb|TB|T|G|M|K|%"
)
_SUFFIX = re.compile(
    rf"(?:[{re.escape(_PUNCT + _QUOTES)}—–]|\.\.+|'s|'S|’s|’S|(?<=[0-9])\+|(?<=°[FfCcKk])\."
    rf"|(?<=[0-9])(?:[{re.escape(_CURRENCY)}])|(?<=[0-9])(?:{_UNITS})"
    rf"|(?<=[0-9a-zß-öø-ÿ%²\-+|{re.escape(_PUNCT + _QUOTES)}])\.|(?<=[A-ZÀ-ÖØ-Þ][A-ZÀ-ÖØ-Þ])\.)$"
)
_ALPHA = "A-Za-zÀ-ÖØ-öø-ÿ"
_INFIX = re.compile(
    rf"\.\.+|…|(?<=[0-9])[+\-*^](?=[0-9-])|(?<=[a-zß-öø-ÿ{re.escape(_QUOTES)}])\.(?=[A-ZÀ-ÖØ-Þ{re.escape(_QUOTES)}])"
    rf"|(?<=[{_ALPHA}]),(?=[{_ALPHA}])|(?<=[{_ALPHA}0-9])(?:-|–|—|--|---|——|~)(?=[{_ALPHA}])"
    rf"|(?<=[{_ALPHA}0-9])[:<>=/](?=[{_ALPHA}])"
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


# spaCy's URL_MATCH (host labels, a lower-case top-level domain, port, path; its IP-address
# branch is left out): a URL is one token, never split at infixes
_URL_PATTERN = re.compile(
    r"(?:[\w+\-.]{2,}://)?(?:\S+(?::\S*)?@)?"
    r"(?:(?:[A-Za-z0-9\u00a1-\uffff][A-Za-z0-9\u00a1-\uffff_-]{0,62})?[A-Za-z0-9\u00a1-\uffff]\.)+"
    r"[a-zß-öø-ÿ]{2,63}(?::\d{2,5})?(?:[/?#]\S*)?"
)
_URL_MAX_CHARS = 2048  # longer chunks are not tried (bounded time on pathological input)


def _url(text: str) -> bool:
    return len(text) <= _URL_MAX_CHARS and _URL_PATTERN.fullmatch(text) is not None


_SUFFIX_WINDOW = 16  # suffixes are looked for in the last characters first (linear time on long chunks)
_LONGEST_SPECIAL = max(map(len, _SPECIALS))


def _is_icon(char: str) -> bool:
    # spaCy's "icons" (Unicode symbols such as "°"): a prefix, a suffix and an infix
    return char > "\x7f" and unicodedata.category(char) == "So"


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
    for size, i in sorted(found, reverse=True):  # longest first, then the later one, as spaCy filters
        if i in taken or i + size - 1 in taken:
            continue
        taken.update(range(i, i + size))
        joined.update(range(i + 1, i + size))
    return [start for k, start in enumerate(starts) if k not in joined]


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
        pre_len = 1 if _is_icon(chunk[begin]) else pre.end() - begin if pre else 0
        if pre_len and _special(chunk, begin + pre_len, end, specials):
            begin += pre_len
            prefix_ends.append(begin)
            break
        suf_len = (1 if _is_icon(chunk[end - 1]) else _suffix_len(chunk, begin + pre_len, end)) if begin + pre_len < end else 0
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
    if middle and not _special(chunk, begin, end, specials) and not _url(middle):
        infixes = [(m.start(), m.end()) for m in _INFIX.finditer(middle)]
        if not middle.isascii():
            infixes += [(i, i + 1) for i, c in enumerate(middle) if _is_icon(c)]
        for infix_start, infix_end in infixes:
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
