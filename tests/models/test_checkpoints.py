"""Official checkpoints are pinned to commits, and pinned single files are checked by SHA-256.

The hub cache is laid out as huggingface_hub lays it out (models--org--name/snapshots/<commit>/,
blobs named by their SHA-256), so `resolve` finds the files offline exactly as it would after
a real download.
"""
from __future__ import annotations

import hashlib
import re

import pytest

from rexrank.errors import MetricError
from rexrank import catalogue as pins
from rexrank.models.checkpoints import Checkpoint, resolve

COMMIT = re.compile(r"[0-9a-f]{40}")


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    import huggingface_hub.constants

    cache = tmp_path / "hub"
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    return cache


def put_file(cache, repo_id, revision, filename, content: bytes, *, as_blob: str | None = None):
    """Place `filename` in the snapshot of `revision`; with `as_blob`, as a symlink to blobs/<as_blob>."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True, exist_ok=True)
    target = snapshot / filename
    if as_blob:
        blob = repo / "blobs" / as_blob
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(content)
        target.symlink_to(blob)
    else:
        target.write_bytes(content)
    return target


def test_every_official_checkpoint_is_pinned_to_a_commit():
    revisions = [pins.RRG_SCORERS_REVISION, pins.RATE_NER.revision, pins.BIOLORD.revision,
                 pins.DISTILROBERTA.revision, pins.BERT_BASE_UNCASED.revision]
    assert all(COMMIT.fullmatch(r) for r in revisions)
    assert set(pins.RRG_SCORERS_SHA256) == {"chexbert.pth", "radgraph.tar.gz", "radgraph-xl.tar.gz"}
    assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in pins.RRG_SCORERS_SHA256.values())


def test_metrics_default_to_the_pins():
    from rexrank.metrics.bertscore import DEFAULT_REVISION as bertscore_revision
    from rexrank.metrics.registry import get_metric
    from rexrank.models.chexbert import CHEXBERT_REVISION, TOKENIZER_REVISION
    from rexrank.radgraph.tarball import checkpoint_for

    assert bertscore_revision == pins.DISTILROBERTA.revision
    assert (CHEXBERT_REVISION, TOKENIZER_REVISION) == (pins.RRG_SCORERS_REVISION, pins.BERT_BASE_UNCASED.revision)
    for model_type in ("radgraph", "radgraph-xl"):
        checkpoint = checkpoint_for(model_type)
        assert checkpoint.revision == pins.RRG_SCORERS_REVISION
        assert checkpoint.sha256 == pins.RRG_SCORERS_SHA256[f"{model_type}.tar.gz"]
    # another revision than the pinned one: its bytes are not known, so nothing to check against
    assert checkpoint_for("radgraph", revision="main").sha256 is None
    rate = get_metric("ratescore")
    assert (rate.ner.repo_id, rate.ner.revision) == (pins.RATE_NER.repo_id, pins.RATE_NER.revision)
    assert (rate.embedding.repo_id, rate.embedding.revision) == (pins.BIOLORD.repo_id, pins.BIOLORD.revision)


def test_a_cached_file_with_the_pinned_content_is_used(hub_cache):
    content = b"official weights"
    digest = hashlib.sha256(content).hexdigest()
    revision = "a" * 40
    put_file(hub_cache, "org/models", revision, "w.pth", content)
    checkpoint = Checkpoint("org/models", revision, filename="w.pth", sha256=digest)
    assert resolve(checkpoint).read_bytes() == content


def test_a_cached_file_with_other_content_is_refused(hub_cache):
    revision = "b" * 40
    put_file(hub_cache, "org/models", revision, "w.pth", b"tampered")
    expected = hashlib.sha256(b"official weights").hexdigest()
    with pytest.raises(MetricError) as err:
        resolve(Checkpoint("org/models", revision, filename="w.pth", sha256=expected))
    message = str(err.value)
    assert expected in message and hashlib.sha256(b"tampered").hexdigest() in message
    assert "org/models/w.pth@" + revision in message and "delete it" in message


def test_hub_cache_blobs_are_trusted_by_their_content_address(hub_cache):
    # the hub client names LFS blobs by SHA-256 after checking them on download: no re-hash
    expected = hashlib.sha256(b"official weights").hexdigest()
    revision = "c" * 40
    put_file(hub_cache, "org/models", revision, "w.pth", b"not re-read", as_blob=expected)
    assert resolve(Checkpoint("org/models", revision, filename="w.pth", sha256=expected)).name == "w.pth"
    # a blob under another name is hashed, and refused
    put_file(hub_cache, "org/models", "d" * 40, "w.pth", b"other", as_blob="e" * 64)
    with pytest.raises(MetricError, match="not the official"):
        resolve(Checkpoint("org/models", "d" * 40, filename="w.pth", sha256=expected))


def test_local_paths_are_used_as_given(tmp_path):
    local = tmp_path / "w.pth"
    local.write_bytes(b"my fine-tuned weights")
    checkpoint = Checkpoint("org/models", "f" * 40, filename="w.pth", path=str(local), sha256="0" * 64)
    assert resolve(checkpoint) == local
    assert checkpoint.provenance()["sha256"] is None


def test_radgraph_refuses_a_cached_archive_that_is_not_the_official_one(hub_cache, tmp_path):
    """End to end through the metric: the pinned RRG_scorers file is checked before use."""
    from rexrank.metrics.registry import get_metric

    put_file(hub_cache, pins.RRG_SCORERS_REPO, pins.RRG_SCORERS_REVISION, "radgraph.tar.gz", b"not an archive")
    with pytest.raises(MetricError) as err:
        get_metric("radgraph", progress=False).score(["No effusion."], ["No effusion."])
    assert pins.RRG_SCORERS_SHA256["radgraph.tar.gz"] in str(err.value)
    assert f"StanfordAIMI/RRG_scorers/radgraph.tar.gz@{pins.RRG_SCORERS_REVISION}" in str(err.value)


def test_sembscore_refuses_a_cached_chexbert_that_is_not_the_official_one(hub_cache):
    from rexrank.metrics.registry import get_metric

    put_file(hub_cache, pins.RRG_SCORERS_REPO, pins.RRG_SCORERS_REVISION, "chexbert.pth", b"not a checkpoint")
    with pytest.raises(MetricError, match=pins.RRG_SCORERS_SHA256["chexbert.pth"]):
        get_metric("sembscore", progress=False).score(["No effusion."], ["No effusion."])
