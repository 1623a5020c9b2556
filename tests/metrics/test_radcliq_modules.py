"""The evaluate modules metrics/bertscore, metrics/sembscore and metrics/radcliq load offline
and follow the bleu2 output contract (run on tiny models of the real architectures)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.tiny_report_models import CORPUS, make_tiny_bert_tokenizer, make_tiny_chexbert, make_tiny_roberta

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    import torch
    from transformers import BertConfig, BertModel

    from rexrank.radgraph.fake import write_archive

    root = tmp_path_factory.mktemp("module_models")
    tok = make_tiny_bert_tokenizer(root / "bert")
    vocab_size = len((tok / "vocab.txt").read_text().split())
    torch.manual_seed(2)
    BertModel(BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=512)).save_pretrained(tok)
    return {
        "roberta": make_tiny_roberta(root / "roberta"),
        "tokenizer": tok,
        "chexbert": make_tiny_chexbert(root / "chexbert.pth", vocab_size),
        "radgraph": write_archive(root / "radgraph", "radgraph", tok, tarball=False),
    }


def _options(name, m, cache_dir):
    bert = {"model": str(m["roberta"]), "num_layers": 2, "baseline": [0.8, 0.81, 0.805]}
    semb = {"checkpoint_path": str(m["chexbert"]), "tokenizer": str(m["tokenizer"])}
    if name == "bertscore":
        return {**bert, "cache_dir": cache_dir}
    if name == "sembscore":
        return {**semb, "cache_dir": cache_dir}
    return {"bertscore_options": bert, "sembscore_options": semb,
            "radgraph_options": {"model_path": str(m["radgraph"]), "progress": False}, "cache_dir": cache_dir}


@pytest.mark.parametrize("name, extra_columns", [
    ("bertscore", {"bertscore_precision", "bertscore_recall"}),
    ("sembscore", set()),
    ("radcliq", {"radcliq_v0", "radcliq_bleu2", "radcliq_bertscore", "radcliq_sembscore", "radcliq_radgraph"}),
])
def test_module_contract(name, extra_columns, models, tmp_path):
    import evaluate

    card = (ROOT / "metrics" / name / "README.md").read_text()
    for card_line in ("---", "title:", "sdk: gradio", "app_file: app.py", "## Citation", "icence"):
        assert card_line in card
    assert "models" in (ROOT / "metrics" / name / "requirements.txt").read_text()
    module = evaluate.load(str(ROOT / "metrics" / name))
    preds, refs = CORPUS[:3], [CORPUS[0], CORPUS[4], CORPUS[2]]
    out = module.compute(predictions=preds, references=refs, **_options(name, models, str(tmp_path)))
    assert isinstance(out[name], float) and len(out["per_study"]) == 3
    assert out[name] == pytest.approx(sum(out["per_study"]) / 3)
    assert set(out.get("per_study_columns", {})) == extra_columns
    assert out["config"]["name"] == name
    json.dumps(out)  # JSON-ready
    if name == "radcliq":
        assert out["radcliq_v1_inv"] == pytest.approx(1 / out["radcliq"])
        assert "radcliq_v0" in out
    if name == "sembscore":
        assert {"chexbert_5_micro_f1", "chexbert_all_macro_f1", "chexbert_labels"} <= set(out["details"])
