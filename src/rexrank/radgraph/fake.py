"""Random-weight RadGraph archives in the RRG_scorers layout, for tests and benchmarks.

The state-dict names and shapes are spelled out here from the official DyGIE code
(dygiepp / radgraph 0.1.18: dygie.py, ner.py, relation.py, coref.py, events.py,
entity_beam_pruner.py; AllenNLP FeedForward / TimeDistributed / Embedding), *not* derived
from rexrank.radgraph.model, so loading such an archive checks our model's layout against
the official one. config.json follows dygiepp's training template (feature_size 20,
max_span_width 8, 2 x 150 ReLU feedforwards, relation spans_per_word 0.5).
"""
from __future__ import annotations

import json
import tarfile
from pathlib import Path

ENTITY_LABELS = {
    "radgraph": ["ANAT-DP", "OBS-DP", "OBS-DA", "OBS-U"],
    "radgraph-xl": [
        "Anatomy::definitely present",
        "Observation::definitely present",
        "Observation::definitely absent",
        "Observation::uncertain",
    ],
}
RELATION_LABELS = ["located_at", "modify", "suggestive_of"]


def _ff(prefix: str, input_dim: int, hidden: int, layers: int) -> dict[str, tuple[int, ...]]:
    shapes, dim = {}, input_dim
    for i in range(layers):
        shapes[f"{prefix}._linear_layers.{i}.weight"] = (hidden, dim)
        shapes[f"{prefix}._linear_layers.{i}.bias"] = (hidden,)
        dim = hidden
    return shapes


def dygie_head_shapes(model_type: str, hidden_size: int, *, feature_size: int = 20, max_span_width: int = 8,
                      ff_hidden: int = 150, ff_layers: int = 2) -> dict[str, tuple[int, ...]]:
    """Official parameter names -> shapes of everything in DyGIE except the transformer."""
    span = 2 * hidden_size + feature_size
    n_ner = len(ENTITY_LABELS[model_type]) + 1  # + the null label ""
    n_rel = len(RELATION_LABELS)
    ner_ns, rel_ns = f"{model_type}__ner_labels", f"{model_type}__relation_labels"
    s: dict[str, tuple[int, ...]] = {"_endpoint_span_extractor._span_width_embedding.weight": (max_span_width, feature_size)}
    # NER: Sequential(TimeDistributed(FeedForward), TimeDistributed(Linear(150, n_labels - 1)))
    s.update(_ff(f"_ner._ner_scorers.{ner_ns}.0._module", span, ff_hidden, ff_layers))
    s[f"_ner._ner_scorers.{ner_ns}.1._module.weight"] = (n_ner - 1, ff_hidden)
    s[f"_ner._ner_scorers.{ner_ns}.1._module.bias"] = (n_ner - 1,)
    # coreference (never run)
    s["_coref._distance_embedding.weight"] = (10, feature_size)
    s.update(_ff("_coref._antecedent_feedforward._module", 3 * span + feature_size, ff_hidden, ff_layers))
    s.update(_ff("_coref._mention_pruner._scorer.0._module", span, ff_hidden, ff_layers))
    s["_coref._mention_pruner._scorer.1._module.weight"] = (1, ff_hidden)
    s["_coref._mention_pruner._scorer.1._module.bias"] = (1,)
    s["_coref._antecedent_scorer._module.weight"] = (1, ff_hidden)
    s["_coref._antecedent_scorer._module.bias"] = (1,)
    s.update(_ff("_coref._f_network", 2 * span, span, 1))
    # relations
    s.update(_ff(f"_relation._mention_pruners.{rel_ns}._scorer.0._module", span, ff_hidden, ff_layers))
    s[f"_relation._mention_pruners.{rel_ns}._scorer.1._module.weight"] = (1, ff_hidden)
    s[f"_relation._mention_pruners.{rel_ns}._scorer.1._module.bias"] = (1,)
    s.update(_ff(f"_relation._relation_feedforwards.{rel_ns}", 3 * span, ff_hidden, ff_layers))
    s[f"_relation._relation_scorers.{rel_ns}.weight"] = (n_rel, ff_hidden)
    s[f"_relation._relation_scorers.{rel_ns}.bias"] = (n_rel,)
    # events (never run; no event namespaces in the vocabulary)
    s["_events._distance_embedding.weight"] = (10, feature_size)
    return s


def dygie_config(model_type: str, transformer: str, *, max_length: int | None = 512, feature_size: int = 20,
                 max_span_width: int = 8, ff_hidden: int = 150, ff_layers: int = 2) -> dict:
    bert = {"type": "pretrained_transformer_mismatched", "model_name": transformer}
    if max_length is not None:
        bert["max_length"] = max_length
    return {
        "dataset_reader": {"type": "dygie", "token_indexers": {"bert": dict(bert)}, "max_span_width": max_span_width},
        "model": {
            "type": "dygie",
            "embedder": {"token_embedders": {"bert": dict(bert)}},
            "initializer": {"regexes": [["_span_width_embedding.weight", {"type": "xavier_normal"}]]},
            "module_initializer": {"regexes": [[".*weight", {"type": "xavier_normal"}]]},
            "loss_weights": {"ner": 1.0, "relation": 1.0, "coref": 0.0, "events": 0.0},
            "feature_size": feature_size,
            "max_span_width": max_span_width,
            "target_task": "relation",
            "feedforward_params": {"num_layers": ff_layers, "hidden_dims": ff_hidden, "dropout": 0.4},
            "modules": {
                "coref": {"spans_per_word": 0.3, "max_antecedents": 100, "coref_prop": 0},
                "ner": {},
                "relation": {"spans_per_word": 0.5},
                "events": {"trigger_spans_per_word": 0.3, "argument_spans_per_word": 0.8,
                           "loss_weights": {"trigger": 0.2, "arguments": 1.0}},
            },
        },
    }


def write_archive(directory: Path, model_type: str, transformer_dir: Path, *, seed: int = 0, tarball: bool = True,
                  head_scale: float = 1.0, **sizes) -> Path:
    """Write config.json, vocabulary/ and weights.th (random) for `model_type`, with the
    encoder architecture of `transformer_dir` (config.json + tokenizer); returns the
    `<type>.tar.gz` (or the folder when tarball=False)."""
    import torch
    from transformers import AutoConfig, AutoModel

    directory = Path(directory)
    folder = directory / model_type
    (folder / "vocabulary").mkdir(parents=True, exist_ok=True)
    max_length = sizes.pop("max_length", 512)
    (folder / "config.json").write_text(json.dumps(dygie_config(model_type, str(transformer_dir), max_length=max_length, **sizes), indent=2))
    vocab = folder / "vocabulary"
    (vocab / "non_padded_namespaces.txt").write_text("*tags\n*labels\n")
    (vocab / f"{model_type}__ner_labels.txt").write_text("\n" + "\n".join(ENTITY_LABELS[model_type]) + "\n")
    (vocab / f"{model_type}__relation_labels.txt").write_text("\n".join(RELATION_LABELS) + "\n")

    config = AutoConfig.from_pretrained(transformer_dir)
    shapes = {f"_embedder.token_embedder_bert._matched_embedder.transformer_model.{k}": tuple(v.shape)
              for k, v in AutoModel.from_config(config).state_dict().items()}
    shapes.update(dygie_head_shapes(model_type, config.hidden_size, **sizes))
    # Every tensor drawn from one seeded generator in name order, so the weights depend on
    # the seed and torch's CPU generator only (not on a library's initialisation scheme).
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for name in sorted(shapes):
        shape = shapes[name]
        scale = head_scale if not name.startswith("_embedder") else 1.0
        state[name] = torch.randn(shape, generator=generator) * (scale / max(1, shape[-1]) ** 0.5)
    torch.save(state, folder / "weights.th")
    if not tarball:
        return folder
    archive = directory / f"{model_type}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(folder.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(folder)), recursive=False)
    return archive


def state_digest(weights: Path) -> str:
    """sha256 over (name, float32 values) of a weights.th, independent of torch.save's format."""
    import hashlib

    import torch

    state = torch.load(weights, map_location="cpu", weights_only=True)
    digest = hashlib.sha256()
    for name in sorted(state):
        digest.update(name.encode())
        digest.update(state[name].to(torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()


TINY_WORDS = (
    "no acute cardiopulmonary process abnormality evidence of moderate hiatal hernia pleural effusion "
    "pneumothorax left right lung heart size normal mild pulmonary edema"
).split()


def write_tiny_bert(directory: Path, *, hidden_size: int = 16, max_position_embeddings: int = 64) -> Path:
    """A tiny uncased WordPiece BERT (config + tokenizer files, no weights) in `directory`."""
    from transformers import BertConfig, BertTokenizer

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *".,:/()!?-%", *TINY_WORDS, "##al", "##ing",
             *letters, *"0123456789", *("##" + c for c in letters)]
    if len(set(vocab)) != len(vocab):  # transformers 4 and 5 resolve duplicates differently
        raise ValueError("duplicate entries in the tiny vocabulary")
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n")
    # transformers 5 takes vocab= (and ignores vocab_file=); 4.x needs vocab_file=.
    # model_max_length avoids an int-overflow default.
    try:
        tokenizer = BertTokenizer(vocab=str(directory / "vocab.txt"), do_lower_case=True, model_max_length=512)
    except TypeError:
        tokenizer = BertTokenizer(vocab_file=str(directory / "vocab.txt"), do_lower_case=True, model_max_length=512)
    tokenizer.save_pretrained(directory)
    BertConfig(vocab_size=len(vocab), hidden_size=hidden_size, num_hidden_layers=1, num_attention_heads=2,
               intermediate_size=2 * hidden_size, max_position_embeddings=max_position_embeddings).save_pretrained(directory)
    return directory


# The tiny archives of the tests (see tests/data/radgraph/README.md for how the official
# package's output on them was produced).
TINY_SETTINGS = {"seed": 1, "head_scale": 10.0, "ff_hidden": 12, "max_length": 16}
