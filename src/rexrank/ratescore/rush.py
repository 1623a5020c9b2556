"""RuSH sentence segmentation (Shi et al., AMIA 2016) as PyRuSH 1.0.13 computes it.

RaTEScore's official sentences come from medSpaCy 1.3.1's `medspacy_pyrush` component:
PyRuSH's `RuSH` over the rules in medSpaCy's `resources/en/rush_rules.tsv`, matched by
PyFastNER 1.0.10's `FastCNER`. This module is rexrank's own implementation of that rule
engine and segmenter, written from the behaviour of those packages (all MIT / Apache-2.0;
read at PyRuSH c358b02 "1.0.13 version" and PyFastNER 1.0.10), quirks included, because
the official numbers depend on them. The rules file ships unchanged as
`rexrank/data/rush_rules.tsv` (source and licence: `rexrank/data/README.md`).

How the rule language is matched (FastCNER):
- every rule is tried from every start position; `\\X` tests one character against a
  class (table `_CLASSES`), other characters match themselves;
- `+` repeats what precedes it, but only two ways are tried: no further repetition, and
  the longest run (at most `MAX_REPEAT` more characters); nothing in between;
- `(` and `)` delimit the reported span; without them the span is the whole match;
- rules live in one character trie walked depth-first; at each node the order is:
  wildcards (in the order the rules introduced them), `(`, `)`, a rule ending here, the
  literal character, `+`. A text character equal to a structural key (`+`, `\\`) follows
  that key as a literal, as the original does;
- two kinds of spans, sentence begins (`stbegin`) and ends (`stend`). A new span that
  overlaps a kept span of its kind replaces it only when strictly wider (every span
  carries the same default score, so the rule scores do not rank them); afterwards spans
  of "pseudo" rules (odd scores) are dropped. Overlap follows quicksectx's interval test,
  including the first stored interval of each kind being one shorter and replaced
  intervals staying in the index (so a later span can still be compared through them).
  When several kept spans overlap a new one, the original compares it with the one that
  quicksectx lists last, an order set by random treap priorities (C `rand()`): the
  official pipeline can then give different sentences for the same text from run to run.
  On the 9,438 ReXrank texts no output depends on it (checked with 8 `srand` seeds); 2
  of 40,000 noisy fuzz texts do. Here the span added last is taken, which gave one of
  the official outcomes for both.
"""
from __future__ import annotations

import bisect
import csv
import re
import string
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

MAX_REPEAT = 50  # PyRuSHSentencizer's max_repeat (the rules file's @MaxRepeatLength is not read)
MIN_SENT_CHARS = 5  # RuSH's min_sent_chars: a gap wider than this becomes a sentence
BEGIN, END = "stbegin", "stend"

_PUNCTUATION = frozenset(string.punctuation)
# \X wildcards that consume one character (FastCNER's WildCardFunctions; `\\`, a literal
# backslash, is refused by parse_rules; `\b` and `\e` match positions, see _match)
_CLASSES: dict[str, Callable[[str], bool]] = {
    "s": lambda c: c == " " or c == "\t" or c == "\xa0",
    "n": lambda c: c == "\n" or c == "\r",
    "(": lambda c: c == "(",
    ")": lambda c: c == ")",
    "d": str.isdigit,
    "C": str.isupper,
    "c": str.islower,
    "p": lambda c: c in _PUNCTUATION,
    "a": lambda c: not c.isspace(),
    "u": lambda c: c > "~" and c != "\xa0",
    "w": lambda c: c > "~" or c.isspace(),
}
# the same classes as regular expressions, for the origin prefilter (non-ASCII letters and
# digits are let through: a prefilter may pass too much, never too little)
_CLASS_PATTERNS = {
    "s": "[ \t\xa0]",
    "n": "[\n\r]",
    "(": "\\(",
    ")": "\\)",
    "d": "(?:[0-9]|[^\x00-\x7f])",
    "C": "(?:[A-Z]|[^\x00-\x7f])",
    "c": "(?:[a-z]|[^\x00-\x7f])",
    "p": "[" + re.escape(string.punctuation) + "]",
    "a": "\\S",
    "u": "[^\x00-\x7e\xa0]",
    "w": "(?:[^\x00-\x7e]|\\s)",
}
# wildcards that `+` may repeat (FastCNER's ReplicationFunctions); others are not repeated
_REPEATABLE = {k: _CLASSES[k] for k in "sndCcpauw"}


# plan steps (see _Node.plan)
_WILD, _AT_START, _OPEN, _CLOSE, _EMIT, _LITERAL, _PLUS = range(7)


class _Node:
    """One trie node. `wild` keeps the wildcard letters in first-insertion order, which is
    the order FastCNER tries them in."""

    __slots__ = ("wild", "open", "close", "plus", "chars", "ends", "wild_node", "_plans")

    def __init__(self) -> None:
        self.wild: dict[str, _Node] = {}
        self.open: _Node | None = None
        self.close: _Node | None = None
        self.plus: _Node | None = None
        self.chars: dict[str, _Node] = {}
        self.ends: dict[str, bool] = {}  # kind -> pseudo (the last rule with this text wins)
        self.wild_node: _Node | None = None  # the wildcard table seen as a node (see _Node._literal)
        self._plans: dict[str, tuple] = {}

    def child(self, key: str, wildcard: bool) -> "_Node":
        if wildcard:
            return self.wild.setdefault(key, _Node())
        if key == "(":
            self.open = self.open or _Node()
            return self.open
        if key == ")":
            self.close = self.close or _Node()
            return self.close
        if key == "+":
            self.plus = self.plus or _Node()
            return self.plus
        return self.chars.setdefault(key, _Node())

    def _literal(self, char: str) -> "_Node | None":
        """The child a text character follows as a literal. FastCNER keys its trie by raw
        rule characters, so a text "+" follows a `+` edge and a text backslash enters the
        wildcard table, where a letter then matches itself."""
        if char in "()":
            return None
        if char == "+":
            return self.plus
        if char == "\\":
            if self.wild and self.wild_node is None:
                self.wild_node = _Node()
                self.wild_node.chars = {k: v for k, v in self.wild.items() if k not in "()"}
            return self.wild_node
        return self.chars.get(char)

    def plan(self, char: str) -> tuple:
        """What the walk does at this node when the current character is `char`, in
        FastCNER's order: wildcards, `(`, `)`, a rule ending here, the literal, `+`.
        Memoised per character (Latin characters only, to bound the memory)."""
        found = self._plans.get(char)
        if found is not None:
            return found
        steps: list[tuple] = []
        for letter, child in self.wild.items():
            if letter == "b":
                steps.append((_AT_START, child, letter))
            elif letter in _CLASSES and _CLASSES[letter](char):
                steps.append((_WILD, child, letter))
        # `(` and `)` consume nothing: worth entering only if their node can act on `char`
        if self.open is not None and self.open.plan(char):
            steps.append((_OPEN, self.open, "("))
        if self.close is not None and self.close.plan(char):
            steps.append((_CLOSE, self.close, ")"))
        if self.ends:
            steps.append((_EMIT, self, ""))
        literal = self._literal(char)
        if literal is not None:
            steps.append((_LITERAL, literal, char))
        if self.plus is not None:
            steps.append((_PLUS, self.plus, "+"))
        plan = tuple(steps)
        if char < "\u0250":
            self._plans[char] = plan
        return plan


@dataclass
class Rules:
    root: _Node = field(default_factory=_Node)
    n_rules: int = 0
    reach: int = 0  # the most characters one match can span
    _origins: "re.Pattern | None" = None

    def origins(self, text: str) -> list[int]:
        """Positions from which some rule can match: the trie as one regular expression
        (run by `re` in C), with FastCNER's two choices per `+` (none, or the longest run
        of at most MAX_REPEAT). Only ~4 % of positions pass on report text, and only they
        are walked. Near a backslash, which FastCNER's trie treats specially (see
        `_Node._literal`), every position is walked."""
        if self._origins is None:
            self._origins = re.compile(f"(?={_pattern(self.root, None)})")
        found = [m.start() for m in self._origins.finditer(text)]
        backslash = text.find("\\")
        if backslash < 0:
            return found
        near = set(found)
        while backslash >= 0:
            near.update(range(max(0, backslash - self.reach + 1), backslash + 1))
            backslash = text.find("\\", backslash + 1)
        return sorted(near)


def _pattern(node: _Node, repeats: str | None) -> str:
    """Regular expression matching where a walk from `node` can reach a rule's end;
    `repeats`: the pattern that a `+` at this node repeats (from how it was entered)."""
    if node.ends:
        return ""
    alternatives = []
    for letter, child in node.wild.items():
        if letter == "b":
            alternatives.append("\\A" + _pattern(child, None))
        elif letter == "e":
            alternatives.append("\\Z" + _pattern(child, None))
        elif letter in _CLASS_PATTERNS:
            repeated = _CLASS_PATTERNS[letter] if letter in _REPEATABLE else None
            alternatives.append(_CLASS_PATTERNS[letter] + _pattern(child, repeated))
    if node.open is not None:
        alternatives.append(_pattern(node.open, "\\("))
    if node.close is not None:
        alternatives.append(_pattern(node.close, "\\)"))
    for char, child in node.chars.items():
        alternatives.append(re.escape(char) + _pattern(child, re.escape(char)))
    if node.plus is not None:
        # none, the longest run (possessive), or a text "+" taken as the literal `+` edge
        run = f"|{repeats}{{1,{MAX_REPEAT}}}+" if repeats else ""
        alternatives.append(f"(?:\\+{run})?" + _pattern(node.plus, "\\+"))
    return f"(?:{'|'.join(alternatives)})" if alternatives else "(?!)"


def parse_rules(lines) -> Rules:
    """Rules from RuSH's TSV format: rule, score, kind (stbegin / stend); `#` comments and
    `@` settings skipped; odd scores mark pseudo rules (no 4th "type" column here)."""
    rules = Rules()
    for row in csv.reader(lines, delimiter="\t"):
        if len(row) < 3 or row[0].startswith(("#", "@")):
            continue
        pattern, score, kind = row[0], float(row[1].strip()), row[2].strip()
        if len(row) > 3:
            raise ValueError(f"RuSH rule {pattern!r}: a 4-column (typed) rules file is not supported")
        if kind not in (BEGIN, END):
            raise ValueError(f"RuSH rule {pattern!r}: unknown kind {kind!r}")
        if "[" in pattern or pattern.endswith("\\") or "\\\\" in pattern or "\\+" in pattern:
            raise ValueError(f"RuSH rule {pattern!r}: syntax this engine does not implement")
        node = rules.root
        i = reach = 0
        while i < len(pattern):
            if pattern[i] == "\\":
                node = node.child(pattern[i + 1], wildcard=True)
                reach += pattern[i + 1] not in "be"
                i += 2
            else:
                node = node.child(pattern[i], wildcard=False)
                reach += MAX_REPEAT if pattern[i] == "+" else pattern[i] not in "()"
                i += 1
        node.ends[kind] = score % 2 != 0
        rules.n_rules += 1
        rules.reach = max(rules.reach, reach)
    return rules


@lru_cache(maxsize=1)
def default_rules() -> Rules:
    from rexrank.data import data_path

    with open(data_path("rush_rules.tsv"), newline="", encoding="utf-8") as fh:
        return parse_rules(fh)


@dataclass
class _Span:
    begin: int
    end: int
    pseudo: bool

    @property
    def width(self) -> int:
        return self.end - self.begin


class _Kept:
    """The spans of one kind and quicksectx's overlap index over them (see module doc)."""

    def __init__(self) -> None:
        self.spans: list[_Span] = []
        self._starts: list[int] = []  # index entries sorted by start: (start, stop, slot, serial)
        self._entries: list[tuple[int, int, int, int]] = []
        self._serial = 0
        self._max_width = 0

    def _index(self, start: int, stop: int, slot: int) -> None:
        at = bisect.bisect_right(self._starts, start)
        self._starts.insert(at, start)
        self._entries.insert(at, (start, stop, slot, self._serial))
        self._serial += 1
        self._max_width = max(self._max_width, stop - start)

    def _hits(self, begin: int, end: int) -> list[tuple[int, int, int, int]]:
        lo = bisect.bisect_left(self._starts, begin - self._max_width)
        hi = bisect.bisect_right(self._starts, end)
        return [
            e
            for e in self._entries[lo:hi]
            # quicksectx IntervalNode._intersect
            if not (e[1] <= begin or e[0] >= end) or (begin == end == e[0]) or (e[0] == e[1] == begin)
        ]

    def add(self, span: _Span) -> None:
        if not self.spans:
            self._index(span.begin, span.end - 1, 0)  # the first interval is stored one shorter
            self.spans.append(span)
            return
        hits = self._hits(span.begin, span.end)
        if not hits:
            self._index(span.begin, span.end, len(self.spans))
            self.spans.append(span)
            return
        slot = max(hits, key=lambda e: e[3])[2]
        if span.width <= self.spans[slot].width:
            return
        self.spans[slot] = span
        # the original removes an interval with the new span's bounds (usually none), not the old one
        at = bisect.bisect_left(self._starts, span.begin)
        while at < len(self._starts) and self._starts[at] == span.begin:
            if self._entries[at][1] == span.end:
                del self._entries[at], self._starts[at]
                break
            at += 1
        self._index(span.begin, span.end, slot)

    def actual(self) -> list[_Span]:
        return [s for s in self.spans if not s.pseudo]


def _match(rules: Rules, text: str) -> tuple[list[_Span], list[_Span]]:
    """Begin and end spans of `text` (FastCNER.process, then pseudo spans removed)."""
    n = len(text)
    kept = {BEGIN: _Kept(), END: _Kept()}

    def emit(node: _Node, begin: int, end: int, pos: int) -> None:
        end = pos if end == 0 else end  # 0 means "no `)` seen", as in the original
        if begin > end:
            begin, end = end, begin
        for kind, pseudo in node.ends.items():
            kept[kind].add(_Span(begin, end, pseudo))

    def live(node: _Node, pos: int) -> bool:
        # a node with nothing to do at `pos` is not entered (saves most of the calls)
        return pos >= n or bool(node._plans.get(text[pos]) or node.plan(text[pos]))

    def walk(node: _Node, begin: int, end: int, pos: int, via_wildcard: bool, key: str) -> None:
        """`via_wildcard`/`key`: how this node was entered, which decides what `+` repeats."""
        if pos == n:
            walk_at_end(node, begin, end, pos)
            return
        for step, child, label in node._plans.get(text[pos]) or node.plan(text[pos]):
            if step == _WILD:
                if live(child, pos + 1):
                    walk(child, begin, end, pos + 1, True, label)
            elif step == _LITERAL:
                if live(child, pos + 1):
                    walk(child, begin, end, pos + 1, False, label)
            elif step == _EMIT:
                emit(node, begin, end, pos)
            elif step == _OPEN:
                walk(child, pos, end, pos, False, label)
            elif step == _CLOSE:
                walk(child, begin, pos, pos, False, label)
            elif step == _AT_START:
                if pos == 0:
                    walk(child, begin, end, pos, True, label)
            else:  # _PLUS: no further repetition, then the longest run (the same again if none)
                if live(child, pos):
                    walk(child, begin, end, pos, False, label)
                repeats = _REPEATABLE.get(key) if via_wildcard else key.__eq__
                if repeats is not None:
                    stop = pos
                    while stop < n and stop - pos < MAX_REPEAT and repeats(text[stop]):
                        stop += 1
                    if live(child, stop):
                        walk(child, begin, end, stop, False, label)

    def walk_at_end(node: _Node, begin: int, end: int, pos: int) -> None:
        """At the end of the text only what ends a rule there counts (FastCNER's order)."""
        if node.ends:
            emit(node, begin, end, pos)
        elif "e" in node.wild and node.wild["e"].ends:
            emit(node.wild["e"], begin, end, pos)
        elif node.close is not None:
            if node.close.ends:
                emit(node.close, begin, pos, pos)
            # `)\e` at the very end: the original's walk finds nothing there
        elif node.plus is not None:
            walk_at_end(node.plus, begin, end, pos)

    for origin in rules.origins(text):
        walk(rules.root, origin, 0, origin, False, " ")
    return kept[BEGIN].actual(), kept[END].actual()


def _trim_gap(text: str, start: int, stop: int) -> tuple[int, int] | None:
    """RuSH's trim_gap: from the first non-space character of text[start:stop] to its last
    letter/digit or one of .!?)]" — None when that leaves less than two characters."""
    first = next((i for i in range(start, stop) if not text[i].isspace()), None)
    if first is None:
        return None
    for i in range(stop - 1, first, -1):
        c = text[i]
        if c.isalnum() or c in '.!?)]"':
            return first, i + 1
    return None


def _fix_gap(out: list[list[int]], text: str, start: int, stop: int) -> None:
    gap = _trim_gap(text, start, stop)
    if gap is None:
        return
    if gap[1] - gap[0] > MIN_SENT_CHARS:
        out.append(list(gap))
    elif out:
        out[-1][1] = gap[1]


def sentence_spans(text: str, rules: Rules | None = None) -> list[tuple[int, int]]:
    """(begin, end) character spans of RuSH's sentences (`RuSH.segToSentenceSpans`, with
    auto_fix_gaps on, as medSpaCy runs it)."""
    begins, ends = _match(rules or default_rules(), text)
    out: list[list[int]] = []
    st_begin, st_end, started, j = 0, 0, False, 0
    for i, begin in enumerate(begins):
        if not started:
            st_begin = begin.begin
            if st_begin < st_end:
                continue
            started = True
        elif begin.begin < st_end:
            continue
        if out and st_begin > out[-1][1]:
            _fix_gap(out, text, out[-1][1], st_begin)
        elif not out and st_begin > 0:
            _fix_gap(out, text, 0, st_begin)
        last_begin = i == len(begins) - 1
        for k in range(j, len(ends)):
            last_end = k == len(ends) - 1
            if not last_begin and not last_end and begins[i + 1].begin < ends[k].begin + 1:
                break
            st_end, j = ends[k].begin + 1, k
            while st_end >= 1 and text[st_end - 1].isspace():  # isspace() covers U+00A0
                st_end -= 1
            if st_end < st_begin:
                continue
            if started:
                out.append([st_begin, st_end])
                started = False
                if last_begin or (not last_end and begins[i + 1].begin > ends[k + 1].end):
                    continue
                break
            out[-1] = [st_begin, st_end]
    if out:
        head = _trim_gap(text, 0, out[0][0])
        if head is not None:
            # the original compares with the first end and fails (IndexError) when there is
            # none; a text with no end marker simply gets the head as its own sentence here
            if ends and out[0][0] <= ends[0].begin:
                out[0][0] = head[0]
            else:
                out.insert(0, list(head))
        tail = _trim_gap(text, out[-1][1], len(text))
        if tail is not None:
            if tail[1] - tail[0] > MIN_SENT_CHARS:
                out.append(list(tail))
            else:
                out[-1][1] = tail[1]
    else:
        whole = _trim_gap(text, 0, len(text))
        if whole is not None and whole[1] - whole[0] > MIN_SENT_CHARS:
            out.append(list(whole))
    return [(b, e) for b, e in out]
