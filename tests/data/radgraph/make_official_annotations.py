"""Produce official_annotations.json: the official radgraph 0.1.18 package's annotations on
the tiny random RadGraph archives that tests/radgraph/test_model.py rebuilds.

radgraph 0.1.18 needs transformers < 5, so this runs in a side environment, e.g.

    pip install --target /tmp/oldtf "transformers==4.57.6" "huggingface_hub<1.0" "tokenizers<0.23" \
        radgraph==0.1.18 dotmap jsonpickle appdirs h5py filelock --no-deps
    HF_HUB_OFFLINE=1 PYTHONPATH=/tmp/oldtf:src python tests/data/radgraph/make_official_annotations.py

(torch and nltk from the project environment). The archives are built with
rexrank.radgraph.fake, whose parameter names are spelled out from the official code; the
test checks that it rebuilds bit-identical weights (digest) before comparing.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

TEXTS = [
    "no evidence of acute cardiopulmonary process moderate hiatal hernia",
    "Left pleural effusion.No pneumothorax/. Heart size normal (stable), 2/3: mild pulmonary edema!",
    "effusion \u0301 left",  # the middle word has no wordpiece once accents are stripped
    "lung",
    "Heart size is normal. The lungs are clear. There is no pleural effusion or pneumothorax. "
    "No acute cardiopulmonary abnormality. Mild degenerative changes of the spine, 5% unchanged).",
    "Well-defined opacity at the right lung base, likely atelectasis; no edema.\\nNo effusion.",
]


def main() -> None:
    import transformers
    from radgraph import RadGraph

    from rexrank.radgraph.fake import TINY_SETTINGS, state_digest, write_archive, write_tiny_bert

    out = {"radgraph_version": "0.1.18", "transformers_version": transformers.__version__, "texts": TEXTS,
           "settings": TINY_SETTINGS, "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        bert = write_tiny_bert(tmp / "tinybert")
        for model_type in ("radgraph", "radgraph-xl"):
            folder = write_archive(tmp, model_type, bert, tarball=False, **TINY_SETTINGS)
            annotations = RadGraph(model_type=model_type, model_cache_dir=str(tmp))(TEXTS)
            out["models"][model_type] = {
                "weights_digest": state_digest(folder / "weights.th"),
                # keyed "0".."n-1" in input order by the package; keep only what it computes
                "annotations": [{"text": annotations[str(i)]["text"], "entities": annotations[str(i)]["entities"]}
                                for i in range(len(TEXTS))],
            }
    (HERE / "official_annotations.json").write_text(json.dumps(out, ensure_ascii=False, separators=(",", ":")) + "\n")
    print("wrote", HERE / "official_annotations.json", file=sys.stderr)


if __name__ == "__main__":
    main()
