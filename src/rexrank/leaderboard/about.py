"""The about tab: what each leaderboard column measures, and whom to cite.

Definitions are our own summaries of how the official code computes each score (see the
metric cards in `metrics/<name>/README.md` for details).
"""
from __future__ import annotations

from rexrank.results_schema import LEADERBOARD_COLUMNS

DEFINITIONS = {
    "bleu2": (
        "Bigram overlap between the generated and the reference report: sentence-level BLEU with "
        "weights (½, ½), averaged over studies (CXR-Report-Metric's `bleu_score`).",
        "Papineni et al., BLEU: a method for automatic evaluation of machine translation, ACL 2002.",
    ),
    "bertscore": (
        "Token-embedding similarity F1 from `distilroberta-base` (layer 5), rescaled with the "
        "published baseline, averaged over studies.",
        "Zhang et al., BERTScore: Evaluating Text Generation with BERT, ICLR 2020.",
    ),
    "sembscore": (
        "Cosine similarity of the CheXbert [CLS] embeddings of the two reports, averaged over studies.",
        "Smit et al., CheXbert, EMNLP 2020; Yu et al., Evaluating progress in automatic chest X-ray "
        "radiology report generation, Patterns 2023.",
    ),
    "radgraph": (
        "Overlap of clinical entities and relations extracted by the RadGraph model "
        "(`radgraph_combined`: mean of entity and relation F1), averaged over studies.",
        "Jain et al., RadGraph, NeurIPS Datasets and Benchmarks 2021; Yu et al., Patterns 2023.",
    ),
    "radcliq_v1_inv": (
        "RadCliQ-v1 is a linear combination of standardised BLEU-2, BERTScore, SembScore and RadGraph "
        "fitted to radiologists' error counts (lower = fewer errors). ReXrank shows 1 / mean RadCliQ-v1, "
        "so that higher is better; it is the default ranking.",
        "Yu et al., Evaluating progress in automatic chest X-ray radiology report generation, Patterns 2023.",
    ),
    "ratescore": (
        "Entity-level score: medical entities are extracted from both reports, embedded and matched, "
        "with weights by entity type; averaged over studies.",
        "Zhao et al., RaTEScore: A Metric for Radiology Report Generation, EMNLP 2024.",
    ),
    "green": (
        "An LLM fine-tuned to list clinically significant errors and matched findings; score = matched "
        "findings / (matched findings + significant errors), averaged over studies.",
        "Ostmeier et al., GREEN: Generative Radiology Report Evaluation and Error Notation, Findings of EMNLP 2024.",
    ),
    "fineradscore_inv": (
        "An LLM grades each line of the generated report for clinical severity of its error (0–4); "
        "ReXrank uses the worst line per report and shows 1 / mean, so that higher is better. "
        "The ReXrank Challenge ranks by it.",
        "Huang et al., FineRadScore: A Radiology Report Line-by-Line Evaluation Technique Generating "
        "Corresponding Severity Scores, MLHC 2024 (PMLR 252).",
    ),
    "rouge": (
        "ROUGE-L: F1 of the longest common word subsequence of the two reports after Porter stemming "
        "(rouge_score, as RadEval computes it), averaged over studies. Optional column: not a ReXrank metric.",
        "Lin, ROUGE: A package for automatic evaluation of summaries, 2004; Xu et al., RadEval, EMNLP 2025 demos.",
    ),
    "temporal_f1": (
        "F1 of the temporal words (new, increased, unchanged, resolved, ...) the two reports use, as "
        "RadEval computes it, averaged over studies. Optional column: not a ReXrank metric.",
        "Zhang et al., Libra: Leveraging temporal images for biomedical radiology analysis, 2024; Xu et al., RadEval.",
    ),
    "srr_bert": (
        "SRR-BERT: a BERT classifier labels each sentence with findings and their status; per study, the F1 of "
        "the generated report's labels against the reference's, averaged over studies. Optional column.",
        "Delbrouck et al., Automated structured radiology report generation, ACL 2025; Xu et al., RadEval.",
    ),
    "crimson": (
        "Optional column, not a published ReXrank metric. An LLM judge lists the abnormal findings of both reports "
        "with their clinical significance and names false, missing and mis-described findings; significance-weighted "
        "score in (-1, 1] (1 = perfect, 0 = no better than a normal template), averaged over studies.",
        "Baharoon et al., CRIMSON: A Clinically-Grounded LLM-Based Metric for Generative Radiology Report "
        "Evaluation, arXiv:2603.06183, 2026.",
    ),
}

REXRANK_CITATION = (
    "Zhang et al., ReXrank: A Public Leaderboard for AI-Powered Radiology Report Generation, "
    "arXiv:2411.15122, 2024."
)


def about_markdown() -> str:
    lines = [
        "## About ReXrank",
        "",
        "ReXrank ranks chest X-ray report generation models on four test sets (ReXGradient, private; "
        "MIMIC-CXR; IU-Xray; CheXpert Plus) in two tracks: **Findings** (generated findings against "
        "the reference findings section) and **Findings + Impression** (against "
        "`Findings: {findings} Impression: {impression}`, built as ReXrank's evaluation script builds it; "
        "a missing section reads `None`).",
        "",
        "Values are means over the test set's studies; **bold** marks the best value of each column "
        "in a table; `± x` is the 95 % confidence interval half-width (1.96 × standard error) where the "
        "results have per-study data. Published results (from the ReXrank site) have no CI. "
        "\\* marks a model that used the test set's training split.",
        "",
        "**n** is the number of studies a result was scored on (the ranking metric's; published results do "
        "not report it). **Tier** says which models are statistically tied: walking down the ranking, each "
        "model with per-study scores is compared with the next model above it that has them, by a paired "
        "t-test on the ranking metric's per-study scores over the studies both scored (two-sided); the p-values "
        "of all these neighbour tests in a table are Holm-corrected together, and a model starts a new tier "
        "when its corrected p is below 0.05, else it shares the tier of the one above. Tiers are computed once "
        "per new result, for the rows the filters keep. Tiers number the rows with per-study scores among "
        "themselves; published rows have none, so their Tier cell is empty, and a table with fewer than two "
        "such rows has no Tier column. The ranking metric's column stands next to the model; a row without "
        "its value is unranked and says why (not published, or not scored). Search, filters and column "
        "choice are under \"Search, filters and columns\".",
        "",
        "Published rows are the ReXrank site's own figures (rajpurkarlab/ReXrank, gh-pages `results/`), shown "
        "as published: scoring a model's public predictions with rexrank can give slightly different values "
        "(for example MoERad-IU's IU-Xray findings BLEU: 0.277 published, 0.270 from its public predictions "
        "file), so compare a submitted result with published ones with that in mind.",
        "",
        "**Filters and columns:** hide models trained on the test set (\\*) or a source (published: the site's "
        "figures; submitted: scored here), and choose the metric columns (columns added since the ReXrank site's "
        "eight are hidden until chosen). Filtered rows are left out of the ranking and the tiers. The page's "
        "address keeps the view (tab, track, ranking metric, search, filters, columns, model): copy it to share "
        "it. The Plots tab shows the field's progress: each result by its date and the best score so far.",
        "",
        "Click a metric's header to rank by it. **Download CSV** above each table gives that table as shown "
        "(same rows and order), with full-precision means and CI half-widths in their own columns. Each "
        "model has a page that a link can open: add `?model=NAME` to this page's address (the Model tab "
        "shows the link).",
        "",
        "| Column | What it measures | Cite |",
        "|---|---|---|",
    ]
    for col in LEADERBOARD_COLUMNS:
        definition, cite = DEFINITIONS[col.key]
        lines.append(f"| **{col.display}** ({'higher' if col.higher_is_better else 'lower'} is better) | {definition} | {cite} |")
    lines += [
        "",
        f"**Cite ReXrank:** {REXRANK_CITATION}",
        "",
        "Published numbers: rajpurkarlab/ReXrank, branch gh-pages, `results/` (MIT licence).",
    ]
    return "\n".join(lines)
