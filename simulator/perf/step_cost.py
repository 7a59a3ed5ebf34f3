"""A step's cost, priced in one place and returned by part.

A scheduler reports what an engine iteration does: its
:class:`~simulator.perf.step_shape.StepShape`, the KV blocks it moves over the host link
(``swap_transfers``: bytes of each swap-out and swap-in, in the order they happened) and,
with speculative decoding, its draft work (:class:`~simulator.perf.draft_cost.DraftWork`).
:class:`StepPricer` turns that into a :class:`StepCost`; the engine sleeps for its
``total_s`` and records it as the step's ``step_time_s``, and lockstep DP ranks take the
largest ``total_s`` of their ranks. Decode runs that the engine fast-forwards are priced here
too (:meth:`StepPricer.decode_run_times`), and their breakdown when the step table records
it (:meth:`StepPricer.decode_run_parts`).

The total keeps the one order of additions every step time has had (outputs are
byte-identical across the change that brought this module)::

    step_s  = perf.step_time(shape)          (a one-token decode step: the decode memo,
                                              perf.decode_step_times, as a decode run)
    swap_s  = sum over transfers, in order, of bytes / host_link_bandwidth_bytes_per_s
              + kv_load_s (synchronous loads from KV offload tiers, simulator.kv.tiers)
    draft_s = draft decode + draft prefill   (DraftCostModel)
    total_s = step_s + (swap_s + draft_s)

``step_s`` splits into ``compute_s`` (the kernels but the collectives), ``communication_s``
(TP all-reduce, EP all-to-all) and ``overhead_s`` (the engine's CPU and sync time: what
async scheduling does not hide), read from the performance model's ``op_times`` when first
asked for (nothing of it is computed on the simulation's hot path). The three add up to
``step_s`` up to rounding; a pipeline-parallel replica's split is its stage model's scaled to
the step's price (the cycle; activation hops count as compute; nothing of it counts toward
the pipeline bubble), and a model without ``op_times`` (a constant or a test stub) puts all
of ``step_s`` in ``compute_s``. A decode run's steps split on the model that priced them (a
pipeline-parallel replica never fast-forwards: :func:`simulator.engine.loop._replica_process`).

The pricer reuses one :class:`StepCost` per replica: a cost is valid until the pricer prices
the replica's next step (:meth:`StepCost.as_dict` keeps one).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from simulator.base.compiled_core import register_pickling
from simulator.perf.pipeline import PipelinePerfModel
from simulator.perf.step_model import StepTimeModel
from simulator.perf.step_times import DecodeStepTimes, StepKernels

__all__ = ["COMMUNICATION_OPS", "StepCost", "StepPricer", "step_parts"]

#: op-time keys (``perf.op_times``) that are communication between GPUs
COMMUNICATION_OPS = frozenset({"all_reduce", "ep_comm"})

#: decode-run steps whose split a pricer remembers (a step of the same batch and context
#: recurs across runs: a quarter of the splits of the Azure conv hour are saved); past this
#: many it starts afresh (the values are the same either way). About 280 bytes each: 18 MB at
#: most a replica, and only in a run that records the breakdown.
RUN_PARTS_MAX = 1 << 16


def step_parts(perf, shape, step_s: float | None = None) -> tuple[float, float, float]:
    """``(compute_s, communication_s, overhead_s)`` of one step of ``shape`` on ``perf``,
    from its ``op_times`` (all compute when it has none).

    Parameters
    ----------
    perf : object
        A performance model (:class:`~simulator.perf.step_model.StepTimeModel`,
        :class:`~simulator.perf.pipeline.PipelinePerfModel`, ...).
    shape : StepShape
    step_s : float, optional
        What the step was priced (seconds). A pipeline model's split is its stage model's
        scaled to it (default: the pipeline's ``step_time(shape)``, read without counting
        toward its bubble); other models split into their own ``op_times``.

    Returns
    -------
    tuple of float
        Seconds; their sum is ``perf.step_time(shape)`` (a pipeline model: ``step_s``) up to
        rounding.
    """
    if isinstance(perf, PipelinePerfModel):
        # a one-token decode step is priced by the pipeline's decode_step_times, which can
        # differ from its step_time: the split follows the price
        total = perf.step_time(shape, tally=False) if step_s is None else step_s
        return _scaled(step_parts(perf.inner, shape), total)
    op_times = getattr(perf, "op_times", None)
    if op_times is None:
        return float(perf.step_time(shape)), 0.0, 0.0
    compute = comm = overhead = 0.0
    for name, t in op_times(shape).items():
        if name == "engine_overhead":
            overhead += t
        elif name in COMMUNICATION_OPS:
            comm += t
        else:
            compute += t
    return float(compute), float(comm), float(overhead)


def _scaled(parts: tuple[float, float, float], total: float) -> tuple[float, float, float]:
    """``parts`` scaled to add up to ``total`` (all zero when they add up to zero)."""
    tot = parts[0] + parts[1] + parts[2]
    scale = total / tot if tot else 0.0
    return parts[0] * scale, parts[1] * scale, parts[2] * scale


class StepCost:
    """What one engine iteration costs, seconds, by part (module docstring).

    Attributes
    ----------
    step_s : float
        The iteration on the GPUs and the engine: ``compute_s + communication_s +
        overhead_s``.
    swap_s : float
        KV blocks moved over the host link (swap preemption) and synchronous loads from KV
        offload tiers (``StepOutput.kv_load_s``).
    draft_decode_s, draft_prefill_s, draft_s : float
        Speculative drafting, the draft's prefill of the step's prompt chunks, and their
        sum.
    total_s : float
        ``step_s + (swap_s + draft_s)``: how long the step lasts.
    """

    __slots__ = ("_parts", "_perf", "_shape", "draft_decode_s", "draft_prefill_s", "draft_s",
                 "step_s", "swap_s", "total_s")

    def __init__(self, perf=None) -> None:
        self.step_s = self.swap_s = self.total_s = 0.0
        self.draft_decode_s = self.draft_prefill_s = self.draft_s = 0.0
        self._perf = perf
        self._shape: Any = None  # the StepShape priced last
        self._parts: tuple[float, float, float] | None = None

    def _init_args(self) -> tuple[tuple, dict]:
        """Constructor arguments that rebuild this object when unpickled
        (:func:`simulator.base.compiled_core.register_pickling`)."""
        return (self._perf,), {}

    def parts(self) -> tuple[float, float, float]:
        """``(compute_s, communication_s, overhead_s)``: ``step_s`` split (seconds; computed
        once per step, when first asked for)."""
        parts = self._parts
        if parts is None:
            if self._shape is None:
                return 0.0, 0.0, 0.0
            parts = self._parts = step_parts(self._perf, self._shape, self.step_s)
        return parts

    @property
    def compute_s(self) -> float:
        """Kernel seconds but the collectives (GEMMs, attention, MoE, norms, LM head, sampler)."""
        return self.parts()[0]

    @property
    def communication_s(self) -> float:
        """Collectives between GPUs: TP all-reduce and EP all-to-all."""
        return self.parts()[1]

    @property
    def overhead_s(self) -> float:
        """The engine's CPU and sync time the GPUs wait for."""
        return self.parts()[2]

    def as_dict(self) -> dict[str, float]:
        """The breakdown as plain floats (a copy that outlives the pricer's next step)."""
        compute, comm, overhead = self.parts()
        return {"compute_s": compute, "communication_s": comm, "overhead_s": overhead,
                "swap_s": self.swap_s, "draft_s": self.draft_s, "step_s": self.step_s,
                "total_s": self.total_s}

    def __repr__(self) -> str:
        return (f"StepCost(step_s={self.step_s!r}, swap_s={self.swap_s!r}, "
                f"draft_s={self.draft_s!r}, total_s={self.total_s!r})")


class StepPricer:
    """Prices one replica's steps (module docstring): the one place a step's time is made.

    Parameters
    ----------
    perf : object
        The replica's performance model (``step_time(shape)``,
        ``decode_step_times(num_seqs, ctx_totals)``).
    host_link_bandwidth_bytes_per_s : float, optional
        The host link swap transfers cross (per direction); needed once a step swaps.
    draft : DraftCostModel, optional
        Prices the draft work of speculative decoding (None: the replica does not draft).

    Attributes
    ----------
    cost : StepCost
        The record :meth:`price` fills and returns (one per pricer, reused).
    """

    __slots__ = ("_decode_run", "_decode_times", "_kernels", "_run_model", "_run_parts", "cost",
                 "draft", "host_link_bandwidth_bytes_per_s", "perf")

    def __init__(self, perf, *, host_link_bandwidth_bytes_per_s: float | None = None,
                 draft=None) -> None:
        self.perf = perf
        self.host_link_bandwidth_bytes_per_s = host_link_bandwidth_bytes_per_s
        self.draft = draft
        self.cost = StepCost(perf)
        # one decode step and a decode run: a StepTimeModel's remembered pure-decode step
        # times (compiled; its ``decode_step_times`` of one context is that value as an array)
        self._decode_times: DecodeStepTimes | None = (
            perf.decode_times if isinstance(perf, StepTimeModel) else None)
        # any other step: a StepTimeModel's kernels and engine terms (compiled; its
        # ``step_time``), where the engine's CPU term is linear
        self._kernels: StepKernels | None = (
            perf.kernels if isinstance(perf, StepTimeModel) else None)
        # a decode run: as the engine has always priced one (any model offering the list)
        self._decode_run = getattr(perf, "decode_step_times_list", None)
        # the model that prices a decode run (a pipeline model's list is its stage model's)
        self._run_model = getattr(self._decode_run, "__self__", perf)
        #: decode-run steps split so far: (num_decode, ctx_total, q, num_sampled) -> parts
        self._run_parts: dict[tuple, tuple[float, float, float]] = {}

    def _init_args(self) -> tuple[tuple, dict]:
        """Constructor arguments that rebuild this object when unpickled
        (:func:`simulator.base.compiled_core.register_pickling`)."""
        bw = self.host_link_bandwidth_bytes_per_s
        return (self.perf,), {"host_link_bandwidth_bytes_per_s": bw, "draft": self.draft}

    def price(self, out, *, decode_memo: bool = True) -> StepCost:
        """The cost of the step ``out`` reports (also left in ``out.cost``).

        Parameters
        ----------
        out : StepOutput
            ``shape``, ``swap_transfers`` (bytes per transfer, or None) and ``draft``
            (:class:`~simulator.perf.draft_cost.DraftWork`, or None).
        decode_memo : bool
            Price a one-token decode step by ``decode_step_times`` (what a fast-forwarded
            run of such steps is priced by, so stepping and fast-forward agree to the bit);
            False prices every step by ``step_time`` (lockstep DP ranks, which never
            fast-forward, have always been priced so).

        Returns
        -------
        StepCost
            :attr:`cost`, filled for this step.

        Raises
        ------
        ValueError
            When the step swaps and the pricer has no host link bandwidth.
        """
        shape = out.shape
        nd = shape.num_decode
        if decode_memo and nd and not shape.prefill_q and shape.decode_q_per_seq == 1:
            times = self._decode_times
            step = (times.one(nd, shape.decode_ctx_total) if times is not None else float(
                self.perf.decode_step_times(nd, np.array([shape.decode_ctx_total]))[0]))
        else:
            kernels = self._kernels
            step = (kernels.seconds(shape) if kernels is not None and kernels.engine is not None
                    else self.perf.step_time(shape))
        swap = 0.0
        transfers = out.swap_transfers
        if transfers is not None:
            bw = self.host_link_bandwidth_bytes_per_s
            if not bw:
                raise ValueError("a step swaps KV blocks but the step pricer has no host link "
                                 "bandwidth (host_link_bandwidth_bytes_per_s)")
            for nbytes in transfers:
                swap += nbytes / bw
        load = getattr(out, "kv_load_s", 0.0)  # synchronous offload loads (scheduler steps)
        if load:
            swap += load
        c = self.cost
        draft = self.draft
        if draft is None:  # a replica that never drafts: its draft parts stay 0.0
            d = 0.0
        else:
            work = out.draft
            if work is not None:
                d_dec = draft.decode_cost(work.num_seqs, work.ctx_total)
                d_pre = draft.prefill_cost(shape.prefill_q, shape.prefill_start,
                                           work.num_prefill_sampled)
                d = d_dec + d_pre
            else:
                d_dec = d_pre = d = 0.0
            c.draft_decode_s = d_dec
            c.draft_prefill_s = d_pre
            c.draft_s = d
        c.step_s = step
        c.swap_s = swap
        c.total_s = step + (swap + d)
        c._shape = shape
        c._parts = None
        out.cost = c
        return c

    def decode_run_times(self, num_seqs: int, ctx_totals) -> list[float]:
        """Seconds of each step of a fast-forwarded decode run (``num_seqs`` one-token decodes
        per step; ``ctx_totals`` the batch's context at each step, a list, range or array), as
        Python floats."""
        times = self._decode_times
        if times is not None:
            if isinstance(ctx_totals, range):  # a run's contexts, never listed
                return times.times_arith(num_seqs, ctx_totals.start, ctx_totals.step,
                                         len(ctx_totals))
            return times.times(num_seqs, _int_list(ctx_totals))
        run = self._decode_run
        if run is not None:  # Python floats throughout (the same values)
            return run(num_seqs, _int_list(ctx_totals))
        return np.asarray(self.perf.decode_step_times(num_seqs, np.asarray(ctx_totals)),
                          dtype=float).tolist()

    def decode_run_parts(self, shape, ctx_totals,
                         step_times) -> tuple[list[float], list[float], list[float]]:
        """The breakdown of each step of a decode run (:meth:`decode_run_times`), split on the
        model that priced it.

        Parameters
        ----------
        shape : StepShape
            The run's first step (every step of the run has its shape but for
            ``decode_ctx_total``).
        ctx_totals : sequence of int
            The batch's context at each step (tokens).
        step_times : sequence of float
            What :meth:`decode_run_times` priced each step (seconds; a pipeline model's split
            is scaled to it, :func:`step_parts`).

        Returns
        -------
        tuple of list of float
            ``(compute_s, communication_s, overhead_s)``, one value per step (seconds); a
            step's three add up to its :meth:`decode_run_times` value up to rounding, and
            equal those of the same step stepped (:meth:`StepCost.parts`) to the bit.

        Notes
        -----
        Splits are remembered per ``(num_decode, ctx_total, decode_q_per_seq, num_sampled)``
        (a decode run has no prefill), :data:`RUN_PARTS_MAX` of them.
        """
        model = self._run_model
        memo = self._run_parts
        if len(memo) > RUN_PARTS_MAX:
            memo.clear()
        nd, q, ns = shape.num_decode, shape.decode_q_per_seq, shape.num_sampled
        compute, comm, overhead = [], [], []
        for ctx, t in zip(ctx_totals, step_times):
            key = (nd, int(ctx), q, ns)  # (a step's time is a function of the key too)
            parts = memo.get(key)
            if parts is None:
                parts = memo[key] = step_parts(model, replace(shape, decode_ctx_total=key[1]),
                                               t)
            c, m, o = parts
            compute.append(c)
            comm.append(m)
            overhead.append(o)
        return compute, comm, overhead


def _int_list(values) -> list[int]:
    """``values`` (a list, range or integer array) as a list of Python ints."""
    if isinstance(values, list):
        return values
    if isinstance(values, range):
        return list(values)
    return values.tolist()


register_pickling(StepCost, StepPricer)
