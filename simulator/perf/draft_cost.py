"""What speculative decoding's drafting adds to a step, priced from the draft work a step does.

The speculative scheduler (:class:`~simulator.scheduling.speculative.SpeculativeScheduler`)
reports a step's draft work as a :class:`DraftWork` (speculating sequences, their context,
prompt chunks that complete); :class:`DraftCostModel` prices it, and
:class:`~simulator.perf.step_cost.StepPricer` adds the result to the step's cost as its
``draft_s``. Cost assumptions, by method:

- ``draft_model``: the draft model's own step time from the performance model on the same
  GPUs and TP degree (``build_perf_model(draft, gpu, tp)``), ``k`` decode steps whose
  context grows by one token per step. Drafting runs inside the engine iteration (one
  scheduler pass, CUDA graphs), so the per-iteration CPU overhead of the draft's
  performance model is not charged again. The first draft pass, which in a real engine
  also re-reads the tokens accepted in the previous step, is costed as a 1-token decode.
- ``eagle`` / ``medusa``: one draft position costs one transformer layer of the target
  plus its LM head (an EAGLE head is one decoder layer feeding the target's LM head; a
  Medusa head is a residual block plus an LM head, which this overstates slightly by the
  attention). Costed as a 1-layer copy of the target on the performance model, ``k``
  positions in sequence.
- ``ngram`` (prompt lookup): a fixed CPU cost of :data:`NGRAM_COST_PER_SEQ_S` per
  speculating sequence and step, independent of ``k``; no draft prefill.
- ``draft_cost_ratio`` (``c``) overrides all of the above: one draft step costs ``c`` times
  the target's plain decode step of the same batch (Leviathan et al.'s ``c``), and the
  draft prefill costs ``c`` times the target's prefill of the same chunks.

Besides drafting, the draft keeps its own KV cache of the prompt (EAGLE heads read the
target's hidden states of every prompt token), so a step with prompt chunks also pays the
draft's prefill of them.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from simulator.perf.step_shape import StepShape

__all__ = ["NGRAM_COST_PER_SEQ_S", "DraftCostModel", "DraftWork"]

#: n-gram (prompt-lookup) proposer CPU cost per speculating sequence and step, seconds. An
#: assumption (a suffix match over the request's tokens on the host), small next to a step.
NGRAM_COST_PER_SEQ_S = 1.0e-5


class DraftWork(NamedTuple):
    """The draft work of one step, as its scheduler reports it (the prompt chunks are the
    step shape's ``prefill_q`` / ``prefill_start``).

    Attributes
    ----------
    num_seqs : int
        Speculating decode sequences (each drafts ``k`` tokens).
    ctx_total : int
        Their summed context at the first draft pass (prompt + emitted tokens).
    num_prefill_sampled : int
        Prompt chunks of the step that complete their prompt (rows through the draft's LM
        head).
    """

    num_seqs: int
    ctx_total: int
    num_prefill_sampled: int


def _gpu_decode(perf, num_seqs: int, ctx) -> np.ndarray:
    """Kernel seconds of ``len(ctx)`` decode passes of the draft (no engine CPU/sync time:
    drafting runs inside the target's step)."""
    f = getattr(perf, "gpu_decode_step_times", None)
    return np.asarray(f(num_seqs, ctx) if f is not None else perf.decode_step_times(num_seqs, ctx),
                      dtype=float)


def _gpu_step(perf, shape) -> float:
    """Kernel seconds of one draft pass over ``shape`` (no engine CPU/sync time)."""
    f = getattr(perf, "gpu_step_time", None)
    return float(f(shape) if f is not None else perf.step_time(shape))


class DraftCostModel:
    """Time one engine step spends drafting (seconds), by speculative method.

    Parameters
    ----------
    method : {"draft_model", "ngram", "eagle", "medusa"}
        The proposer.
    num_draft_steps : int
        ``k``: sequential draft passes per step (tree depth for trees).
    target_perf : object
        The target's performance model (``step_time(shape)``, ``decode_step_times(n, ctx)``).
    draft_perf : object, optional
        Performance model of the draft (``draft_model``) or of the 1-layer head
        (``eagle``/``medusa``); unused with ``draft_cost_ratio`` or ``ngram``.
    draft_cost_ratio : float, optional
        ``c``: one draft step = ``c`` x the target's plain decode step of the same batch.

    Notes
    -----
    See the module docstring for the assumptions behind each method;
    :func:`simulator.scheduling.speculative.draft_cost_model` builds one from a scenario.
    """

    def __init__(self, method: str, num_draft_steps: int, target_perf, draft_perf=None,
                 draft_cost_ratio: float | None = None):
        self.method = method
        self.k = int(num_draft_steps)
        self.target_perf = target_perf
        self.draft_perf = draft_perf
        self.ratio = draft_cost_ratio
        self._steps = np.arange(self.k, dtype=np.int64)

    def decode_cost(self, num_seqs: int, ctx_total: int) -> float:
        """Drafting time for ``num_seqs`` speculating sequences (seconds).

        Parameters
        ----------
        num_seqs : int
            Speculating decode sequences in the step.
        ctx_total : int
            Their summed context (tokens) at the first draft pass (prompt + emitted).

        Returns
        -------
        float
            ``k`` sequential draft passes (0 when ``num_seqs == 0``).
        """
        if num_seqs <= 0 or self.k <= 0:
            return 0.0
        if self.ratio is not None:
            if self.ratio == 0.0:
                return 0.0
            t = self.target_perf.decode_step_times(num_seqs, np.array([ctx_total]))
            return float(self.k * self.ratio * float(np.asarray(t).reshape(-1)[0]))
        if self.method == "ngram":
            return NGRAM_COST_PER_SEQ_S * num_seqs
        ctx = ctx_total + self._steps * num_seqs
        return float(np.sum(_gpu_decode(self.draft_perf, num_seqs, ctx)))

    def prefill_cost(self, prefill_q: list, prefill_start: list, num_sampled: int) -> float:
        """The draft's own prefill of the step's prompt chunks (seconds).

        Parameters
        ----------
        prefill_q, prefill_start : list of int
            Query tokens and cached tokens of each prefill chunk (as in ``StepShape``).
        num_sampled : int
            Chunks that complete their prompt (rows through the draft's LM head).

        Returns
        -------
        float
            0 for ``ngram`` or without prefill chunks.
        """
        if not prefill_q or self.method == "ngram":
            return 0.0
        shape = StepShape(prefill_q=list(prefill_q), prefill_start=list(prefill_start),
                          num_sampled=int(num_sampled))
        if self.ratio is not None:
            if self.ratio == 0.0:
                return 0.0
            return float(self.ratio * self.target_perf.step_time(shape))
        return _gpu_step(self.draft_perf, shape)
