"""The `inputs_description` of each `evaluate` module, as evaluate's own modules write it:
the inputs, every option `compute` accepts, what it returns, and a runnable example.

The option list and the defaults are read from the metric class (`metric_options`), so a
new or changed option shows up here by itself; only the one-line help is written by hand
(tests/metrics/test_evaluate_modules.py fails on an option without help).
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any

UNDOCUMENTED = "(undocumented)"

# constructor parameters that are plumbing, not options a user passes to `compute`
INTERNAL = {"run_context"}  # set by a scoring run (rexrank.metrics.run_context)

INPUTS = """Args:
    predictions (list of str): generated reports.
    references (list of str): reference reports, same length and order as `predictions`.
"""

# options several metrics share
SHARED = {
    "batch_size": "texts per forward pass.",
    "device": "'cuda', 'cpu', ...; None = CUDA when available (runs fp32).",
    "cache": "cache the reference side (embeddings, labels, annotations) on disk.",
    "cache_dir": "where that cache lives; None = ~/.cache/rexrank (or $REXRANK_CACHE).",
    "progress": "show progress bars on long runs.",
}

# rexrank.llm.LLMSettings: shared by the LLM-judged metrics; arguments win over REXRANK_LLM_* variables
LLM = {
    "backend": "'openai' (any OpenAI-compatible server) or 'transformers' (local weights); None = $REXRANK_LLM_BACKEND, else 'openai' when base_url is set, else the metric's default.",
    "model": "model name on the server, or hub id / local path for transformers; None = $REXRANK_LLM_MODEL or the metric's default.",
    "base_url": "OpenAI-compatible endpoint, e.g. 'http://localhost:8000/v1' (vLLM); None = $REXRANK_LLM_BASE_URL / $OPENAI_BASE_URL.",
    "api_key": "endpoint key; None = $REXRANK_LLM_API_KEY / $OPENAI_API_KEY. Never written to outputs.",
    "revision": "hub revision (transformers) or a label for the served weights (openai), recorded in `config`.",
    "model_path": "local weights folder (transformers); wins over the hub.",
    "max_concurrency": "parallel requests to the endpoint.",
    "timeout": "seconds per HTTP request.",
    "max_retries": "retries on 429 / 5xx / timeouts / connection errors.",
    "backoff": "first retry delay in seconds, doubled each time (Retry-After wins).",
    "max_backoff": "longest retry delay in seconds.",
    "seed": "sampling seed sent to the server (decoding is greedy / temperature 0).",
    "cache": "cache answers on disk by request content (a re-run costs nothing).",
    "cache_dir": "where that cache lives; None = ~/.cache/rexrank (or $REXRANK_CACHE).",
    "price_input_per_mtok": "USD per million prompt tokens, for the cost report in details['llm_usage'].",
    "price_output_per_mtok": "USD per million completion tokens, same.",
    "device": "transformers backend: 'cuda', 'cpu', ...",
    "dtype": "transformers backend: 'float16', 'bfloat16' or 'float32' (default fp16 on GPU, fp32 on CPU).",
    "batch_size": "transformers backend: prompts per generate call.",
    "replicas": "transformers backend: replicas (worker processes sharing the weights) generating batches at once, each batch whole on one replica (the same ids as one after another); None = as many as the free GPU memory holds, 1 on the CPU.",
    "progress": "show a progress bar over the requests.",
}

OPTIONS: dict[str, dict[str, str]] = {
    "bleu2": {},
    "rouge": {
        "use_stemmer": "Porter-stem words longer than 3 characters before matching (RadEval: on; rouge_score's own default: off).",
    },
    "temporal_f1": {
        "ner": "'stanza' (official: keywords plus Stanza's radiology NER; needs stanza and its model) or 'keywords' (keyword search only, no model).",
        "stanza_dir": "Stanza resources folder holding the radiology model; None = $STANZA_RESOURCES_DIR or ~/stanza_resources.",
    },
    "srr_bert": {
        "model": "SRR-BERT hub id (default: StanfordAIMI/SRR-BERT-Leaves-with-Statuses, as RadEval).",
        "revision": "its hub revision (RadEval loads main; not pinned).",
        "model_path": "local folder with the classifier's config and weights; wins over the hub.",
        "tokenizer_path": "local folder with the CXR-BERT-general tokenizer; None = microsoft/BiomedVLP-CXR-BERT-general at its pinned commit.",
        "batching": "'radeval' (official: every sentence, reference then prediction, batches of 4) or 'distinct' (faster: each distinct sentence once, batches of 32, references' labels cached; near-threshold labels may differ).",
    },
    "bertscore": {
        "model": "hub id or local folder of the encoder (default: distilroberta-base at its pinned commit).",
        "revision": "hub revision of `model`; None = the pinned commit for the default model, else 'main'.",
        "num_layers": "hidden layer to use; None = 5 (known only for the default model).",
        "idf": "idf-weight tokens (CXR-Report-Metric: off).",
        "rescale_with_baseline": "rescale P/R/F with the published baseline (as ReXrank).",
        "baseline": "(P, R, F) baseline for another model or layer.",
    },
    "sembscore": {
        "checkpoint_path": "local chexbert.pth; None = StanfordAIMI/RRG_scorers/chexbert.pth at the pinned commit (SHA-256 checked).",
        "revision": "hub revision for the checkpoint; None = the pinned commit.",
        "tokenizer": "tokenizer hub id or folder; None = bert-base-uncased at its pinned commit.",
        "num_attention_heads": "override for a non-standard checkpoint; None = read from the checkpoint.",
        "labels": "also compute CheXbert labels and CheXbert F1 (in `details`).",
    },
    "radgraph": {
        "model_type": "'radgraph' (RadGraph v1, behind ReXrank and RadCliQ) or 'radgraph-xl'.",
        "model_path": "local <model_type>.tar.gz or its extracted folder; None = StanfordAIMI/RRG_scorers.",
        "revision": "hub revision of StanfordAIMI/RRG_scorers (pinned; the archive's SHA-256 is checked).",
        "transformer_path": "local folder with the encoder's config and tokenizer (for offline use).",
        "transformer_revision": "hub revision of that encoder; None = its pinned commit.",
    },
    "radcliq": {
        "bertscore_options": "dict of bertscore options for the BERTScore component (e.g. {'idf': True} = RadEval's setting).",
        "sembscore_options": "dict of sembscore options for the SembScore component.",
        "radgraph_options": "dict of radgraph options for the RadGraph-F1 component.",
    },
    "ratescore": {
        "ner_model": "RaTE-NER hub id.",
        "ner_revision": "its hub revision (pinned).",
        "ner_path": "local NER folder; wins over the hub.",
        "embedding_model": "entity encoder hub id (BioLORD-2023-C).",
        "embedding_revision": "its hub revision (pinned).",
        "embedding_path": "local encoder folder; wins over the hub.",
        "affinity_matrix": "'long' (official default, whole reports), 'short' (sentence inputs) or a JSON file of weights.",
        "sentence_splitter": "'pyrush' (default: the official pipeline's sentences, no extra dependency), 'regex' (rexrank's earlier splitter) or 'medspacy' (the official pipeline itself; needs medspaCy).",
    },
    "green": {
        "max_length": "prompt + completion tokens (official: 2048).",
        "max_words": "words kept of each report in the prompt (official cap).",
        "max_new_tokens": "extra cap on the completion; None = the official total length only.",
        "tokenizer_path": "local GREEN tokenizer folder for an endpoint run (official ids and length cap); None = the checkpoint's tokenizer from the hub cache or the Hub.",
        "endpoint_prompt": "'ids' (the official token ids sent as the prompt; text, logged and recorded, where GREEN's tokenizer cannot be loaded) or 'text' (for servers that take no ids; the server tokenises).",
        "unparseable": "'zero' (official: a completion without [Matched Findings] scores 0, counted, and is listed as n_unparseable / unparseable_positions in details) or 'fail' (strict: NaN and listed in failures).",
        "batching": "'official' (batches of 8 in input order; completion budget = max_length minus the longest prompt of the batch) or 'by_length' (faster: prompts sorted by length; may differ on long reports).",
        "keep_completions": "return the raw completions in details.",
        "dtype": "'float16' (official, on every device, CPU included), 'bfloat16' or 'float32'.",
    },
    "crimson": {
        "guidelines": "None (official: the prompt's guideline sections for any judge but the fine-tuned one, which was trained without them), True or False to force them.",
        "patient_context": "one dict (e.g. {'Age': 71, 'Indication': 'dyspnea'}) or None per study: the official prompt's Patient Context block; default none. `rexrank score`/the backend: 'test_set' takes age and indication from the test set.",
        "max_new_tokens": "completion token cap (official: 8192).",
        "keep_completions": "return the raw answers in details.",
        "dtype": "transformers weights' precision (official: bfloat16 on every device).",
        "batch_size": "studies per generate call, transformers (official: 1).",
        "seed": "sent to an endpoint serving another model than the fine-tuned judge (official OpenAI path: 42).",
    },
    "fineradscore": {
        "no_actionable_max": "highest severity still counted as 'no actionable error' (0-4).",
        "no_significant_max": "highest severity still counted as 'no significant error' (0-4).",
        "max_reasks": "re-asks after an answer that is not valid JSON or fails the schema.",
        "max_tokens": "completion token cap per answer.",
        "json_mode": "ask the server for a JSON object (response_format).",
        "strata": "one label per study (e.g. normal/abnormal); error rates per stratum go to details.",
    },
    "spec_cxr": {
        "entity_set": "YAML/JSON entity set file; None = rexrank's default set.",
        "structured_output": "'json_schema', 'json_object' or 'none' (for servers without JSON-schema support).",
        "max_reasks": "re-asks after an invalid answer.",
        "max_tokens": "completion token cap per answer.",
    },
}

RETURNS = {
    "bleu2": "bleu2 (corpus mean of the per-study BLEU-2) and per_study (one score per pair, input order).",
    "rouge": "rouge (mean ROUGE-L F1), rouge1, rouge2, rougeL (means of the per-study F1), per_study (ROUGE-L), per_study_columns (rouge1, rouge2, rougeL), config.",
    "temporal_f1": "temporal_f1 (mean per-study temporal-entity F1), per_study, config.",
    "srr_bert": "srr_bert (RadEval's corpus value: weighted F1 over the 163 labels), srr_bert_precision, srr_bert_recall (weighted), srr_bert_mean_f1 (mean of the per-study F1), per_study (F1), per_study_columns (precision, recall), config.",
    "bertscore": "bertscore (mean rescaled F1), bertscore_precision, bertscore_recall, per_study, per_study_columns, config.",
    "sembscore": "sembscore (mean cosine), per_study, details (CheXbert labels and F1 when labels=True), config.",
    "radgraph": "radgraph (mean radgraph_combined), per_study, the entity/relation F1 and reward levels under per_study_columns, config.",
    "radcliq": "radcliq (mean RadCliQ-v1, lower is better), radcliq_v1_inv (ReXrank's 1/RadCliQ-v1), radcliq_v0, the four components under per_study_columns, config.",
    "ratescore": "ratescore (mean), per_study, details, config.",
    "green": "green (mean), green_std, green_zero_error_rate_a..f, per_study, per_study_columns (matched findings, error counts), details (failures, llm_usage), config.",
    "crimson": "crimson (mean, in (-1, 1]), crimson_std, per_study, per_study_columns (false/missing/attribute error counts and weighted sums, attribute error types), details (failures, unparseable answers, llm_usage), config.",
    "fineradscore": "fineradscore (mean of the per-report maximum severity, lower is better), fineradscore_inv (ReXrank's 1/FineRadScore), no_error_rate, no_actionable_error_rate, no_significant_error_rate, per_study, details, config.",
    "spec_cxr": "spec_cxr (mean report-level error count, lower is better), presence F1 and attribute accuracies, per_study, details, config.",
}

# Examples run with doctest in the tests: bleu2's fully; the others up to loading the
# module (their `compute` needs the checkpoints or an LLM endpoint, hence +SKIP).
_LOAD = '''    >>> import evaluate
    >>> {var} = evaluate.load("rexrank/{name}")
'''
EXAMPLES = {
    "bleu2": _LOAD.format(var="bleu2", name="bleu2") + '''    >>> out = bleu2.compute(predictions=["No pneumothorax.", "Heart size is normal."],
    ...                     references=["No pneumothorax or effusion.", "The heart is normal in size."])
    >>> round(out["bleu2"], 4), [round(s, 4) for s in out["per_study"]]
    (0.3491, [0.363, 0.3352])
''',
    "rouge": _LOAD.format(var="rouge", name="rouge") + '''    >>> out = rouge.compute(predictions=["No pneumothorax.", "Heart size is normal."],
    ...                     references=["No pneumothorax or effusion.", "The heart is normal in size."])
    >>> round(out["rouge1"], 4), round(out["rouge2"], 4), [round(s, 4) for s in out["per_study"]]
    (0.7333, 0.375, [0.6667, 0.6])
''',
    "temporal_f1": _LOAD.format(var="temporal", name="temporal_f1") + '''    >>> out = temporal.compute(predictions=["Stable cardiomegaly. New effusion."],
    ...                        references=["Unchanged cardiomegaly, new small effusion."], ner="keywords")
    >>> round(out["temporal_f1"], 4)
    0.5
''',
    "srr_bert": _LOAD.format(var="srr", name="srr_bert") + '''    >>> out = srr.compute(predictions=["Small left pleural effusion."], references=["No pleural effusion."])  # doctest: +SKIP
    >>> out["srr_bert"], out["per_study"]  # doctest: +SKIP
''',
    "bertscore": _LOAD.format(var="bertscore", name="bertscore") + '''    >>> out = bertscore.compute(predictions=["No pneumothorax."], references=["No pneumothorax or effusion."])  # doctest: +SKIP
    >>> out["bertscore"], out["per_study_columns"]["bertscore_precision"]  # doctest: +SKIP
''',
    "sembscore": _LOAD.format(var="semb", name="sembscore") + '''    >>> out = semb.compute(predictions=["No pneumothorax."], references=["Small left pneumothorax."], labels=False)  # doctest: +SKIP
    >>> out["sembscore"], out["per_study"]  # doctest: +SKIP
''',
    "radgraph": _LOAD.format(var="radgraph", name="radgraph") + '''    >>> out = radgraph.compute(predictions=["No pleural effusion."], references=["Small left pleural effusion."])  # doctest: +SKIP
    >>> out["radgraph"], out["per_study_columns"]["radgraph_simple"]  # doctest: +SKIP
''',
    "radcliq": _LOAD.format(var="radcliq", name="radcliq") + '''    >>> out = radcliq.compute(predictions=["No pneumothorax."], references=["Small left pneumothorax."],
    ...                       bertscore_options={"batch_size": 16})  # doctest: +SKIP
    >>> out["radcliq_v1_inv"], out["radcliq_v0"]  # doctest: +SKIP
''',
    "ratescore": _LOAD.format(var="rate", name="ratescore") + '''    >>> out = rate.compute(predictions=["No pleural effusion."], references=["Small left pleural effusion."])  # doctest: +SKIP
    >>> out["ratescore"], out["per_study"]  # doctest: +SKIP
''',
    "green": _LOAD.format(var="green", name="green") + '''    >>> out = green.compute(predictions=["No pneumothorax."], references=["Small left pneumothorax."],
    ...                     base_url="http://localhost:8000/v1", model="StanfordAIMI/GREEN-radllama2-7b")  # doctest: +SKIP
    >>> out["green"], out["details"]["llm_usage"]  # doctest: +SKIP
''',
    "crimson": _LOAD.format(var="crimson", name="crimson") + '''    >>> out = crimson.compute(predictions=["No pneumothorax."], references=["Small left pneumothorax."],
    ...                       base_url="http://localhost:8000/v1", model="rajpurkarlab/medgemma-4b-it-crimson")  # doctest: +SKIP
    >>> out["crimson"], out["details"]["llm_usage"]  # doctest: +SKIP
''',
    "fineradscore": _LOAD.format(var="frs", name="fineradscore") + '''    >>> out = frs.compute(predictions=["No pneumothorax."], references=["Small left pneumothorax."],
    ...                   model="gpt-4o-2024-08-06")  # doctest: +SKIP
    >>> out["fineradscore_inv"], out["no_significant_error_rate"]  # doctest: +SKIP
''',
    "spec_cxr": _LOAD.format(var="spec", name="spec_cxr") + '''    >>> out = spec.compute(predictions=["No pneumothorax."], references=["Small left pneumothorax."],
    ...                    base_url="http://localhost:8000/v1", model="Qwen/Qwen2.5-72B-Instruct")  # doctest: +SKIP
    >>> out["spec_cxr"], out["per_study"]  # doctest: +SKIP
''',
}


def metric_options(cls) -> list[inspect.Parameter]:
    """The keyword options a metric class accepts: its own `__init__` parameters and, while
    an `__init__` passes **kwargs on, its bases' (LLM metrics end in LLMSettings' fields)."""
    from rexrank.llm import LLMSettings

    seen: dict[str, inspect.Parameter] = {}
    for klass in cls.__mro__:
        if "__init__" not in vars(klass) or klass is object:
            continue
        params = list(inspect.signature(vars(klass)["__init__"]).parameters.values())[1:]
        for p in params:
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name not in INTERNAL:
                seen.setdefault(p.name, p)
        if not any(p.kind == p.VAR_KEYWORD for p in params):
            return list(seen.values())
        if klass.__name__ == "LLMMetric":  # its **llm_options are LLMSettings(**llm_options)
            for f in dataclasses.fields(LLMSettings):
                default = f.default if f.default is not dataclasses.MISSING else None
                seen.setdefault(f.name, inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default))
            return list(seen.values())
    return list(seen.values())


def option_help(name: str, option: str, llm: bool) -> str:
    own = OPTIONS.get(name, {})
    if option in own:
        return own[option]
    if llm and option in LLM:
        return LLM[option]
    return SHARED.get(option, UNDOCUMENTED)


def _default(value: Any) -> str:
    return "required" if value is inspect.Parameter.empty else f"default {value!r}"


def inputs_description(name: str) -> str:
    from rexrank.metrics.registry import metric_class

    cls = metric_class(name)
    llm = any(k.__name__ == "LLMMetric" for k in cls.__mro__)
    lines = [INPUTS]
    options = metric_options(cls)
    if options:
        lines.append("Options (keyword arguments of `compute`):")
        lines += [f"    {p.name} ({_default(p.default)}): {option_help(name, p.name, llm)}" for p in options]
        lines.append("")
    else:
        lines += ["Options: none (the official computation has no settings).", ""]
    lines += ["Returns:", f"    {RETURNS[name]}", "", "Examples:", "", EXAMPLES[name]]
    return "\n".join(lines)
