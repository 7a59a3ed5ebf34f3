"""servesim calibration: measured latency tables, fitted GPU efficiencies, fidelity checks.

Modules
-------
``fit_vidur``
    Fits size-dependent roofline efficiencies to Vidur's public A100/H100 operator timings
    (numpy/scipy only) and writes ``hardware_profiles/<gpu>/fitted.yaml``.
``harness`` (torch)
    Times real kernels (GEMMs, attention prefill/decode through
    ``torch.nn.functional.scaled_dot_product_attention``, elementwise ops, LM head, all-reduce)
    on ``cpu`` or ``cuda`` and writes a profile folder (tables + ``provenance.yaml`` +
    ``spec.yaml``): ``servesim calibrate``.
``tiny_model``, ``engine`` (torch)
    A small Llama-architecture model and a real iteration-level continuous-batching loop that
    follows the simulator's scheduler, for ``servesim validate``.
``validate`` (torch)
    Replays a scaled trace on the real engine and in the simulator, and reports the error.

Only ``fit_vidur`` works without torch; the others import it lazily (``pip install -e
".[calibrate]"``). The simulator itself never imports this package at module level.
"""

#: version of the measurement harness, recorded in every ``provenance.yaml``
HARNESS_VERSION = "1.0"

__all__ = ["HARNESS_VERSION"]
