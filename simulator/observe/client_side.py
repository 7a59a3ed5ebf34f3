"""The API server's share of a client-measured latency: the engine profile's ``api_server``
terms (:class:`simulator.perf.engine_profile.ApiServer`) added to a replay's simulated
latencies when, and only when, the record was measured at the HTTP client.

The simulation starts a request when it reaches the engine and ends it when the engine
emits its last token; a client (inference-perf, GuideLLM, ``vllm bench serve``) also times the
HTTP request, the prompt's tokenisation, the response's set-up, detokenisation and streaming.
The replay keeps the client's send times as the engine's arrivals and shifts what the client
sees: first token and finish by ``per_request_s``, each later token by a further
``per_output_token_s`` (a constant shift of every arrival would not change the engine's
schedule). Engine-side records (vLLM ``RequestStateStats``) are compared unshifted.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from simulator.cluster.setup import _user_path
from simulator.observe.record import RecordedRun
from simulator.perf.engine_profile import EngineProfile, get_engine_profile

__all__ = ["api_server_section", "api_server_terms", "client_view"]


def api_server_terms(run: RecordedRun, result, base_dir=None) -> tuple[float, float, Any]:
    """``(per_request_s, per_output_token_s, profile_api_server)`` for a replay: the terms of
    the engine profile the scenario names (``perf.engine``, whatever the step-time source) for
    a client-side record, ``(0, 0, ...)`` for an engine-side one.

    Raises
    ------
    ValueError
        The scenario's engine profile cannot be loaded.
    """
    prof = getattr(getattr(result.setup, "perf", None), "engine", None)
    if not isinstance(prof, EngineProfile):   # e.g. perf.source: constant loads no profile
        prof = get_engine_profile(_user_path(str(result.scenario.perf.engine), base_dir))
    api = prof.api_server
    if not run.client_side:
        return 0.0, 0.0, api
    return float(api.per_request_s.value), float(api.per_output_token_s.value), api


def client_view(requests: pd.DataFrame, per_request_s: float,
                per_output_token_s: float) -> pd.DataFrame:
    """The simulation's request table as the client would time it.

    Parameters
    ----------
    requests : pandas.DataFrame
        ``RunResult.requests`` (``first_token_time_s``, ``finish_time_s``,
        ``num_emitted_tokens``, ``status``).
    per_request_s, per_output_token_s : float
        Seconds (>= 0).

    Returns
    -------
    pandas.DataFrame
        A copy with ``first_token_time_s`` + ``per_request_s`` and, for requests that
        emitted tokens, ``finish_time_s`` + ``per_request_s`` + ``per_output_token_s`` x
        (emitted tokens - 1); the same frame when both terms are 0.
    """
    if not (per_request_s or per_output_token_s):
        return requests
    out = requests.copy()
    emitted = out["num_emitted_tokens"].to_numpy(dtype=float)
    has = emitted >= 1
    ft = out["first_token_time_s"].to_numpy(dtype=float)
    fin = out["finish_time_s"].to_numpy(dtype=float)
    out["first_token_time_s"] = np.where(has, ft + per_request_s, ft)
    out["finish_time_s"] = np.where(
        has, fin + per_request_s + per_output_token_s * np.maximum(emitted - 1.0, 0.0), fin)
    return out


def api_server_section(run: RecordedRun, per_request_s: float, per_output_token_s: float,
                       api) -> dict:
    """The ``api_server`` entry of ``validation.json``: whether the terms were applied, why,
    and their values and sources."""
    consts = api.constants() if api is not None else {}
    return {
        "applied": bool(run.client_side),
        "why": ("the record's latencies are measured at the HTTP client" if run.client_side
                else "the record's latencies are the engine's own (no API server in them)"),
        "per_request_s": per_request_s if run.client_side else 0.0,
        "per_output_token_s": per_output_token_s if run.client_side else 0.0,
        "profile": consts,
    }
