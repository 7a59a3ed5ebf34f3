"""servesim calibration: measured latency tables, fitted GPU efficiencies, fidelity checks.

Modules
-------
``fit_vidur``
    Fits size-dependent roofline efficiencies to Vidur's public A100/H100 operator timings
    (numpy/scipy only) and writes ``hardware_profiles/<gpu>/fitted.yaml``.
``dispatch``
    ``servesim calibrate``: picks the table format (v1 on CPU, v2 on CUDA) and runs its
    harness.
``device`` (torch)
    What both formats share: the device's description, its copy bandwidth and the profile's
    measured ``spec.yaml``.
``harness`` (torch)
    Format v1 (CPU default): times a model's operators inside
    forward passes (GEMMs, attention prefill/decode through
    ``torch.nn.functional.scaled_dot_product_attention``, elementwise ops, LM head, all-reduce)
    and writes a flat profile folder (tables + ``provenance.yaml`` + ``spec.yaml``).
``flat_format``
    Format v1 without torch: the harness's grid, the tables built from its samples, the
    folder's CSV files and ``provenance.yaml``.
``operator_harness``, ``ops``, ``paged``, ``collectives``, ``grids``, ``timing`` (torch)
    Format v2 (CUDA default): operator-level tables as a serving engine runs the operators
    (paged-KV attention kernels, CUDA events, L2 flush, CUDA graphs, NCCL collectives) in
    ``OUT/tables/servesim-harness-<version>/``.
``tableset``, ``compare`` (no torch)
    Read, write and check v2 table sets; ``servesim calibrate compare OURS THEIRS``.
``tiny_model``, ``engine`` (torch)
    A small Llama-architecture model and a real iteration-level continuous-batching loop that
    follows the simulator's scheduler, for ``servesim validate``.
``validate`` (torch)
    Replays a scaled trace on the real engine and in the simulator, and reports the error.
``import_aic`` (with ``aic_source``, ``aic_convert``), ``import_lss`` (with ``lss_profile``,
``lss_convert``)
    ``servesim calibrate import-aic`` / ``import-lss``: aiconfigurator's kernel tables and
    LLMServingSim's per-layer profiles converted into table sets (no torch).

Only ``fit_vidur``, ``grids``, ``flat_format``, ``tableset``, ``compare`` and the importers
work without torch; the others import it lazily (``pip install -e ".[calibrate]"``). The
simulator itself never imports this package at module level.
"""

#: version of the measurement harness, recorded in every ``provenance.yaml``
HARNESS_VERSION = "2.0"

__all__ = ["HARNESS_VERSION"]
