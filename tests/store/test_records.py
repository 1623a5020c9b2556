"""Records: paths, public names, views, request ids and dates (rexrank.store.records).

Pinned by hand (issue 32: what the mutation tool found unpinned): every expected value comes from an
independent oracle, never from rexrank's earlier output."""
from __future__ import annotations

import json
import re

import pytest

from rexrank.store import records as R
from support.store_queue import T0


# ---- store.records: paths, public names and views, written out ---------------------------
RID = "20260101T120000.000000-0123456789"  # the form new_request_id gives (records.REQUEST_ID_EXAMPLE)


def test_result_and_scratch_paths_by_hand():
    """Where records live (records' module docstring): index/records/<first two hex digits of
    the path's sha256>.json (FIPS 180-2's test vector sha256("abc") = ba7816bf...), records/
    and per_study/ under test set and track with every character but letters, digits and
    "-_." replaced by "_" (an empty part is "_"), scratch/<id>/shard-<kkk>-attempt-<a>."""
    assert R.result_shard("abc") == "index/records/ba.json"
    assert R.result_shard("") == "index/records/e3.json"  # sha256 of nothing: e3b0c442...
    record = {"test_set": "iu_xray", "track": "find ings", "id": "../a:b"}
    assert R.result_path(record) == "records/iu_xray/find_ings/.._a_b.json"
    assert R.result_path({"test_set": "", "track": "t-1", "id": "x.y"}) == "records/_/t-1/x.y.json"
    assert R.per_study_path("iu/xray", "", "r 1") == "per_study/iu_xray/_/r_1.parquet"
    assert R.shard_paths(RID, 3, 2) == (f"scratch/{RID}/shard-003-attempt-2.json", f"scratch/{RID}/shard-003-attempt-2.parquet")
    assert R.shard_paths(RID, "12", 1.0)[0] == f"scratch/{RID}/shard-012-attempt-1.json"
    with pytest.raises(R.BadRequestId):
        R.shard_paths("../x", 0, 0)


def test_public_names_of_stores_sources_and_paths_by_hand():
    """Nothing public holds a server's or a submitter's path: a local store is named
    "local store <its folder's name>", a local source or a local path in a provenance by its
    base name (after / or \\, trailing ones dropped); hf:// ids, URLs and plain words stay."""
    assert R.public_store_name("hf://org/store") == "hf://org/store"
    assert R.public_store_name("/srv/data/my-store/") == "local store my-store"
    assert R.public_store_name("HF://org/store") == "local store store"
    assert R.public_source("C:\\Users\\me\\preds.jsonl") == "preds.jsonl"
    assert R.public_source("/home/me/runs/a/b/preds.parquet") == "preds.parquet"
    assert R.public_source("hf://me/preds@abc") == "hf://me/preds@abc"
    assert R.public_source(None) == R.public_source("") == ""
    assert R.public_paths({"ckpt": ["/opt/models/a.pt", "~/b.bin", "./c.pt", "C:\\d.pt", "..\\e.pt"],
                           "hub": "hf://x/y", "url": "https://e.org/a/b", "name": "BERT/base", 3: 4.5}) == \
        {"ckpt": ["a.pt", "b.bin", "c.pt", "d.pt", "e.pt"], "hub": "hf://x/y", "url": "https://e.org/a/b",
         "name": "BERT/base", 3: 4.5}


def test_public_predictions_sources_by_hand():
    """A Hub dataset is named by its id only if the Hub said it was public when filed (True,
    not a truthy string); else "a private dataset at commit <revision, or the id's @sha>"; a
    local file by its base name."""
    hub = "hf://alice/preds@0123abc"
    assert R.public_predictions_source({"source": hub, "public": True}) == hub
    assert R.public_predictions_source({"source": hub, "public": "yes"}) == "a private dataset at commit 0123abc"
    assert R.public_predictions_source({"source": hub, "revision": "fedcba9"}) == "a private dataset at commit fedcba9"
    assert R.public_predictions_source({"source": "hf://a/b@c@d"}) == "a private dataset at commit d"
    assert R.public_predictions_source({"source": "/home/alice/preds.jsonl", "public": True}) == "preds.jsonl"
    assert R.public_predictions_source({}) == ""


def test_status_view_by_hand():
    """What `rexrank status --json` prints: id, status, error, the result's values (None
    without a result), and notes only when there are some."""
    request = {"id": RID, "status": "FINISHED", "error": None, "notes": ("metric x not run",), "model_name": "m"}
    assert R.status_view(request, {"values": {"bleu2": 0.5}, "id": "r"}) == \
        {"id": RID, "status": "FINISHED", "error": None, "results": {"bleu2": 0.5}, "notes": ["metric x not run"]}
    assert R.status_view({"id": RID, "status": "FAILED", "error": "boom", "notes": []}) == \
        {"id": RID, "status": "FAILED", "error": "boom", "results": None}
    assert R.status_view({"id": RID, "status": "PENDING"}, {}) == {"id": RID, "status": "PENDING", "error": None,
                                                                    "results": None}


def test_records_are_written_as_indented_utf8_json_and_jsonable_makes_plain_values():
    """dumps: JSON indented by 2, non-ASCII kept as UTF-8, a final newline, NaN refused;
    jsonable: numpy scalars and arrays to Python, NaN and infinities to None, tuples to
    lists, keys to strings."""
    import numpy as np

    assert R.dumps({"a": "é", "b": [1]}) == '{\n  "a": "é",\n  "b": [\n    1\n  ]\n}\n'.encode("utf-8")
    with pytest.raises(ValueError):
        R.dumps({"x": float("nan")})
    out = R.jsonable({1: np.float32(0.5), "a": (np.int64(3), float("inf")), "n": np.array([1.0, np.nan]),
                      "m": -float("inf"), "s": "x", "f": 2.5})
    assert out == {"1": 0.5, "a": [3, None], "n": [1.0, None], "m": None, "s": "x", "f": 2.5}
    assert type(out["a"][0]) is int and type(out["1"]) is float


def test_request_ids_are_the_time_to_the_microsecond_and_a_10_digit_hash():
    """new_request_id: UTC %Y%m%dT%H%M%S.%f, "-", and the first 10 hex digits of the sha256 of
    repr(ts) and the parts joined by NUL (the digest written out with hashlib)."""
    import hashlib

    rid = R.new_request_id(T0 + 0.25, "alice", "model-a")
    digest = hashlib.sha256(b"1767225600.25\x00alice\x00model-a").hexdigest()[:10]
    assert rid == f"20260101T000000.250000-{digest}"
    assert R.check_request_id(rid) == rid
    assert R.new_request_id(T0, "a") != R.new_request_id(T0, "b")


def _request_file(**change) -> dict:
    """A well-formed open request record (REQUEST_FIELDS), changed by `change`."""
    record = {"id": RID, "status": "PENDING", "test_set": "example", "track": "findings", "model_name": "m",
              "submitter": "alice", "submitted_time": "2026-01-01T12:00:00Z",
              "predictions": {"path": f"predictions/{RID}/test.parquet", "sha256": "ab"}}
    return {k: v for k, v in {**record, **change}.items() if v is not ...}


@pytest.mark.parametrize("record, path, message", [
    ([1], None, "a JSON list, not an object"),
    (_request_file(status=..., track=...), None, "lacks status, track"),
    (_request_file(status=1, predictions=[]), None, "status is int, not str; predictions is list, not dict"),
    (_request_file(id="../x"), None,
     "'../x' is not a request id (expected the form 20260101T120000.000000-0123456789)"),
    (_request_file(), f"queue/{RID[:-1]}8.json",
     f"holds request id '{RID}', which belongs in queue/{RID}.json"),
    (_request_file(status="FINISHED"), f"queue/{RID[:-1]}8.json",
     f"holds request id '{RID}', which belongs in done/{RID}.json"),
    (_request_file(status="DONE"), None, "unknown status 'DONE'"),
    (_request_file(status="RUNNING"), f"done/{RID}.json",
     f"is RUNNING but lies among the settled requests; it belongs in queue/{RID}.json"),
    (_request_file(submitted_time="2026-01-01 12:00:00"), None,
     "submitted_time '2026-01-01 12:00:00' is not YYYY-MM-DDTHH:MM:SSZ"),
    (_request_file(predictions={"path": "p"}), None, "predictions lacks its path or sha256"),
    (_request_file(predictions={"sha256": "ab"}), None, "predictions lacks its path or sha256"),
    (_request_file(attempts=True), None, "attempts is bool"),
    (_request_file(attempts=1.0), None, "attempts is float"),
    (_request_file(lease_expires="soon"), None, "lease_expires is str"),
    (_request_file(lease_expires=False), None, "lease_expires is bool"),
])
def test_a_queue_file_that_cannot_be_used_is_refused_with_its_reason(record, path, message):
    """parse_request's checks, in order, each message written out: an object, the fields
    and their types, the id's form, the file it must be in (queue/ open, done/ settled),
    a known status, an open request not in done/, the date's form, the predictions' path
    and sha256, attempts an int and lease_expires a number or null (never a bool)."""
    with pytest.raises(R.BadRecord) as caught:
        R.parse_request(json.dumps(record).encode("utf-8"), path or f"queue/{RID}.json")
    assert str(caught.value) == message


def test_a_usable_queue_file_is_read_as_it_is():
    record = _request_file(attempts=2, lease_expires=1.5, status="FAILED")
    assert R.parse_request(json.dumps(record).encode(), f"done/{RID}.json") == record
    assert R.parse_request(json.dumps(_request_file(lease_expires=None, attempts=0)).encode(), f"queue/{RID}.json") \
        == _request_file(lease_expires=None, attempts=0)
    assert R.parse_request(json.dumps(_request_file(lease_expires=3)).encode(), f"queue/{RID}.json")["lease_expires"] == 3


@pytest.mark.parametrize("data, message", [
    (b'{"a": 1, "a": 2}', "repeated keys ['a']"),
    (b"\xff{}", "not UTF-8 (byte 0)"),
    (b'{"a": 1,}', "not valid JSON (line 1, column 9): Expecting property name enclosed in double quotes"),
])
def test_a_file_that_is_not_a_json_object_says_why_in_one_line(data, message):
    """_load: the JSON module's own message with its line and column, the first byte that is
    not UTF-8, the keys given twice."""
    with pytest.raises(R.BadRecord) as caught:
        R.parse_result(data, "records/x.json")
    assert str(caught.value) == message


def test_result_records_need_their_five_fields():
    good = {"id": "r", "model_name": "m", "test_set": "t", "track": "k", "values": {}}
    assert R.parse_result(json.dumps(good).encode(), "records/x.json") == good
    with pytest.raises(R.BadRecord, match="^lacks values$"):
        R.parse_result(json.dumps({k: v for k, v in good.items() if k != "values"}).encode(), "records/x.json")
    with pytest.raises(R.BadRecord, match="^values is list, not dict$"):
        R.parse_result(json.dumps({**good, "values": []}).encode(), "records/x.json")


def test_a_request_id_that_is_no_id_is_shown_short():
    """check_request_id: only the form new_request_id gives (ASCII digits), any other value
    refused with its repr, cut to 40 characters and its length when longer than 60."""
    with pytest.raises(R.BadRequestId) as caught:
        R.check_request_id("a" * 100)
    assert str(caught.value) == f"'{'a' * 39}... (100 characters) is not a request id (expected the form {R.REQUEST_ID_EXAMPLE})"
    sixty = "b" * 58  # repr adds two quotes: 60 characters, shown whole
    with pytest.raises(R.BadRequestId, match=re.escape(f"'{sixty}' is not a request id")):
        R.check_request_id(sixty)
    for bad in (None, 20260101, RID + "\n", "\u0662" * 8 + RID[8:], RID.upper().replace("0123456789", "ABCDEF0123")):
        with pytest.raises(R.BadRequestId):
            R.check_request_id(bad)
    assert R.request_path(RID) == f"queue/{RID}.json" and R.request_path(RID, "FAILED") == f"done/{RID}.json"
    assert R.request_paths(RID) == (f"queue/{RID}.json", f"done/{RID}.json")
    assert R.predictions_path(RID) == f"predictions/{RID}/test.parquet"
    with pytest.raises(R.BadRequestId):
        R.request_paths("x")


def test_an_open_request_is_dated_by_the_servers_register_and_a_settled_one_as_written():
    """with_server_time: an open request in queue/ takes submitted_time and received_time
    from the register (an ISO date), loses a received_time its writer put there when the
    register has none; a settled request, or one outside queue/, is returned as it is."""
    req = _request_file(received_time="1999-01-01T00:00:00Z")
    when = "2026-02-03T04:05:06Z"
    assert R.with_server_time(f"queue/{RID}.json", req, {RID: when}) == \
        {**req, "submitted_time": when, "received_time": when}
    unseen = R.with_server_time(f"queue/{RID}.json", req, {RID: "not a date"})
    assert unseen == {k: v for k, v in req.items() if k != "received_time"}
    assert R.with_server_time(f"queue/{RID}.json", req, {}) == unseen
    assert R.with_server_time(f"queue/{RID}.json", unseen, {}) == unseen  # none in the file, none in the register
    assert req["received_time"] == "1999-01-01T00:00:00Z"  # the record read is left as it was
    settled = {**req, "status": "FINISHED"}
    assert R.with_server_time(f"queue/{RID}.json", settled, {RID: when}) is settled
    assert R.with_server_time(f"done/{RID}.json", req, {RID: when}) is req


def test_summaries_and_recent_entries_hold_what_the_rules_and_tables_read():
    """summary: the fields the submission rules read and the predictions' sha256 only;
    recent_entry: those and the queue tables' (institution, error, finished_time, worker,
    result_id); a missing field is None."""
    req = {**_request_file(status="FINISHED"), "failure_kind": None, "private": False, "institution": "Lab",
           "worker": "w", "result_id": "r1", "finished_time": "2026-01-02T00:00:00Z", "lease_token": "t"}
    expected = {"id": RID, "status": "FINISHED", "failure_kind": None, "private": False,
                "submitted_time": "2026-01-01T12:00:00Z", "submitter": "alice", "model_name": "m",
                "test_set": "example", "track": "findings", "predictions": {"sha256": "ab"}}
    assert R.summary(req) == expected
    assert R.recent_entry(req) == {**expected, "institution": "Lab", "error": None,
                                   "finished_time": "2026-01-02T00:00:00Z", "worker": "w", "result_id": "r1"}


def test_index_files_are_named_by_the_names_key_and_the_contents_sha256():
    """request_index_files: index/names/ and index/submitters/ files named by the first 32
    hex digits of the sha256 of the name's key (names that compare equal share one), and
    index/predictions/ by those of the sha256 of the predictions' sha256 text."""
    import hashlib

    from rexrank.store.names import name_key

    names, submitters, contents = R.request_index_files("Model A", "alice", "ab")
    assert names == f"index/names/{hashlib.sha256(name_key('Model A').encode()).hexdigest()[:32]}.json"
    assert submitters == f"index/submitters/{hashlib.sha256(name_key('alice').encode()).hexdigest()[:32]}.json"
    assert contents == f"index/predictions/{hashlib.sha256(b'ab').hexdigest()[:32]}.json"
    assert R.request_index_files("model a", "ALICE", "ab")[:2] == (names, submitters)
    assert R.request_index_files("Model B", "bob", "cd")[0] != names


def test_dates_are_utc_seconds_written_with_a_z_whatever_the_machines_time_zone(monkeypatch):
    """iso and parse_iso read and write UTC, also on a machine whose local time is 5 hours
    behind it (POSIX TZ "XYZ+5", no daylight saving)."""
    import time

    monkeypatch.setenv("TZ", "XYZ+5")
    time.tzset()
    try:
        assert time.localtime(T0).tm_hour == 19  # the zone is in effect: 2025-12-31 19:00 there
        _check_dates()
    finally:
        monkeypatch.undo()  # the machine's own zone back for the tests that follow
        time.tzset()


def test_request_ids_are_dated_in_utc_whatever_the_machines_time_zone(monkeypatch):
    """new_request_id's time is UTC, also where local time is 5 hours behind it."""
    import time

    monkeypatch.setenv("TZ", "XYZ+5")
    time.tzset()
    try:
        assert R.new_request_id(T0 + 0.25, "alice").startswith("20260101T000000.250000-")
    finally:
        monkeypatch.undo()
        time.tzset()


def _check_dates():
    assert R.iso(T0 + 3661.9) == "2026-01-01T01:01:01Z"
    assert R.parse_iso("2026-01-01T01:01:01Z") == T0 + 3661
    for bad in ("2026-01-01T01:01:01", "2026-01-01 01:01:01Z", None):
        assert not R._is_iso(bad)
    assert R._is_iso("2026-01-01T01:01:01Z")


def test_a_61_character_id_is_cut_and_a_base_name_keeps_its_last_letters():
    """check_request_id shows a repr of at most 60 characters whole (59 letters and two
    quotes: 61, cut to 40 and the length); public_source drops only trailing slashes."""
    with pytest.raises(R.BadRequestId) as caught:
        R.check_request_id("c" * 59)
    assert str(caught.value).startswith(f"'{'c' * 39}... (59 characters) is not a request id")
    assert R.public_source("/data/runs/MAX/") == "MAX"


def test_a_summary_keeps_who_filed_it_by_id_and_leaves_out_ids_it_lacks():
    """summary: the account fields (submitter_id, namespace, namespace_id) the rules read to
    know whose a settled request is (rexrank.store.accounts), each only when it has a value:
    a request filed before ids has none, and is then its submitter's name's."""
    req = {**_request_file(status="FINISHED"), "submitter_id": "u1", "namespace": "acme", "namespace_id": ""}
    summary = R.summary(req)
    assert {k: summary[k] for k in ("submitter_id", "namespace")} == {"submitter_id": "u1", "namespace": "acme"}
    assert "namespace_id" not in summary
    assert {"submitter_id", "namespace", "namespace_id"}.isdisjoint(R.summary(_request_file(status="FINISHED")))
    assert R.recent_entry(req)["submitter_id"] == "u1"
