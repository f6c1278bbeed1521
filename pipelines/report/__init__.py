"""Rendering analysed results (pipelines.analysis, pipelines.inspection) and nothing else: markdown, CSV/JSON, figures.

files.py        atomic CSV and PNG writers
markdown.py     markdown tables and cells
figures.py      the per-domain figures and the shared plotting pieces (colours, binned curves)
domain.py       a domain's report: results/<domain>/summary.{md,csv} and its figures
study.py        the study: results/summary.{md,csv,json}, its figures, the per-domain reports
study_markdown.py  the sections of the study's summary.md
study_figures.py   figure3.png, the NLL-by-position panels, the critical-difference diagrams, recency.png
html.py         the study's page, index.html: one self-contained file from the summary.json object (templates/)
page_tables.py  the page's tables: its cells, the leaderboard, the mean rank, make settle's looks
page_charts.py  the page's charts: Vega-Lite specs built with altair
page_runs.py    the page's one-run view: each run's manifest, training curves and per-example NLL
inspection.py   a run's inspection: RUN/inspect/<split>.json and its figures
inspection_figures.py  attention by distance and the encodings' views
"""
