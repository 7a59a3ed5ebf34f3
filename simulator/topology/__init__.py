"""Serving-topology maths (issue 11): what moving work between GPUs costs.

Pure functions, no simulation state (layer 2 of the import graph, beside ``perf`` and ``kv``):

- :mod:`.transfer`: the KV cache of a prompt moved from a prefill to a decode GPU
  (disaggregated prefill/decode), optionally overlapped layer by layer with the prefill;
- :mod:`.pipeline`: pipeline-parallel stage split, per-stage time, activation transfer,
  micro-batch schedule and bubble, KV bytes per GPU under PP;
- :mod:`.expert`: expert-parallel all-to-all volume (dispatch and combine) with a load-skew
  factor.

The ``prefix_affinity`` router is :mod:`simulator.cluster.routing`; pools behind a gateway are
:mod:`simulator.runs.gateway`; DP ranks in lockstep are :mod:`simulator.engine.lockstep`.
"""
