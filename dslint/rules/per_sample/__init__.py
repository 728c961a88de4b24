"""DSL2xx, per-sample cost: work that is the same for every sample, repeated for
every sample (directory scans, annotation reloads, model/transform/vocabulary
construction), and CUDA work in code that runs in DataLoader workers. "Per-sample"
comes from ``ctx.is_per_sample`` (``__getitem__``, the loop that yields in
``__iter__``, what they reach, lazy once-per-worker blocks and memoised helpers
excluded); "the same for every sample" from ``dslint.semantics.dataflow`` (index
dependence)."""
