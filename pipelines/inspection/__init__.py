"""Looking inside a trained run, as plain data (no printing, no files: pipelines.report.inspection renders it).

run.py        one run: its model and data from the run folder, the windows inspected, the Inspection found
attention.py  attention weights, computed as the model attends, summed by query-key distance
recency.py    the recency profile those sums make, the far-mass measure and their JSON form (no torch)
views.py      what each encoding learned: coordinates, gates, contextual positions, bias curves, frequencies
content.py    what lies under a window: bars, sleep stages, the genome locus, a task's text
"""
