"""A Llama tokenizer folder without tokenizer.json, encoded as transformers 4.x encodes it.

GREEN's checkpoint (StanfordAIMI/GREEN-RadLlama2-7b) ships tokenizer.model,
tokenizer_config.json, special_tokens_map.json and added_tokens.json, no tokenizer.json,
and its official run used transformers 4.x. There `AutoTokenizer(use_fast=True)` converts
the SentencePiece model; with `legacy` unset or true (4.x's default) every stretch of text
between special tokens gets SentencePiece's "▁" prefix, with `legacy=False` only the
first. transformers 5 converts such a folder its own way (no `legacy`, and only with
protobuf installed), so the same folder gives other ids. This encoder reproduces 4.x on
top of sentencepiece: split at added tokens, encode each stretch. Checked against
transformers 4.46.3: identical ids on 3,000 random texts for each `legacy` setting, and
identical decoding of valid UTF-8 (test data: tests/data/green/).
"""
from __future__ import annotations

import json
import re
from pathlib import Path


class LegacyLlamaTokenizer:
    """The parts of a transformers tokenizer that the transformers backend uses."""

    def __init__(self, folder: str | Path):
        import sentencepiece

        folder = Path(folder)
        self._sp = sentencepiece.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
        config = _read_json(folder / "tokenizer_config.json")
        specials_map = _read_json(folder / "special_tokens_map.json")
        self.legacy = config.get("legacy") is not False  # 4.x: unset means legacy
        self.add_bos_token = config.get("add_bos_token", True)
        # added tokens: content -> id, from every place transformers 4.x reads them
        added: dict[str, int] = {}
        for token_id, entry in (config.get("added_tokens_decoder") or {}).items():
            added[entry["content"]] = int(token_id)
        added.update({k: int(v) for k, v in _read_json(folder / "added_tokens.json").items()})
        special_names = {}
        for name in ("bos_token", "eos_token", "unk_token", "pad_token"):
            value = specials_map.get(name, config.get(name))
            if value is not None:
                special_names[name] = value["content"] if isinstance(value, dict) else value
        extra = specials_map.get("additional_special_tokens") or config.get("additional_special_tokens") or []
        special_contents = set(special_names.values()) | {t["content"] if isinstance(t, dict) else t for t in extra}
        for content in special_contents:
            if content not in added:
                token_id = self._sp.piece_to_id(content)
                if token_id != self._sp.unk_id() or content == special_names.get("unk_token"):
                    added[content] = token_id
        self._added = added
        self._id_to_added = {v: k for k, v in added.items()}
        self._special_ids = {added[c] for c in special_contents if c in added}
        self._split = re.compile("(" + "|".join(re.escape(c) for c in sorted(added, key=len, reverse=True)) + ")") if added else None
        self.bos_token_id = added.get(special_names.get("bos_token", "<s>"), self._sp.bos_id())
        self.eos_token_id = added.get(special_names.get("eos_token", "</s>"), self._sp.eos_id())
        self.eos_token = special_names.get("eos_token", "</s>")
        # GREEN pads with EOS (tokenizer.pad_token = tokenizer.eos_token)
        self.pad_token, self.pad_token_id = self.eos_token, self.eos_token_id
        # placeholder for stretches that get no "▁": encoded in front, then dropped (4.x's own trick)
        self._placeholder = special_names.get("unk_token", "<unk>")
        self._placeholder_len = len(self._sp.encode(self._placeholder))

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        ids = [self.bos_token_id] if add_special_tokens and self.add_bos_token else []
        parts = self._split.split(text) if self._split else [text]
        first = True
        for part in parts:
            if part in self._added:
                ids.append(self._added[part])
            elif part:
                if self.legacy or first:
                    ids += self._sp.encode(part)
                else:
                    ids += self._sp.encode(self._placeholder + part)[self._placeholder_len :]
            else:
                continue
            first = False
        return ids

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict:
        return {"input_ids": self.encode(text, add_special_tokens=add_special_tokens)}

    def decode(self, ids, skip_special_tokens: bool = False, clean_up_tokenization_spaces: bool = False) -> str:
        if clean_up_tokenization_spaces:
            raise ValueError("LegacyLlamaTokenizer does not clean up spaces; the caller applies its own rule")
        pieces: list[str] = []
        run: list[int] = []
        for token_id in ids:
            if token_id in self._id_to_added or token_id >= self._sp.get_piece_size():
                if run:
                    pieces.append(self._sp.decode(run))
                    run = []
                if not (skip_special_tokens and token_id in self._special_ids):
                    pieces.append(self._id_to_added.get(token_id, ""))
            else:
                run.append(token_id)
        if run:
            pieces.append(self._sp.decode(run))
        return "".join(pieces)


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def needs_legacy_tokenizer(folder: str | Path) -> bool:
    """A SentencePiece-only Llama folder, which transformers 5 would encode differently."""
    folder = Path(folder)
    return (folder / "tokenizer.model").is_file() and not (folder / "tokenizer.json").is_file()
