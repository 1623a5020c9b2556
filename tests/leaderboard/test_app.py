"""The leaderboard app's endpoints through gradio_client, and the two CLI commands."""
from __future__ import annotations

import tempfile
from importlib import resources
from pathlib import Path

import pandas as pd
import pytest

from rexrank.leaderboard.model_page import NO_SUCH_MODEL
from rexrank.cli.main import main
from rexrank.leaderboard.source import LeaderboardSource, open_leaderboard_store, seed_if_empty
from support.browser import serve
from support.paths import shared_path


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from gradio_client import Client

    from rexrank.leaderboard.app import build_app
    from rexrank.store import open_store

    store = open_store(tmp_path_factory.mktemp("lb") / "store")
    assert seed_if_empty(store) == 128
    demo = build_app(LeaderboardSource.from_store(store, ttl=0))
    url = serve(demo)
    try:
        yield Client(url, verbose=False, download_files=False), store
    finally:
        demo.close()


def _csv(name):
    return pd.read_csv(shared_path("data", "published", "current", name))


def _model(cell: str) -> str:
    return cell.split("](")[0].lstrip("[").replace(" \\*", "")


def test_named_endpoints(served):
    client, _ = served
    names = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    assert {"/views", "/leaderboard", "/model", "/plots", "/submit", "/status", "/queue", "/reload"} <= names


def test_leaderboard_endpoint_ranks_like_the_csv(served):
    client, _ = served
    out = client.predict("iu_xray", "findings_impression", "fineradscore_inv", "", api_name="/leaderboard")
    csv = _csv("result_iu_xray.csv").sort_values("1/FineRadScore", ascending=False, na_position="last")
    assert [_model(r[1]) for r in out["data"]] == csv["Model Name"].tolist()
    assert out["headers"][2] == "1/FineRadScore ↑ ▼"  # the ranking metric next to the model
    assert out["data"][-1][0] == "–"  # UniRG-CXR has no FineRadScore: unranked, last
    # and its row says why, and where it stands by the metrics it has (issue 39)
    assert out["data"][-1][2] == ("– not published · 1st of 7 by BLEU, BertScore, SembScore, RadGraph, 1/RadCliQ-v1, "
                                  "RaTEScore; 4th of 7 by GREEN")


def _views(client, *args):
    """/views outputs: overview grid and CSV, then per test set (note, grid, CSV), then the
    overview's note and status. A test-set grid comes as an update (its column widths follow
    the columns shown): its table is the update's value."""
    out = client.predict(*args, api_name="/views")
    over, over_csv, *per_test_set, _overview_note, status = out
    tabs = {t: per_test_set[3 * i: 3 * i + 3] for i, t in enumerate(("rexgradient", "mimic_cxr", "iu_xray", "chexpert_plus"))}
    for t, (note, grid, csv) in tabs.items():
        tabs[t] = [note, grid.get("value", grid), csv]
    return over, over_csv, tabs, status


def test_views_endpoint_switches_track_rank_and_search(served):
    client, _ = served
    over, _, tabs, status = _views(client, "findings", "radcliq_v1_inv", "")
    assert over["headers"] == ["Rank", "ReXGradient (private)", "MIMIC-CXR", "IU-Xray", "CheXpert Plus"]
    note, mimic, _ = tabs["mimic_cxr"]
    csv = _csv("findings_result_mimiccxr.csv").sort_values("1/RadCliQ-v1", ascending=False)
    assert [_model(r[1]) for r in mimic["data"]] == csv["Model Name"].tolist()
    assert note == f"{len(csv)} results in the Findings track."  # no per-study scores: no Tier column to explain
    assert "128 results" in status
    over, _, tabs, status = _views(client, "findings_impression", "bleu2", "stanford")
    note, cxp, _ = tabs["chexpert_plus"]
    csv = _csv("result_chexpertplus.csv")
    stanford = csv[csv["Institution"] == "Stanford"].sort_values("BLEU", ascending=False)
    assert [_model(r[1]) for r in cxp["data"]] == stanford["Model Name"].str.replace("_", "-").tolist()
    assert note.startswith(f"{len(stanford)} of {len(csv)} results match the search.")


def test_views_endpoint_csv_files_hold_the_shown_tables(served):
    client, _ = served
    over, over_csv, tabs, _ = _views(client, "findings", "green", "csiro")
    note, iu, iu_csv = tabs["iu_xray"]
    assert Path(iu_csv["path"]).name == "rexrank_iu_xray_findings_by-green_search.csv"
    table = pd.read_csv(iu_csv["path"], keep_default_na=False, na_values=[""])
    assert table["Model"].tolist() == [_model(r[1]) for r in iu["data"]]
    green = iu["headers"].index("GREEN ↑ ▼")
    assert [f"{v:.3f}" for v in table["GREEN"]] == [r[green].strip("*") for r in iu["data"]]
    overview = pd.read_csv(over_csv["path"], keep_default_na=False)
    assert overview.columns.tolist() == over["headers"]
    assert overview.astype(str).values.tolist() == [[c.replace("\\", "") for c in r] for r in over["data"]]


def test_model_endpoint(served):
    client, _ = served
    header, results, significance = client.predict("GPT4V", "radcliq_v1_inv", api_name="/model")
    results = results.get("value", results)  # an update: the grid's column widths follow its columns
    assert header.startswith("### GPT4V") and "no per-study scores" in header
    assert "8 results;" in header and "[Link to this page](?model=GPT4V)" in header
    assert len(results["data"]) == 8
    assert significance["headers"] == ["Test set", "Track", "Neighbour", "Result"]
    # published results: no tests, and each row says why (issue 21.5)
    assert len(significance["data"]) == 8 and all("no per-study scores" in r[3] for r in significance["data"])
    assert "the ReXrank site's own figures" in header
    # a name without results: named (empty) tables, not gradio's "1 2 3" placeholder headers
    header, results, significance = client.predict("No-Such-Model", "radcliq_v1_inv", api_name="/model")
    results = results.get("value", results)
    assert header == NO_SUCH_MODEL
    assert results["headers"][:3] == ["Test set", "Track", "Rank"] and results["data"] == []


def test_plots_endpoint_draws_both_figures(served):
    client, _ = served
    corr, box, note = client.predict("mimic_cxr", "findings", api_name="/plots")
    assert corr is not None and box is not None and note == ""


def test_submit_files_a_request_and_reports_errors(served, tmp_path):
    from gradio_client import handle_file

    client, store = served
    predictions = str(resources.files("rexrank.data").joinpath("example_predictions.json"))
    args = ["example", "findings", "My model", "My lab", "https://example.org/m", []]
    msg, answer, queue = client.predict(handle_file(predictions), "", *args, "", api_name="/submit")
    assert msg.startswith("❌") and "enter your name" in msg
    assert answer == {"filed": False, "request": None, "error": "enter your name (or your organisation's) as submitter"}
    msg, answer, queue = client.predict(handle_file(predictions), "", *args, "alice", api_name="/submit")
    assert msg.startswith("✅"), msg
    (request,) = store.list_requests()
    assert request["status"] == "PENDING" and request["submitter"] == "alice" and request["model_name"] == "My model"
    # the request records the uploaded file's own name, not the server's temporary copy
    assert request["predictions"]["source"] == "example_predictions.json"
    assert queue["data"][0][0] == request["id"]
    assert queue["data"][0][1] == "alice / My model"  # named as the board will name it
    assert answer["filed"] and answer["request"]["id"] == request["id"] and answer["request"]["submitter"] == "alice"
    # the same predictions again: refused by the store, with its reason shown
    msg, _, _ = client.predict(handle_file(predictions), "", *args, "alice", api_name="/submit")
    assert msg.startswith("❌ Not filed:") and "identical resubmission" in msg
    # a predictions file missing studies: the validator's message names them
    bad = tmp_path / "bad.csv"
    bad.write_text("id,prediction\nEX001,No acute findings.\n")
    msg, _, _ = client.predict(handle_file(str(bad)), "", "example", "findings", "Other", "", "", [], "bob", api_name="/submit")
    assert msg.startswith("❌") and "have no prediction" in msg
    assert len(store.list_requests()) == 1
    # the message names the file as uploaded, never the server's temp copy of it
    assert "bad.csv: " in msg
    assert "/" not in msg.split("bad.csv")[0] and tempfile.gettempdir() not in msg and str(tmp_path) not in msg


def test_reload_picks_up_new_results(served):
    client, store = served
    store.add_result({
        "id": "rexrank/iu_xray/findings/new-model", "model_name": "New-Model", "institution": "Lab",
        "test_set": "iu_xray", "track": "findings", "source": "rexrank",
        "values": {"radcliq_v1_inv": {"mean": 9.0, "ci95": 0.1, "n": 590}},
    })
    client.predict(api_name="/reload")
    out = client.predict("iu_xray", "findings", "radcliq_v1_inv", "", api_name="/leaderboard")
    assert _model(out["data"][0][1]) == "New-Model"  # no model URL: plain text, no link
    assert out["headers"][:4] == ["Rank", "Model", "1/RadCliQ-v1 ↑ ▼", "n"]
    assert out["data"][0][2] == "**9.000**\u00a0±\u00a00.100"
    assert out["data"][0][3] == "590"  # n: the studies it was scored on


def test_cli_import_published(tmp_path, capsys):
    folder = shared_path("data", "published", "current")
    assert main(["import-published", str(folder), "--store", str(tmp_path / "s")]) == 0
    assert "imported 128 published results (8 tables)" in capsys.readouterr().out
    from rexrank.store import open_store

    results = open_store(tmp_path / "s").list_results()
    assert len(results) == 128 and all(r["source"] == "published" for r in results)
    # again: same ids, replaced, not duplicated
    assert main(["import-published", str(folder), "--store", str(tmp_path / "s")]) == 0
    assert len(open_store(tmp_path / "s").list_results()) == 128
    assert main(["import-published", str(tmp_path / "nowhere"), "--store", str(tmp_path / "s")]) == 1
    assert "not a folder" in capsys.readouterr().err


def test_only_the_default_store_is_seeded(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REXRANK_STORE", raising=False)
    store, note = open_leaderboard_store()
    assert "seeded" in note and len(store.list_results()) == 128
    store, note = open_leaderboard_store()  # not empty any more: left alone
    assert note == "" and len(store.list_results()) == 128
    named, note = open_leaderboard_store(str(tmp_path / "named"))
    assert named.list_results() == [] and "import-published" in note


def test_space_app_builds_on_the_seeded_default_store(tmp_path, monkeypatch):
    import runpy

    from support.paths import PROJECT_ROOT

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REXRANK_STORE", raising=False)
    namespace = runpy.run_path(str(PROJECT_ROOT / "leaderboard_space" / "app.py"), run_name="space_app")
    assert namespace["store"].name == "rexrank-store"
    assert len(namespace["store"].list_results()) == 128
    assert namespace["demo"].title == "ReXrank leaderboard"


def test_submit_help_lists_the_readme_formats(tmp_path):
    """The Submit tab names every predictions format and column the README lists."""
    import re

    from rexrank.leaderboard.app import build_app
    from rexrank.store import open_store
    from support.paths import PROJECT_ROOT

    readme = (PROJECT_ROOT / "README.md").read_text()
    listed = re.search(r"^Predictions: (.*?)\. Missing", readme, re.S | re.M).group(1)
    wanted = re.findall(r"`([^`]+)`", listed) + re.findall(r"\b(JSON|CSV|JSONL|parquet)\b", listed)
    assert {"id", "study_id", "prediction", "report", "model_prediction", "datasets", "parquet"} <= set(wanted)
    demo = build_app(LeaderboardSource.from_store(open_store(tmp_path / "store")))
    help_text = next(b.value for b in demo.blocks.values() if type(b).__name__ == "Markdown" and "Formats:" in str(b.value))
    missing = [w for w in wanted if w not in help_text]
    assert not missing, f"the submit help lacks {missing}: {help_text}"


def test_gradio_fills_in_the_special_parameters(tmp_path):
    """gr.Request, gr.EventData and gr.OAuthToken parameters are filled in by gradio only if
    it can resolve their type hints: else `?model=`, header clicks and Hub sign-in break."""
    import inspect

    from gradio.utils import get_type_hints, is_special_typed_parameter

    from rexrank.leaderboard.app import build_app
    from rexrank.store import open_store

    demo = build_app(LeaderboardSource.from_store(open_store(tmp_path / "store")))
    special = {}
    for block_fn in demo.fns.values():
        fn = block_fn.fn
        if fn is None or not inspect.isfunction(fn):
            continue
        hints = get_type_hints(fn)
        for name, param in inspect.signature(fn).parameters.items():
            if "gr." in str(param.annotation):
                special[f"{fn.__name__}.{name}"] = is_special_typed_parameter(name, hints)
    assert special == {"on_load.request": True, "rank_from_header.evt": True, "submit.oauth_token": True}


def test_a_figure_is_encoded_once_per_view_of_the_data_and_sent_as_an_image(tmp_path, monkeypatch):
    """The Space keeps each view's figures encoded: Gradio would otherwise encode a kept figure
    again at every event that returns it. A new result is a new view: drawn again."""
    import gradio as gr

    from rexrank.leaderboard.app import build_app
    from rexrank.store import open_store
    from support.boards import result

    store = open_store(tmp_path / "store")
    seed_if_empty(store)
    demo = build_app(LeaderboardSource.from_store(store, ttl=0))
    endpoint = {fn.api_name: fn.fn for fn in demo.fns.values() if fn.api_name in ("plots", "progress")}
    encoded = []
    encode = gr.Plot.postprocess
    monkeypatch.setattr(gr.Plot, "postprocess", lambda self, value: encoded.append(self.label) or encode(self, value))

    progress = endpoint["progress"]("iu_xray", "findings", "bleu2", False, ["published", "submitted"])
    assert progress == endpoint["progress"]("iu_xray", "findings", "bleu2", False, ["published", "submitted"])
    corr, box, _ = endpoint["plots"]("iu_xray", "findings")
    assert (corr, box) == endpoint["plots"]("iu_xray", "findings")[:2]
    assert sorted(encoded) == ["Metric correlation", "Metric distributions", "Progress: best score by date (ranking metric)"]
    for figure in (progress[0], corr, box):
        assert figure.type == "matplotlib" and figure.plot.startswith("data:image/webp;base64,")

    store.add_result(result("Newcomer", mean=0.5, bleu=0.9))
    assert endpoint["progress"]("iu_xray", "findings", "bleu2", False, ["published", "submitted"])[0] != progress[0]
    assert len(encoded) == 4
