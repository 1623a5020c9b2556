"""Copies: predictions that another party filed first are held for the maintainers' review
(rexrank.store.review), never refused or published silently.

Two filings on one test set and track are copies when the studies they predict the same
are at least THRESHOLD (99 %) of the studies the larger of them predicts. "The same" is
after normalising whitespace (runs of it are one space, the ends trimmed), so a trailing
space changes nothing; an empty prediction predicts nothing, so it neither counts as the
same nor among the studies predicted (two filings of nothing copy nothing). Filings of one
party (the same submitter, or the same namespace: members of one organisation) are never
copies of each other, and a request is never compared with itself (a requeue is the same
filing).

The original is the filing whose content reached the Hub first: for a predictions dataset,
the Hub server's time of the last commit that changed its predictions file(s) at the
pinned commit (a later commit that only touched a README does not make it younger); for
an uploaded file, when this server received it; on a tie, the earlier filing. A copy of
an earlier original is HELD; a filing that turns out to be the original of earlier
filings is not held, and those copies are held (when still waiting) or listed for review
(when already scored).

Everything here is server-side (the requests repo, which only the organisers read), and
nothing of it reaches the filer: a held request says "held for review by the
maintainers" whatever the other filing is, and is judged after every other rule
(rexrank.store.policy), so that a filing refused for its quota learns nothing.

    copies/key.json                              a random key, made at the first filing
    copies/filings/<request id>.json             one filing: its party, content time, study
                                                 count and per-study fingerprints
    copies/anchors/<test_set>/<track>/<xx>.json  {"anchors": {fingerprint: [request ids]}}
    copies/published.json                        scored requests later found to copy an
                                                 original filed after them (for review)

A study's fingerprint is 64 bits of HMAC-SHA256(key, study id NUL normalised text). Finding
the candidates costs the same whatever the history holds: each filing is indexed under its
ANCHORS smallest fingerprints (a bottom-k sketch), and a new filing looks up its own. Two
filings sharing 99 % of their studies share the smallest fingerprint of the shared ones
in both sketches unless ANCHORS of the few others all sort before it (for 1 % others,
about 0.01^8); the key is secret, so nobody can choose texts whose fingerprints sort
first. The candidates found are then compared study by study. An identical copy is found
whatever its size (its sketch is the original's).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass

from rexrank.store import records as R
from rexrank.store.accounts import bound_key, legacy_bindings, namespace_key, submitter_key
from rexrank.store.index import dumps_index
from rexrank.store.repo import Snapshot, StoreError, load_json_object, transact

THRESHOLD = 0.99
ANCHORS = 8
KEY_PATH = f"{R.COPIES_DIR}key.json"
FILINGS_DIR = f"{R.COPIES_DIR}filings/"
ANCHORS_DIR = f"{R.COPIES_DIR}anchors/"
PUBLISHED_COPIES = f"{R.COPIES_DIR}published.json"
# where an original's time comes from
FROM_COMMIT, FROM_UPLOAD, FROM_FILING = "commit", "upload", "filing"


def normalised(text) -> str:
    return " ".join(str(text).split())


def fingerprints(key: bytes, ids, texts) -> tuple[str, ...]:
    """The sorted fingerprints of the studies whose normalised prediction is not empty."""
    out = set()
    for sid, text in zip(ids, texts):
        norm = normalised(text)
        if norm:
            out.add(hmac.new(key, f"{sid}\x00{norm}".encode("utf-8"), hashlib.sha256).hexdigest()[:16])
    return tuple(sorted(out))


@dataclass(frozen=True)
class Filing:
    """One filing's content as the copy rule sees it."""

    request_id: str
    test_set: str
    track: str
    submitter_key: str
    namespace_key: str
    content_time: float  # seconds since the epoch (the Hub's commit time, or when it was received)
    content_from: str
    n: int  # rows in the filing, empty predictions included (for the maintainers)
    prints: tuple[str, ...]

    @classmethod
    def of(cls, request: dict, prints, *, n: int, content_time: float, content_from: str) -> "Filing":
        return cls(request["id"], request["test_set"], request["track"], submitter_key(request),
                   namespace_key(request), float(content_time), content_from, int(n), tuple(sorted(prints)))

    def to_json(self) -> dict:
        return {"request_id": self.request_id, "test_set": self.test_set, "track": self.track,
                "submitter_key": self.submitter_key, "namespace_key": self.namespace_key,
                "content_time": self.content_time, "content_from": self.content_from, "n": self.n,
                "fingerprints": list(self.prints)}

    @classmethod
    def from_json(cls, data: dict) -> "Filing":
        return cls(str(data["request_id"]), str(data["test_set"]), str(data["track"]), str(data["submitter_key"]),
                   str(data["namespace_key"]), float(data["content_time"]), str(data["content_from"]), int(data["n"]),
                   tuple(data["fingerprints"]))

    @property
    def anchors(self) -> tuple[str, ...]:
        return self.prints[:ANCHORS]

    def same_party(self, other: "Filing", legacy: dict | None = None) -> bool:
        """One party's filings: the same submitter or namespace, a name recorded before ids
        being the account it is bound to in `legacy` (rexrank.store.accounts)."""
        def party(f: Filing) -> tuple[str, str]:
            return bound_key(f.submitter_key, legacy or {}), bound_key(f.namespace_key, legacy or {})

        (mine, my_space), (theirs, their_space) = party(self), party(other)
        return mine == theirs or my_space == their_space

    def before(self, other: "Filing") -> bool:
        """Whether this content reached the Hub (or this server) first; ties by filing order."""
        return (self.content_time, self.request_id) < (other.content_time, other.request_id)


def share(a: Filing, b: Filing) -> float:
    """Studies predicted the same (after normalising whitespace), as a share of the studies
    the larger filing predicts (empty predictions left out of both)."""
    return len(set(a.prints) & set(b.prints)) / max(len(a.prints), len(b.prints), 1)


def filing_path(request_id: str) -> str:
    return f"{FILINGS_DIR}{R.check_request_id(request_id)}.json"


def anchor_path(test_set: str, track: str, fingerprint: str) -> str:
    return f"{ANCHORS_DIR}{R._safe(test_set)}/{R._safe(track)}/{fingerprint[:2]}.json"


def _load(repo, snap: Snapshot, path: str) -> dict:
    return load_json_object(repo, snap, path, damaged=f"{path} is damaged; restore it from the repo's history")


def key_at(repo, snap: Snapshot) -> tuple[bytes, dict[str, bytes]]:
    """The store's fingerprint key as of `snap`, and the change that records it when there is
    none yet (a random one, made by the first filing and written in its commit)."""
    found = _load(repo, snap, KEY_PATH).get("key")
    if isinstance(found, str) and len(found) == 64:
        return bytes.fromhex(found), {}
    new = secrets.token_hex(32)
    return bytes.fromhex(new), {KEY_PATH: (json.dumps({"key": new}) + "\n").encode()}


def key(repo) -> bytes:
    """The store's fingerprint key (made, in a commit of its own, if no filing made it)."""
    made: list[bytes] = []

    def decide(snap: Snapshot):
        found, changes = key_at(repo, snap)
        made.append(found)
        return (changes, "copies: the fingerprint key", None) if changes else None

    transact(repo, decide)
    return made[-1]


class CopyIndex:
    """The filings and their anchors as of one snapshot; `add` gives the changes that index
    one more filing (made in the commit that files it)."""

    def __init__(self, repo, snap: Snapshot, legacy: dict | None = None):
        """`legacy`: the names recorded before ids and their ids (accounts/legacy.json as of
        `snap` when not given; the filing's own commit passes the binding it makes)."""
        self.repo, self.snap = repo, snap
        self.legacy = legacy_bindings(repo, snap) if legacy is None else legacy
        self._shards: dict[str, dict] = {}
        self._dirty: set[str] = set()

    def _shard(self, path: str) -> dict:
        if path not in self._shards:
            content = _load(self.repo, self.snap, path).get("anchors", {})
            self._shards[path] = content if isinstance(content, dict) else {}
        return self._shards[path]

    def filing(self, request_id: str) -> Filing | None:
        content = _load(self.repo, self.snap, filing_path(request_id))
        if not content:
            return None
        try:
            return Filing.from_json(content)
        except (KeyError, TypeError, ValueError):
            raise StoreError(f"{self.repo.name}: {filing_path(request_id)} is damaged; restore it from the repo's "
                             "history") from None

    def matches(self, filing: Filing) -> list[tuple[Filing, float]]:
        """Filings of other parties on the same test set and track that are copies of
        `filing` or it of them, with the share of studies predicted the same."""
        candidates: set[str] = set()
        for fingerprint in filing.anchors:
            ids = self._shard(anchor_path(filing.test_set, filing.track, fingerprint)).get(fingerprint, [])
            candidates.update(i for i in ids if isinstance(i, str))
        candidates.discard(filing.request_id)  # its own requeue is the same filing
        found = []
        for request_id in sorted(candidates):
            other = self.filing(request_id)
            if other is None or (other.test_set, other.track) != (filing.test_set, filing.track):
                continue
            if other.same_party(filing, self.legacy):
                continue
            common = share(filing, other)
            if common >= THRESHOLD:
                found.append((other, common))
        return found

    def add(self, filing: Filing) -> dict[str, bytes]:
        for fingerprint in filing.anchors:
            path = anchor_path(filing.test_set, filing.track, fingerprint)
            ids = self._shard(path).setdefault(fingerprint, [])
            if filing.request_id not in ids:
                ids.append(filing.request_id)
                self._dirty.add(path)
        changes = {path: dumps_index({"anchors": self._shards[path]}) for path in sorted(self._dirty)}
        changes[filing_path(filing.request_id)] = dumps_index(filing.to_json())
        return changes


def judge(filing: Filing, matches: list[tuple[Filing, float]]) -> tuple[list, list]:
    """(the originals `filing` copies, the earlier filings that copy it), each as
    [(Filing, share)]."""
    originals = [(other, common) for other, common in matches if other.before(filing)]
    copies = [(other, common) for other, common in matches if filing.before(other)]
    return originals, copies


def describe(matches) -> list[dict]:
    """What a held request records of what it matched (for the maintainers only)."""
    return [{"request_id": other.request_id, "share": round(common, 4), "content_time": R.iso(other.content_time),
             "content_from": other.content_from} for other, common in matches]


def flag_published(flagged: dict, copy: Filing, original: Filing, common: float) -> dict:
    """`flagged` (copies/published.json's requests) with the scored request of `copy`
    listed for review: an original of its predictions was filed after it."""
    return {**flagged, copy.request_id: {"original": original.request_id, "share": round(common, 4),
                                         "flagged_time": R.iso(R.now()), "content_time": R.iso(copy.content_time),
                                         "original_content_time": R.iso(original.content_time)}}


def published_changes(flagged: dict) -> dict[str, bytes | None]:
    return {PUBLISHED_COPIES: dumps_index({"requests": flagged}) if flagged else None}


def published_copies(repo, snap: Snapshot) -> dict:
    content = _load(repo, snap, PUBLISHED_COPIES).get("requests", {})
    return content if isinstance(content, dict) else {}
