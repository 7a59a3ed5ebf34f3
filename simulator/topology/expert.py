"""Expert parallelism: how many bytes the MoE all-to-all moves.

With EP over ``p`` ranks each rank holds ``E / p`` experts; each token picks ``k`` experts
(top-k routing). In a true all-to-all (dispatch, then combine: DeepEP, pplx-kernels, vLLM's
``deepep_*`` / ``pplx`` backends) a token's hidden state is sent to every remote rank holding
one of its experts and the expert outputs come back the same way. Under uniform routing a
chosen expert is remote with probability ``(p - 1) / p``, so per rank and per MoE layer

    dispatch bytes = T x k x (p - 1) / p x hidden x act_bytes      (sent, and received)
    combine bytes  = the same, in the other direction

where ``T`` is the rank's tokens. vLLM's default ``allgather_reducescatter`` backend instead
all-gathers the whole group's hidden states and reduce-scatters the outputs: each rank
receives ``(p - 1) / p x T_group x hidden x act_bytes`` per collective (ring collectives,
Patarasuk & Yuan 2009), independent of ``k``.

Load imbalance: routing is rarely uniform. A skew factor ``s >= 1`` states that the busiest
rank receives ``s`` times the mean (``s = 1``: uniform); the step waits for that rank, so its
expert rows and received bytes scale by ``s``.
"""
from __future__ import annotations

from dataclasses import dataclass

BACKENDS = ("all_to_all", "allgather_reducescatter")


@dataclass(frozen=True)
class AllToAllVolume:
    """Bytes one rank exchanges for one MoE layer (the busiest rank under skew).

    Attributes
    ----------
    dispatch_bytes, combine_bytes : float
        Received by the busiest rank in the dispatch and the combine phase.
    """

    dispatch_bytes: float
    combine_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.dispatch_bytes + self.combine_bytes


def ep_all_to_all_volume(num_tokens_per_rank: int, hidden_size: int, experts_per_token: int,
                         expert_parallel_size: int, *, act_bytes: int = 2,
                         backend: str = "all_to_all", skew: float = 1.0) -> AllToAllVolume:
    """Per-rank bytes of one MoE layer's token exchange (formulas: module docstring).

    Parameters
    ----------
    num_tokens_per_rank : int
        Tokens of one data-parallel rank in the step (balanced ranks: the group has
        ``p`` times as many).
    hidden_size, experts_per_token, expert_parallel_size : int
    act_bytes : int
        Bytes per activation element (bf16: 2).
    backend : {"all_to_all", "allgather_reducescatter"}
    skew : float
        Busiest rank's load over the mean (>= 1).

    Raises
    ------
    ValueError
        On an unknown backend, ``skew < 1`` or ``expert_parallel_size < 1``.
    """
    if backend not in BACKENDS:
        raise ValueError(f"EP backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if not skew >= 1.0:
        raise ValueError(f"expert load skew must be >= 1 (1 = uniform routing), got {skew!r}")
    p = int(expert_parallel_size)
    if p < 1:
        raise ValueError(f"expert_parallel_size must be >= 1, got {p}")
    if p == 1:
        return AllToAllVolume(0.0, 0.0)
    frac = (p - 1) / p
    row = float(hidden_size) * act_bytes
    if backend == "all_to_all":
        one = num_tokens_per_rank * experts_per_token * frac * row * skew
    else:  # the gathered tensor is the same for every rank: skew does not change it
        one = frac * num_tokens_per_rank * p * row
    return AllToAllVolume(one, one)
