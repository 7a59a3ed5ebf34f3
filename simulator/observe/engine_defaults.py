"""What a recording vLLM did by default, by version and GPU, for settings a record leaves out.

A record rarely lists every engine setting: ``meta.json`` carries the keyword arguments the
harness passed (and, from the LLMServingSim harness, the resolved config), a ``vllm bench serve``
file only what ``--metadata`` added. The replay fills the gaps with what that vLLM version
chose on that GPU, each value labelled with the rule it came from (never servesim's own
defaults, which describe no engine). Two generations:

* **V1 engine (vLLM >= 0.8)**: chunked prefill always on, prefix caching on by default
  (``EngineArgs._set_default_args_v1``), ``block_size`` 16, ``gpu_memory_utilization`` 0.9,
  KV dtype ``auto``, FCFS. Batch budgets from ``EngineArgs.get_batch_defaults``
  (``vllm/engine/arg_utils.py``): from 0.9 (vLLM PR #17885) a GPU with >= 70 GiB that is not
  an A100 gets ``max_num_batched_tokens`` 8192 / ``max_num_seqs`` 1024 under ``vllm serve``
  (16384 / 1024 in the offline ``LLM`` class), any other GPU 2048 / 256 (8192 / 256); in 0.8
  the large values went to GPUs whose name contains ``h100`` or ``h200``. A record does not say
  which entry point ran, so the ``vllm serve`` values are used and the replay says so.
* **V0 engine (vLLM < 0.8)**: no prefix caching, no chunked prefill (prefill-only steps first,
  ``max_num_batched_tokens`` = max(``max_model_len``, 2048): ``SchedulerConfig`` of 0.6),
  ``max_num_seqs`` 256, the synchronous ``vllm-v0`` engine profile.

Versions are read as PEP 440 release numbers: ``0.11.1rc2.dev5+g1234abc`` is 0.11.1 (a
pre-release or development build of it).
"""
from __future__ import annotations

import re
from typing import Any

__all__ = ["V0_DEFAULTS", "V1_DEFAULTS", "batch_defaults", "engine_generation",
           "release_tuple"]

_RELEASE = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?")

#: vLLM V1 defaults (record setting names) for options a record leaves unset; the values a
#: vLLM 0.19.0 resolved config shows for options its engine_kwargs leave unset
#: (shared/reference/groundtruth/llmservingsim, RTX4090/Llama-3.1-8B meta.json), unchanged
#: since V1 became the default engine in 0.8 (``_set_default_args_v1``: chunked prefill always,
#: prefix caching on unless disabled). ``async_scheduling`` is listed only from 0.19, where a
#: resolved config shows it on.
V1_DEFAULTS: dict[str, Any] = {
    "block_size": 16, "gpu_memory_utilization": 0.9, "enable_prefix_caching": True,
    "enable_chunked_prefill": True, "kv_cache_dtype": "auto", "policy": "fcfs"}

#: vLLM V0 defaults (0.6.x ``EngineArgs`` / ``CacheConfig`` / ``SchedulerConfig``): prefix
#: caching and chunked prefill off, 256 sequences, 16-token blocks, 0.9 of the memory.
V0_DEFAULTS: dict[str, Any] = {
    "block_size": 16, "gpu_memory_utilization": 0.9, "enable_prefix_caching": False,
    "enable_chunked_prefill": False, "kv_cache_dtype": "auto", "policy": "fcfs",
    "max_num_seqs": 256}


def release_tuple(version: Any) -> tuple[int, int, int] | None:
    """``(major, minor, patch)`` of a vLLM version string, or None when it is not one.

    ``0.19.0`` -> (0, 19, 0); ``0.11.1rc2.dev5+g1234abc`` -> (0, 11, 1); ``v0.6.3.post1`` ->
    (0, 6, 3); ``0.8`` -> (0, 8, 0).
    """
    m = _RELEASE.match(str(version or ""))
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def engine_generation(version: Any) -> str | None:
    """``"v1"`` for vLLM >= 0.8 (the V1 engine is the default), ``"v0"`` before, None when the
    version cannot be read."""
    rel = release_tuple(version)
    if rel is None:
        return None
    return "v1" if rel[:2] >= (0, 8) else "v0"


def batch_defaults(version: Any, device: str, hbm_bytes: float) -> tuple[int, int, str]:
    """``max_num_batched_tokens``, ``max_num_seqs`` and the rule, for a V1 ``vllm serve``.

    Parameters
    ----------
    version : str or None
        The vLLM version (>= 0.8); None (not recorded): the rule of the newest versions.
    device : str
        The recorded device string, else the catalog GPU's name.
    hbm_bytes : float
        The GPU's memory (bytes).

    Returns
    -------
    (int, int, str)
        Tokens per step, sequences per step, and one sentence naming the rule applied.
    """
    rel = release_tuple(version)
    name = str(device).lower()
    if rel is None or rel[:2] >= (0, 9):
        big = hbm_bytes >= 70 * 2**30 and "a100" not in name
        rule = ("" if rel is not None else "version not recorded, so ") + (
                f"vLLM >= 0.9 vllm serve default on {device} ({hbm_bytes / 2**30:.0f} GiB"
                + (", >= 70 GiB and not an A100" if big else
                   ", an A100" if "a100" in name else ", under 70 GiB") + ")")
    else:
        big = "h100" in name or "h200" in name
        rule = (f"vLLM 0.8 vllm serve default on {device} ("
                + ("an H100/H200 by name" if big else "not an H100/H200 by name") + ")")
    return (8192, 1024, rule) if big else (2048, 256, rule)
