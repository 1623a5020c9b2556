"""Requests held for the maintainers' review (`rexrank review`): filings whose predictions
another party had first (rexrank.store.copies). A held request waits in queue/ with
status HELD, which no worker claims; the maintainers release it (PENDING again: the same
round for the privacy ledger) or reject it (FAILED, kind "rejected": it counts against
the quota like a cancelled one). A scored request that turns out to copy an original
filed after it is listed too (copies/published.json); rejecting it withdraws its result.

What the filer reads of a held request is HELD_MESSAGE, whatever the other filing is;
what it matched is in the request's `review` field, which only the maintainers read (the
requests repo; the public answers of rexrank.backend.public_door leave it out).
"""
from __future__ import annotations

from rexrank.errors import RexrankError
from rexrank.store import copies
from rexrank.store import records as R
from rexrank.store.index import IndexEdit
from rexrank.store.repo import Snapshot, StoreError, transact

# neutral: saying why (another account's predictions) would answer "did anyone file these?"
HELD_MESSAGE = ("held for review by the maintainers before it is scored: they either release it, and it is scored "
                "and published as usual, or reject it, and this status then says so; nothing needs doing meanwhile")
REJECTED_MESSAGE = "rejected by the maintainers after review: its predictions match predictions another account had first"


def held(request: dict, originals: list, ts: float) -> dict:
    """`request` (PENDING, or RUNNING before anything was published) held for review:
    what it matched is kept for the maintainers."""
    from rexrank.store.queue import transition

    review = {"reason": "copy", "held_time": R.iso(ts), "matches": copies.describe(originals)}
    return transition(request, R.HELD, ts, error=HELD_MESSAGE, review=review, worker=None, lease_expires=None,
                      publishing=False)


class ReviewOperations:
    """Mixed into `Store` (which provides requests, results, _update, _find_request,
    get_request, list_requests, read_predictions)."""

    # ---- filing ------------------------------------------------------------------------
    def judge_copies(self, snap: Snapshot, edit: IndexEdit, request: dict, filing: copies.Filing,
                     ts: float, legacy: dict | None = None) -> tuple[dict, dict[str, bytes | None]]:
        """At filing (in the filing's commit): `request` held if another party had its
        predictions first; earlier filings that copy it held (while waiting) or listed for
        review (once scored). `legacy`: the names bound to ids as of this commit
        (copies.CopyIndex). Returns (the request to write, the other changes)."""
        index = copies.CopyIndex(self.requests, snap, legacy)
        originals, later = copies.judge(filing, index.matches(filing))
        changes: dict[str, bytes | None] = {}
        if originals:
            request = held(request, originals, ts)
        flagged = before = copies.published_copies(self.requests, snap)
        for other, common in later:
            found = self._find_request(snap, other.request_id)
            if found is None:
                continue
            path, current = found
            publishing = current["status"] == R.RUNNING and current.get("publishing")
            if current["status"] == R.PENDING or (current["status"] == R.RUNNING and not publishing):
                changes.update(edit.move_request(path, current, held(current, [(filing, common)], ts)))
            elif current["status"] == R.FINISHED or publishing:
                flagged = copies.flag_published(flagged, other, filing, common)
        if flagged != before:
            changes.update(copies.published_changes(flagged))
        changes.update(index.add(filing))
        return request, changes

    def filing_of(self, request: dict) -> copies.Filing:
        """The request's filing in the copy index; one filed without it (by an earlier
        version, or by a client that skipped it) is fingerprinted from its stored
        predictions, dated now (the latest it can have arrived: nothing it says of itself
        makes it anyone's original), and indexed."""
        found = copies.CopyIndex(self.requests, self.requests.snapshot()).filing(request["id"])
        if found is not None:
            return found
        filing = self._fingerprint_stored(request, copies.key(self.requests), received=R.now())

        def decide(snap: Snapshot):
            index = copies.CopyIndex(self.requests, snap)
            if index.filing(request["id"]) is not None:
                return None
            return index.add(filing), f"copies: index {request['id']}", None

        transact(self.requests, decide)
        return filing

    def _fingerprint_stored(self, request: dict, key: bytes, *, received: float | None = None) -> copies.Filing:
        """`received`: None for the time the store recorded when it was filed (to the second).
        The stored parquet is as untrusted as any predictions file (a request file written by
        hand names its own): read by the sandboxed reader (rexrank.sandbox), never parsed here.
        A SubmissionError when it cannot be read."""
        from rexrank.store.scratch import ScratchDir
        from rexrank.submissions import read_raw_predictions

        with ScratchDir("fingerprint") as tmp:
            path = tmp / "predictions.parquet"
            path.write_bytes(self.read_predictions(request))
            rows = read_raw_predictions(path).rows
        prints = copies.fingerprints(key, [sid for sid, _, _ in rows], [text for _, text, _ in rows])
        if received is None:
            received = R.parse_iso(request["submitted_time"])
        return copies.Filing.of(request, prints, n=len(rows), content_time=received, content_from=copies.FROM_FILING)

    def hold_if_copied(self, request: dict, worker_id: str) -> dict | None:
        """The backend's check before scoring (after every other rule): a request that
        copies a filing another party had first is HELD (returned); None to go on. A
        request the maintainers released from review is not held again."""
        if (request.get("review") or {}).get("released"):
            return None
        filing = self.filing_of(request)
        ts = R.now()

        def decide(snap: Snapshot):
            originals, _ = copies.judge(filing, copies.CopyIndex(self.requests, snap).matches(filing))
            if not originals:
                return None
            found = self._find_request(snap, request["id"])
            if found is None:
                return None
            path, current = found
            if current["status"] != R.RUNNING or current.get("worker") != worker_id:
                return None  # no longer this worker's: whoever holds it decides
            new = held(current, originals, ts)
            edit = IndexEdit(self.requests, snap)
            return {**edit.move_request(path, current, new), **edit.changes()}, f"hold {request['id']}", new

        return transact(self.requests, decide, folders=(R.QUEUE_DIR,))

    def index_copies(self) -> int:
        """Fingerprint every filing the copy index lacks (requests filed before it existed),
        dated when they were received; returns how many were added (`rexrank backend --reindex`)."""
        requests = self.list_requests()
        snap = self.requests.snapshot()
        index = copies.CopyIndex(self.requests, snap)
        missing = [r for r in requests if index.filing(r["id"]) is None]
        if not missing:
            return 0
        key = copies.key(self.requests)
        filings = []
        for request in missing:
            try:
                filings.append(self._fingerprint_stored(request, key))
            except (RexrankError, KeyError, ValueError, OSError):  # (a SubmissionError: the reader refused it)
                continue  # no readable predictions: nothing to compare

        def decide(snap: Snapshot):
            index = copies.CopyIndex(self.requests, snap)
            changes: dict[str, bytes | None] = {}
            for filing in filings:
                if index.filing(filing.request_id) is None:
                    changes.update(index.add(filing))
            return changes, f"copies: index {len(filings)} earlier filings", None

        transact(self.requests, decide)
        return len(filings)

    # ---- the maintainers' review -------------------------------------------------------
    def held_requests(self) -> list[dict]:
        return self.list_requests(R.HELD)

    def published_copies(self) -> dict:
        """{request id: what it copies}: scored requests an original filed later matched."""
        return copies.published_copies(self.requests, self.requests.snapshot())

    def release_held(self, request_id: str) -> dict:
        """HELD -> PENDING (the maintainers judged it no copy); a listed scored request is
        taken off the list, its result kept."""
        from rexrank.store.queue import transition

        current = self.get_request(request_id)
        if current["status"] != R.HELD:
            if request_id in self.published_copies():
                self._unlist(request_id)
                return self.get_request(request_id)
            raise StoreError(f"request {request_id} is {current['status']}, not held for review")
        ts = R.now()

        def release(r):
            if r["status"] != R.HELD:
                return None
            new = transition(r, R.PENDING, ts, error=None,
                             review={**(r.get("review") or {}), "released": R.iso(ts)})
            new["history"][-1]["reviewed"] = True  # the same round for the ledger
            return new

        return self._update(request_id, release, "release from review") or self.get_request(request_id)

    def reject_held(self, request_id: str, *, reason: str = "") -> dict:
        """HELD -> FAILED, kind "rejected" (counts against the quota), its shard outputs
        removed (its Jobs are cancelled by `rexrank review`: rexrank.backend.dispatch). A
        listed scored request: its result is withdrawn from the results repo and the request
        marked rejected."""
        from rexrank.store.queue import transition

        message = REJECTED_MESSAGE + (f": {reason}" if reason else "")
        current = self.get_request(request_id)
        listed = request_id in self.published_copies()
        if current["status"] != R.HELD and not (listed and current["status"] == R.FINISHED):
            raise StoreError(f"request {request_id} is {current['status']}, not held for review")
        ts = R.now()
        if listed and current["status"] == R.FINISHED:
            self.withdraw_result(current)
            self._unlist(request_id)

        def reject(r):
            if r["status"] not in (R.HELD, R.FINISHED):
                return None
            return transition(r, R.FAILED, ts, error=message, failure_kind=R.REJECTED, worker=None,
                              lease_expires=None, review={**(r.get("review") or {}), "rejected": R.iso(ts)})

        rejected = self._update(request_id, reject, "reject after review") or self.get_request(request_id)
        if rejected.get("dispatch"):  # held while a dispatcher ran it: its shards' outputs go (its Jobs: the caller)
            self.drop_shard_outputs(request_id)
        return rejected

    def _unlist(self, request_id: str) -> None:
        def decide(snap: Snapshot):
            flagged = copies.published_copies(self.requests, snap)
            if request_id not in flagged:
                return None
            rest = {k: v for k, v in flagged.items() if k != request_id}
            return copies.published_changes(rest), f"review: {request_id} reviewed", None

        transact(self.requests, decide)
