"""The ReXrank leaderboard: published seed results, table building, the Gradio app.

Modules: `published` (published CSV tables -> result records, the shipped seed),
`records` (record validation and the flat frame every view is built from), `tables`
(ranking, highlighting, CI display, search, overview), `model_page`, `about`,
`tiers` (statistical tiers from paired tests between neighbours), `view_state` (the view in
the page's address), `progress` (best score by date), `submit` (validating and filing a
request), `downloads` (CSV files for the download buttons), `page_style` (the grids' CSS,
column widths and header-click script), `app` (the Gradio Blocks, kept thin).
"""
