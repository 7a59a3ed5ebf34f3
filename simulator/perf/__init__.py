"""Execution-time models: step time from a batch's shape (roofline; fitted; measured tables)."""
from .roofline import RooflineParams, RooflinePerfModel, StepShape

__all__ = ["RooflineParams", "RooflinePerfModel", "StepShape", "build_perf_model"]


def build_perf_model(model, gpu, tensor_parallel_size=1, weight_dtype="bf16",
                     kv_cache_dtype="bf16", source="auto"):
    """Build the execution-time model for one replica.

    ``source``:

    - ``auto`` (default): the GPU profile's measured latency tables when it has them for this
      model/TP (:mod:`simulator.perf.table`), else its fitted efficiencies when it has a
      ``fitted.yaml`` (:mod:`simulator.perf.fitted`: H100 and A100, fitted to Vidur's public
      measurements), else the datasheet roofline;
    - ``table``: the measured tables (error if absent);
    - ``fitted``: the fitted roofline (datasheet roofline when the profile has no fit);
    - ``roofline``: the datasheet roofline with its default efficiencies (analytic, unchanged
      by any measurement; what hand-computed checks use).

    ``provenance()`` of the result says which operator class came from where (``measured``,
    ``fitted`` or ``datasheet``).
    """
    if source in ("auto", "table"):
        try:
            from .table import load_table_perf_model  # optional (calibration tables)
        except ImportError:
            load_table_perf_model = None
        if load_table_perf_model is not None:
            m = load_table_perf_model(model, gpu, tensor_parallel_size, weight_dtype,
                                      kv_cache_dtype, required=(source == "table"))
            if m is not None:
                return m
        elif source == "table":
            raise ValueError("latency-table model unavailable")
    if source in ("auto", "fitted"):
        from .fitted import build_fitted_or_roofline
        return build_fitted_or_roofline(model, gpu, tensor_parallel_size, weight_dtype,
                                        kv_cache_dtype)
    return RooflinePerfModel(model, gpu, tensor_parallel_size, weight_dtype, kv_cache_dtype)
