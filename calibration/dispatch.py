"""``servesim calibrate``'s entry: :func:`calibrate` picks the table format and runs its
harness (v1: :class:`calibration.harness.Harness`, the flat in-context profile; v2:
:func:`calibration.operator_harness.calibrate_operators`, operator-level table sets).

Both harnesses import torch inside their functions, so importing this module does not need it.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .harness import Harness
from .operator_harness import calibrate_operators


def calibrate(model: str, out_dir: str | Path, device: str = "cpu", quick: bool = False,
              tensor_parallel_size: int = 1, threads: int | None = 1,
              max_num_seqs: int = 16, max_num_batched_tokens: int = 256,
              max_context: int = 2048, time_budget_s: float | None = None,
              log: Callable[[str], None] = print, table_format: str | None = None,
              **v2_options) -> Path:
    """Measure the operator tables of ``model`` on ``device`` and write ``out_dir``.

    Parameters
    ----------
    model : str
        ``servesim-tiny-llama`` (alias ``tiny``), a catalog id or a ``config.json`` path.
    out_dir : path
        Profile folder (created; tables for other shapes already there are kept).
    device : str
        ``cpu`` or ``cuda`` / ``cuda:N``.
    quick : bool
        Smaller grid and fewer repeats (about 30 s on 2 CPU cores for the tiny model).
    tensor_parallel_size : int
        Shapes are the TP shard's; all-reduce is measured when several GPUs are present.
    threads : int or None
        ``torch.set_num_threads`` for CPU runs (recorded; use the same in ``validate``).
    max_num_seqs, max_num_batched_tokens, max_context : int
        Ranges of the grid (batch, tokens per step, context per sequence).
    time_budget_s : float, optional
        Stop adding timed passes (v2: grid points) after this many seconds.
    table_format : str, optional
        ``v1``: the flat in-context profile of this module (tables at ``out_dir``'s root,
        what ``servesim validate`` and ``simulator.perf.tables.flat_profile`` read); ``v2``: operator-level
        tables in ``out_dir/tables/servesim-harness-<version>/``
        (:func:`calibration.operator_harness.calibrate_operators`). Default: ``v1`` on CPU,
        ``v2`` on CUDA.
    **v2_options
        ``attention_backend``, ``fp8``, ``flush_l2``, ``cuda_graphs``, ``warmup``,
        ``repeats``, ``collectives``, ``file_format`` of ``calibrate_operators`` (v2 only;
        None means not given).

    Returns
    -------
    Path
        The profile folder (v1) or the table-set folder (v2).

    Raises
    ------
    ValueError
        Unknown format, v2 options with ``v1``, or what the chosen path raises.
    """
    fmt = table_format or ("v2" if str(device).startswith("cuda") else "v1")
    if fmt not in ("v1", "v2"):
        raise ValueError(f"--format must be v1 or v2, got {table_format!r}")
    opts = {k: v for k, v in v2_options.items() if v is not None}  # None: not given
    if fmt == "v2":
        return calibrate_operators(model, out_dir, device=device, quick=quick,
                                   tensor_parallel_size=tensor_parallel_size, threads=threads,
                                   max_num_seqs=max_num_seqs,
                                   max_num_batched_tokens=max_num_batched_tokens,
                                   max_context=max_context, time_budget_s=time_budget_s,
                                   log=log, **opts)
    used = sorted(opts)
    if used:
        raise ValueError(f"{', '.join(used)}: only with --format v2 (operator-level tables)")
    h = Harness(model, out_dir, device, quick, tensor_parallel_size, threads, max_num_seqs,
                max_num_batched_tokens, max_context, time_budget_s, log)
    h.measure()
    h.measure_overhead()
    return h.write()
