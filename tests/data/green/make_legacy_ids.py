"""Produce legacy_ids.json: the token ids that GREEN's official tokenisation gives under
transformers 4.46 for a few GREEN inputs, with the synthetic Llama tokenizer folders that
tests/test_green_tokens.py builds around tokenizer.model.

tokenizer.model is rexrank's own: a 600-piece SentencePiece BPE model (Llama-2 settings:
byte_fallback, split_digits, add_dummy_prefix, identity normalisation, unk/bos/eos 0/1/2)
trained with sentencepiece 0.2 on rexrank's synthetic example reports and the shipped GREEN
prompt template. transformers 4.x is needed, so this runs in a side environment, e.g.

    python -m venv /tmp/tf446 && /tmp/tf446/bin/pip install "transformers==4.46.3" sentencepiece protobuf jinja2
    PYTHONPATH=src:tests /tmp/tf446/bin/python tests/data/green/make_legacy_ids.py

The tokenisation below is the official one (Stanford-AIMI/GREEN green_score/green.py:
AutoTokenizer(add_eos_token=True, use_fast=True, padding_side="left"), its chat template,
batch_encode_plus with padding, truncation, max_length=2048), written anew.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import transformers
from transformers import AutoTokenizer

from support.green_token_folders import CASES, FOLDERS, build_folder
from rexrank.metrics.green_text import make_prompt

CHAT_TEMPLATE = (
    "{% for message in messages %}\n{% if message['from'] == 'human' %}\n{{ '<|user|>\n' + message['value'] + eos_token }}\n"
    "{% elif message['from'] == 'system' %}\n{{ '<|system|>\n' + message['value'] + eos_token }}\n"
    "{% elif message['from'] == 'gpt' %}\n{{ '<|assistant|>\n'  + message['value'] + eos_token }}\n{% endif %}\n"
    "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}"
)


def official_ids(folder: Path, prompts: list[str]) -> list[list[int]]:
    tok = AutoTokenizer.from_pretrained(folder, add_eos_token=True, use_fast=True, padding_side="left")
    tok.chat_template = CHAT_TEMPLATE
    tok.pad_token = tok.eos_token
    texts = [tok.apply_chat_template([{"from": "human", "value": p}, {"from": "gpt", "value": ""}], tokenize=False,
                                     add_generation_prompt=True) for p in prompts]
    enc = tok(texts, padding=True, truncation=True, max_length=2048)
    return [[i for i, m in zip(ids, mask) if m] for ids, mask in zip(enc["input_ids"], enc["attention_mask"])]


def main() -> None:
    prompts = [make_prompt(reference, candidate) for reference, candidate in CASES]
    out = {"transformers_version": transformers.__version__, "ids": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in FOLDERS:
            out["ids"][name] = official_ids(build_folder(Path(tmp) / name, name), prompts)
    path = Path(__file__).with_name("legacy_ids.json")
    path.write_text(json.dumps(out) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
