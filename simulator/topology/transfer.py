"""KV-cache transfer between a prefill and a decode GPU (disaggregated serving).

In prefill/decode disaggregation (DistServe, Zhong et al. OSDI 2024; Splitwise, Patel et al.
ISCA 2024; vLLM's P/D connectors) the prefill instance computes the prompt's KV cache and the
first token, then ships the KV to a decode instance. The bytes moved are the KV bytes of the
prompt over all layers; the link is modelled alpha-beta (Hockney 1994): one message of ``b``
bytes takes ``latency_s + b / bandwidth_bytes_per_s``.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Link:
    """A point-to-point link: achieved one-direction bandwidth and per-message latency.

    Parameters
    ----------
    bandwidth_bytes_per_s : float
        Achieved bandwidth of one direction (> 0), bytes per second.
    latency_s : float
        Fixed cost of one message (>= 0), seconds.
    kind : str
        Label only (``nvlink``, ``infiniband``, ``pcie``).

    Raises
    ------
    ValueError
        On a non-positive bandwidth or a negative latency.
    """

    bandwidth_bytes_per_s: float
    latency_s: float = 0.0
    kind: str = ""

    def __post_init__(self):
        if not self.bandwidth_bytes_per_s > 0:
            raise ValueError(f"link bandwidth_bytes_per_s must be > 0, got "
                             f"{self.bandwidth_bytes_per_s!r}")
        if not self.latency_s >= 0:
            raise ValueError(f"link latency_s must be >= 0, got {self.latency_s!r}")

    def message_time_s(self, num_bytes: float) -> float:
        """Seconds to move one message of ``num_bytes`` bytes: ``latency + bytes / bandwidth``."""
        return self.latency_s + float(num_bytes) / self.bandwidth_bytes_per_s


def kv_transfer_bytes(num_prompt_tokens: int, kv_bytes_per_token: float) -> float:
    """Bytes of KV a prompt hands over: ``prompt tokens x KV bytes per token``.

    Parameters
    ----------
    num_prompt_tokens : int
        Tokens whose K and V the prefill computed (>= 0).
    kv_bytes_per_token : float
        KV bytes of one token over *all* layers and KV heads of the model
        (:meth:`simulator.catalog.models.ModelSpec.kv_bytes_per_token` with ``tp=1``): the whole
        cache moves, whichever way the two sides shard it.
    """
    if num_prompt_tokens < 0:
        raise ValueError(f"num_prompt_tokens must be >= 0, got {num_prompt_tokens}")
    return float(num_prompt_tokens) * float(kv_bytes_per_token)


def kv_transfer_time_s(num_prompt_tokens: int, kv_bytes_per_token: float, link: Link, *,
                       num_layers: int = 1, prefill_s: float = 0.0,
                       layerwise: bool = False) -> float:
    """Seconds the decode side waits for a prompt's KV after the prefill finished.

    Without overlap the KV is one message: ``latency + bytes / bandwidth``. With
    ``layerwise=True`` (the engine sends each layer's KV as soon as that layer's prefill is
    done, as vLLM's layer-wise connectors and DistServe do) the ``L`` per-layer messages of
    ``m = latency + bytes / (L x bandwidth)`` each queue on the link behind a prefill that
    produces one layer every ``c = prefill_s / L``: the last message ends
    ``m + (L - 1) x max(0, m - c)`` after the prefill's end (a link faster than the compute
    hides all but the last layer; a slower one is the bottleneck).

    Parameters
    ----------
    num_prompt_tokens : int
    kv_bytes_per_token : float
        See :func:`kv_transfer_bytes`.
    link : Link
    num_layers : int
        Layers ``L`` (layer-wise mode only).
    prefill_s : float
        Prefill compute time of the prompt, seconds (layer-wise mode only).
    layerwise : bool
        Overlap the transfer with the prefill layer by layer.

    Returns
    -------
    float
        Exposed transfer time in seconds (0 for an empty prompt).
    """
    byts = kv_transfer_bytes(num_prompt_tokens, kv_bytes_per_token)
    if byts <= 0:
        return 0.0
    if not layerwise or num_layers <= 1:
        return link.message_time_s(byts)
    L = int(num_layers)
    m = link.message_time_s(byts / L)
    c = max(0.0, float(prefill_s)) / L
    return m + (L - 1) * max(0.0, m - c)
