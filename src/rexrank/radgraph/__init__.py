"""RadGraph (DyGIE++) inference and RadGraph-F1 scoring, re-implemented on torch + transformers.

- preprocess: report -> words per model type (radgraph 0.1.18 rules)
- tarball: the StanfordAIMI/RRG_scorers archive (config.json, vocabulary/, weights.th)
- model: the DyGIE++ network with the official parameter names
- annotator: texts -> RadGraph annotations (radgraph's JSON format)
- f1: radgraph_combined (CXR-Report-Metric) and F1RadGraph rewards (radgraph 0.1.18)
"""
