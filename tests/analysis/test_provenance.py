"""Per-study files say what they are (test set, track, references, metric configs, version),
and `rexrank analyze` refuses to compare runs that disagree on them; report.html shows the
test set the files name and renders its statistical notes."""
from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest

import rexrank
from rexrank.analysis.io import AnalysisError, load_runs
from rexrank.cli.main import main
from rexrank.data import data_path
from rexrank.per_study_file import read_provenance, write_per_study

EXAMPLE_PREDICTIONS = data_path("example_predictions.json")


def scored(tmp_path, name: str, *, track: str = "findings", predictions=EXAMPLE_PREDICTIONS) -> str:
    out = tmp_path / f"{name}.parquet"
    assert main(["score", "--dataset", "example", "--track", track, "--predictions", str(predictions),
                 "--per-study", str(out), "--no-progress"]) == 0
    return str(out)


@pytest.fixture
def shorter(tmp_path):
    """A second system: the example predictions cut to their first four words."""
    preds = json.loads(EXAMPLE_PREDICTIONS.read_text())
    worse = {k: {**v, "model_prediction": " ".join(v["model_prediction"].split()[:4])} for k, v in preds.items()}
    path = tmp_path / "worse.json"
    path.write_text(json.dumps(worse))
    return path


def test_per_study_file_carries_the_run_provenance(tmp_path):
    path = scored(tmp_path, "a")
    prov = read_provenance(path)
    references = rexrank.load_test_set("example", track="findings")["reference"]
    digest = hashlib.sha256()
    for text in references:
        digest.update(text.encode() + b"\x00")
    assert prov["test_set"]["name"] == "example" and prov["test_set"]["track"] == "findings"
    assert prov["test_set"]["references_sha256"] == digest.hexdigest()
    assert prov["rexrank_version"] == rexrank.__version__
    assert prov["metrics"]["bleu2"]["config"]["smoothing"] == "method1"
    assert prov["complete"] is True and prov["failed"] == [] and prov["pending"] == []
    assert list(pd.read_parquet(path).columns) == ["id", "bleu2"]  # the table itself is unchanged


def same_studies_as(path: str, like: str, out) -> str:
    """`path`'s run restricted to the studies of `like` (as the same system scored on another
    track of a test set whose studies all have findings), provenance kept."""
    frame = pd.read_parquet(path)
    ids = set(pd.read_parquet(like)["id"])
    write_per_study(frame[frame["id"].isin(ids)], out, read_provenance(path))
    return str(out)


def test_analyze_refuses_runs_from_different_tracks(tmp_path, shorter, capsys):
    a = scored(tmp_path, "a")
    b = same_studies_as(scored(tmp_path, "b_all", track="findings_impression", predictions=shorter), a, tmp_path / "b.parquet")
    assert main(["analyze", f"a={a}", f"b={b}", "--out", str(tmp_path / "report"), "--bootstrap", "20", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "scored on different tracks and references" in err
    assert f"{a}: Embedded example" in err and "findings track" in err and "findings_impression track" in err
    assert not (tmp_path / "report" / "report.html").exists()


def test_analyze_refuses_runs_with_different_references(tmp_path, shorter):
    a = scored(tmp_path, "a")
    b = scored(tmp_path, "b", predictions=shorter)
    prov = read_provenance(b)
    prov["test_set"]["references_sha256"] = "0" * 64  # e.g. a locally edited copy of the test set
    write_per_study(pd.read_parquet(b), b, prov)
    with pytest.raises(AnalysisError, match=r"different references: .*references SHA-256 000000000000"):
        load_runs([a, b])


def test_analyze_refuses_runs_from_different_test_sets(tmp_path, shorter):
    a = scored(tmp_path, "a")
    b = scored(tmp_path, "b", predictions=shorter)
    prov = read_provenance(b)
    prov["test_set"].update(name="iu_xray", title="IU-Xray (test)")
    write_per_study(pd.read_parquet(b), b, prov)
    with pytest.raises(AnalysisError, match=r"different test sets: .*Embedded example.*IU-Xray \(test\) \(iu_xray\)"):
        load_runs([a, b])


def test_analyze_uses_the_test_set_the_files_name(tmp_path, shorter):
    """No --dataset: the title names the test set and track, and its attributes are there to stratify by."""
    a, b = scored(tmp_path, "a"), scored(tmp_path, "b", predictions=shorter)
    out = tmp_path / "report"
    assert main(["analyze", a, b, "--strata", "split", "--out", str(out), "--bootstrap", "20", "--no-progress"]) == 0
    page = (out / "report.html").read_text()
    assert "2 systems on Embedded example (synthetic, written for rexrank), findings track (19 studies)" in page
    assert set(pd.read_csv(out / "tables" / "strata_split.csv")["stratum"]) == {"test"}
    # --dataset that contradicts the files is an error, not a silent choice
    assert main(["analyze", a, b, "--dataset", "iu_xray", "--out", str(out), "--no-progress"]) == 1


def test_files_without_provenance_are_analysed_with_a_note(tmp_path, shorter, capsys):
    a = scored(tmp_path, "a")
    csv = tmp_path / "b.csv"
    pd.read_parquet(scored(tmp_path, "b", predictions=shorter)).to_csv(csv, index=False)
    out = tmp_path / "report"
    assert main(["analyze", a, str(csv), "--out", str(out), "--bootstrap", "20", "--no-progress"]) == 0
    assert f"{csv} carries no provenance" in capsys.readouterr().out


def test_report_without_a_known_test_set_claims_none(tmp_path):
    frames = {}
    for name, shift in (("a", 0.0), ("b", 0.1)):
        path = tmp_path / f"{name}.csv"
        pd.DataFrame({"id": [f"s{i}" for i in range(8)], "bleu2": [0.1 * i + shift for i in range(8)]}).to_csv(path, index=False)
        frames[name] = str(path)
    out = tmp_path / "report"
    assert main(["analyze", *frames.values(), "--out", str(out), "--bootstrap", "20", "--no-progress"]) == 0
    page = (out / "report.html").read_text()
    assert "ReXrank analysis — 2 systems (8 studies)" in page and "on test set" not in page


def test_statistical_notes_are_rendered_not_shown_as_markdown(tmp_path):
    from rexrank.analysis.report import Analysis, render_html

    page = render_html(Analysis(title="t", statistical_notes="- **Ranks.** `p_holm` <script>x</script>\n- two"))
    assert "<li><strong>Ranks.</strong> <code>p_holm</code> &lt;script&gt;x&lt;/script&gt;</li>" in page
    assert "**" not in page and "<script>" not in page


@pytest.mark.parametrize("failing", ["write", "rename"])
def test_a_results_file_that_cannot_be_written_leaves_no_temporary_file(tmp_path, monkeypatch, failing):
    import rexrank.per_study_file as per_study_file

    def refuse(*args, **kwargs):
        raise OSError(28, "No space left on device")

    if failing == "write":
        monkeypatch.setattr(per_study_file, "follow_umask", refuse)
    else:
        monkeypatch.setattr(per_study_file.os, "replace", refuse)
    target = tmp_path / "results.json"
    with pytest.raises(OSError, match="No space left"):
        per_study_file.write_json_atomic(target, {"a": 1})
    assert list(tmp_path.iterdir()) == []
