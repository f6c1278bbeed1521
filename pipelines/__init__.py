"""posbench's command lines, one module each, and the library they call. Hydra lives here and nowhere else.

Entry points (`python -m pipelines.<name>`):
  prepare          fetch and tokenise a domain (`make data-<domain>`)
  samples          print (and plot) examples of a domain
  roster           list a roster's encodings at a model size
  train            one run: train, evaluate, manifest
  sweep            a domain's roster x seeds, locally or on SLURM (`make train`)
  evaluate         score a finished run again
  inspect          look inside a finished run: attention by distance, what its encoding learned
  generate         continue a piece with a trained music model
  compare          per-domain reports and the cross-domain study (`make compare`; `WITH=` joins a published study)
  settle           train the seeds the open verdicts need, group-sequentially (`make settle`)
  publish          write a study's per-run evidence for others to join (`make publish`)
  reproduce        re-train published runs and compare them with the study (`make reproduce`)
  demo             the laptop comparison on synthetic tasks (`make demo`)
  throughput       speed, memory and FLOP use of every encoding (`make throughput`)
  prep_throughput  data preparation speed

Library, by layer of responsibility:
  experiment/   configs into objects; one run's training, evaluation and generation
  runs/         the run folder: layout, manifest, metrics files, model file; what comparisons hold fixed; published
                studies
  inspection/   looking inside a trained run: attention weights by distance, the encodings' views, as data
  analysis/     statistics and results as plain data (no printing, no files)
  report/       rendering results: markdown, CSV/JSON, figures
  launch/       running a sweep: plan, local processes with GPU pinning, progress view, SLURM
  benchmarks/   model throughput, data-preparation throughput, tokenizer benchmark
"""
