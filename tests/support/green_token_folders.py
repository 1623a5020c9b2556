"""Synthetic Llama tokenizer folders around tests/data/green/tokenizer.model, laid out as
GREEN-RadLlama2-7b's (tokenizer.model, tokenizer_config.json, special_tokens_map.json,
added_tokens.json; no tokenizer.json), and the GREEN inputs whose official ids are in
tests/data/green/legacy_ids.json. Shared by the tests and the script that made the ids."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "green"
EXTRA_TOKEN, EXTRA_ID = "<|coord_9|>", 600  # GREEN's folder lists one additional special token

FOLDERS = {
    "legacy_unset": {},  # transformers 4.x treats an unset `legacy` as true
    "legacy_false": {"legacy": False},
}

CASES = [
    ("Heart size is normal. No pleural effusion.", "Mild cardiomegaly.  No effusion."),
    ("Lines and tubes:\n- ETT 4 cm above the carina.\n\nIMPRESSION: No acute process.", "ETT in place.</s> Lungs clear."),
    ("Small left pleural effusion (? edema).", f"Left effusion {EXTRA_TOKEN} unchanged, 2 . 5 cm."),
]


def build_folder(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(DATA / "tokenizer.model", folder / "tokenizer.model")
    config = {
        "tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False,
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<unk>",
        "clean_up_tokenization_spaces": False, "model_max_length": 4096, "sp_model_kwargs": {},
        **FOLDERS[name],
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    special = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<unk>",
               "additional_special_tokens": [EXTRA_TOKEN]}
    (folder / "special_tokens_map.json").write_text(json.dumps(special, indent=1))
    (folder / "added_tokens.json").write_text(json.dumps({EXTRA_TOKEN: EXTRA_ID}))
    return folder


def build_tiny_legacy_llama(folder: Path, *, hidden: int = 32, seed: int = 0) -> Path:
    """A tiny random Llama (GREEN's architecture) in a SentencePiece-only tokenizer folder."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    build_folder(folder, "legacy_unset")
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=EXTRA_ID + 1, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         bos_token_id=1, eos_token_id=2, pad_token_id=2)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder
