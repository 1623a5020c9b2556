"""Local `transformers` backend: greedy generation with a causal LM checkpoint.

"completion" requests are tokenised as given (the tokenizer adds BOS; literal special
tokens such as "</s>" in the text become their ids, as in GREEN's official inference);
"chat" requests are rendered with the tokenizer's own chat template. Batches are
left-padded. `max_length` in a request's params caps prompt + completion (GREEN's
official setting); `max_tokens` caps the completion alone; `clean_up_tokenization_spaces`
is passed to the decoder when given.

GREEN's options (backend kwargs): `legacy_llama_tokenizer` encodes a SentencePiece-only
Llama folder as transformers 4.x did (`rexrank.llm.llama_tokenizer`), and
`sort_by_length=False` keeps the requests' order in the batches (the official batches).
CRIMSON's: `generation_config_eos` also stops at the end-of-sequence ids of the checkpoint's
generation_config.json (Gemma's <end_of_turn>), as `generate` does when not told otherwise.

With `settings.replicas` > 1 (by default as many as the free GPU memory holds) the batches
are generated at once by that many replicas, processes sharing the weights (`rexrank.llm.replicas`), each batch
whole and with the same kernels: the same ids as one batch after another.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from rexrank.llm.settings import LLMSettings
from rexrank.llm.types import LLMRequest, LLMResponse
from rexrank.models.building import MODEL_BUILD_LOCK
from rexrank.models.checkpoints import Checkpoint, pick_device, resolve
from rexrank.models.encoders import folder_fingerprint

log = logging.getLogger(__name__)


class TransformersBackend:
    name = "transformers"
    max_concurrency = 1
    fixed_batches = True  # generate(batches=...) keeps the given batches

    def __init__(
        self,
        settings: LLMSettings,
        *,
        licence: str = "",
        max_input_tokens: int | None = None,
        legacy_llama_tokenizer: bool = False,
        sort_by_length: bool = True,
        generation_config_eos: bool = False,
    ):
        if settings.model and not settings.model_path and Path(settings.model).expanduser().is_dir():
            settings = replace(settings, model_path=settings.model)  # --llm-model /local/folder
        self.settings = settings
        self.checkpoint = Checkpoint(
            repo_id=settings.model or str(settings.model_path),
            revision=settings.revision or "main",
            path=settings.model_path,
            licence=licence,
        )
        self.max_input_tokens = max_input_tokens
        self.legacy_llama_tokenizer = legacy_llama_tokenizer
        self.sort_by_length = sort_by_length
        self.generation_config_eos = generation_config_eos
        self._model = None
        self._tokenizer = None
        self._path: Path | None = None
        self._kwargs = dict(licence=licence, max_input_tokens=max_input_tokens, legacy_llama_tokenizer=legacy_llama_tokenizer,
                            sort_by_length=sort_by_length, generation_config_eos=generation_config_eos)
        self._pool = None
        self.replicas: int | None = settings.replicas  # decided when the first batches are generated

    # Loading is lazy: a rerun served entirely from the cache never loads the weights (the
    # tokenizer alone may be loaded, e.g. to count prompt tokens).
    def _load_tokenizer(self):
        if self._tokenizer is not None:
            return self._tokenizer
        from rexrank.llm.llama_tokenizer import LegacyLlamaTokenizer, needs_legacy_tokenizer

        self._path = resolve(self.checkpoint, option="model_path")
        if self.legacy_llama_tokenizer and needs_legacy_tokenizer(self._path):
            tokenizer = LegacyLlamaTokenizer(self._path)
        else:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(self._path, padding_side="left")
            if tokenizer.pad_token is None:
                tokenizer.pad_token = tokenizer.eos_token
        self._tokenizer = tokenizer
        return tokenizer

    def _load(self):
        if self._model is not None:
            return
        self._path = resolve(self.checkpoint, option="model_path")  # before the slow imports: missing weights fail at once
        import torch
        from transformers import AutoModelForCausalLM

        self._load_tokenizer()
        device = pick_device(self.settings.device)
        dtype_name = self.settings.dtype or ("float16" if device.startswith("cuda") else "float32")
        with MODEL_BUILD_LOCK:
            model = AutoModelForCausalLM.from_pretrained(self._path, dtype=getattr(torch, dtype_name))
        model.to(device).eval()
        self._adopt(model, device, dtype_name)

    def _adopt(self, model, device: str, dtype_name: str) -> None:
        self._model, self._device = model, device
        stops = [self._tokenizer.eos_token_id]
        if self.generation_config_eos:
            extra = model.generation_config.eos_token_id
            stops += [i for i in (extra if isinstance(extra, list) else [extra]) if i is not None and i not in stops]
        self._stop_ids = stops
        self.dtype = dtype_name

    @property
    def tokenizer(self):
        return self._load_tokenizer()

    def identity(self) -> dict:
        revision = self.checkpoint.revision
        if self.settings.model_path:
            revision = "local:" + folder_fingerprint(Path(self.settings.model_path))
        identity = {"backend": self.name, "model": self.checkpoint.repo_id, "revision": revision, "dtype": self.settings.dtype}
        if self.legacy_llama_tokenizer:
            identity["tokenizer"] = "transformers-4 Llama rule"  # other ids than before: other cache keys
        return identity

    def prompt_ids(self, request: LLMRequest) -> list[int]:
        tok = self.tokenizer
        if request.prompt_ids:
            return list(request.prompt_ids)
        if request.kind == "completion":
            return tok(request.prompt, add_special_tokens=True)["input_ids"]
        if request.kind == "chat":
            text = tok.apply_chat_template(request.message_dicts, tokenize=False, add_generation_prompt=True)
            return tok(text, add_special_tokens=False)["input_ids"]
        raise ValueError(f"unknown request kind {request.kind!r}")

    def generate(self, requests: list[LLMRequest], on_progress=None, on_result=None, batches: list[list[int]] | None = None) -> list[LLMResponse]:
        """Answers in request order; `on_result(i, response)` for each as its batch ends.
        `batches` (request numbers per batch, each batch one set of params) fixes the
        batches: their members and so their padded width."""
        self._load_tokenizer()
        on_progress = on_progress or (lambda n: None)
        on_result = on_result or (lambda i, response: None)
        out: list[LLMResponse | None] = [None] * len(requests)
        ready: list[tuple[int, list[int]]] = []
        for i, request in enumerate(requests):
            try:
                ids = self.prompt_ids(request)
            except Exception as exc:  # e.g. no chat template
                out[i] = LLMResponse(None, error=f"cannot build the prompt: {type(exc).__name__}: {exc}")
                on_result(i, out[i])
                on_progress(1)
                continue
            cap = request.param_dict.get("max_length")
            limit = self.max_input_tokens or cap
            if limit is not None and len(ids) >= limit:
                out[i] = LLMResponse(
                    None, prompt_tokens=len(ids), error=f"prompt is {len(ids)} tokens, no room under the {limit}-token limit"
                )
                on_result(i, out[i])
                on_progress(1)
                continue
            ready.append((i, ids))
        todo = self._batches(requests, ready, batches)
        for batch in todo:
            params = requests[batch[0][0]].params
            if any(requests[i].params != params for i, _ in batch):
                raise ValueError("a fixed batch mixes generation parameters")

        def finished(k: int, responses: list[LLMResponse]) -> None:
            for (i, _), response in zip(todo[k], responses):
                out[i] = response
                on_result(i, response)
            on_progress(len(todo[k]))

        inputs = [[ids for _, ids in batch] for batch in todo]
        params = [dict(requests[batch[0][0]].param_dict) for batch in todo]
        left = list(range(len(todo)))
        if len(todo) > 1 and self._replica_count(params) > 1:
            pool = self._replica_pool()
            left = pool.generate(inputs, params, finished)
            if left:  # the same batches, one after another, here: the same ids, only slower
                log.warning("the model's replicas stopped (%s); generating the %d remaining batch(es) one after another "
                            "(replicas=1 avoids the replicas; a script must start with `if __name__ == \"__main__\":` "
                            "for them)", pool.broken, len(left))
                self.close()
                self.replicas = 1
        self._load()
        for k in left:
            finished(k, self._generate_batch(inputs[k], params[k]))
        return out  # type: ignore[return-value]

    def _replica_count(self, params: list[dict]) -> int:
        if self.replicas is None:
            from rexrank.llm.replicas import default_replicas

            if not pick_device(self.settings.device).startswith("cuda"):
                self.replicas = 1
                return 1
            self._load()  # the replicas share these weights: what is left free holds their caches
            longest = max((p.get("max_length") or 0 for p in params), default=0) or 4096
            self.replicas = default_replicas(self._model.config, device=self._device, dtype=self.dtype,
                                             batch_size=self.settings.batch_size, max_length=longest)
        return self.replicas

    def _replica_pool(self):
        if self._pool is None:
            from rexrank.llm.replicas import ReplicaPool

            self._load()  # loaded once, here; the replicas use these weights in place
            settings = replace(self.settings, model_path=str(self._path))
            self._pool = ReplicaPool(self.replicas, type(self), settings, self._kwargs, self._shared_model())
        return self._pool

    def _shared_model(self) -> tuple:
        """What a replica needs to run this very model without a copy of its weights: the
        config, the generation config, and every parameter and buffer (CUDA tensors go to the
        worker as CUDA IPC handles, CPU tensors through shared memory)."""
        tensors = {name: t.detach() for name, t in self._model.named_parameters(remove_duplicate=False)}
        tensors.update({name: t for name, t in self._model.named_buffers(remove_duplicate=False)})
        return self._model.config, self._model.generation_config, tensors, self._device, self.dtype

    def _attach(self, config, generation_config, tensors: dict, device: str, dtype_name: str) -> None:
        """Builds the model around another process's weights (see `_shared_model`)."""
        import torch
        from transformers import AutoModelForCausalLM

        self._load_tokenizer()
        with MODEL_BUILD_LOCK, torch.device("meta"):  # no memory: every tensor is replaced below
            model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype_name))
        for name, tensor in tensors.items():
            owner, _, leaf = name.rpartition(".")
            module = model.get_submodule(owner)
            if leaf in module._parameters:
                module._parameters[leaf] = torch.nn.Parameter(tensor, requires_grad=False)
            else:
                module._buffers[leaf] = tensor
        model.generation_config = generation_config
        self._adopt(model.eval(), device, dtype_name)

    @property
    def batch_log(self) -> list[tuple[int, float, float]]:
        """(worker pid, start, end) of each batch the replicas generated."""
        return self._pool.log if self._pool is not None else []

    def close(self) -> None:
        """Stops the replicas' worker processes (they also end with this process)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def _batches(self, requests, ready: list[tuple[int, list[int]]], fixed: list[list[int]] | None) -> list[list[tuple[int, list[int]]]]:
        if fixed is not None:
            ids = dict(ready)  # a prompt that could not be built is out of its batch (reported above)
            return [[(i, ids[i]) for i in batch if i in ids] for batch in fixed if any(i in ids for i in batch)]
        # requests with identical generation params are batched together, shortest first
        # to keep padding (and thus wasted compute) low, or in their own order
        groups: dict[tuple, list[tuple[int, list[int]]]] = {}
        for i, ids in ready:
            groups.setdefault(requests[i].params, []).append((i, ids))
        out = []
        for members in groups.values():
            if self.sort_by_length:
                members.sort(key=lambda m: len(m[1]))
            out += [members[start : start + self.settings.batch_size] for start in range(0, len(members), self.settings.batch_size)]
        return out

    def _generate_batch(self, batch: list[list[int]], params: dict) -> list[LLMResponse]:
        import torch

        tok = self._tokenizer
        width = max(len(ids) for ids in batch)
        pad = tok.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids in batch], device=self._device)
        attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in batch], device=self._device)
        stops = self._stop_ids
        kwargs = dict(do_sample=False, eos_token_id=stops if len(stops) > 1 else stops[0], pad_token_id=pad, temperature=None, top_p=None, top_k=None)
        if params.get("max_tokens") is not None:
            kwargs["max_new_tokens"] = int(params["max_tokens"])
        if params.get("max_length") is not None:
            # official GREEN: total length (padded prompt + completion); with max_tokens too, the tighter wins
            room = int(params["max_length"]) - width
            kwargs["max_new_tokens"] = min(room, kwargs.get("max_new_tokens", room))
        try:
            with torch.inference_mode():
                generated = self._model.generate(input_ids=input_ids, attention_mask=attention, **kwargs)
        except Exception as exc:  # OOM and the like: every study of the batch failed, said so
            return [LLMResponse(None, prompt_tokens=len(ids), error=f"generation failed: {type(exc).__name__}: {exc}") for ids in batch]
        decoding = {k: params[k] for k in ("clean_up_tokenization_spaces",) if k in params}
        responses = []
        for ids, row in zip(batch, generated[:, width:].tolist()):
            new = row
            finish = "length"
            ends = [row.index(i) for i in stops if i in row]
            if ends:
                new = row[: min(ends) + 1]
                finish = "stop"
            text = tok.decode(new, skip_special_tokens=True, **decoding)
            responses.append(LLMResponse(text, prompt_tokens=len(ids), completion_tokens=len(new), finish_reason=finish, completion_ids=new))
        return responses
