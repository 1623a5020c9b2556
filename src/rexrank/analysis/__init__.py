"""Analyses the ReXrank papers report (strata, sites, metric correlations, error rates) and
what they could not (paired significance, rank uncertainty, human alignment).

Modules, one job each:
    io            read per-study score tables of several systems, join them on study id
    uncertainty   normal / bootstrap CIs, paired tests, rank intervals, Holm
    strata        tables per study-level attribute (normal vs abnormal, site, ...)
    sites         per-site ranking table (Challenge paper Figure 2)
    error_rates   FineRadScore error-free rates per stratum (Challenge paper Figure 1)
    correlation   metric-vs-metric correlation across systems (Challenge paper Figure 3)
    alignment     metric-vs-radiologist Kendall tau-b on ReXVal
    figures       every figure as a function returning a matplotlib Figure (Agg, no pyplot)
    report        tables (CSV + markdown), figures (PNG + SVG), one self-contained HTML
    pipeline      `analyze(...)`: everything above for `rexrank analyze`

Nothing here imports torch; matplotlib and scipy come with the `analysis` extra.
"""
