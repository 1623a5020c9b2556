"""The official checkpoints, pinned: Hub repository, commit, and the SHA-256 of single files.

Where the hashes come from (the Hub is unreachable from where this was written, so they
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
Local paths (`checkpoint_path=`, `model_path=`, ...) are used as given, without these checks.
"""
from __future__ import annotations

RRG_SCORERS_REPO = "StanfordAIMI/RRG_scorers"
RRG_SCORERS_REVISION = "3ef1a0c82b418549078cd93b24b12c6e67bf9862"
RRG_SCORERS_SHA256 = {
    "chexbert.pth": "6550703c92d640e1e04d8105a7a185d76ece0f25fcbf033d292785bf22c0fde1",
    "radgraph.tar.gz": "7808499d3dc6c37859d3283a4258be0364104420224aeae7395f2f0f9c28bbb9",
    "radgraph-xl.tar.gz": "fadb5a3454e8996714b609e3105a07e447fa61aa88fffe966b650959475117b6",
}

RATE_NER_REPO = "Angelakeke/RaTE-NER-Deberta"
RATE_NER_REVISION = "66d4b8189374f9b137e1b8633951ca4b4d758673"

BIOLORD_REPO = "FremyCompany/BioLORD-2023-C"
BIOLORD_REVISION = "bbe32ad7713d398847c80f9699c72df16a44f4ad"

DISTILROBERTA_REPO = "distilbert/distilroberta-base"  # formerly "distilroberta-base"
DISTILROBERTA_REVISION = "fb53ab8802853c8e4fbdbcd0529f21fc6f459b2b"

BERT_BASE_UNCASED_REPO = "google-bert/bert-base-uncased"
BERT_BASE_UNCASED_REVISION = "86b5e0934494bd15c9632b12f734a8a67f723594"

_BIOMEDBERT_REVISION = "e1354b7a3a09615f6aba48dfad4b7a613eef7062"
RADGRAPH_ENCODER_REVISIONS = {
    "microsoft/BiomedNLP-PubMedBERT-base-uncased-abstract-fulltext": _BIOMEDBERT_REVISION,
    "microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract-fulltext": _BIOMEDBERT_REVISION,
    "microsoft/BiomedVLP-CXR-BERT-general": "93af83cefc6d3f7d0ef9a0b78b0d579452c6a546",
}


def radgraph_encoder_revision(name: str) -> str:
    return RADGRAPH_ENCODER_REVISIONS.get(name, "main")


def rrg_scorers_sha256(filename: str, revision: str) -> str | None:
    """The expected SHA-256 of an RRG_scorers file, when it is fetched at the pinned commit."""
    return RRG_SCORERS_SHA256.get(filename) if revision == RRG_SCORERS_REVISION else None
