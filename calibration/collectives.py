"""Collectives across the visible GPUs: NCCL through ``torch.distributed`` (torch).

:func:`measure_collectives` spawns one process per GPU (``torch.multiprocessing.spawn``,
``nccl`` backend, file rendezvous) for each world size 2, 4, 8 that fits the visible GPUs
and times, for each message size:

- ``all_reduce`` eagerly (``dist.all_reduce``; table ``all_reduce``, ``backend: nccl``, and
  table ``nccl``, ``op: all_reduce``);
- ``all_reduce`` captured once per size into a CUDA graph and replayed (``backend: graph``):
  a decode step under CUDA graphs, as vLLM runs it when its custom all-reduce is not used
  (NCCL >= 2.9.6 supports capture; torch's ``ProcessGroupNCCL`` too);
- ``all_gather`` (``all_gather_into_tensor``) and ``reduce_scatter``
  (``reduce_scatter_tensor``) eagerly (table ``nccl``).

``bytes`` follows nccl-tests' convention: the size of the whole tensor (all-reduce: the
buffer reduced in place; all-gather: the gathered output; reduce-scatter: the input), bf16
elements of 2 bytes. Every timed call is preceded by ``dist.barrier()`` so the ranks start
together; rank 0's CUDA events give the sample. With fewer than two GPUs nothing runs.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pandas as pd

from .timing import summarize

COLLECTIVE_OPS = ("all_reduce", "all_gather", "reduce_scatter")
BF16_BYTES = 2


def world_sizes(num_gpus: int) -> list[int]:
    """Tensor-parallel world sizes to measure: 2, 4, 8 up to ``num_gpus``."""
    return [w for w in (2, 4, 8) if w <= int(num_gpus)]


def elements_for(op: str, nbytes: int, world: int) -> int:
    """bf16 elements of the whole tensor for a ``nbytes`` message, rounded up to a multiple
    of ``world`` (all-gather and reduce-scatter split it evenly across ranks)."""
    n = max(1, int(nbytes) // BF16_BYTES)
    return -(-n // world) * world


def measure_collectives(sizes: list[int], warmup: int = 5, repeats: int = 20,
                        graph: bool = True, ops=COLLECTIVE_OPS, log=print) -> dict:
    """Time NCCL collectives over ``sizes`` bytes for every world size that fits.

    Parameters
    ----------
    sizes : list of int
        Message sizes (bytes, whole tensor).
    warmup, repeats : int
        Untimed and timed calls per size.
    graph : bool
        Also time the CUDA-graph all-reduce.
    ops : sequence of str
        Subset of :data:`COLLECTIVE_OPS`.

    Returns
    -------
    dict
        ``{"all_reduce": DataFrame, "nccl": DataFrame, "notes": [...]}``; the frames are
        absent with fewer than two GPUs (``notes`` says why).
    """
    import torch
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n < 2:
        return {"notes": [f"collectives not measured: {n} CUDA device(s) visible (needs 2+)"]}
    import torch.multiprocessing as mp
    ar, nc, notes = [], [], []
    for world in world_sizes(n):
        with tempfile.TemporaryDirectory() as td:
            out = Path(td) / "res.json"
            mp.spawn(_collective_worker,
                     args=(world, [int(s) for s in sizes], list(ops), bool(graph), int(warmup),
                           int(repeats), str(out), str(Path(td) / "init")),
                     nprocs=world, join=True)
            res = json.loads(out.read_text())
        for r in res["rows"]:
            st = summarize(r["samples_s"]).as_dict()
            if r["op"] == "all_reduce":
                ar.append({"dtype": "bf16", "backend": r["backend"], "num_gpus": world,
                           "bytes": r["bytes"], "impl": "torch.distributed NCCL", **st})
            if r["backend"] == "nccl":
                nc.append({"op": r["op"], "dtype": "bf16", "num_gpus": world,
                           "bytes": r["bytes"], **st})
        notes += [f"{world} GPUs: {m}" for m in res["notes"]]
        log(f"  collectives: {world} GPUs, {len(sizes)} sizes")
    out = {"notes": notes}
    if ar:
        out["all_reduce"] = pd.DataFrame(ar)
    if nc:
        out["nccl"] = pd.DataFrame(nc)
    return out


def _collective_worker(rank: int, world: int, sizes: list[int], ops: list[str], graph: bool,
                       warmup: int, repeats: int, out: str, init: str) -> None:
    """One rank of :func:`measure_collectives` (module level: ``spawn`` pickles it)."""
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method=f"file://{init}", rank=rank, world_size=world)
    rows, notes = [], []

    def timed(call):
        ts = []
        for _ in range(repeats):
            dist.barrier()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            call()
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e) * 1e-3)
        return ts

    try:
        for op in ops:
            for size in sizes:
                n = elements_for(op, size, world)
                nbytes = n * BF16_BYTES
                call = _collective_call(op, n, world, dev)
                for _ in range(warmup):
                    call()
                torch.cuda.synchronize(dev)
                rows.append({"op": op, "backend": "nccl", "bytes": nbytes,
                             "samples_s": timed(call)})
                if op == "all_reduce" and graph:
                    g, why = _capture_graph(call, dev)
                    # every rank must agree, or the ranks would run different collectives
                    ok = torch.tensor([0 if g is None else 1], dtype=torch.int32, device=dev)
                    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
                    if int(ok.item()) == 1:
                        rows.append({"op": op, "backend": "graph", "bytes": nbytes,
                                     "samples_s": timed(g.replay)})
                    else:
                        notes.append(f"all_reduce graph capture failed at {nbytes} B "
                                     f"({why or 'on another rank'}); eager only from here")
                        graph = False
                    del g
    finally:
        if rank == 0:
            Path(out).write_text(json.dumps({"rows": rows, "notes": notes}))
        dist.destroy_process_group()


def _collective_call(op: str, n: int, world: int, dev):
    """A no-argument call running collective ``op`` over a bf16 tensor of ``n`` elements
    (the whole tensor: all-gather's output, reduce-scatter's input) on this rank."""
    import torch
    import torch.distributed as dist
    if op == "all_reduce":
        x = torch.zeros(n, dtype=torch.bfloat16, device=dev)

        def call(x=x):
            dist.all_reduce(x)
    elif op == "all_gather":
        inp = torch.zeros(n // world, dtype=torch.bfloat16, device=dev)
        outp = torch.empty(n, dtype=torch.bfloat16, device=dev)

        def call(inp=inp, outp=outp):
            dist.all_gather_into_tensor(outp, inp)
    elif op == "reduce_scatter":
        inp = torch.zeros(n, dtype=torch.bfloat16, device=dev)
        outp = torch.empty(n // world, dtype=torch.bfloat16, device=dev)

        def call(inp=inp, outp=outp):
            dist.reduce_scatter_tensor(outp, inp)
    else:
        raise ValueError(f"unknown collective {op!r}")
    return call


def _capture_graph(call, dev) -> tuple:
    """``call`` captured in a CUDA graph after two warm-up runs on a side stream; ``(graph,
    "")``, or ``(None, why)`` when this rank cannot capture it."""
    import torch
    try:
        side = torch.cuda.Stream(device=dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            for _ in range(2):
                call()
        torch.cuda.current_stream(dev).wait_stream(side)
        torch.cuda.synchronize(dev)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            call()
        torch.cuda.synchronize(dev)
    except Exception as e:  # noqa: BLE001 - capture unsupported: eager only
        torch.cuda.synchronize(dev)
        return None, f"{type(e).__name__}: {str(e)[:100]}"
    return g, ""
