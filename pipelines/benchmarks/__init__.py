"""What the suite costs to run, measured on the machine at hand; rows as plain data, reports apart.

- `step`: timing and memory of one model's training and evaluation steps, and the device's matmul peak.
- `model`: the model benchmark: every encoding at each domain's preset and over a context sweep, timed in
  interleaved groups, with ratios to a reference and the growth of memory with the context.
- `model_report`: its progress lines, tables, figure and files (throughput.csv, .png, .json).
- `data`: the data benchmark: each stored domain's preparation and its hot kernels, cold, from a mirror folder.
- `data_report`: its table and CSV file.
- `tokenizer`: the NT tokenizer's bases/s on one core and the peak memory of preparing a big chromosome.

The command lines are `pipelines.throughput` (model and data), `pipelines.prep_throughput` (data) and
`pipelines.benchmarks.tokenizer`.
"""
