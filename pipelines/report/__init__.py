"""Rendering analysed results (pipelines.analysis, pipelines.inspection) and nothing else: markdown, CSV/JSON, figures.

files.py        atomic CSV and PNG writers
markdown.py     markdown tables and cells
figures.py      the per-domain figures and the shared plotting pieces (colours, binned curves)
domain.py       a domain's report: results/<domain>/summary.{md,csv} and its figures
study.py        the study: results/summary.{md,csv,json}, its figures, the per-domain reports
study_markdown.py  the sections of the study's summary.md
study_figures.py   figure3.png, the NLL-by-position panels, the critical-difference diagrams, recency.png
html.py         the study's page, index.html: one self-contained file from the summary.json object (templates/)
inspection.py   a run's inspection: RUN/inspect/<split>.json and its figures
inspection_figures.py  attention by distance and the encodings' views
"""
