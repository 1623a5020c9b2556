"""Weights that are not here: every model metric fails within seconds with advice in the
terms of where it runs (command line or Python); `rexrank weights status` shows what the
local cache holds and `rexrank weights download` fetches it (against a fake Hub on
127.0.0.1) and checks the bytes against the pins."""
from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from rexrank.cli.main import main
from rexrank.data import data_path
from rexrank.errors import MetricError
from rexrank.metrics.registry import get_metric
from rexrank.models import checkpoints, weights
from rexrank.models.advice import EndpointUnreachable, WeightsUnavailable, cli_terms, option_setting
from rexrank.models.checkpoints import Checkpoint

EXAMPLE_PREDICTIONS = str(data_path("example_predictions.json"))
MODEL_METRICS = ("bertscore", "sembscore", "radgraph", "radcliq", "ratescore", "green", "crimson")
LLM_METRICS = ("green", "crimson", "fineradscore", "spec_cxr")
# The goal is 3 s (benchmarks/offline_failure.py measures it); tests only tell one short probe
# from the clients' retries (23 s a file for the Hub, a minute a study for an LLM endpoint), with
# room for a busy machine.
LIMIT_S = 10.0


@pytest.fixture(autouse=True)
def hub_cache(tmp_path, monkeypatch):
    """An empty hub cache for each test, and no remembered Hub probe."""
    import huggingface_hub.constants as constants

    cache = tmp_path / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(checkpoints, "_probes", {})
    return cache


@pytest.fixture
def silent_server():
    """http://127.0.0.1:PORT that accepts connections and never answers (a hung server, or a
    network that swallows packets)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held = []

    def accept():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()
    for conn in held:
        conn.close()


def closed_port_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there: connections are refused
    return f"http://127.0.0.1:{port}"


def online(monkeypatch, endpoint: str) -> None:
    """huggingface_hub allowed online (tests run with HF_HUB_OFFLINE=1) and pointed at `endpoint`."""
    import huggingface_hub.constants as constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", endpoint + "/{repo_id}/resolve/{revision}/{filename}")


def score_cli(tmp_path, metric: str, *extra: str) -> tuple[int, dict, float]:
    out = tmp_path / f"{metric}.json"
    started = time.monotonic()
    code = main(["score", "--dataset", "example", "--predictions", EXAMPLE_PREDICTIONS, "--metrics", metric,
                 "--out", str(out), "--no-progress", *extra])
    return code, json.loads(out.read_text()), time.monotonic() - started


def metric_option_prefix(metric: str) -> str:
    return "--metric-option 'radcliq." if metric == "radcliq" else f"--metric-option {metric}."


# metrics that load more than one checkpoint known before any is here (RadGraph's encoder is
# named inside its archive)
SEVERAL_CHECKPOINTS = {"sembscore": 2, "radcliq": 4, "ratescore": 2}


def check_the_advice_fixes_every_checkpoint(metric: str, advice: str) -> None:
    """One missing checkpoint: how to fetch it or point at a local copy. Several (an empty
    cache): the others are named and the advice is the one command that fetches them all."""
    if metric in SEVERAL_CHECKPOINTS:
        named = advice.split(" also lacks ")[1].split(". ")[0]
        assert len(named.split(", ")) == SEVERAL_CHECKPOINTS[metric] - 1
        assert f"`rexrank weights download {metric}`" in advice and "hf download" not in advice
    else:
        assert metric_option_prefix(metric) in advice and "hf download " in advice


# ---- fast failure with advice ----------------------------------------------------------

@pytest.mark.parametrize("metric", MODEL_METRICS)
def test_offline_model_metric_fails_fast_with_command_line_advice(metric, tmp_path):
    code, results, _ = score_cli(tmp_path, metric)
    assert code == 1
    failure = results["failed"][metric]
    assert failure["seconds"] < LIMIT_S
    assert "HF_HUB_OFFLINE" in failure["reason"]
    advice = failure["advice"]
    check_the_advice_fixes_every_checkpoint(metric, advice)
    assert f"rexrank weights download {metric}" in advice
    assert "huggingface-cli" not in advice and "_path=\"" not in advice  # no Python keywords on the command line


@pytest.mark.parametrize("metric", MODEL_METRICS)
def test_unreachable_hub_fails_fast_instead_of_retrying(metric, tmp_path, monkeypatch, silent_server):
    """No HF_HUB_OFFLINE, and a Hub that never answers: one short probe, not the client's
    retries (about 23 s a file before)."""
    online(monkeypatch, silent_server)
    code, results, _ = score_cli(tmp_path, metric)
    assert code == 1
    failure = results["failed"][metric]
    assert failure["seconds"] < LIMIT_S
    assert f"the Hub ({silent_server}) cannot be reached" in failure["reason"]
    check_the_advice_fixes_every_checkpoint(metric, failure["advice"])


def test_refused_hub_connection_fails_fast(tmp_path, monkeypatch):
    online(monkeypatch, closed_port_url())
    code, results, _ = score_cli(tmp_path, "sembscore")
    assert code == 1 and results["failed"]["sembscore"]["seconds"] < LIMIT_S
    assert "cannot be reached (ConnectError" in results["failed"]["sembscore"]["reason"]


def test_python_callers_get_advice_in_keyword_terms():
    with pytest.raises(WeightsUnavailable) as err:
        get_metric("bertscore", progress=False).score(["No effusion."], ["No effusion."])
    message = str(err.value)
    assert message.startswith("bertscore: checkpoint distilbert/distilroberta-base@")
    assert 'model="DIR"' in message
    assert "huggingface_hub.snapshot_download('distilbert/distilroberta-base'" in message
    assert "rexrank.models.weights.download(['bertscore'])" in message
    assert "--metric-option" not in message and "huggingface-cli" not in message
    # inside the command line's terms, the same error reads as a command line
    with cli_terms():
        assert "--metric-option bertscore.model=DIR" in str(err.value)


def test_several_missing_checkpoints_are_named_with_the_one_call_that_fetches_them():
    with pytest.raises(WeightsUnavailable) as err:
        get_metric("sembscore", progress=False).score(["No effusion."], ["No effusion."])
    message = str(err.value)
    assert message.startswith("sembscore: checkpoint StanfordAIMI/RRG_scorers/chexbert.pth@")
    assert "sembscore also lacks google-bert/bert-base-uncased@" in message
    assert "rexrank.models.weights.download(['sembscore'])" in message and "--metric-option" not in message
    with cli_terms():
        assert "`rexrank weights download sembscore`" in str(err.value)


def test_a_component_of_radcliq_is_advised_as_radcliq_option():
    with pytest.raises(WeightsUnavailable) as err:
        get_metric("radcliq", progress=False).score(["No effusion."], ["No effusion."])
    assert err.value.metrics[-1] == "radcliq"
    component = err.value.metrics[0]
    assert str(err.value).startswith("radcliq: checkpoint ")
    setting = option_setting(err.value.metrics, err.value.option, err.value.local_value())
    assert setting.startswith(f'{component}_options={{"')  # e.g. radgraph_options={"model_path": "DIR/radgraph.tar.gz"}
    with cli_terms():
        cli = option_setting(err.value.metrics, err.value.option, err.value.local_value())
        assert cli.startswith(f"--metric-option 'radcliq.{component}_options={{\"")


@pytest.mark.parametrize("metric", LLM_METRICS)
@pytest.mark.parametrize("endpoint", ["refused", "silent"])
def test_unreachable_llm_endpoint_fails_fast(metric, endpoint, tmp_path, silent_server):
    url = (closed_port_url() if endpoint == "refused" else silent_server) + "/v1"
    code, results, _ = score_cli(tmp_path, metric, "--llm-base-url", url, "--llm-model", "served")
    assert code == 1
    failure = results["failed"][metric]
    assert failure["seconds"] < LIMIT_S
    assert failure["reason"].startswith(f"LLM endpoint {url}")
    assert "--llm-base-url URL" in failure["advice"] and f"--metric-option {metric}.base_url=URL" in failure["advice"]


def test_unreachable_llm_endpoint_in_python_terms():
    metric = get_metric("fineradscore", model="served", base_url=closed_port_url() + "/v1", cache=False, progress=False)
    with pytest.raises(EndpointUnreachable) as err:
        metric.score(["No effusion."], ["No effusion."])
    assert 'base_url="URL"' in str(err.value) and "--llm-base-url" not in str(err.value)


# ---- status ----------------------------------------------------------------------------

def put_file(cache, repo_id, revision, filename, content: bytes, *, blob: str | None = None):
    """A file in the hub cache as huggingface_hub lays it out: snapshots/<rev>/<file> -> blobs/<name>."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    target = repo / "snapshots" / revision / filename
    target.parent.mkdir(parents=True, exist_ok=True)
    stored = repo / "blobs" / (blob or hashlib.sha256(content).hexdigest())
    stored.parent.mkdir(parents=True, exist_ok=True)
    stored.write_bytes(content)
    target.symlink_to(stored)
    return target


def test_status_of_sembscore_cached_missing_and_wrong_bytes(hub_cache, capsys):
    from rexrank.models import chexbert as C
    from rexrank.catalogue import RRG_SCORERS_SHA256

    pinned = RRG_SCORERS_SHA256["chexbert.pth"]
    # stored under its pinned content address: trusted as the official file without re-reading
    path = put_file(hub_cache, C.CHEXBERT_REPO, C.CHEXBERT_REVISION, "chexbert.pth", b"x" * 2048, blob=pinned)
    assert main(["weights", "status", "sembscore"]) == 1  # not ready: a script can tell
    out = capsys.readouterr().out
    assert "sembscore: NOT ready" in out  # the tokenizer is not here
    assert "cached     StanfordAIMI/RRG_scorers/chexbert.pth@" in out and "size 2.0 KiB" in out
    assert "Stanford Academic Software License" in out
    assert f"--metric-option sembscore.checkpoint_path={path}" in out
    assert "missing    google-bert/bert-base-uncased@" in out
    assert "hf download google-bert/bert-base-uncased config.json" in out and "--metric-option sembscore.tokenizer=DIR" in out
    # --verify reads the bytes: they are not the pinned ones
    statuses = weights.status(["sembscore"], verify=True)
    assert statuses[0].state == weights.WRONG_HASH and pinned in statuses[0].detail
    # the tokenizer folder: config + vocabulary make it complete
    for name, content in (("config.json", b'{"model_type": "bert"}'), ("vocab.txt", b"[PAD]\n[CLS]\n")):
        put_file(hub_cache, C.TOKENIZER_REPO, C.TOKENIZER_REVISION, name, content)
    statuses = weights.status(["sembscore"])
    assert [s.state for s in statuses] == [weights.CACHED, weights.CACHED]
    assert statuses[1].size == len(b'{"model_type": "bert"}') + len(b"[PAD]\n[CLS]\n")


def test_status_flags_a_pinned_file_stored_with_other_bytes(hub_cache):
    from rexrank.models import chexbert as C

    put_file(hub_cache, C.CHEXBERT_REPO, C.CHEXBERT_REVISION, "chexbert.pth", b"not the official weights")
    status = weights.status(["sembscore"])[0]
    assert status.state == weights.WRONG_HASH
    assert hashlib.sha256(b"not the official weights").hexdigest() in status.detail


def test_status_without_network_and_radcliq_lists_its_components(capsys, monkeypatch):
    monkeypatch.setenv("REXRANK_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    assert main(["weights", "status", "radcliq", "bleu2", "fineradscore"]) == 1  # radcliq lacks its weights
    out = capsys.readouterr().out
    assert "bleu2: ready (needs no model)" in out and "fineradscore: ready (judged by the LLM endpoint" in out
    for option in ('radcliq.bertscore_options={"model": "DIR"}', 'radcliq.sembscore_options={"checkpoint_path": "DIR/chexbert.pth"}',
                   'radcliq.radgraph_options={"model_path": "DIR/radgraph.tar.gz"}'):
        assert option in out
    assert "the encoder named in radgraph.tar.gz" in out
    assert "rexrank weights download radcliq" in out


def test_radgraph_encoder_is_read_from_the_cached_archive(hub_cache, tmp_path):
    """The encoder RadGraph needs is named inside its archive: once the archive is cached,
    status names it at its pinned commit (read by streaming the tarball, not extracting it)."""
    import io
    import tarfile

    from rexrank.catalogue import RRG_SCORERS_REPO, RRG_SCORERS_REVISION, radgraph_encoder_revision

    encoder = "microsoft/BiomedVLP-CXR-BERT-general"
    config = json.dumps({"model": {"embedder": {"token_embedders": {"bert": {"model_name": encoder}}}}}).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in (("weights.th", b"w" * 4096), ("config.json", config)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    put_file(hub_cache, RRG_SCORERS_REPO, RRG_SCORERS_REVISION, "radgraph.tar.gz", buf.getvalue())
    archive, encoder_status = weights.status(["radgraph"])
    assert archive.state == weights.WRONG_HASH  # these bytes are not the pinned archive
    assert encoder_status.need.checkpoint.describe() == f"{encoder}@{radgraph_encoder_revision(encoder)}"
    assert encoder_status.state == weights.MISSING
    assert encoder_status.local_option(terms="cli") == "--metric-option radgraph.transformer_path=DIR"


def test_default_needs_are_what_the_metrics_load():
    """The list cannot drift from the metrics: each default metric resolves these checkpoints."""
    from rexrank.metrics.bertscore import BertScore
    from rexrank.radgraph.tarball import checkpoint_for

    assert weights.default_needs("bertscore")[0].checkpoint.same_source(BertScore().checkpoint)
    assert weights.default_needs("radgraph")[0].checkpoint.same_source(checkpoint_for("radgraph"))
    rate = get_metric("ratescore")
    assert [n.checkpoint for n in weights.default_needs("ratescore")] == [rate.ner, rate.embedding]
    green = get_metric("green")
    assert weights.default_needs("green")[0].checkpoint.repo_id == green.settings.model
    srr = get_metric("srr_bert")
    assert [n.checkpoint for n in weights.default_needs("srr_bert")[:2]] == [srr.checkpoint, srr.tokenizer]
    assert [n.kind for n in weights.default_needs("temporal_f1")] == ["stanza"]
    crimson = get_metric("crimson")
    assert weights.default_needs("crimson")[0].checkpoint.repo_id == crimson.settings.model
    assert weights.default_needs("bleu2") == [] and weights.default_needs("spec_cxr") == []
    assert weights.default_needs("rouge") == []
    with pytest.raises(MetricError, match="unknown metric"):
        weights.default_needs("bleu4")


# ---- download against a fake Hub -------------------------------------------------------

@pytest.fixture
def fake_hub(monkeypatch):
    from support.fakehub import FakeHub

    with FakeHub() as hub:
        online(monkeypatch, hub.url)
        yield hub


def publish(hub, repo_id: str, files: dict[str, bytes]) -> str:
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(endpoint=hub.url, token="hf_fake")
    api.create_repo(repo_id, repo_type="model", exist_ok=True)
    info = api.create_commit(repo_id, [CommitOperationAdd(name, data) for name, data in files.items()],
                             commit_message="weights", repo_type="model")
    return info.oid


def test_download_fetches_a_model_folder_and_verifies_it(fake_hub, monkeypatch, capsys):
    from dataclasses import replace

    from rexrank import catalogue

    files = {"config.json": b'{"model_type": "roberta"}', "vocab.json": b"{}", "merges.txt": b"#version: 0.2\n",
             "model.safetensors": b"weights" * 100, "pytorch_model.bin": b"same weights, other format", "tf_model.h5": b"tf"}
    commit = publish(fake_hub, catalogue.DISTILROBERTA.repo_id, files)
    (need,) = catalogue.METRIC_NEEDS["bertscore"]
    monkeypatch.setitem(catalogue.METRIC_NEEDS, "bertscore", (replace(need, checkpoint=replace(need.checkpoint, revision=commit)),))
    assert weights.status(["bertscore"])[0].state == weights.MISSING
    assert main(["weights", "download", "bertscore"]) == 0
    out = capsys.readouterr().out
    assert "bertscore: ready" in out and "verified" in out
    status = weights.status(["bertscore"], verify=True)[0]
    assert status.state == weights.CACHED
    fetched = {p.name for p in status.path.iterdir()}
    assert fetched == {"config.json", "vocab.json", "merges.txt", "model.safetensors"}  # only what the metric reads


def test_download_refuses_bytes_that_are_not_the_pinned_ones(fake_hub):
    official = b"official weights"
    commit = publish(fake_hub, "org/scorers", {"w.pth": b"tampered weights"})
    need = weights.Need(Checkpoint("org/scorers", commit, filename="w.pth", sha256=hashlib.sha256(official).hexdigest()),
                        "checkpoint_path", "file", "weights", "sembscore")
    result = weights.fetch_need("sembscore", need)
    assert result.state == weights.WRONG_HASH and hashlib.sha256(official).hexdigest() in result.detail
    # the right bytes at a newer commit pass
    commit = publish(fake_hub, "org/scorers", {"w.pth": official})
    need = weights.Need(Checkpoint("org/scorers", commit, filename="w.pth", sha256=hashlib.sha256(official).hexdigest()),
                        "checkpoint_path", "file", "weights", "sembscore")
    assert weights.fetch_need("sembscore", need).state == weights.CACHED


def test_download_without_a_hub_says_so_at_once(monkeypatch, capsys):
    online(monkeypatch, closed_port_url())
    started = time.monotonic()
    assert main(["weights", "download", "sembscore"]) == 1
    assert time.monotonic() - started < LIMIT_S
    assert "cannot download weights: the Hub" in capsys.readouterr().err


def test_the_user_hub_cache_follows_huggingface_hub_rules(monkeypatch, tmp_path):
    from support.paths import _user_hub_cache

    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert _user_hub_cache() == str(tmp_path / ".cache" / "huggingface" / "hub")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _user_hub_cache() == str(tmp_path / "xdg" / "huggingface" / "hub")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert _user_hub_cache() == str(tmp_path / "hf" / "hub")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    assert _user_hub_cache() == str(tmp_path / "cache")


def test_download_radgraph_xl_fetches_its_archive_too(fake_hub, monkeypatch, capsys):
    """`rexrank weights download --radgraph-xl`: what the `weights` tests' RadGraph-XL golden
    test loads (radgraph-xl.tar.gz, then the encoder named inside it), beside the default set."""
    asked = []

    def fetch_need(metric, need):
        asked.append((metric, need.checkpoint.filename))
        return weights.NeedStatus(metric, need, weights.CACHED)

    monkeypatch.setattr(weights, "fetch_need", fetch_need)
    assert main(["weights", "download", "bleu2", "--radgraph-xl"]) == 1  # the encoder stays unknown here
    assert asked == [("radgraph", "radgraph-xl.tar.gz")]
    asked.clear()
    main(["weights", "download", "bleu2"])
    assert asked == []


def test_download_fetches_stanza_and_nltk_data_with_their_own_downloaders(fake_hub, monkeypatch, tmp_path, capsys):
    """temporal_f1's Stanza model and srr_bert's punkt_tab live outside the hub cache: status
    looks where Stanza and NLTK look, download calls their downloaders (stand-ins here)."""
    import sys
    import types

    import nltk

    resources, nltk_dir = tmp_path / "stanza", tmp_path / "nltk_data"
    monkeypatch.setenv("STANZA_RESOURCES_DIR", str(resources))
    monkeypatch.setattr(nltk.data, "path", [str(nltk_dir)])

    def stanza_download(lang, model_dir, package, processors, verbose):
        assert (lang, package, processors) == ("en", "radiology", {"tokenize": "default", "ner": "radiology"})
        (Path(model_dir) / "en" / "ner").mkdir(parents=True)
        (Path(model_dir) / "en" / "ner" / "radiology.pt").write_bytes(b"w" * 10)
        (Path(model_dir) / "resources.json").write_text("{}")

    def nltk_download(name, quiet, raise_on_error):
        (nltk_dir / "tokenizers" / "punkt_tab" / "english").mkdir(parents=True)
        (nltk_dir / "tokenizers" / "punkt_tab" / "english" / "sent_starters.txt").write_text("the\n")
        return True

    monkeypatch.setitem(sys.modules, "stanza", types.SimpleNamespace(__version__="1.10.1", download=stanza_download))
    monkeypatch.setattr(nltk, "download", nltk_download)
    assert [s.state for s in weights.status(["temporal_f1"])] == [weights.MISSING]
    assert main(["weights", "status", "temporal_f1"]) == 1
    assert "rexrank weights download temporal_f1" in capsys.readouterr().out
    statuses = weights.download(["temporal_f1"])
    assert [s.state for s in statuses] == [weights.CACHED] and str(resources) in str(statuses[0].path)
    punkt = [s for s in weights.status(["srr_bert"]) if s.need.kind == "nltk"]
    assert [s.state for s in punkt] == [weights.MISSING]
    assert weights.fetch_need("srr_bert", punkt[0].need).state == weights.CACHED
