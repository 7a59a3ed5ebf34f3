"""Execution-time models: step time from a batch's shape (roofline; fitted; measured tables)."""
from .roofline import RooflineParams, RooflinePerfModel, StepShape

__all__ = ["RooflineParams", "RooflinePerfModel", "StepShape", "build_perf_model"]


def build_perf_model(model, gpu, tensor_parallel_size=1, weight_dtype="bf16",
                     kv_cache_dtype="bf16", source="auto"):
    """Build the execution-time model for one replica.

    ``source``: ``roofline`` (the roofline; with the GPU profile's fitted efficiencies when it
    has a ``fitted.yaml``, else datasheet efficiencies), ``table`` (latency tables in the GPU's
    profile folder; error if absent) or ``auto`` (tables when the profile has them for this
    model/TP, else the roofline). ``provenance()`` of the result says which operator class
    came from where (``measured``, ``fitted`` or ``datasheet``).
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
    from .fitted import build_fitted_or_roofline
    return build_fitted_or_roofline(model, gpu, tensor_parallel_size, weight_dtype,
                                    kv_cache_dtype)
