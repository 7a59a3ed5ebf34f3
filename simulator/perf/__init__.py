"""Execution-time models: step time from a batch's shape (DESIGN.md section 3).

:func:`build_perf_model` composes a :class:`~simulator.perf.step_model.StepTimeModel` from an
*operator backend* (measured tables, fitted efficiencies or the datasheet roofline) and an
*engine profile* (:mod:`simulator.perf.engine_profile`), or returns the synthetic
:class:`~simulator.perf.step_model.ConstantPerfModel`.
"""
from simulator.perf.engine_profile import EngineProfile, get_engine_profile
from simulator.perf.roofline import RooflineParams, RooflinePerfModel
from simulator.perf.step_model import ConstantPerfModel, StepTimeModel
from simulator.perf.step_shape import StepShape

__all__ = ["ConstantPerfModel", "EngineProfile", "RooflineParams", "RooflinePerfModel",
           "StepShape", "StepTimeModel", "build_operator_backend", "build_perf_model",
           "enable_operator_backend_memo", "get_engine_profile"]

#: operator backends built in this process, by their arguments (None: no reuse)
_BACKEND_MEMO: dict | None = None


def enable_operator_backend_memo() -> None:
    """Reuse operator backends in this process: :func:`build_operator_backend` keeps what it
    built by its arguments (the tables are read once per GPU, TP and dtype, not once per
    scheduler setting). For worker processes of capacity plans, which build dozens of setups
    of a few GPUs; the backends are read-only after construction (their memo caches hold
    values that depend on the query alone). Tables changed on disk afterwards are not
    re-read."""
    global _BACKEND_MEMO
    if _BACKEND_MEMO is None:
        _BACKEND_MEMO = {}


def build_operator_backend(model, gpu, tensor_parallel_size=1, weight_dtype="bf16",
                           kv_cache_dtype="bf16", source="auto", engine_version=None,
                           engine_family="vllm", expert_parallel_size=1,
                           expert_load_skew=1.0):
    """The per-operator time backend for one replica (no engine terms).

    ``source``:

    - ``auto`` (default): measured latency tables of the GPU profile for every operator that
      has one (the table set of ``engine_version``, default the newest shipped), the profile's
      fitted efficiencies (``fitted.yaml``) or the datasheet roofline for the rest;
    - ``table``: as ``auto`` but measured GEMM and attention tables are required (error if
      absent);
    - ``fitted``: the fitted roofline (datasheet roofline when the profile has no fit);
    - ``roofline``: the datasheet roofline with its default efficiencies (analytic, unchanged
      by any measurement; what hand-computed checks use).

    Raises
    ------
    ValueError
        ``table`` without tables, or an ``engine_version`` the profile does not have.
    """
    if _BACKEND_MEMO is not None:
        key = (model, gpu, tensor_parallel_size, weight_dtype, kv_cache_dtype, source,
               engine_version, engine_family, expert_parallel_size, expert_load_skew)
        hit = _BACKEND_MEMO.get(key)
        if hit is None:
            hit = _BACKEND_MEMO[key] = _build_operator_backend(*key)
        return hit
    return _build_operator_backend(model, gpu, tensor_parallel_size, weight_dtype,
                                   kv_cache_dtype, source, engine_version, engine_family,
                                   expert_parallel_size, expert_load_skew)


def _build_operator_backend(model, gpu, tensor_parallel_size, weight_dtype, kv_cache_dtype,
                            source, engine_version, engine_family, expert_parallel_size,
                            expert_load_skew):
    if source in ("auto", "table"):
        from simulator.perf.measured import load_measured_backend
        m = load_measured_backend(model, gpu, tensor_parallel_size, weight_dtype,
                                  kv_cache_dtype, required=(source == "table"),
                                  engine_version=engine_version, engine_family=engine_family)
        if m is not None:
            return m.with_expert_parallel(expert_parallel_size, expert_load_skew)
    if source in ("auto", "table", "fitted"):
        from simulator.perf.fitted import build_fitted_or_roofline
        ops = build_fitted_or_roofline(model, gpu, tensor_parallel_size, weight_dtype,
                                       kv_cache_dtype)
        return ops.with_expert_parallel(expert_parallel_size, expert_load_skew)
    ops = RooflinePerfModel(model, gpu, tensor_parallel_size, weight_dtype, kv_cache_dtype)
    return ops.with_expert_parallel(expert_parallel_size, expert_load_skew)


def build_perf_model(model, gpu, tensor_parallel_size=1, weight_dtype="bf16",
                     kv_cache_dtype="bf16", source="auto", *, engine="vllm-v1",
                     engine_version=None, constant=None, max_num_seqs=256,
                     max_num_batched_tokens=8192, num_speculative_tokens=0,
                     expert_parallel_size=1, expert_load_skew=1.0):
    """Build the step-time model of one replica.

    Parameters
    ----------
    model : ModelSpec
    gpu : GPUSpec
    tensor_parallel_size : int
    weight_dtype, kv_cache_dtype : str
    source : {"auto", "table", "fitted", "roofline", "constant"}
        Operator backend (see :func:`build_operator_backend`), or ``constant``.
    engine : str or EngineProfile
        Engine profile name (``vllm-v1``, ``vllm-v0``, ``none``), path, or object.
    engine_version : str, optional
        Measured-table version (``0.19.0``); default the newest the GPU profile ships.
    constant : dict or object, optional
        ``step_s``, ``per_token_s``, ``per_seq_s`` for ``source: constant``.
    max_num_seqs, max_num_batched_tokens, num_speculative_tokens : int
        Scheduler settings that fix the CUDA-graph capture sizes.
    expert_parallel_size : int
        GPUs an MoE model's experts are split over (``cluster.enable_expert_parallel``).
    expert_load_skew : float
        Busiest EP rank's expert load over the mean (``cluster.expert_load_skew``, >= 1).

    Returns
    -------
    StepTimeModel or ConstantPerfModel
    """
    if source == "constant":
        c = constant if isinstance(constant, dict) else (
            constant.model_dump() if constant is not None else {})
        return ConstantPerfModel(**c)
    prof = engine if isinstance(engine, EngineProfile) else get_engine_profile(engine)
    family = prof.engine if prof.engine not in ("none", "") else "vllm"
    ops = build_operator_backend(model, gpu, tensor_parallel_size, weight_dtype, kv_cache_dtype,
                                 source, engine_version=engine_version, engine_family=family,
                                 expert_parallel_size=expert_parallel_size,
                                 expert_load_skew=expert_load_skew)
    sizes = prof.cuda_graphs.sizes_for(max_num_seqs, max_num_batched_tokens,
                                       num_speculative_tokens)
    return StepTimeModel(ops, prof, sizes)
