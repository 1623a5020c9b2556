"""The model metrics in one scoring run, against one bare forward pass of each model.

"suite": `score_predictions` (what `rexrank score` and the backend run) with
bleu2,bertscore,sembscore,radgraph,radcliq,ratescore on distinct synthetic reports, with no
model loaded and an empty reference cache (a first submission on a new test set).
"bare": loading each model and one batched forward pass of it over the distinct texts of
the run (length-sorted batches of the metrics' batch sizes, tokenisation included), nothing
else — the floor any implementation pays:
- BERTScore: distilroberta-base's first 5 layers over the reports;
- SembScore: CheXbert (bert-base + 14 heads) over the reports;
- RadGraph: the DyGIE++ model (BERT-base encoder, then span NER and relation scoring) over
  the reports;
- RaTEScore: the RaTE-NER tagger (DeBERTa-v3-base) over the distinct sentences, BioLORD
  (MPNet) over the distinct entity strings the tagger finds.
Both sides load the models with the same loaders (reading weights, building modules).
Models have random weights and the real architectures (built as in model_metrics.py,
radgraph.py and ratescore.py); random heads tag more entities than real ones would.

Goals: suite/bare <= 1.15; radcliq beside its components adds <= 2 % to the run (its own
seconds in the run's results, over the run's seconds). Rounds alternate bare and suite in
one process; every round is printed, then the median round, and as the last line
`suite/bare = R` (the median round's ratio).

Like `rexrank` and the backend Space, the benchmark asks PyTorch for huge pages
(THP_MEM_ALLOC_ENABLE=1 unless set; `rexrank.models.huge_pages`, `huge_pages.py`): without
them, page faults on freed and re-allocated activation buffers swing a model's pass by
+-20 % with the heap's history, on both sides.

On a shared machine wall times swing with the other load; `--threads 1 --clock cpu` times
this process's CPU work instead, which other processes barely move.

Usage: python benchmarks/suite.py [--pairs 200] [--rounds 3] [--device cpu|cuda] [--threads N] [--clock wall|cpu]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from rexrank.models.huge_pages import prefer_huge_pages

prefer_huge_pages()  # as the `rexrank` command and the backend Space run: bare passes and the run alike
import torch  # noqa: E402

from model_metrics import bare_forward, build_chexbert, build_roberta
from radgraph import build_archive
from ratescore import build_models as build_ratescore_models
from synthetic_reports import synthetic_reports

METRICS = "bleu2,bertscore,sembscore,radgraph,radcliq,ratescore"
BASELINE = (0.84732, 0.84759504, 0.8473319)  # distilroberta-base layer 5 (bertscore.py)
BATCH = {"bertscore": 64, "sembscore": 32, "radgraph": 16, "ratescore": 32}  # the metrics' defaults
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCKS["wall"]


def build(root: Path, texts: list[str]) -> dict[str, str]:
    root.mkdir(parents=True, exist_ok=True)
    roberta = build_roberta(root, texts)
    chexbert, bert_tokenizer = build_chexbert(root, texts)
    ner, entity_encoder = build_ratescore_models(root, texts, layers=12)
    return {"roberta": str(roberta), "chexbert": str(chexbert), "bert_tokenizer": str(bert_tokenizer),
            "radgraph": str(build_archive(root)), "ner": ner, "entity_encoder": entity_encoder}


def metric_options(models: dict[str, str], cache_dir: Path, device: str) -> dict[str, dict]:
    common = {"cache_dir": str(cache_dir), "device": device}
    bertscore = {"model": models["roberta"], "num_layers": 5, "baseline": BASELINE, "batch_size": BATCH["bertscore"]}
    sembscore = {"checkpoint_path": models["chexbert"], "tokenizer": models["bert_tokenizer"], "batch_size": BATCH["sembscore"]}
    radgraph = {"model_path": models["radgraph"], "batch_size": BATCH["radgraph"]}
    return {
        "bertscore": {**common, **bertscore},
        "sembscore": {**common, **sembscore},
        "radgraph": {**common, **radgraph},
        "radcliq": {**common, "bertscore_options": bertscore, "sembscore_options": sembscore, "radgraph_options": radgraph},
        "ratescore": {**common, "ner_path": models["ner"], "embedding_path": models["entity_encoder"],
                      "batch_size": BATCH["ratescore"]},
    }


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run_suite(models, predictions, references, cache_dir: Path, device: str):
    """Seconds of the run, the run, and each metric's seconds in it on the benchmark's clock
    (the results' own `seconds` are wall time, not comparable with --clock cpu)."""
    from rexrank import scoring
    from rexrank.models import shared
    from rexrank.submissions import Predictions

    shared.clear()  # loads are part of the run
    own: dict[str, float] = {}
    original = scoring._score_metric

    def timed(name, *args, **kwargs):
        begun = clock()
        try:
            return original(name, *args, **kwargs)
        finally:
            synchronize(device)
            own[name] = clock() - begun

    ids = [f"S{i:05d}" for i in range(len(predictions))]
    scoring._score_metric = timed
    try:
        start = clock()
        run = scoring.score_predictions(Predictions(ids, list(predictions), "synthetic", 0), references, metrics=METRICS,
                                        metric_options=metric_options(models, cache_dir, device), progress=False)
        synchronize(device)
        return clock() - start, run, own
    finally:
        scoring._score_metric = original


def ratescore_inputs(models, texts: list[str], device: str) -> tuple[list[str], list[str]]:
    """The distinct sentences and entity strings of the run (found once, not timed)."""
    from rexrank.ratescore.models import EntityTagger
    from rexrank.ratescore.sentences import DEFAULT_SPLITTER, get_splitter

    split = get_splitter(DEFAULT_SPLITTER)  # the splitter the metric runs with
    sentences = list(dict.fromkeys(s for t in texts for s in split(t)))
    tagger = EntityTagger(Path(models["ner"]), device, BATCH["ratescore"])
    entities = list(dict.fromkeys(e for row in tagger(sentences, progress=False) for e, _ in row))
    return sentences, entities


def run_bare(models, texts: list[str], sentences: list[str], entities: list[str], device: str) -> dict[str, float]:
    """Seconds per model: load + one batched forward pass over its distinct inputs."""
    from rexrank.metrics.bertscore import BertScore
    from rexrank.models import shared
    from rexrank.models.chexbert import CheXbert
    from rexrank.models.token_embeddings import TokenEmbedder
    from rexrank.radgraph.annotator import RadGraphAnnotator
    from rexrank.radgraph.decode import read
    from rexrank.ratescore.models import EntityEncoder, EntityTagger

    shared.clear()
    seconds = {}

    def timed(name, fn):
        start = clock()
        with torch.inference_mode():
            fn()
        synchronize(device)
        seconds[name] = clock() - start

    def bertscore():
        embedder = TokenEmbedder(BertScore(model=models["roberta"], num_layers=5, baseline=BASELINE).checkpoint,
                                 num_layers=5, batch_size=BATCH["bertscore"], device=device)
        bare_forward(embedder.encoder.model, embedder.encoder.tokenizer, texts, BATCH["bertscore"], device=device)

    def sembscore():
        chexbert = CheXbert(models["chexbert"], tokenizer=models["bert_tokenizer"], batch_size=BATCH["sembscore"], device=device)
        bare_forward(chexbert.model, chexbert.tokenizer, texts, BATCH["sembscore"], device=device)

    def radgraph():
        annotator = RadGraphAnnotator(model_path=models["radgraph"], batch_size=BATCH["radgraph"], device=device)
        words = sorted((w for w in map(annotator.words, texts) if w), key=len)
        for start in range(0, len(words), BATCH["radgraph"]):  # encoder, heads, labels read (no JSON)
            read(annotator._labels(annotator._encode(words[start : start + BATCH["radgraph"]])), annotator.model.span_table)

    def ratescore():
        tagger = EntityTagger(Path(models["ner"]), device, BATCH["ratescore"])
        encoder = EntityEncoder(Path(models["entity_encoder"]), device, BATCH["ratescore"])
        for model, tokenizer, inputs, length in ((tagger.model, tagger.tokenizer, sentences, 512),
                                                 (encoder.model, encoder.tokenizer, entities, 30)):
            ordered = sorted(inputs, key=len)
            for start in range(0, len(ordered), BATCH["ratescore"]):
                batch = tokenizer(ordered[start : start + BATCH["ratescore"]], padding=True, truncation=True,
                                  max_length=length, return_tensors="pt").to(device)
                model(**batch)

    for name, fn in (("bertscore", bertscore), ("sembscore", sembscore), ("radgraph", radgraph), ("ratescore", ratescore)):
        timed(name, fn)
    return seconds


def add_machine_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall (default) or cpu: this process's CPU time, steadier on a shared machine with --threads 1")


def apply_machine_options(parser: argparse.ArgumentParser, args) -> None:
    """The clock, the device (an unavailable one fails here, before minutes of model
    building) and torch's threads, as `add_machine_options` read them."""
    global clock
    if args.clock == "cpu" and args.device != "cpu":
        parser.error("--clock cpu measures CPU work only; use the wall clock with a GPU")
    clock = CLOCKS[args.clock]
    from rexrank.models.checkpoints import pick_device

    pick_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    add_machine_options(parser)
    args = parser.parse_args()
    apply_machine_options(parser, args)
    torch.manual_seed(0)
    references = synthetic_reports(args.pairs, seed=1)
    predictions = synthetic_reports(args.pairs, seed=2)
    texts = list(dict.fromkeys(predictions + references))
    assert len(texts) == 2 * args.pairs, "the benchmark wants distinct texts"

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["REXRANK_CACHE"] = str(root / "rexrank-cache")  # the RadGraph archive is extracted here
        started = time.perf_counter()
        models = build(root / "models", texts)
        sentences, entities = ratescore_inputs(models, texts, args.device)
        print(f"{args.pairs} pairs, {len(texts)} distinct reports, {len(sentences)} distinct sentences, "
              f"{len(entities)} distinct entity strings; device {args.device}, {torch.get_num_threads()} torch threads, "
              f"{args.clock} clock; "
              f"models built in {time.perf_counter() - started:.0f} s")
        run_bare(models, texts[:8], sentences[:8], entities[:8], args.device)  # warm-up: file cache, extraction

        rounds = []
        for r in range(args.rounds):
            bare = run_bare(models, texts, sentences, entities, args.device)
            suite_s, run, own = run_suite(models, predictions, references, root / f"cache{r}", args.device)
            per_metric = {name: m["seconds"] for name, m in run.results["metrics"].items()}
            rounds.append((suite_s / sum(bare.values()), suite_s, bare, per_metric))
            print(f"round {r + 1}: suite {suite_s:7.1f} s, bare {sum(bare.values()):7.1f} s "
                  f"({', '.join(f'{k} {v:.1f}' for k, v in bare.items())}), suite/bare = {suite_s / sum(bare.values()):.3f}; "
                  f"radcliq {per_metric['radcliq']:.2f} s = {100 * per_metric['radcliq'] / suite_s:.2f} % of the run")
            print(f"  in the run ({args.clock} clock): {', '.join(f'{k} {v:.1f}' for k, v in own.items())}; "
                  f"ratescore in run / bare = {own['ratescore'] / bare['ratescore']:.3f} (goal <= 1.10)")
        ratio, suite_s, bare, per_metric = sorted(rounds, key=lambda x: x[0])[len(rounds) // 2]
        print("median round, per metric in the run (wall s, from the results): " + ", ".join(f"{k} {v:.2f}" for k, v in per_metric.items()))
        print(f"radcliq beside its components: {100 * per_metric['radcliq'] / suite_s:.2f} % of the run (goal <= 2 %)")
        spread = [x[0] for x in rounds]
        print(f"rounds' suite/bare: {', '.join(f'{x:.3f}' for x in spread)} (median {statistics.median(spread):.3f}; goal <= 1.15)")
        print(f"suite/bare = {ratio:.3f}")


if __name__ == "__main__":
    main()
