"""The checkpoint catalogue: every checkpoint a metric loads (hub id, pinned revision, files,
SHA-256 of single files, licence, size) and which of them each metric needs, declared once.
The metrics load from here and `rexrank weights` lists and fetches from here.

This module is the bottom of the package: it imports nothing of rexrank, so models/,
radgraph/, llm/ and metrics/ can all read it without tying themselves into an import cycle.

Where the pins come from (the Hub is unreachable from where this was written, so they
were read from the Hub's own pages as stored by a public crawl, 2026-11):
- StanfordAIMI/RRG_scorers: commit 3ef1a0c8 is the newest commit on main in the crawl
  (huggingface.co/StanfordAIMI/RRG_scorers/commits/main). It only re-uploaded
  echograph.tar.gz; chexbert.pth is unchanged since 4ccc069b (2022-05-13,
  /commit/4ccc069b767395ca82f4ac92eccad10d1eb4a98a) and radgraph.tar.gz /
  radgraph-xl.tar.gz since d0c5c616 (/blob/d0c5c6165b313aa612871cfacd9286723837d6dc/<file>).
  The SHA-256 values are the LFS object ids those pages show; chexbert.pth's also matches
  an independent third-party checksum. A snapshot 6646433b seen in public deployments holds
  the same chexbert.pth and radgraph-xl.tar.gz.
- Angelakeke/RaTE-NER-Deberta: 66d4b818 (/tree/66d4b8189374f9b137e1b8633951ca4b4d758673,
  24 commits) is the newest commit found; its model.safetensors is the one from the last
  weight upload (92e85ddf). The newest config.json's label names are not visible in the
  crawl; `ratescore.models` refuses a config without B-/I- labels, so a wrong guess fails
  loudly rather than mislabelling.
- FremyCompany/BioLORD-2023-C: bbe32ad7 ("Remove sentence_transformers wrapper",
  2024-03-04, /tree/bbe32ad7713d398847c80f9699c72df16a44f4ad) is the last commit that
  changed config.json and the weights (pytorch_model.bin); later commits touch the README
  or add a safetensors copy of the same weights.
- distilbert/distilroberta-base: fb53ab88 adds tokenizer_config.json (PR #4); weights
  unchanged since 2022-11 (safetensors copy of the 2019 upload).
- The encoders RadGraph archives name in config.json (only their config and tokenizer are
  loaded; weights come from the archive): BiomedBERT abstract-fulltext (formerly PubMedBERT;
  renamed 2023-11) at e1354b7a, the head of main, README-only changes since the tokenizer
  config upload (eaa409b6, 2021-09) and the old name's snapshot in public hub caches;
  BiomedVLP-CXR-BERT-general at 93af83ce, the head of main (tokenizer and config from
  2022-05-05). Encoders not listed load their `main`.
- google-bert/bert-base-uncased: 86b5e093, a snapshot used by public deployments; vocab.txt
  is unchanged since 2018 and tokenizer.json since 2020 in the stored history.
Sizes are approximate download sizes, from each model's parameter count (fp32, 4 bytes a
parameter; CheXbert's file also holds its Adam state, three times the weights); `rexrank
weights status` shows the exact size of what is cached.
Local paths (`checkpoint_path=`, `model_path=`, ...) are used as given, without these checks.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Checkpoint:
    """Where a metric's weights come from. `path` (a local folder or file) wins over the hub."""

    repo_id: str
    revision: str = "main"
    filename: str | None = None  # a single file inside the repo (e.g. chexbert.pth), else the whole snapshot
    path: str | None = None
    licence: str = ""
    sha256: str | None = None  # of `filename` as fetched from the hub; local paths are used as given
    size: str = field(default="", compare=False)  # approximate download size, for people deciding to fetch it

    def describe(self) -> str:
        if self.path:
            return f"local {self.path}"
        target = f"{self.repo_id}/{self.filename}" if self.filename else self.repo_id
        return f"{target}@{self.revision}"

    def same_source(self, other: "Checkpoint") -> bool:
        return (self.repo_id, self.revision, self.filename, self.path) == (other.repo_id, other.revision, other.filename, other.path)

    def provenance(self) -> dict:
        return {"repo_id": self.repo_id, "revision": self.revision, "filename": self.filename, "path": self.path,
                "sha256": None if self.path else self.sha256}


# -- the files read from a model repository ------------------------------------------------

CONFIG_FILE = "config.json"
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
)
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def model_files(*, weights: bool = True, tokenizer: bool = True) -> tuple[str, ...]:
    """The files of a model repo a metric reads (those the repo has)."""
    return (CONFIG_FILE, *(TOKENIZER_FILES if tokenizer else ()), *(WEIGHT_FILES if weights else ()))


# -- the checkpoints ---------------------------------------------------------------------------

RRG_SCORERS_REPO = "StanfordAIMI/RRG_scorers"
RRG_SCORERS_REVISION = "3ef1a0c82b418549078cd93b24b12c6e67bf9862"
RRG_SCORERS_SHA256 = {
    "chexbert.pth": "6550703c92d640e1e04d8105a7a185d76ece0f25fcbf033d292785bf22c0fde1",
    "radgraph.tar.gz": "7808499d3dc6c37859d3283a4258be0364104420224aeae7395f2f0f9c28bbb9",
    "radgraph-xl.tar.gz": "fadb5a3454e8996714b609e3105a07e447fa61aa88fffe966b650959475117b6",
}


def rrg_scorers_sha256(filename: str, revision: str) -> str | None:
    """The expected SHA-256 of an RRG_scorers file, when it is fetched at the pinned commit."""
    return RRG_SCORERS_SHA256.get(filename) if revision == RRG_SCORERS_REVISION else None


CHEXBERT = Checkpoint(
    RRG_SCORERS_REPO, RRG_SCORERS_REVISION, filename="chexbert.pth", sha256=RRG_SCORERS_SHA256["chexbert.pth"],
    licence="Stanford Academic Software License (non-commercial); see CheXbert LICENSE", size="about 1.3 GB")
# the tokenizer CheXbert was trained with
BERT_BASE_UNCASED = Checkpoint("google-bert/bert-base-uncased", "86b5e0934494bd15c9632b12f734a8a67f723594",
                               licence="Apache-2.0", size="under 1 MB (config and tokenizer only)")

RADGRAPH_LICENCE = (
    "StanfordAIMI/RRG_scorers is tagged MIT; the RadGraph v1 model was first released on PhysioNet "
    "under the PhysioNet Credentialed Health Data License"
)
RADGRAPH_SIZES = {"radgraph": "about 0.5 GB", "radgraph-xl": "about 0.5 GB"}


def radgraph_archive(model_type: str, *, revision: str = RRG_SCORERS_REVISION, path: str | None = None) -> Checkpoint:
    """The RadGraph model archive `<model_type>.tar.gz` in StanfordAIMI/RRG_scorers."""
    filename = f"{model_type}.tar.gz"
    return Checkpoint(RRG_SCORERS_REPO, revision, filename=filename, path=path, licence=RADGRAPH_LICENCE,
                      sha256=rrg_scorers_sha256(filename, revision), size=RADGRAPH_SIZES.get(model_type, ""))


_BIOMEDBERT_REVISION = "e1354b7a3a09615f6aba48dfad4b7a613eef7062"
CXR_BERT_GENERAL = Checkpoint("microsoft/BiomedVLP-CXR-BERT-general", "93af83cefc6d3f7d0ef9a0b78b0d579452c6a546",
                              licence="MIT", size="under 1 MB (config and tokenizer only)")
RADGRAPH_ENCODER_REVISIONS = {
    "microsoft/BiomedNLP-PubMedBERT-base-uncased-abstract-fulltext": _BIOMEDBERT_REVISION,
    "microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract-fulltext": _BIOMEDBERT_REVISION,
    CXR_BERT_GENERAL.repo_id: CXR_BERT_GENERAL.revision,
}


def radgraph_encoder_revision(name: str) -> str:
    return RADGRAPH_ENCODER_REVISIONS.get(name, "main")


DISTILROBERTA = Checkpoint("distilbert/distilroberta-base", "fb53ab8802853c8e4fbdbcd0529f21fc6f459b2b",
                           licence="Apache-2.0", size="about 330 MB")  # formerly "distilroberta-base"
RATE_NER = Checkpoint("Angelakeke/RaTE-NER-Deberta", "66d4b8189374f9b137e1b8633951ca4b4d758673", licence="MIT",
                      size="about 0.7 GB")
BIOLORD = Checkpoint("FremyCompany/BioLORD-2023-C", "bbe32ad7713d398847c80f9699c72df16a44f4ad",
                     licence="other: ihtsdo-and-nlm-licences (UMLS / SNOMED CT terms)", size="about 0.4 GB")
# SRR-BERT (Delbrouck et al., ACL 2025), as RadEval loads it: revision not pinned (no commit of it could be
# read where this was written; RadEval loads main), tokenizer CXR-BERT-general (pinned above)
SRR_BERT = Checkpoint("StanfordAIMI/SRR-BERT-Leaves-with-Statuses", "main", licence="see its model card (StanfordAIMI)",
                      size="about 0.4 GB (a BERT-base classifier)")
PUNKT_TAB = Checkpoint("nltk_data/tokenizers/punkt_tab", "NLTK's downloader", licence="Apache-2.0 (NLTK data)",
                       size="about 5 MB")
# Stanza keeps its models in its own folder and fetches the release matching its own version
STANZA_RADIOLOGY = Checkpoint("stanfordnlp/stanza-en", "the installed stanza's release", licence="Apache-2.0",
                              size="about 0.4 GB (radiology NER, its character LMs and word vectors, tokenizer)")
GREEN = Checkpoint("StanfordAIMI/GREEN-radllama2-7b", "main",  # revision not pinned: the official runs load main
                   licence="llama2 (model card of StanfordAIMI/GREEN-RadLlama2-7b)", size="about 13.5 GB")
# CRIMSON's judge: crimson-score's DEFAULT_HF_MODEL; its model card gives MedGemma's licence.
# Revision not pinned, as GREEN's: the official code loads main.
CRIMSON = Checkpoint("rajpurkarlab/medgemma-4b-it-crimson", "main",
                     licence="Health AI Developer Foundations terms of use (MedGemma; model card of "
                             "rajpurkarlab/medgemma-4b-it-crimson)", size="about 8.6 GB")


# -- what each metric needs ------------------------------------------------------------------

@dataclass(frozen=True)
class Need:
    """One checkpoint a metric loads, and the option of `component` that points at a local copy.

    kind: "file" (one file, `checkpoint.filename`), "model" (config + tokenizer + weights),
    "weights" (config + weights, the tokenizer coming from elsewhere),
    "tokenizer" (config + tokenizer), "snapshot" (the whole repository) or "stanza" (Stanza's
    own resources folder, filled by Stanza's downloader) or "nltk" (NLTK data, its downloader).
    named_in: for a checkpoint named inside another one (RadGraph's encoder, named in its
    archive's config), that other checkpoint; `checkpoint` is then None until it is read.
    """

    checkpoint: Checkpoint | None
    option: str
    kind: str
    role: str
    component: str
    pending: str = ""  # why the checkpoint is not known yet
    named_in: Checkpoint | None = None

    @property
    def files(self) -> tuple[str, ...]:
        if self.kind in ("model", "tokenizer", "weights"):
            return model_files(weights=self.kind != "tokenizer", tokenizer=self.kind != "weights")
        return ()

    def label(self) -> str:
        return self.checkpoint.describe() if self.checkpoint else self.pending


def radgraph_needs(model_type: str = "radgraph") -> tuple[Need, ...]:
    archive = radgraph_archive(model_type)
    return (Need(archive, "model_path", "file", "RadGraph model archive", "radgraph"),
            Need(None, "transformer_path", "tokenizer", "encoder config + tokenizer", "radgraph",
                 pending=f"the encoder named in {archive.filename} (known once the archive is here)", named_in=archive))


_BERTSCORE = (Need(DISTILROBERTA, "model", "model", "encoder (layers 1-5)", "bertscore"),)
_SEMBSCORE = (Need(CHEXBERT, "checkpoint_path", "file", "CheXbert weights", "sembscore"),
              Need(BERT_BASE_UNCASED, "tokenizer", "tokenizer", "CheXbert tokenizer", "sembscore"))
LLM_ENDPOINT_METRICS = ("fineradscore", "spec_cxr")  # judged by a served LLM: no weights here
# LLM judges whose weights are needed only for the local path: ready where an endpoint is set
WEIGHTS_OR_ENDPOINT = ("green", "crimson")

# metric -> the checkpoints it loads with its default options (every registered metric is a key)
METRIC_NEEDS: dict[str, tuple[Need, ...]] = {
    "bleu2": (),
    "rouge": (),
    "srr_bert": (Need(SRR_BERT, "model_path", "weights", "SRR-BERT classifier (revision not pinned)", "srr_bert"),
                 Need(CXR_BERT_GENERAL, "tokenizer_path", "tokenizer", "CXR-BERT tokenizer", "srr_bert"),
                 Need(PUNKT_TAB, "", "nltk", "NLTK English sentence splitter (punkt_tab)", "srr_bert")),
    "temporal_f1": (Need(STANZA_RADIOLOGY, "stanza_dir", "stanza", "Stanza radiology NER (ner='stanza')", "temporal_f1"),),
    "bertscore": _BERTSCORE,
    "sembscore": _SEMBSCORE,
    "radgraph": radgraph_needs(),
    "radcliq": _BERTSCORE + _SEMBSCORE + radgraph_needs(),
    "ratescore": (Need(RATE_NER, "ner_path", "snapshot", "entity tagger", "ratescore"),
                  Need(BIOLORD, "embedding_path", "snapshot", "entity encoder", "ratescore")),
    "green": (Need(GREEN, "model_path", "snapshot", "GREEN model (transformers backend; revision not pinned)", "green"),),
    "crimson": (Need(CRIMSON, "model_path", "snapshot", "CRIMSON judge (transformers backend; revision not pinned)",
                     "crimson"),),
    "fineradscore": (),
    "spec_cxr": (),
}
