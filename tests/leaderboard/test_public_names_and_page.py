"""Issue 20 items 3, 6, 7 and issue 19 item 2 (results): names that cannot pass for another,
CSV downloads a spreadsheet cannot run, http(s) model URLs checked by the store, a page that
echoes no crafted link and shows no path, results ranked only where each value passes its
checks, per-study files found from the result's id, and a damaged one that affects only
its own model's page. Every input here is our own (the trial's were not given)."""
from __future__ import annotations

import csv
import io
import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from rexrank.leaderboard.model_page import NO_SUCH_MODEL
from rexrank.backend.worker import Worker
from rexrank.errors import SubmissionError
from rexrank.leaderboard import tables
from rexrank.leaderboard.downloads import CsvFiles
from rexrank.leaderboard.model_page import model_header, neighbour_significance
from rexrank.leaderboard.published import load_seed_records
from rexrank.leaderboard.records import records_frame
from rexrank.leaderboard.source import LeaderboardSource
from rexrank.store import FAILED, FINISHED, Quota, open_store
from rexrank.store import records as R
from rexrank.store.names import name_key
from support.backend_fixtures import rogue, run  # noqa: F401 (fixture)
from support.requests import submit, variant
from support.paths import SHARED

def check_name(label, text):
    from rexrank.store.names import check_name

    check_name(label, text)


def check_url(label, text):
    from rexrank.store.names import check_url

    check_url(label, text)


def escape_formulas(table):
    from rexrank.leaderboard.downloads import escape_formulas

    return escape_formulas(table)


PUBLISHED = [
    {"id": f"published/iu_xray/findings/{name.lower()}", "model_name": name, "institution": inst,
     "submitter": "ReXrank (published)", "test_set": "iu_xray", "track": "findings", "source": "published",
     "values": {"bleu2": {"mean": 0.2, "ci95": None, "n": None}}}
    for name, inst in (("MAIRA-2", "Microsoft"), ("MedGemma", "Google"), ("MedVersa", "Harvard"), ("Libra", "Lehigh University"))
]


# ---- names: repertoire and skeleton (20.3) ---------------------------------------------------

def _published_names():
    """(model names, institutions, URLs) of every published ReXrank table we have: the shipped
    records and, when ../shared is beside the checkout, every CSV of its current and history."""
    names, insts, urls = set(), set(), set()
    for r in load_seed_records():
        names.add(r["model_name"]), insts.add(r["institution"]), urls.add(r["model_url"])
    for path in sorted((SHARED / "data" / "published").rglob("*.csv")):
        with path.open(encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                names.add(row["Model Name"]), insts.add(row["Institution"]), urls.add(row["Model URL"])
    return names, insts, urls


def test_every_published_name_stays_valid():
    names, insts, urls = _published_names()
    assert len(names) >= 25
    for name in names:
        check_name("model name", name)
    for inst in insts - {""}:
        check_name("institution", inst)
    for url in urls - {""}:
        check_url("model URL", url)
    # published names that differ only by "-" and "_" stay distinct entries
    assert name_key("CheXpertPlus-CheX") != name_key("CheXpertPlus_CheX")


LOOKALIKES = {
    "MAIRA-2": ["MAlRA-2", "MA1RA-2", "maira-2", "MAIRA\u20102", "MAIRA\u20112", "MAIRA\u20132", "MAIRA\u20142",
                "MAIRA\u22122", "MAIRA\ufe632", "MAIRA-2\ufe0f", "MA\u034fIRA-2", "MAIRA-2\u180b", "MAIRA\u17b4-2",
                "MAIRA\u17b5-2", "MAI\u115fRA-2", "MAI\u1160RA-2", "MAI\u3164RA-2", "MAI\uffa0RA-2", "MAIRA-2\U000e0100",
                "MAI\u0301RA-2", "M\u0391IRA-2", "MAIRA-2*", "MAIRA-\U0001d7d0"],
    "MedGemma": ["MedGemrna", "MedGernrna", "MedGe\u217fma"],
    "Libra": ["Iibra", "1ibra", "L\u0456bra", "Li\u200dbra"],
}


@pytest.mark.parametrize("published,lookalike", [(p, n) for p, names in LOOKALIKES.items() for n in names])
def test_a_lookalike_of_a_published_name_is_marked_and_never_a_takeover(tmp_path, rogue, published, lookalike):
    """Nobody owns a bare name (issue 37): a lookalike the name rules let through is filed under
    its namespace and marked beside the published entry; one they refuse stays refused, by the
    client and by the backend."""
    assert name_key(lookalike) == name_key(published)
    store = open_store(tmp_path / "s", quota=Quota(0))
    store.add_results([{**r, "id": f"{r['id']}-example", "test_set": "example"} for r in PUBLISHED])
    try:
        submit(store, model_name=lookalike, submitter="mallory")
    except SubmissionError as exc:
        assert re.search("not allowed|invisible or control|mixes", str(exc)), exc
        sneaked = rogue(store, model_name=lookalike, submitter="mallory")  # a client that checks nothing
        Worker(store, metrics="bleu2", worker_id="w").run(once=True)
        assert store.get_request(sneaked["id"])["status"] == FAILED
        assert all(r["source"] == "published" for r in store.list_results())
        return
    Worker(store, metrics="bleu2", worker_id="w").run(once=True)
    table = tables.ranked(records_frame(store.list_results()), "example", "findings", "bleu2")
    marked = dict(zip(table["model_name"], table["lookalike"]))
    assert marked[f"mallory / {lookalike}"] and not marked[published]  # the published entry stays itself
    assert tables.LOOKALIKE_MARK in tables.model_cell({**table[table["model_name"] == f"mallory / {lookalike}"]
                                                       .iloc[0].to_dict()})


def test_two_namespaces_with_one_name_are_no_lookalikes_but_lookalike_namespaces_are():
    rows = [{**PUBLISHED[0], "id": f"r{i}", "model_name": "CheXagent-3", "namespace": ns, "source": "rexrank"}
            for i, ns in enumerate(("alice", "bob", "stanford-aimi", "stanford-aiml"))]
    table = tables.ranked(records_frame(rows), "iu_xray", "findings", "bleu2")
    assert dict(zip(table["model_name"], table["lookalike"])) == {
        "alice / CheXagent-3": False, "bob / CheXagent-3": False,
        "stanford-aimi / CheXagent-3": True, "stanford-aiml / CheXagent-3": True}


def test_a_lookalike_is_marked_in_the_overview_the_csv_download_and_its_model_page():
    rows = [{**PUBLISHED[0], "id": f"r{i}", "model_name": "CheXagent-3", "namespace": ns, "source": "rexrank",
             "values": {"bleu2": {"mean": 0.2 + i / 100, "ci95": None, "n": None}}}
            for i, ns in enumerate(("alice", "stanford-aimi", "stanford-aiml"))]
    frame = records_frame(rows)
    views = tables.page_views(frame, "findings", "bleu2", test_sets=("iu_xray",))
    overview, plain = views.overview["IU-Xray"].tolist(), views.overview_plain["IU-Xray"].tolist()
    for cells in (overview, plain):
        assert [tables.LOOKALIKE_MARK in c for c in cells] == [True, True, False], cells  # best first
    csv = views.tables["iu_xray"].plain
    assert dict(zip(csv["Model"], csv["Lookalike name"])) == {
        "stanford-aiml / CheXagent-3": "yes", "stanford-aimi / CheXagent-3": "yes", "alice / CheXagent-3": ""}
    assert tables.LOOKALIKE_MARK in model_header(frame, "stanford-aiml / CheXagent-3")
    assert tables.LOOKALIKE_MARK not in model_header(frame, "alice / CheXagent-3")


def test_a_record_from_before_namespaces_is_its_submitters_as_the_rules_have_it():
    """A request without a namespace files under its submitter (store.accounts.namespace_of):
    its record, written before namespaces existed, is the same model as the submitter's new one."""
    old = {**PUBLISHED[0], "id": "old", "model_name": "MyModel", "submitter": "alice", "source": "rexrank"}
    new = {**old, "id": "new", "namespace": "alice", "date": "2025-06-01"}
    frame = records_frame([old, new, PUBLISHED[1]])
    assert list(frame["model_name"]) == ["alice / MyModel", "alice / MyModel", "MedGemma"]
    assert list(frame["namespace"]) == ["alice", "alice", ""]  # a published entry has none


def test_a_record_written_by_hand_shows_no_default_ignorable_character():
    rec = record("Med\u034fVersa\ufe0f\u115f\u17b4", rid="r1", bleu2=0.1)
    rec["institution"] = "Lab\u180b\U000e0100"
    row = records_frame([rec]).iloc[0]
    assert row["model_name"] == "MedVersa" and row["institution"] == "Lab"


def test_distinct_names_stay_distinct():
    for a, b in (("MAIRA-2", "MAIRA-3"), ("MAIRA-2", "MAIRA_2"), ("MedVersa", "MedVerse"), ("RGRG", "RGRC"),
                 ("CXRMate-ED", "CXRMate-RRG24")):
        assert name_key(a) != name_key(b), (a, b)


@pytest.mark.parametrize("field", ["model_name", "institution"])
@pytest.mark.parametrize("value", ['=HYPERLINK("https://evil.example","x")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(1+1)",
                                   "Tab\tin", "CR\rin", "  =padded", "\t=tabbed", "Lab\u2028Two", "Lab<script>", "Lab\\u0000"])
def test_a_name_that_a_spreadsheet_runs_or_that_is_outside_the_repertoire_is_refused(tmp_path, rogue, field, value):
    store = open_store(tmp_path / "s", quota=Quota(0))
    kw = {"model_name": "fine-model", field: value}
    with pytest.raises(SubmissionError, match="formula|not allowed|invisible or control"):
        submit(store, **kw)
    assert store.list_requests() == []
    sneaked = rogue(store, **kw)
    Worker(store, metrics="bleu2", worker_id="w").run(once=True)
    assert store.get_request(sneaked["id"])["status"] == FAILED and store.list_results() == []


@pytest.mark.parametrize("url", ["javascript:alert(1)", "=HYPERLINK(\"http://x\")", "ftp://example.org/m", "http://",
                                 "https://example.org/a b", "data:text/html,<b>x</b>", "//example.org/m",
                                 "https://example.org/\u202eevil", "file:///etc/passwd"])
def test_the_model_url_is_http_and_checked_by_the_store_and_the_cli(tmp_path, capsys, rogue, url):
    root = tmp_path / "s"
    store = open_store(root, quota=Quota(0))
    with pytest.raises(SubmissionError, match="model URL"):
        submit(store, model_url=url)
    code, out, err = run(capsys, "submit", "--store", str(root), "--dataset", "example", "--predictions",
                         str(variant(tmp_path, 1)), "--model-name", "m", "--submitter", "bob", "--model-url", url)
    assert code == 1 and "model URL" in err and store.list_requests() == []
    sneaked = rogue(store, model_url=url)
    Worker(store, metrics="bleu2", worker_id="w").run(once=True)
    assert store.get_request(sneaked["id"])["status"] == FAILED and store.list_results() == []


@pytest.mark.parametrize("ch", ["\u034f", "\ufe0f", "\u115f", "\u1160", "\u3164", "\uffa0", "\u17b4", "\u180b", "\U000e0100"])
def test_a_new_name_holding_a_default_ignorable_character_is_refused(ch):
    with pytest.raises(SubmissionError, match="invisible or control character"):
        check_name("model name", f"Fresh{ch}Model")


def test_no_name_begins_with_a_formula_character_tab_or_return():
    for value in ("=1", "+1", "-1", "@1", "\tx", "\rx", "\t", "-"):
        with pytest.raises(SubmissionError, match="formula|invisible or control"):
            check_name("model name", value)


def test_a_plain_web_url_and_an_accented_institution_pass(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store, model_name="RadPhi3.5Vision-v2", institution="Université de Montréal (Mila)",
                 model_url="https://huggingface.co/org/model?rev=main#card")
    assert req["institution"] == "Université de Montréal (Mila)"


# ---- CSV downloads (20.3) ------------------------------------------------------------------------

def record(name, *, rid=None, test_set="iu_xray", track="findings", date="2025", per_study=False, **values):
    out = {"id": rid or f"rexrank/{test_set}/{track}/{name}", "model_name": name, "institution": "Lab",
           "model_url": "", "date": date, "test_set": test_set, "track": track, "source": "rexrank",
           "per_study_available": per_study, "values": {}}
    for key, v in values.items():
        mean, ci, n = (v + (None, None))[:3] if isinstance(v, tuple) else (v, None, None)
        out["values"][key] = {"mean": mean, "ci95": ci, "n": n}
    return out


def test_every_csv_cell_that_a_spreadsheet_would_run_is_escaped(tmp_path):
    evil = ["=1+1", "+SUM(A1)", "-2+3", "@cmd", "=x\ty", "-\rx"]
    records = [record(name, rid=f"r{i}", bleu2=0.1 + i / 100, bertscore=-0.065) for i, name in enumerate(evil)]
    records[0]["institution"] = "=HYPERLINK(\"https://evil.example\")"
    records[1]["model_url"] = "=IMPORTXML(A1)"
    frame = records_frame(records)  # written by hand into the store: the page still escapes them
    views = tables.page_views(frame, "findings", "bleu2", "")
    files = CsvFiles(tmp_path / "csv")
    for table, name in ((views.tables["iu_xray"].plain, "iu"), (views.overview_plain, "overview")):
        path = files.write(table, name)
        with open(path, encoding="utf-8", newline="") as fh:
            cells = [c for row in csv.reader(fh) for c in row]
        assert not [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r") or (c[:1] == "-" and not _number(c))]
    table = pd.read_csv(files.write(views.tables["iu_xray"].plain, "iu"), keep_default_na=False)
    assert sorted(table["Model"]) == sorted("'" + n.replace("\t", "").replace("\r", "") for n in evil)
    assert table["BertScore"].tolist() == [-0.065] * 6  # numbers stay numbers
    assert escape_formulas(pd.DataFrame({"a": ["\tx", "\rx", "x"]}))["a"].tolist() == ["'\tx", "'\rx", "x"]


def _number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def test_escape_leaves_ordinary_cells_alone():
    table = pd.DataFrame({"Model": ["MAIRA-2", "a=b"], "BLEU": [0.1, -0.2]})
    pd.testing.assert_frame_equal(escape_formulas(table), table)


# ---- the page (20.6) -----------------------------------------------------------------------------

@pytest.mark.parametrize("wanted", ["\u202eAsreVdeM", "https://evil.example/login", "[MedVersa](https://evil.example)",
                                    "<a href='https://evil.example'>x</a>", "MedVersa\u200b", "x\x1b]8;;https://e.x\x07y"])
def test_an_unknown_model_is_not_echoed(wanted):
    frame = records_frame(load_seed_records())
    header = model_header(frame, wanted)
    assert header == NO_SUCH_MODEL
    assert "evil" not in header and "http" not in header and "\u202e" not in header


def test_search_downloads_are_kept_by_content_and_bounded(tmp_path):
    frame = records_frame(load_seed_records())
    files = CsvFiles(tmp_path / "csv", keep=5)
    paths = []
    for query in ["a", "b", "c", "e", "g", "i", "m", "r", "s", "t", "u", "x"] * 2:
        view = tables.page_views(frame, "findings", "bleu2", query).tables["iu_xray"]
        paths.append(files.write(view.plain, f"iu_{query}"))
    assert files.count() <= 5
    assert len(set(paths)) == 12  # the same search twice: the same file
    again = files.write(tables.page_views(frame, "findings", "bleu2", "a").tables["iu_xray"].plain, "iu_a")
    assert pd.read_csv(again).shape[0] > 0  # a pruned file is written again when asked for
    same = tables.page_views(frame, "findings", "bleu2", "").tables["iu_xray"].plain
    assert files.write(same, "iu") == files.write(same.copy(), "iu")


def test_no_server_or_submitter_path_is_published(tmp_path, capsys):
    root = tmp_path / "server-side" / "store"
    predictions = variant(tmp_path, 3)  # an absolute path on the submitter's machine
    code, out, err = run(capsys, "submit", "--store", str(root), "--dataset", "example", "--predictions",
                         str(predictions), "--model-name", "m", "--submitter", "bob", "--json")
    assert code == 0, err
    store = open_store(root, quota=Quota(0))
    assert store.list_requests()[0]["predictions"]["source"] == predictions.name
    Worker(store, metrics="bleu2", worker_id="w").run(once=True)
    result = store.list_results()[0]
    assert result["provenance"]["predictions"]["source"] == predictions.name
    for path in (root / "results").rglob("*"):
        if path.is_file():
            assert str(tmp_path) not in path.read_bytes().decode("utf-8", "replace"), path
    source = LeaderboardSource.from_store(store, ttl=0)
    from rexrank.leaderboard.app import _status_text

    assert str(tmp_path) not in source.label and str(tmp_path) not in _status_text(source)


def test_a_request_holding_a_local_path_publishes_its_base_name(tmp_path, rogue):
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = rogue(store)  # a request from an older client: the full path in its source
    path = tmp_path / "s" / "requests" / R.request_path(req["id"])
    data = json.loads(path.read_text())
    data["predictions"]["source"] = "/home/alice/secret project/preds.jsonl"
    path.write_text(json.dumps(data))
    Worker(store, metrics="bleu2", worker_id="w").run(once=True)
    assert store.list_results()[0]["provenance"]["predictions"]["source"] == "preds.jsonl"
    assert R.public_source("C:\\Users\\alice\\preds.csv") == "preds.csv"
    assert R.public_source("hf://alice/preds@0123abcd") == "hf://alice/preds@0123abcd"


# ---- results ranked only where they pass their checks (19.2) ---------------------------------------

BAD_VALUES = [
    ("bleu2", (5.0, 0.01, 590), "outside the metric's range"),
    ("bleu2", (-0.1, 0.01, 590), "outside the metric's range"),
    ("bertscore", (-20.0, None, 590), "outside the metric's range"),
    ("sembscore", (1.5, None, 590), "outside the metric's range"),
    ("radgraph", (0.3, -3.0, 590), "negative"),
    ("ratescore", (0.5, 0.01, 10**6), "not a count"),
    ("green", (0.5, 0.01, 12.5), "not a count"),
    ("green", (0.5, 0.01, 0), "not a count"),
    ("radcliq_v1_inv", (0.01, None, 590), "outside the metric's range"),
    ("radcliq_v1_inv", (-0.1, None, 590), "outside the metric's range"),
    ("fineradscore_inv", (0.1, None, 590), "outside the metric's range"),
    # the optional columns (issue 22): F1 values in 0..1, CRIMSON in (-1, 1]
    ("rouge", (1.2, None, 590), "outside the metric's range"),
    ("temporal_f1", (-0.2, None, 590), "outside the metric's range"),
    ("srr_bert", (3.0, None, 590), "outside the metric's range"),
    ("crimson", (-1.0, None, 590), "outside the metric's range"),
    ("crimson", (1.5, None, 590), "outside the metric's range"),
]


@pytest.mark.parametrize("key,value,why", BAD_VALUES)
def test_a_value_that_fails_its_checks_is_not_ranked_and_is_listed(tmp_path, key, value, why):
    fine = {"radcliq_v1_inv": 1.0, "fineradscore_inv": 0.4}.get(key, 0.2)
    good = record("Honest", rid="r1", **{"bleu2": (0.1, 0.01, 590), key: (fine, 0.01, 590)})
    cheat = record("Cheat", rid="r2", **{"bleu2": (0.05, 0.01, 590), key: value})
    store = open_store(tmp_path / "s", quota=Quota(0))
    store.add_results([good, cheat])
    source = LeaderboardSource.from_store(store, ttl=0)
    for frame, problems in ((source.frame(), source.problems), (None, [])):
        if frame is None:
            frame = records_frame([good, cheat], problems=problems)
        view = tables.ranked(frame, "iu_xray", "findings", key)
        assert view["model_name"].tolist()[0] == "Honest" and math.isnan(view["rank"].iloc[1])
        assert any("r2" in p and why in p for p in problems), problems
        # its other values stay ranked
        assert tables.ranked(frame, "iu_xray", "findings", "bleu2")["model_name"].tolist() == ["Honest", "Cheat"]
        assert frame.loc[frame["id"] == "r2", "bleu2"].notna().item() == (key != "bleu2")


@pytest.mark.parametrize("date", ["9999-99-99", "2999-01-01", "2025-02-30", "yesterday", "2025-1-1", "20250101"])
def test_a_record_with_no_real_past_date_is_left_out_and_listed(tmp_path, date):
    store = open_store(tmp_path / "s", quota=Quota(0))
    store.add_results([record("Honest", rid="r1", bleu2=0.1), record("Cheat", rid="r2", date=date, bleu2=0.9)])
    source = LeaderboardSource.from_store(store, ttl=0)
    assert source.frame()["model_name"].tolist() == ["Honest"]
    assert any("r2" in p and "date" in p for p in source.problems)


def test_every_published_record_passes_the_checks():
    problems: list[str] = []
    frame = records_frame(load_seed_records(), problems=problems)
    assert problems == [] and len(frame) == 128


# ---- per-study files (19.2, 20.7) ------------------------------------------------------------------

def per_study_bytes(seed: int, n: int = 20, **columns) -> bytes:
    rng = np.random.default_rng(seed)
    table = pd.DataFrame({"id": [f"EX{i:03d}" for i in range(1, n + 1)],
                          "radcliq_v1": rng.normal(1.0 + seed / 10, 0.2, n), **columns})
    buf = io.BytesIO()
    table.to_parquet(buf, index=False)
    return buf.getvalue()


def three_results(store):
    for i, name in enumerate(("Alpha", "Beta", "Gamma")):
        rec = record(name, rid=f"rexrank-{name.lower()}", test_set="example", radcliq_v1_inv=(1 / (1.0 + i / 10), 0.05, 20))
        store.add_result(rec, per_study=per_study_bytes(i))


def test_a_per_study_path_in_a_record_is_never_read(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(0))
    outside = tmp_path / "outside.parquet"
    outside.write_bytes(per_study_bytes(7))
    (tmp_path / "s" / "results" / "secret.parquet").write_bytes(per_study_bytes(8))
    for i, named in enumerate([str(outside), "../../outside.parquet", "secret.parquet", "per_study/../secret.parquet"]):
        rec = record(f"M{i}", rid=f"rexrank-m{i}", test_set="example", per_study=True, bleu2=0.1)
        rec["per_study_path"] = named
        store.add_results([rec])
        assert store.read_per_study(rec) is None  # the file of its id does not exist
        source = LeaderboardSource.from_store(store, ttl=0)
        assert source.per_study(rec["id"]) is None
        assert any(rec["id"] in p and "missing" in p for p in source.problems)
    three_results(store)
    rec = store.get_result("rexrank-beta", test_set="example", track="findings")
    assert store.read_per_study({**rec, "per_study_path": str(outside)}) == per_study_bytes(1)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "missing", "no id", "text scores", "repeated ids"])
def test_a_damaged_per_study_file_affects_only_its_own_models_page(tmp_path, damage):
    store = open_store(tmp_path / "s", quota=Quota(0))
    three_results(store)
    path = tmp_path / "s" / "results" / R.per_study_path("example", "findings", "rexrank-beta")
    data = path.read_bytes()
    if damage == "garbage":
        path.write_bytes(b"PAR1 this is not parquet")
    elif damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "missing":
        path.unlink()
    elif damage == "no id":
        path.write_bytes(per_study_bytes(1).replace(b"id", b"xx"))
        pd.DataFrame({"study": ["a"], "radcliq_v1": [1.0]}).to_parquet(path)
    elif damage == "text scores":
        pd.DataFrame({"id": ["EX001", "EX002"], "radcliq_v1": ["1.0", "oops"]}).to_parquet(path)
    else:
        pd.DataFrame({"id": ["EX001", "EX001"], "radcliq_v1": [1.0, 2.0]}).to_parquet(path)
    source = LeaderboardSource.from_store(store, ttl=0)
    ranked = tables.ranked(source.frame(), "example", "findings")
    assert ranked["model_name"].tolist() == ["Alpha", "Beta", "Gamma"]
    beta = neighbour_significance(source, "Beta", resamples=50)  # its own page: shown, with the reason
    assert len(beta) == 2 and all("this result's per-study scores cannot be used" in r for r in beta["Result"])
    for other in ("Alpha", "Gamma"):  # the neighbours' pages work; only the pair with Beta lacks a test
        sig = neighbour_significance(source, other, resamples=50)
        assert sig["Result"].tolist() == ["the neighbour's per-study scores cannot be used (see the problems listed above)"]
    assert any("rexrank-beta" in p and "per-study" in p for p in source.problems)
    from rexrank.leaderboard.app import _status_text

    assert "rexrank-beta" in _status_text(source)


def test_intact_per_study_files_give_the_tests(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(0))
    three_results(store)
    source = LeaderboardSource.from_store(store, ttl=0)
    sig = neighbour_significance(source, "Beta", resamples=50)
    assert len(sig) == 2 and all(r.startswith(("better", "worse")) for r in sig["Result"])
    assert source.problems == []


def test_a_store_indexed_by_an_earlier_name_key_is_reindexed_before_the_rules_read_it(tmp_path, rogue):
    """Index files are named by name_key: after the key changed, a worker rebuilds them once
    (else the quota would look up a submitter file that the earlier request is not in)."""
    root = tmp_path / "s"
    store = open_store(root, quota=Quota(1, 7))
    owner = submit(store, model_name="Libra-X", submitter="alice")
    store.claim("w0", lease_seconds=60)
    store.finish(owner["id"], "w0", result_id=owner["id"])  # settled, no result: the index alone knows
    index = root / "requests" / "index"
    assert json.loads((index / "layout.json").read_text()) == R.REQUESTS_LAYOUT_CONTENT
    # as an earlier version left it: no layout file, the name files under other keys
    (index / "layout.json").unlink()
    for folder in ("names", "submitters"):
        for path in (index / folder).iterdir():
            path.rename(path.with_name("0" * 32 + path.name[32:] if not path.name.startswith("0") else "1" + path.name[1:]))
    sneaked = rogue(open_store(root, quota=Quota(0)), variant(tmp_path, 2), model_name="Other", submitter="alice")
    Worker(open_store(root, quota=Quota(1, 7)), metrics="bleu2", worker_id="w").run(once=True)
    refused = store.get_request(sneaked["id"])
    assert refused["status"] == FAILED and "'alice' already has 1 submission(s)" in refused["error"]
    assert json.loads((index / "layout.json").read_text()) == R.REQUESTS_LAYOUT_CONTENT


def test_a_metrics_checkpoint_path_on_the_server_is_published_by_its_base_name(tmp_path, monkeypatch):
    from rexrank.metrics.bleu2 import Bleu2

    server = "/srv/rexrank/secret-models/bleu-tokenizer.json"
    monkeypatch.setattr(Bleu2, "config", lambda self: {"checkpoint": {"path": server, "repo_id": "org/tok"},
                                                       "base_url": "http://llm.internal:8000/v1"})
    store = open_store(tmp_path / "s", quota=Quota(0))
    submit(store)
    Worker(store, metrics="bleu2", worker_id="w").run(once=True)
    config = store.list_results()[0]["provenance"]["metrics"]["bleu2"]["config"]
    assert config["checkpoint"] == {"path": "bleu-tokenizer.json", "repo_id": "org/tok"}
    assert config["base_url"] == "http://llm.internal:8000/v1"
    assert "/srv/" not in json.dumps(store.list_results())
