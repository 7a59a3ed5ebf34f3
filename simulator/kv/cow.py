"""Block arithmetic of parallel sampling with copy-on-write prompt blocks.

A request with ``n > 1`` (vLLM ``SamplingParams.n``; beam search with ``use_beam_search`` and
beam width ``n``) runs ``n`` sequences over one prompt. PagedAttention shares the prompt's KV
between them (Kwon et al., SOSP 2023, section 4.4 "parallel sampling": the sequences' block
tables point at the same physical prompt blocks, reference counted, and a block shared by
several sequences is copied when one of them first writes into it: copy-on-write). With
prompt length ``P``, block size ``B`` and ``L >= P`` tokens of KV per sequence:

- the ``F = P // B`` full prompt blocks are held once, shared by all ``n`` sequences;
- while no sequence has written past the prompt (``L == P``, the prefill), the prompt's last
  partial block is shared too: ``ceil(P / B)`` blocks in all;
- the first generated token lands in the partial block (when ``P % B != 0``): every sequence
  but the last holder copies it, so each sequence then owns ``ceil(L / B) - F`` blocks.

Hence, for ``L > P``::

    blocks(P, L, n, B) = F + n x (ceil(L / B) - F)

against ``n x ceil(L / B)`` for ``n`` independent requests: ``(n - 1) x F`` blocks saved
(``(n - 1) x ceil(P / B)`` during the prefill). Beam search is charged as parallel sampling:
an upper bound on its KV (beams that share a generated prefix share its full blocks too).
"""
from __future__ import annotations


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def parallel_sampling_blocks(num_prompt_tokens: int, num_tokens: int, n: int,
                             block_size: int) -> int:
    """Physical KV blocks held by ``n`` sequences sharing one prompt (copy-on-write).

    Parameters
    ----------
    num_prompt_tokens : int
        Prompt length ``P`` in tokens (>= 1).
    num_tokens : int
        Tokens of KV each sequence needs (``L``; ``L <= P`` during the prefill, when the
        prompt's KV is computed once for all sequences).
    n : int
        Sequences (>= 1).
    block_size : int
        Tokens per block (>= 1).

    Returns
    -------
    int
        ``ceil(L / B)`` while ``L <= P``; ``P // B + n x (ceil(L / B) - P // B)`` after.

    Raises
    ------
    ValueError
        On ``n < 1``, ``block_size < 1``, ``num_prompt_tokens < 1`` or ``num_tokens < 0``.
    """
    if n < 1 or block_size < 1 or num_prompt_tokens < 1 or num_tokens < 0:
        raise ValueError(f"parallel_sampling_blocks needs n >= 1, block_size >= 1, a prompt "
                         f">= 1 token and num_tokens >= 0; got n={n}, block_size={block_size},"
                         f" prompt={num_prompt_tokens}, num_tokens={num_tokens}")
    if num_tokens <= num_prompt_tokens or n == 1:
        return _ceil_div(num_tokens, block_size)
    full = num_prompt_tokens // block_size
    return full + n * (_ceil_div(num_tokens, block_size) - full)


def independent_blocks(num_prompt_tokens: int, num_tokens: int, n: int,
                       block_size: int) -> int:
    """Blocks ``n`` independent requests of the same prompt would hold: ``n x ceil(L / B)``
    (the prompt's KV is computed once per request, so held ``n`` times)."""
    del num_prompt_tokens  # same for every request; kept for a symmetric signature
    return n * _ceil_div(num_tokens, block_size)


def blocks_saved(num_prompt_tokens: int, num_tokens: int, n: int, block_size: int) -> int:
    """Blocks copy-on-write sharing saves against ``n`` independent requests:
    ``(n - 1) x P // B`` after the first generated token, ``(n - 1) x ceil(P / B)`` before."""
    return (independent_blocks(num_prompt_tokens, num_tokens, n, block_size)
            - parallel_sampling_blocks(num_prompt_tokens, num_tokens, n, block_size))
