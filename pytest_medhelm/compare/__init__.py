"""Saved runs, comparisons with a baseline, regression gates and shards (fine-tune regression testing).

* :mod:`~pytest_medhelm.compare.storage`: ``.medhelm/runs/NNNN_<name>.json``, numbered like pytest-benchmark's
  storage, with machine, git and option information; loading by name, number, "latest" or path.
* :mod:`~pytest_medhelm.compare.stats`: the paired tests (exact McNemar, paired bootstrap), confidence intervals,
  the minimum detectable effect, Holm's correction.
* :mod:`~pytest_medhelm.compare.compare`: the comparison section of a run (rows per benchmark, category and
  overall; terminal and Markdown tables; compare-fail gates; win rates with the baseline as one more model).
* :mod:`~pytest_medhelm.compare.power`: power planning for gates (the minimum detectable effect at a run's n and
  the n for a margin; ``pytest-medhelm power``, ``--medhelm-power``).
* :mod:`~pytest_medhelm.compare.plugin`: the pytest side (``--medhelm-save``, ``--medhelm-autosave``,
  ``--medhelm-compare``, ``--medhelm-compare-fail``, ``--medhelm-shard``).

Nothing here is imported by a pytest session that uses none of these options.
"""
