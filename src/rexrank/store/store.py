"""`Store`: the requests queue and the results, over two repos (local or Hub)."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Iterable

from rexrank.errors import SubmissionError
from rexrank.store import records as R
from rexrank.store.index import IndexEdit, load_index
from rexrank.store.problems import Problem
from rexrank.store.policy import QUOTA_KEY, Quota, check_dataset_owner, check_names, check_policy
from rexrank.store.queue import QueueOperations
from rexrank.store.review import ReviewOperations
from rexrank.store.repo import Repo, Snapshot, StoreError, consistent_reads, transact

log = logging.getLogger("rexrank.store")

REQUIRED_RESULT_KEYS = ("id", "model_name", "test_set", "track", "values")


class Store(QueueOperations, ReviewOperations):
    def __init__(self, requests: Repo, results: Repo, *, name: str, quota: Quota | None = None):
        """`quota`: the quota this process enforces (None: REXRANK_QUOTA, else the store's
        config.json key "quota", else ReXrank's on a Hub store and none on a local one)."""
        self.requests = requests
        self.results = results
        self.name = name
        # REXRANK_QUOTA is read (and a wrong one refused) when the store is opened, as before
        self._quota = quota if quota is not None else Quota.env_setting()
        self._problems: dict[str, dict[str, Problem]] = {"requests": {}, "results": {}}
        self._reported: set[tuple[str, str, str]] = set()
        self._results_indexed = False  # once seen, the results index stays (until a --reindex)
        self._requests_indexed = False

    def __repr__(self) -> str:
        return f"Store({self.name!r})"

    @property
    def quota(self) -> Quota:
        """The quota enforced here (rexrank.store.policy says where it comes from)."""
        if self._quota is not None:
            return self._quota
        from rexrank.store.config import read_config

        configured = read_config(self).get(QUOTA_KEY)
        if configured is not None:  # a wrong setting stops the store's users, never refuses a request
            where = f"{self.name}/{R.CONFIG_FILE}: {QUOTA_KEY}"
            if not isinstance(configured, str):
                raise StoreError(f'{where} must be a string "N/DAYS", e.g. "1/7" (0: no quota)')
            try:
                return Quota.parse(configured, where=where,
                                   origin=f'set by the store\'s config.json key "{QUOTA_KEY}" ({configured})')
            except SubmissionError as exc:
                raise StoreError(str(exc)) from None
        if self.name.startswith("hf://"):
            return Quota.from_env()  # a public service's: ReXrank's 1/7
        return Quota(0, origin="none: a local store has no quota unless its config.json sets one")

    # ---- reading ----------------------------------------------------------------------
    # A file that cannot be used (not JSON, a field missing, ...) is quarantined: left out
    # of every listing, kept in `problems()`, logged once per version of the file. It never
    # stops the other requests or results.
    def _read_records(self, which: str, snap: Snapshot, folders: Iterable[str], parse) -> list[tuple[str, dict]]:
        """(path, record) for every JSON file under `folders` (listed in `snap`)."""
        repo = self.requests if which == "requests" else self.results
        folders = tuple(folders)
        good = []
        bad = {p: v for p, v in self._problems[which].items() if not p.startswith(folders)}
        for folder in folders:
            for path in snap.paths(folder, ".json"):
                try:
                    good.append((path, parse(repo.read(snap, path), path)))
                except R.BadRecord as exc:
                    bad[path] = problem = Problem(which, path, str(exc))
                    if (which, path, snap.files[path]) not in self._reported:
                        self._reported.add((which, path, snap.files[path]))
                        log.warning("%s: skipped an unreadable record: %s", self.name, problem)
        self._problems[which] = bad
        return good

    def _queued(self, snap: Snapshot) -> list[tuple[str, dict]]:
        """(path, request) in the queue, oldest first: open requests, and in a store of the
        earlier layout settled ones too (the next claim moves them to done/)."""
        found = self._read_records("requests", snap, [R.QUEUE_DIR], R.parse_request)
        received = self._received(snap)
        found = [(path, R.with_server_time(path, req, received)) for path, req in found]
        return sorted(found, key=lambda pr: (pr[1]["submitted_time"], pr[1]["id"]))

    def _received(self, snap: Snapshot) -> dict:
        """The backend's register of when it first saw each open request."""
        received = load_index(self.requests, snap, R.RECEIVED_INDEX).get("requests", {})
        return received if isinstance(received, dict) else {}

    def problems(self) -> list[Problem]:
        """Queue and result files skipped because they cannot be used (re-read now)."""
        self.list_requests()
        self.list_results()
        return [*self._problems["requests"].values(), *self._problems["results"].values()]

    def quarantined(self, repo: str) -> list[Problem]:
        """Problems found by the last listings of `repo` ("requests" or "results"), not re-read."""
        return list(self._problems[repo].values())

    def list_requests(self, status: str | Iterable[str] | None = None) -> list[dict]:
        """Request records, oldest first; optionally only those with `status`. Reads every
        request of the history unless only open statuses are asked for."""
        wanted = set(R.STATUSES) if status is None else {status} if isinstance(status, str) else set(status)
        folders = [R.QUEUE_DIR] if wanted <= set(R.OPEN) else [R.QUEUE_DIR, R.DONE_DIR]
        def read():
            snap = self.requests.snapshot(*folders)
            received = self._received(snap)
            return [(path, R.with_server_time(path, req, received))
                    for path, req in self._read_records("requests", snap, folders, R.parse_request)]

        found = consistent_reads(self.requests, read)
        latest: dict[str, dict] = {}
        for _, req in found:  # a request in both places (edited by hand): the later state
            if req["id"] not in latest or len(req.get("history") or []) > len(latest[req["id"]].get("history") or []):
                latest[req["id"]] = req
        reqs = sorted(latest.values(), key=lambda r: (r["submitted_time"], r["id"]))
        return [r for r in reqs if r["status"] in wanted]

    def queue_view(self) -> list[dict]:
        """What the queue tables show, newest first: every open request and the last
        RECENT_LIMIT settled ones (as summaries with their error), whatever the history holds."""
        def read():
            snap = self.requests.snapshot(R.QUEUE_DIR)
            shown = {e["id"]: e for e in load_index(self.requests, snap, R.RECENT_INDEX).get("requests", [])}
            shown.update({req["id"]: req for _, req in self._queued(snap)})
            return shown

        shown = consistent_reads(self.requests, read)
        return sorted(shown.values(), key=lambda r: (r["submitted_time"], r["id"]), reverse=True)

    def _find_request(self, snap: Snapshot, request_id: str) -> tuple[str, dict] | None:
        """(path, request) wherever it is; `snap` must list the queue."""
        queue_path, done_path = R.request_paths(request_id)
        path = queue_path if queue_path in snap.files else done_path
        data = self.requests.read_optional(snap, path)
        if data is None:
            return None
        try:
            return path, R.with_server_time(path, R.parse_request(data, path), self._received(snap))
        except R.BadRecord as exc:
            raise StoreError(f"request {request_id!r} in {self.name} cannot be read: {exc}") from None

    def get_request(self, request_id: str) -> dict:
        R.check_request_id(request_id)
        found = consistent_reads(self.requests, lambda: self._find_request(self.requests.snapshot(R.QUEUE_DIR), request_id))
        if found is None:
            raise StoreError(f"no request {request_id!r} in {self.name}")
        return found[1]

    def read_predictions(self, request: dict) -> bytes:
        """The stored predictions parquet of a request: found from its id, never from the
        path written in the record (a hand-written record could name any file)."""
        return self.requests.read(self.requests.snapshot(), R.predictions_path(request["id"]))

    def list_results(self) -> list[dict]:
        """Result records (format: rexrank.results_schema), sorted by test set, track, id.
        Reads every record; the leaderboard reads only what changed (ResultsFeed)."""
        snap = self.results.snapshot(R.RECORDS_DIR)
        out = [rec for _, rec in self._read_records("results", snap, [R.RECORDS_DIR], R.parse_result)]
        return sorted(out, key=lambda r: (str(r["test_set"]), str(r["track"]), str(r["id"])))

    def get_result(self, result_id: str, *, test_set: str | None = None, track: str | None = None) -> dict | None:
        """One result record; with its test set and track it is read directly, without
        them every record is read."""
        if test_set is None or track is None:
            return next((r for r in self.list_results() if r["id"] == result_id), None)
        path = R.result_path({"id": result_id, "test_set": test_set, "track": track})
        data = self.results.read_optional(self.results.snapshot(), path)
        if data is None:
            return None
        try:
            return R.parse_result(data, path)
        except R.BadRecord as exc:
            raise StoreError(f"result {result_id!r} in {self.name} cannot be read: {exc}") from None

    def read_per_study(self, record: dict) -> bytes | None:
        """A result's per-study scores (parquet bytes), None when it has none. The file is
        found from the record's test set, track and id, never from a path the record
        holds (a record written by hand could name any file, inside the store or not)."""
        if not record.get("per_study_available") and not record.get("per_study_path"):
            return None
        path = R.per_study_path(str(record["test_set"]), str(record["track"]), str(record["id"]))
        return self.results.read_optional(self.results.snapshot(), path)

    def results_feed(self):
        """An incremental reader of the result records (what the leaderboard uses)."""
        from rexrank.store.feed import ResultsFeed

        return ResultsFeed(self)

    # ---- writing results -------------------------------------------------------------
    def add_result(self, record: dict, *, per_study: bytes | None = None) -> None:
        """Write (or replace, same id) one result record atomically; with `per_study`
        (parquet bytes, public test sets only) in the same commit."""
        missing = [k for k in REQUIRED_RESULT_KEYS if k not in record]
        if missing:
            raise StoreError(f"result record lacks {', '.join(missing)}")
        record = R.jsonable(dict(record))
        extra: dict[str, bytes | None] = {}
        if per_study is not None:
            record["per_study_path"] = R.per_study_path(record["test_set"], record["track"], record["id"])
            record["per_study_available"] = True
            extra[record["per_study_path"]] = per_study
        self._write_results([record], extra, f"result {record['id']}")

    def withdraw_result(self, request: dict) -> None:
        """Remove a request's published result (record, per-study scores, index entries) in
        one commit: the maintainers rejected it after review (rexrank.store.review)."""
        record = self.get_result(request.get("result_id") or request["id"], test_set=request["test_set"],
                                 track=request["track"])
        if record is None:
            return
        self.ensure_results_indexed()
        path = R.result_path(record)

        def decide(snap: Snapshot):
            edit = IndexEdit(self.results, snap)
            edit.remove_result(path)
            changes: dict[str, bytes | None] = {path: None}
            per_study = R.per_study_path(record["test_set"], record["track"], record["id"])
            if self.results.read_optional(snap, per_study) is not None:
                changes[per_study] = None
            return {**changes, **edit.changes()}, f"withdraw result {record['id']}", None

        transact(self.results, decide)

    def add_results(self, records: Iterable[dict]) -> int:
        """Write many result records in one commit (e.g. seeding the published tables:
        one Hub commit instead of one per record). Returns how many were written."""
        checked = []
        for record in records:
            missing = [k for k in REQUIRED_RESULT_KEYS if k not in record]
            if missing:
                raise StoreError(f"result record {record.get('id')!r} lacks {', '.join(missing)}")
            checked.append(R.jsonable(dict(record)))
        written = {R.result_path(r): r for r in checked}
        if written:
            self._write_results(list(written.values()), {}, f"{len(written)} results")
        return len(written)

    def _write_results(self, records: list[dict], extra: dict[str, bytes | None], message: str) -> None:
        """Records (and `extra` files) with their index entries, in one commit: what it
        reads and writes does not depend on how many records the store holds."""
        self.ensure_results_indexed()

        def decide(snap: Snapshot):
            edit = IndexEdit(self.results, snap)
            changes = dict(extra)
            for record in records:
                path, data = R.result_path(record), R.dumps(record)
                changes[path] = data
                edit.put_result(path, record, data)
            edit.mark_results_indexed()
            return {**changes, **edit.changes()}, message, None

        transact(self.results, decide)

    def requests_index_stale(self, snap: Snapshot) -> bool:
        """Whether the request indexes name their files by an earlier name key
        (rexrank.store.names.NAME_KEY_VERSION) or lack the index by predictions content, and
        must be rebuilt before the submission rules look names up there (read once per
        Store: one small file)."""
        if self._requests_indexed:
            return False
        stale = (load_index(self.requests, snap, R.REQUESTS_LAYOUT) != R.REQUESTS_LAYOUT_CONTENT
                 and self.requests.read_optional(snap, R.RECENT_INDEX) is not None)
        self._requests_indexed = not stale
        return stale

    def reindex_requests_by_names(self) -> None:
        from rexrank.store.layout import index_requests

        n = index_requests(self)
        self._requests_indexed = True
        log.info("%s: re-indexed %d settled request(s) by the names as this version compares them and by content", self.name, n)

    def ensure_results_indexed(self) -> None:
        """Index the results of a store written before the index existed (once, logged)."""
        if self._results_indexed:
            return
        if load_index(self.results, self.results.snapshot(), R.RESULTS_LAYOUT) != R.RESULTS_LAYOUT_CONTENT:
            if self.results.snapshot(R.RECORDS_DIR).paths(R.RECORDS_DIR):  # else the first write marks it
                from rexrank.store.layout import index_results

                index_results(self, reason="written before the results index existed, or indexed by names compared "
                              "in an earlier way")
        self._results_indexed = True

    def results_named(self, model_name: str) -> list[dict]:
        """Result records whose model name compares equal to `model_name` (id, model_name,
        source, submitter), read through the index by name."""
        snap = self.results.snapshot()
        if not self._results_indexed and load_index(self.results, snap, R.RESULTS_LAYOUT) != R.RESULTS_LAYOUT_CONTENT:
            return self.list_results()  # not indexed yet: every record (the rules filter)
        self._results_indexed = True
        return list(load_index(self.results, snap, R.key_file(R.RESULT_NAMES_DIR, model_name)).get("records", {}).values())

    # ---- submitting ------------------------------------------------------------------
    def submit(
        self,
        *,
        test_set: str,
        track: str,
        predictions: str | Path,
        model_name: str,
        submitter: str,
        institution: str = "",
        model_url: str = "",
        trained_on: Iterable[str] = (),
        data_dir: str | Path | None = None,
        hub_endpoint: str | None = None,
        hub_token: str | bool | None = None,
        source_label: str | None = None,
        now: float | None = None,
        id_column: str | None = None,
        prediction_column: str | None = None,
        dataset_owners: Iterable[str] | None = None,
        submitter_id: str | None = None,
        namespace: str = "",
        namespace_id: str | None = None,
        model_repo: str = "",
    ) -> dict:
        """File a request; returns the request record (`id`, `status`, ...): PENDING, or
        HELD for the maintainers' review when another party filed these predictions first
        (rexrank.store.copies).

        test_set, track: e.g. "iu_xray", "findings" (rexrank.testsets.registry).
        predictions: a file (ReXrank submission JSON, CSV/JSONL/JSON list with id and
            prediction columns, parquet), a `datasets.save_to_disk` folder, or
            "hf://USER/REPO[@REVISION]" (a Hub dataset repo: read at the commit the revision
            resolves to now; the request records the repo and that commit's sha).
        hub_token: whose access reads an hf:// dataset (None: HF_TOKEN or the saved login;
            False: none, the repo must be public).
        model_name, institution, model_url, trained_on (test set names the model was
            trained on).
        submitter, submitter_id: who files: the Hub account's name and immutable id (the
            leaderboard passes whoami's); on a local store a typed name and no id, the
            name then being the identity (rexrank.store.accounts).
        namespace, namespace_id: the account the model is filed under (the submitter, by
            default, or one of their organisations): the board shows "namespace / name".
        model_repo: a Hub model repo the leaderboard checked belongs to the submitter's
            accounts: the row is that repo's.
        data_dir: where the test set's JSON is (needed for MIMIC-CXR / CheXpert Plus; for
            a private test set, ids are checked by the backend instead).
        source_label: how the request names a local predictions file (the leaderboard passes
            the uploaded file's own name, never the server's temporary path).
        id_column, prediction_column: the file's column names when they are not the usual ones.
        dataset_owners: the account names whose hf:// datasets this submitter may file (the
            leaderboard passes the submitter's and their organisations', from whoami);
            None: not checked (the organisers' command line, which names the submitter).

        The predictions are validated with rexrank.submissions (the `rexrank score`
        validator) before anything is written. Raises SubmissionError (a RexrankError)
        with a message for the submitter if they are invalid, identical to an earlier
        request of the same model (same predictions), or over the submitter's quota.
        """
        from rexrank.store import copies
        from rexrank.store.accounts import Account, account_key, request_fields
        from rexrank.store.hub_predictions import content_time_on_hub, read_raw_from_hub
        from rexrank.submissions import read_raw_predictions
        from rexrank.store.predictions import content_sha256, to_parquet_bytes, validate_for
        from rexrank.testsets.registry import TEST_SETS, check_track, get_spec

        model_name, submitter = (model_name or "").strip(), (submitter or "").strip()
        institution, model_url = (institution or "").strip(), (model_url or "").strip()
        namespace = (namespace or "").strip()
        if not namespace or account_key(namespace) == account_key(submitter):  # the default: their own
            namespace, namespace_id = submitter, submitter_id
        if not model_name:
            raise SubmissionError("model name is empty")
        if not submitter:
            raise SubmissionError("submitter is empty")
        for label, value in (("model name", model_name), ("submitter", submitter), ("institution", institution), ("model URL", model_url)):
            if len(value or "") > 300:
                raise SubmissionError(f"{label} is longer than 300 characters")
        check_names(model_name=model_name, submitter=submitter, institution=institution, model_url=model_url,
                    namespace=namespace)
        who = Account(submitter, submitter_id or None)
        spec = get_spec(test_set)
        self.check_approval(self.requests.snapshot(), test_set, who)  # before reading anything: a courtesy
        check_track(track)
        trained_on = [t.strip() for t in trained_on if t and t.strip()]
        unknown = [t for t in trained_on if t not in TEST_SETS]
        if unknown:
            raise SubmissionError(f"--trained-on: unknown test set(s) {unknown}; known: {', '.join(TEST_SETS)}")

        source = str(predictions)
        hub_fields: dict = {}
        arrived: float | None = None  # when the content reached the Hub (None: when this server received it)
        if source.startswith("hf://"):
            if dataset_owners is not None:
                from rexrank.store.hub_predictions import parse_spec

                check_dataset_owner(parse_spec(source)[0], submitter=submitter, owners=dataset_owners)
            raw, dataset = read_raw_from_hub(source, endpoint=hub_endpoint, token=hub_token,
                                             id_column=id_column, prediction_column=prediction_column)
            # the commit read, not the revision asked for: what is scored is exactly this commit;
            # `public`: whether the Hub said the repo is public now (else it is never named publicly)
            source, hub_fields = dataset.pinned, {"repo": dataset.repo_id, "revision": dataset.sha,
                                                  "files": list(dataset.files), "public": dataset.public}
            arrived = content_time_on_hub(dataset, endpoint=hub_endpoint, token=hub_token)
        else:
            raw = read_raw_predictions(predictions, id_column=id_column, prediction_column=prediction_column)
            source = R.public_source(source_label or source)
        preds, ids_checked = validate_for(raw, test_set, track, data_dir=data_dir)
        sha = content_sha256(preds)
        parquet = to_parquet_bytes(preds)
        accounts = request_fields(who, Account(namespace, namespace_id or None))

        def decide(snap: Snapshot):
            ts = R.now() if now is None else now
            probe = {"model_name": model_name, "test_set": test_set, "track": track, "predictions": {"sha256": sha},
                     "institution": institution, "model_url": model_url, **accounts}
            legacy, bound = self.bind_legacy_name(snap, who)  # a first binding is written with the filing
            existing = self._history(snap, probe, legacy)
            check_policy(existing, probe, now=ts, quota=self.quota)
            approval = self.check_approval(snap, test_set, who) or {}  # so is an approved name's
            rid = R.new_request_id(ts, submitter_id or submitter, namespace, model_name, sha)
            request = {
                "id": rid,
                "status": R.PENDING,
                "test_set": test_set,
                "track": track,
                "private": spec.private,
                "model_name": model_name,
                **accounts,
                "institution": institution,
                "model_url": model_url,
                **({"model_repo": model_repo} if model_repo else {}),
                "trained_on": trained_on,
                "submitted_time": R.iso(ts),
                "received_time": R.iso(ts),
                "predictions": {
                    "path": R.predictions_path(rid),
                    "source": source,
                    "sha256": sha,
                    "n": len(preds),
                    "n_empty": preds.n_empty,
                    "ids_checked": ids_checked,
                    **hub_fields,
                },
                "worker": None,
                "lease_expires": None,
                "attempts": 0,
                "error": None,
                "result_id": None,
                "history": [{"time": R.iso(ts), "status": R.PENDING}],
            }
            key, new_key = copies.key_at(self.requests, snap)
            filing = copies.Filing.of(request, copies.fingerprints(key, preds.ids, preds.texts), n=len(preds),
                                      content_time=ts if arrived is None else arrived,
                                      content_from=copies.FROM_UPLOAD if arrived is None else copies.FROM_COMMIT)
            # filed through this API (the leaderboard Space, the organisers' CLI): dated by the
            # filing server's clock in the backend's register; a request file written any
            # other way is dated when the backend first sees it
            edit = IndexEdit(self.requests, snap)
            edit.receive(rid, R.iso(ts))
            request, judged = self.judge_copies(snap, edit, request, filing, ts, legacy)
            changes = {**judged, **approval, **bound, **new_key, R.request_path(rid): R.dumps(request),
                       R.predictions_path(rid): parquet, **edit.changes()}
            return changes, f"submit {rid}: {model_name} on {test_set}/{track}", request

        return transact(self.requests, decide, folders=(R.QUEUE_DIR,))


def results_repo_files(records: Iterable[dict]) -> dict[str, bytes]:
    """The files of a results repo holding exactly `records`, as `Store.add_results` writes
    them (records and their index), built in a scratch folder: e.g. to seed a new Hub repo."""
    import tempfile

    from rexrank.store.local import LocalRepo

    with tempfile.TemporaryDirectory(prefix="rexrank-results-") as tmp:
        results = LocalRepo(Path(tmp) / "results")
        Store(LocalRepo(Path(tmp) / "requests"), results, name=tmp).add_results(records)
        snap = results.snapshot("")  # "": every folder
        return {path: results.read(snap, path) for path in snap.files}
