"""Experiments: families of scenarios run together, on shared request lists.

- :mod:`~simulator.experiments.runner`: the one runner (variants of a base, their request
  lists loaded once, the cache, the executor) every experiment goes through;
- :mod:`~simulator.experiments.executor`: the one executor (in process, a local process
  pool, or Ray);
- :mod:`~simulator.experiments.cache`: the content-addressed result cache;
- :mod:`~simulator.experiments.grid`: field-path grids (``hardware.gpu: [h100, a100]``);
- :mod:`~simulator.experiments.compare`: ``servesim compare`` (variants side by side);
- :mod:`~simulator.experiments.spec_sweep`: ``servesim spec-sweep`` (acceptance economics:
  speculation on and off over an arrival-rate sweep).

Sweeps and capacity plans (:mod:`simulator.planner`) are experiments too and use the same
runner, executor and cache. Reports of every experiment are in :mod:`simulator.report`.
"""
