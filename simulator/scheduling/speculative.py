"""Speculative decoding inside the engine: draft cost, verification, acceptance, rollback.

:class:`SpeculativeScheduler` is the continuous (vLLM v1-like) scheduler with a lookahead:
every decode schedules ``1 + k`` query tokens (the last emitted token plus ``k`` draft
tokens to verify; ``k * width`` for a tree) and KV slots for them, so the target's
verification pass is costed by the performance model like any other step shape
(:class:`~simulator.perf.step_shape.StepShape` with ``decode_q_per_seq = 1 + k``). This module
adds what the parent does not know about:

1. **Draft work**, reported with the step as ``out.draft`` (a
   :class:`~simulator.perf.draft_cost.DraftWork`) and priced on the perf side (the step
   pricer of :meth:`SpeculativeScheduler.step_pricer` holds the scenario's
   :class:`~simulator.perf.draft_cost.DraftCostModel`): ``k`` sequential draft decode steps
   over the step's speculating decodes, plus the draft's own prefill of the prompt chunks in
   the step (the draft keeps its own KV cache of the prompt; EAGLE heads read the target's
   hidden states of every prompt token).
2. **Verification outcome**: after the step, per speculating request, the number of
   accepted drafts ``a`` in ``0..k`` is drawn from the acceptance model of the request's
   slice (``SpeculativeConfig.acceptance_model(spec.slice)``) using the replica's own
   stream ``simulator.base.rng.stream(seed, "speculative", replica_idx)``. The request emits
   ``min(a + 1, remaining)`` tokens (the accepted drafts plus the bonus/corrected token,
   never past its output length or ``max_model_len``).
3. **KV rollback**: afterwards ``num_computed_tokens == num_tokens - 1`` (the KV of the
   accepted drafts exists; that of the bonus token is computed by the next step) and the
   blocks held beyond the computed tokens (rejected drafts' slots) go back to the pool.
4. **Counters** for :mod:`simulator.speculative.metrics` (per slice and per replica).

One speculative step is one inter-token gap per request, whatever it emits (DESIGN.md
glossary, ITL).

The cost assumptions of each drafting method are in :mod:`simulator.perf.draft_cost`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from simulator.base.compiled_core import register_pickling
from simulator.base.rng import stream
from simulator.catalog.models import get_model
from simulator.perf import build_perf_model
from simulator.perf.draft_cost import DraftCostModel, DraftWork
from simulator.perf.step_cost import StepPricer
from simulator.scenario.config import SchedulerConfig
from simulator.scheduling.continuous import ContinuousScheduler, StepOutput
from simulator.scheduling.limits import SchedulerLimits

__all__ = ["SliceCounters", "SpeculativeScheduler", "draft_cost_model", "spec_rng"]

#: Named RNG stream of the speculative subsystem (:mod:`simulator.base.rng`), one sub-stream per
#: replica.
SPEC_STREAM = "speculative"


def spec_rng(seed: int, replica_idx: int) -> np.random.Generator:
    """The speculative sampling stream of one replica.

    Parameters
    ----------
    seed : int
        The scenario's seed.
    replica_idx : int
        Replica index.

    Returns
    -------
    numpy.random.Generator
        ``simulator.base.rng.stream(seed, "speculative", replica_idx)``.
    """
    return stream(seed, SPEC_STREAM, replica_idx)


def draft_cost_model(scenario, setup) -> DraftCostModel:
    """The draft cost model of ``scenario.speculative`` on ``setup``'s GPUs.

    Parameters
    ----------
    scenario : Scenario
        With a ``speculative`` block.
    setup : ReplicaSetup
        ``setup.perf`` is the target's model; ``setup.extra["draft_model"]`` the draft's
        :class:`~simulator.catalog.models.ModelSpec` (``draft_model`` method).

    Returns
    -------
    DraftCostModel
    """
    spec = scenario.speculative
    k = spec.num_speculative_tokens
    if spec.draft_cost_ratio is not None:
        return DraftCostModel(spec.method, k, setup.perf,
                              draft_cost_ratio=float(spec.draft_cost_ratio))
    if spec.method == "ngram":
        return DraftCostModel("ngram", k, setup.perf)
    if spec.method == "draft_model":
        draft = setup.extra.get("draft_model")
        if draft is None:
            draft = get_model(spec.draft_model)
    else:  # eagle / medusa: one layer of the target + its LM head
        draft = dataclasses.replace(setup.model, num_layers=1,
                                    name=f"{setup.model.name}-{spec.method}-head",
                                    aliases=())
    return DraftCostModel(spec.method, k, setup.perf,
                          draft_perf=_build_draft_perf(draft, scenario, setup))


def _build_draft_perf(model, scenario, setup):
    try:
        return build_perf_model(model, setup.gpu, setup.tensor_parallel_size,
                                setup.weight_dtype, setup.kv_cache_dtype,
                                source=scenario.perf.source, engine=scenario.perf.engine,
                                engine_version=scenario.perf.engine_version,
                                constant=scenario.perf.constant,
                                max_num_seqs=scenario.scheduler.max_num_seqs,
                                max_num_batched_tokens=scenario.scheduler.max_num_batched_tokens)
    except ValueError:
        # no latency tables for the draft: the roofline (labelled so in the summary)
        return build_perf_model(model, setup.gpu, setup.tensor_parallel_size,
                                setup.weight_dtype, setup.kv_cache_dtype, source="roofline",
                                engine=scenario.perf.engine)


@dataclass
class SliceCounters:
    """Speculative counters of one workload slice on one replica.

    Attributes
    ----------
    num_drafts : int
        Speculating (request, step) pairs: vLLM's ``num_drafts``.
    num_draft_tokens : int
        Draft tokens verified (``k`` per draft; ``width * depth`` for a tree).
    num_accepted_tokens : int
        Draft tokens accepted by verification (before capping at the output length).
    num_emitted_tokens : int
        Tokens the speculating steps emitted (accepted + bonus, capped).
    accepted_hist : ndarray of int64, shape (k + 1,)
        Drafts that accepted exactly ``n`` tokens, ``n = 0..k``.
    num_plain_decodes : int
        Decodes that ran without drafts (the token budget had no room for the lookahead).
    draft_time_s : float
        Drafting time attributed to the slice: each speculating step's drafting time split
        by the slice's share of the step's speculating sequences (seconds).
    step_time_s : float
        Speculating steps' time attributed the same way (seconds).
    """

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    num_emitted_tokens: int = 0
    accepted_hist: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    num_plain_decodes: int = 0
    draft_time_s: float = 0.0
    step_time_s: float = 0.0


class SpeculativeScheduler(ContinuousScheduler):
    """Continuous batching with speculative decoding (draft, verify, accept, roll back).

    Parameters
    ----------
    config : SchedulerConfig
        The scenario's ``scheduler:`` section.
    limits : SchedulerLimits
        The replica's derived scheduler limits.
    kv : KVCacheManager
        The replica's KV cache (lookahead slots are allocated by the parent's ``schedule``
        and released here on rejection).
    recorder : RunRecorder
        Run records (finished requests, ITL samples).
    replica_id : int
        Replica index (also selects the RNG stream).
    scenario : Scenario
        Must have ``speculative`` set.
    setup : ReplicaSetup
        Target performance model, GPU, TP and the draft model spec.

    Attributes
    ----------
    k : int
        ``num_speculative_tokens`` (tree depth for trees).
    num_lookahead_tokens : int
        Draft tokens verified per decode (``k``, or ``width * depth`` for a tree).
    slices : dict of str to SliceCounters
        Counters per workload slice.
    draft_decode_time_s, draft_prefill_time_s : float
        Total drafting time and the draft's prefill time (seconds).
    busy_time_s, spec_step_time_s : float
        Time of all steps, and of the steps that drafted (seconds).
    num_steps, num_spec_steps : int
        Steps, and steps that drafted.
    step_log : dict of str to list
        One entry per drafting step: ``num_seqs`` (speculating sequences), ``batch_size``
        (all sequences of the step), ``ctx_total``
        (their summed context before the step, tokens), ``prefill_tokens``, ``step_time_s``
        and ``draft_time_s`` (drafting + draft prefill, seconds); the verification cost
        analysis of :mod:`simulator.speculative.metrics` reads it.
    """

    #: parallel sampling with drafts is not modelled: such requests are rejected at arrival
    supports_parallel_sampling = False

    def __init__(self, config: SchedulerConfig, limits: SchedulerLimits, kv, recorder,
                 replica_id: int = 0, *, scenario, setup):
        super().__init__(config, limits, kv, recorder, replica_id)
        self._built_from = (scenario, setup)  # (rebuilds it when unpickled: _init_args)
        spec = scenario.speculative
        if spec is None:
            raise ValueError("SpeculativeScheduler needs scenario.speculative")
        self.spec_cfg = spec
        self.k = int(spec.num_speculative_tokens)
        self.num_lookahead_tokens = int(spec.num_verified_tokens)
        self.rng = spec_rng(scenario.seed, replica_id)
        #: prices the draft work of this replica's steps (:meth:`step_pricer`)
        self.cost = draft_cost_model(scenario, setup)
        self.target_perf = setup.perf
        self._slice_row: dict[str, int] = {}
        self._slice_names: list[str] = []
        self._row_counters: list[SliceCounters] = []
        self._cdf = np.zeros((0, self.k + 1))
        self.slices: dict[str, SliceCounters] = {}
        self.draft_decode_time_s = 0.0
        self.draft_prefill_time_s = 0.0
        self.busy_time_s = 0.0
        self.spec_step_time_s = 0.0
        self.num_steps = 0
        self.num_spec_steps = 0
        self.step_log: dict[str, list] = {"num_seqs": [], "batch_size": [], "ctx_total": [],
                                          "prefill_tokens": [], "step_time_s": [],
                                          "draft_time_s": []}
        self._pending: tuple | None = None
        #: set by the gateway's degrade controller (``disable_speculation``): the next steps
        #: verify no draft tokens; the draft keeps prefilling so speculation can resume
        self.speculation_paused = False
        self.num_paused_steps = 0

    def _init_args(self) -> tuple[tuple, dict]:
        """Constructor arguments that rebuild this object when unpickled
        (:func:`simulator.base.compiled_core.register_pickling`)."""
        return (self.cfg, self.limits, self.kv, self.rec, self.replica_id), {"scenario": self._built_from[0], "setup": self._built_from[1]}

    # ------------------------------------------------------------------ acceptance models
    def _row(self, slice_name: str) -> int:
        row = self._slice_row.get(slice_name)
        if row is None:
            model = self.spec_cfg.acceptance_model(slice_name)
            pmf = np.asarray(model.pmf(self.k), dtype=float)
            cdf = np.cumsum(pmf)
            # from the last length of positive probability on the cdf is exactly 1, so a
            # uniform in [0, 1) never lands on a zero-probability tail (as the models do)
            cdf[int(np.flatnonzero(pmf > 0.0)[-1]):] = 1.0
            row = len(self._slice_names)
            self._slice_row[slice_name] = row
            self._slice_names.append(slice_name)
            self._row_counters.append(self._counters(slice_name))
            self._cdf = np.vstack([self._cdf, cdf[None, :]])
        return row

    def _counters(self, slice_name: str) -> SliceCounters:
        c = self.slices.get(slice_name)
        if c is None:
            c = SliceCounters(accepted_hist=np.zeros(self.k + 1, dtype=np.int64))
            self.slices[slice_name] = c
        return c

    def sample_accepted(self, rows: np.ndarray) -> np.ndarray:
        """Accepted drafts for one step: one uniform per speculating request.

        Parameters
        ----------
        rows : ndarray of int
            Acceptance-model row (slice) of each speculating request, in batch order.

        Returns
        -------
        ndarray of int64
            Accepted drafts per request, in ``0..k`` (inverse-CDF sampling, as
            :meth:`AcceptanceModel.sample_num_accepted` does).
        """
        u = self.rng.random(len(rows))
        return (self._cdf[rows] <= u[:, None]).sum(axis=1).astype(np.int64)

    # ------------------------------------------------------------------ one iteration
    def step_pricer(self, perf) -> StepPricer:
        """The pricer of this scheduler's steps on ``perf``: the parent's, plus the draft
        work priced by :attr:`cost`."""
        bw = self.limits.host_link_bandwidth_bytes_per_s
        return StepPricer(perf, host_link_bandwidth_bytes_per_s=bw, draft=self.cost)

    def schedule(self, now: float) -> StepOutput | None:
        """Build the next iteration and report its draft work in ``out.draft``."""
        paused = self.speculation_paused
        self.num_lookahead_tokens = 0 if paused else int(self.spec_cfg.num_verified_tokens)
        out = super().schedule(now)
        self._pending = None
        if out is None:
            return None
        if paused:
            out.veto = out.veto or "speculation_paused"  # stepped: the counters stay exact
            self.num_paused_steps += 1
        la = self.num_lookahead_tokens
        spec_reqs = []
        ctx = 0
        prefill_done = 0  # prefill chunks that complete their prompt
        for r, n in zip(out.reqs, out.ntoks):
            if r.is_decoding:
                if la and n == 1 + la:  # la == 0: speculation paused, a plain decode
                    spec_reqs.append(r)
                    ctx += r.num_tokens
            elif r.num_computed_tokens + n == r.num_tokens:
                prefill_done += 1
        out.draft = DraftWork(len(spec_reqs), ctx, prefill_done)
        self._pending = (out, spec_reqs, ctx)
        return out

    def update(self, out: StepOutput, start: float, end: float) -> None:
        """Apply a finished iteration: verification outcome, emissions, KV rollback.

        Raises
        ------
        ValueError
            When ``out`` (from :meth:`schedule`) was not priced (``out.cost``: the drafting
            times the counters take come from its price, :meth:`step_pricer`).
        """
        pending, self._pending = self._pending, None
        dt = end - start
        self.num_steps += 1
        self.busy_time_s += dt
        if pending is None or pending[0] is not out:
            super().update(out, start, end)
            return
        _, spec_reqs, ctx = pending
        cost = out.cost
        if cost is None:
            raise ValueError("SpeculativeScheduler.update: the step was not priced "
                             "(StepPricer.price from step_pricer) before it was applied")
        d_dec, d_pre = cost.draft_decode_s, cost.draft_prefill_s
        self.draft_decode_time_s += d_dec
        self.draft_prefill_time_s += d_pre
        # decodes that got no lookahead (no budget left for it)
        for r, n in zip(out.reqs, out.ntoks):
            if n == 1 and r.is_decoding:
                self._counters(r.spec.slice).num_plain_decodes += 1
        drafted = None
        if spec_reqs:
            self.num_spec_steps += 1
            self.spec_step_time_s += dt
            log = self.step_log
            log["num_seqs"].append(len(spec_reqs))
            log["batch_size"].append(len(out.reqs))
            log["ctx_total"].append(ctx)
            log["prefill_tokens"].append(out.num_prefill_tokens)
            log["step_time_s"].append(dt)
            log["draft_time_s"].append(cost.draft_s)
            drafted = self._verify(spec_reqs, dt, d_dec)
        # emission, finishes and the rollback of rejected drafts' slots: the parent's one
        # routine, told how many tokens each verified request emits
        self._apply_step(out, start, end, drafted)

    def _verify(self, spec_reqs: list, dt: float, d_dec: float) -> dict:
        """Draw each speculating request's accepted drafts and count them; returns the
        tokens each request emits (accepted + bonus, capped by its output length and
        ``max_model_len``)."""
        max_len = self.limits.max_model_len
        row_of = self._slice_row
        rows_l = []
        for r in spec_reqs:
            row = row_of.get(r.spec.slice)
            rows_l.append(self._row(r.spec.slice) if row is None else row)
        rows = np.array(rows_l, dtype=np.int64)
        accepted = self.sample_accepted(rows)
        emitted = np.empty(len(spec_reqs), dtype=np.int64)
        drafted = {}
        for i, (r, a) in enumerate(zip(spec_reqs, accepted.tolist())):
            ntok = r.num_prompt_tokens + r.num_emitted
            # never past the output length or max_model_len
            e = min(a + 1, max(1, min(r.num_output_tokens - r.num_emitted, max_len - ntok)))
            emitted[i] = e
            drafted[r] = e
            r.spec_drafts += 1
            r.spec_accepted += a
        self._count(rows, accepted, emitted, len(spec_reqs), dt, d_dec)
        return drafted

    def _count(self, rows, accepted, emitted, num_spec: int, dt: float, d_dec: float) -> None:
        """Per-slice counters of one verification step."""
        # counters per slice (vectorised over the batch)
        nrow, k1 = len(self._slice_names), self.k + 1
        n = np.bincount(rows, minlength=nrow)
        acc = np.bincount(rows, weights=accepted, minlength=nrow)
        emi = np.bincount(rows, weights=emitted, minlength=nrow)
        hist = np.bincount(rows * k1 + accepted, minlength=nrow * k1).reshape(nrow, k1)
        nver = self.num_lookahead_tokens
        share = 1.0 / num_spec
        for row in np.flatnonzero(n).tolist():
            c = self._row_counters[row]
            cnt = int(n[row])
            c.num_drafts += cnt
            c.num_draft_tokens += cnt * nver
            c.num_accepted_tokens += int(acc[row])
            c.num_emitted_tokens += int(emi[row])
            c.accepted_hist += hist[row]
            c.draft_time_s += d_dec * share * cnt
            c.step_time_s += dt * share * cnt


register_pickling(SliceCounters, SpeculativeScheduler)
