"""The ReXrank leaderboard: published seed results, table building, the Gradio app.

Modules: `published` (published CSV tables -> result records, the shipped seed),
`records` (record validation and the flat frame every view is built from), `tables`
(ranking, highlighting, CI display, search, overview), `model_page`, `about`,
`submit` (validating and filing a request), `app` (the Gradio Blocks, kept thin).
"""
