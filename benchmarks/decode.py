"""RadGraph's pass split into its forward passes and its decoding, old reading against new.

The model is the random-weight DyGIE++ of radgraph.py (BERT-base encoder, RadGraph's heads);
the texts are the suite's distinct synthetic reports, in the annotator's length-sorted
batches of 16. Timed each round (old and new swap places every round, so neither always
runs second):
- forward: the encoder's batched forward passes (tokenised beforehand);
- heads: the DyGIE span heads per document (model.score), alone;
- decoding old, in two parts: word vectors from the encoder's output, then the heads'
  labels to JSON annotations, through rexrank.radgraph.reference (a per-word mean for every
  word; a per-document read of the labels, a read per relation, a scan of all relations per
  entity);
- decoding new: the same two parts through the annotator's path (word vectors stitched per
  batch; one read of the batch's labels, numpy, relations grouped by source);
- pass old / new: reference.annotate against RadGraphAnnotator.annotate on the texts
  (tokenising, encoder, heads, decoding; the whole RadGraph pass of a scoring run).
Printed per round and as medians: the decoding old and new (word vectors + labels to JSON)
and their ratio, the heads, the forward passes, and `pass / forward` (the issue's goal on
CUDA: <= 2). Each part's outputs are compared between the paths (they must be equal).

On a GPU every figure waits for the device at its end (torch.cuda.synchronize), and the
new pass reads labels in a background thread while the next batch runs. On the CPU the
decoding seconds are the Python work that a GPU run also pays on its critical path; on a
shared machine `--threads 1 --clock cpu` times this process's CPU work, which other
processes barely move.

Usage: python benchmarks/decode.py [--pairs 600] [--rounds 3] [--device cpu|cuda] [--threads N]
       [--clock wall|cpu] [--no-pass]
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
from pathlib import Path

import suite  # noqa: I001  (sets PyTorch's huge pages as the suite benchmark does)
import torch

from radgraph import build_archive
from synthetic_reports import synthetic_reports


def timed(device: str, fn) -> tuple[float, object]:
    gc.collect()  # each part starts from a collected heap: a collection inside is its own garbage's
    suite.synchronize(device)
    start = suite.clock()  # wall unless --clock cpu
    with torch.inference_mode():
        out = fn()
    suite.synchronize(device)
    return suite.clock() - start, out


class OpCount:
    """Counts the torch operations run inside it (each a kernel launch or more on a GPU)
    and, among them, the reads of one number back to the host (`int(t)`, `t.item()`: a
    wait for the device each). `tolist()` is not a torch operation: `reads` adds those."""

    def __init__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        counter = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                counter.ops += 1
                counter.scalars += func is torch.ops.aten._local_scalar_dense.default
                return func(*args, **(kwargs or {}))

        self.ops = self.scalars = 0
        self.mode = Mode()

    def __enter__(self):
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        self.mode.__exit__(*exc)


def measure(model_path: str, texts: list[str], device: str, rounds: int, *, passes: bool = True, report=print) -> dict:
    """Seconds (medians over rounds) of each part on `texts`; prints each round."""
    from rexrank.radgraph import reference
    from rexrank.radgraph.annotator import RadGraphAnnotator
    from rexrank.radgraph.decode import fetch

    annotator = RadGraphAnnotator(model_path=model_path, batch_size=16, device=device)
    annotator.annotate(texts[:16], progress=False)  # warm-up
    words = sorted((w for w in map(annotator.words, texts) if w), key=len)
    encoded = [annotator._encode(words[i : i + 16]) for i in range(0, len(words), 16)]
    transformer = annotator.model._embedder.transformer
    n_start = len(annotator._start_ids)
    ns = (annotator.ner_namespace, annotator.relation_namespace)

    def forward():
        return [transformer(input_ids=e.ids.to(device), attention_mask=e.mask.to(device)).last_hidden_state for e in encoded]

    _, hidden = timed(device, forward)  # kept: the decoding timings start from the same output

    def stitch_old():
        return [reference.stitch(annotator, e.per_doc, e.owner, h) for e, h in zip(encoded, hidden)]

    def stitch_new():
        return [e.plan.stitch(h, e.owner, n_start) for e, h in zip(encoded, hidden)]

    vectors = stitch_new()

    def heads():
        return [[annotator.model.score(vec, *ns) for vec in batch] for batch in vectors]

    labels = heads()

    def read_old():
        out = []
        for batch_labels, batch in zip(labels, _batches(words)):
            for w, doc in zip(batch, batch_labels):
                entities, relations = reference.read_document(doc, annotator.model.settings.max_span_width)
                out.append(reference.to_json(w, entities, relations, annotator.ner_labels, annotator.relation_labels))
        return out

    def read_new():
        return [a for batch_labels, batch in zip(labels, _batches(words)) for a in annotator._read(fetch(batch_labels), batch)]

    def same(a, b) -> bool:
        if isinstance(a, list):
            return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        return torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b

    # device work and host waits: the same on any machine, and what a GPU's critical path pays per op
    counts = {}
    for name, fn in (("stitch old", stitch_old), ("stitch new", stitch_new), ("heads", heads), ("read old", read_old),
                     ("read new", read_new)):
        with torch.inference_mode(), OpCount() as count:
            out = fn()
        counts[name] = count
    docs, n_batches = len(words), len(encoded)
    relations = sum(len(r) for batch in labels for doc in batch
                    for r in [reference.read_document(doc, annotator.model.settings.max_span_width)[1]])
    # old: ner, spans, kept spans, relation pairs by tolist per document + an int() per relation; new: one copy per batch
    waits_old, waits_new = 4 * docs + counts["read old"].scalars, n_batches + counts["read new"].scalars
    report(f"  {docs} texts, {n_batches} batches, {relations} relations; torch ops (each >= 1 kernel launch on a GPU): "
           f"word vectors old {counts['stitch old'].ops}, new {counts['stitch new'].ops}; reading old "
           f"{counts['read old'].ops}, new {counts['read new'].ops}; heads {counts['heads'].ops}")
    report(f"  host waits for the device in the reading: old {waits_old} ({counts['read old'].scalars} of them int() per relation), "
           f"new {waits_new}; per 1,200 texts old {1200 * waits_old / docs:.0f}, new {1200 * waits_new / docs:.0f}")

    figures: dict[str, list[float]] = {}
    for r in range(rounds):
        seconds = {"forward": timed(device, forward)[0], "heads": timed(device, heads)[0]}
        flip = 1 if r % 2 == 0 else -1  # old first in odd rounds, new first in even ones
        for part, old, new in (("stitch", stitch_old, stitch_new), ("read", read_old, read_new)) + (
                (("pass", lambda: reference.annotate(annotator, texts), lambda: annotator.annotate(texts, progress=False)),)
                if passes else ()):
            outputs = {}
            for name, fn in [("old", old), ("new", new)][::flip]:
                seconds[f"{part} {name}"], outputs[name] = timed(device, fn)
            if not same(outputs["old"], outputs["new"]):
                raise SystemExit(f"{part}: the new path's output differs from the reference's")
        for key, value in seconds.items():
            figures.setdefault(key, []).append(value)
        report(f"  round {r + 1}: " + ", ".join(f"{k} {v:.2f} s" for k, v in seconds.items()))
    medians = {k: statistics.median(v) for k, v in figures.items()}
    old = medians["stitch old"] + medians["read old"]
    new = medians["stitch new"] + medians["read new"]
    report(f"  medians over {rounds} rounds, {len(words)} texts on {device}:")
    report(f"  decoding (word vectors from the encoder's output + labels to JSON, heads not included): "
           f"old {old:.3f} s, new {new:.3f} s, old/new = {old / new:.1f}; per 1,200 texts: old {1200 * old / len(words):.2f} s, "
           f"new {1200 * new / len(words):.2f} s")
    report(f"    word vectors: old {medians['stitch old']:.3f} s, new {medians['stitch new']:.3f} s; "
           f"labels to JSON: old {medians['read old']:.3f} s, new {medians['read new']:.3f} s")
    report(f"  span heads (per document): {medians['heads']:.2f} s")
    report(f"  forward passes (encoder): {medians['forward']:.2f} s")
    if passes:
        report(f"  RadGraph pass: old {medians['pass old']:.2f} s, new {medians['pass new']:.2f} s, "
               f"old/new = {medians['pass old'] / medians['pass new']:.2f}")
        report(f"  RadGraph pass / forward passes: old {medians['pass old'] / medians['forward']:.2f}, "
               f"new {medians['pass new'] / medians['forward']:.2f} (goal on CUDA <= 2)")
    return medians


def _batches(words: list[list[str]]):
    return [words[i : i + 16] for i in range(0, len(words), 16)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=600, help="texts = 2 x pairs (default 600: 1,200 texts)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-pass", action="store_true", help="skip the whole-pass timings")
    suite.add_machine_options(parser)
    args = parser.parse_args()
    suite.apply_machine_options(parser, args)
    texts = list(dict.fromkeys(synthetic_reports(args.pairs, seed=1) + synthetic_reports(args.pairs, seed=2)))
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["REXRANK_CACHE"] = str(Path(tmp) / "cache")
        archive = build_archive(Path(tmp))
        print(f"{len(texts)} texts, device {args.device}, {torch.get_num_threads()} torch threads, {args.clock} clock")
        measure(str(archive), texts, args.device, args.rounds, passes=not args.no_pass)


if __name__ == "__main__":
    main()
