"""The immutable description of one request as the workload declares it.

A :class:`RequestSpec` is what a trace row or a synthetic generator produces. The simulator
never mutates it; the replica keeps its own mutable progress state (see
``simulator/scheduling/state.py``).

Oracle boundary (DESIGN.md invariant 8): ``num_output_tokens`` is the *true* output length,
known to the simulator only. Routing and admission control may read ``max_tokens`` (the
declared limit a real client sends), never ``num_output_tokens``.
"""
from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request of the workload.

    Attributes
    ----------
    request_id : int
        Unique, dense id within a run (0..N-1 in arrival order).
    arrival_time_s : float
        Arrival time in seconds from the start of the run (>= 0).
    num_prompt_tokens : int
        Prompt (input) length in tokens (>= 1).
    num_output_tokens : int
        True output length in tokens (>= 1). Oracle: only the engine's token accounting reads it.
    max_tokens : int or None
        Declared output limit (what a client sends); ``None`` when the workload has none.
    tenant : str
        Tenant / client name (for per-tenant metrics and fair share).
    priority : int
        Priority class; lower value = more important (vLLM's convention).
    slice : str
        Workload slice name (e.g. ``code``, ``chat``) for per-slice metrics and acceptance.
    cancel_after_s : float or None
        Client patience in seconds after arrival: a request still without its first token at
        ``arrival_time_s + cancel_after_s`` is cancelled.
    cancel_when_streaming : bool
        The client's ``cancel_after_s`` covers the whole response (a total HTTP time-out, e.g.
        aiohttp's ``ClientTimeout(total=...)``): a request still streaming then is cancelled
        too, at the end of the step in progress, its KV freed (vLLM's API server aborts a
        request whose client disconnected). False: only requests without a first token.
    prefix_hash_ids : tuple of int or None
        Content ids of the request's token blocks, ``prefix_block_tokens`` tokens each, from
        the prompt's first token on (Mooncake ``hash_ids``); equal ids (and equal ids before
        them) share KV. They usually cover a prefix of the prompt; a session turn's ids also
        cover its output, so the next turn, whose prompt repeats this turn's prompt and
        answer, finds their blocks (:mod:`simulator.kv.manager`).
    prefix_block_tokens : int
        Tokens covered by one entry of ``prefix_hash_ids`` (512 in the Mooncake traces).
    source_line : int or None
        Line number in the source trace file (1-based, header = line 1), for error messages.
    n : int
        Output sequences generated from the prompt (vLLM ``SamplingParams.n``; with
        ``use_beam_search`` the beam width, as vLLM's OpenAI server reads ``n``). The ``n``
        sequences share the prompt's KV blocks (copy-on-write, :mod:`simulator.kv.cow`); each
        is ``num_output_tokens`` long.
    use_beam_search : bool
        Beam search of width ``n`` (vLLM's ``use_beam_search``); costed as parallel sampling.
    num_kv_transferred_tokens : int
        Prompt tokens whose KV cache arrives with the request (disaggregated serving: a
        decode pool's copy of a request prefilled elsewhere, which also brings its first
        output token); the replica allocates their blocks on admission but does not compute
        them. 0 for every workload request.
    handoff_token_time_s : float or None
        With ``num_kv_transferred_tokens``: when the prefill pool emitted the first token
        (seconds), so the decode side's first inter-token gap is measured from it.
    session_id : int or None
        The conversation (or agent session) this request is a turn of; None: a request alone.
    turn_index : int
        0-based position of the turn in its session (turns of a session are consecutive
        integers from 0).
    think_time_s : float
        Closed-loop sessions: seconds between the end of the previous turn (its last token)
        and this turn's arrival (the user reading and typing); ignored for turn 0 and when
        turns arrive at their recorded times (``workload.session_arrival: open``).
    """

    request_id: int
    arrival_time_s: float
    num_prompt_tokens: int
    num_output_tokens: int
    max_tokens: int | None = None
    tenant: str = "default"
    priority: int = 0
    slice: str = "default"
    cancel_after_s: float | None = None
    prefix_hash_ids: tuple[int, ...] | None = None
    prefix_block_tokens: int = 512
    source_line: int | None = None
    n: int = 1
    use_beam_search: bool = False
    num_kv_transferred_tokens: int = 0
    handoff_token_time_s: float | None = None
    cancel_when_streaming: bool = False
    session_id: int | None = None
    turn_index: int = 0
    think_time_s: float = 0.0


#: each field's slot setter, in field order (a new field must be added to :func:`request_spec`:
#: the unpacking fails at import otherwise)
(_SET_ID, _SET_ARRIVAL, _SET_PROMPT, _SET_OUTPUT, _SET_MAX_TOKENS, _SET_TENANT, _SET_PRIORITY,
 _SET_SLICE, _SET_CANCEL, _SET_PREFIX, _SET_BLOCK_TOKENS, _SET_LINE, _SET_N, _SET_BEAM,
 _SET_KV_MOVED, _SET_HANDOFF, _SET_CANCEL_STREAMING, _SET_SESSION, _SET_TURN, _SET_THINK) = (
    RequestSpec.__dict__[f.name].__set__ for f in fields(RequestSpec))


def request_spec(request_id, arrival_time_s, num_prompt_tokens, num_output_tokens, max_tokens,
                 tenant, priority, slice, cancel_after_s, prefix_hash_ids, prefix_block_tokens,
                 source_line, n, use_beam_search, num_kv_transferred_tokens,
                 handoff_token_time_s, cancel_when_streaming, session_id, turn_index,
                 think_time_s) -> RequestSpec:
    """``RequestSpec(...)`` of every field, positionally, in field order: the trace readers'
    constructor (a million-request trace makes a million specs). The frozen dataclass's
    ``__init__`` sets each slot through ``object.__setattr__`` (3.0 us a spec); this sets them
    through the slots' own setters (1.5 us). The same object: equal, hashed and printed as
    ``RequestSpec(...)`` makes it (``tests/base/test_request_spec.py``)."""
    s = object.__new__(RequestSpec)
    _SET_ID(s, request_id)
    _SET_ARRIVAL(s, arrival_time_s)
    _SET_PROMPT(s, num_prompt_tokens)
    _SET_OUTPUT(s, num_output_tokens)
    _SET_MAX_TOKENS(s, max_tokens)
    _SET_TENANT(s, tenant)
    _SET_PRIORITY(s, priority)
    _SET_SLICE(s, slice)
    _SET_CANCEL(s, cancel_after_s)
    _SET_PREFIX(s, prefix_hash_ids)
    _SET_BLOCK_TOKENS(s, prefix_block_tokens)
    _SET_LINE(s, source_line)
    _SET_N(s, n)
    _SET_BEAM(s, use_beam_search)
    _SET_KV_MOVED(s, num_kv_transferred_tokens)
    _SET_HANDOFF(s, handoff_token_time_s)
    _SET_CANCEL_STREAMING(s, cancel_when_streaming)
    _SET_SESSION(s, session_id)
    _SET_TURN(s, turn_index)
    _SET_THINK(s, think_time_s)
    return s
