"""What the runs say, as plain data: no printing, no files written (pipelines.report renders it).

evidence.py   which runs a comparison may use: finished, missing or failed, and comparable (SPEC 3)
stats.py      the statistics: seed averages, intervals, paired t-tests with Holm, ranks, Friedman and Nemenyi
curves.py     NLL by position, seeds pooled, on the splits longer than the training context
domain.py     one domain's result (DomainResult) from its runs: per-example NLL or per-task accuracy
recency.py    attention by distance of the inspected runs (their inspect/<split>.json), seeds pooled
study.py      the cross-domain study (Study): mean ranks, Friedman tests over domains and tasks
bridge.py     a study of one domain at other settings, ranked in that domain by its Δ to its own reference runs
"""
