"""The one base of every configuration model (scenario, workload, speculative, sweep, plan).

:class:`StrictModel` is a pydantic model that

- forbids unknown keys (a typo is an error listing the allowed keys, not a silent default);
- does not coerce (pydantic strict mode: ``true`` is not 1, ``"2"`` is not 2 or 2.0; an int is
  still accepted where a float is expected, as JSON and YAML write ``2`` for 2.0);
- rejects infinities and NaN in every float field (``allow_inf_nan=False``: no setting of a
  simulator is meaningful at infinity; "no limit" is spelled by leaving a field out / null);
- re-validates on assignment.

Bounds are stated per field with ``Field(ge=..., le=...)``, so pydantic's message names the
limit (``Input should be greater than or equal to 1``); the scenario loader formats it as one
line naming the file and key path (:func:`simulator.scenario.config.format_validation_error`).
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

#: The largest token count a length field may hold: 2**31 - 1, the int32 range in which
#: vLLM keeps sequence lengths (``seq_lens = torch.zeros(max_num_reqs, dtype=torch.int32)`` in
#: vLLM v1's ``vllm/v1/worker/gpu_model_runner.py``), so no engine the simulator models could
#: serve a longer sequence.
MAX_TOKENS_REPRESENTABLE = 2**31 - 1


class StrictModel(BaseModel):
    """Base of every servesim config model: extra keys forbidden, strict types, finite floats."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False,
                              validate_assignment=True)


def int_keys(v: Any, what: str = "key") -> Any:
    """Before-validator for ``dict[int, ...]`` fields: accept integer keys and their JSON
    spelling (``"2"``, as a scenario round-tripped through JSON writes them), reject anything
    else (``true``, ``"x"``, ``1.5``) with a message naming the key.

    Raises
    ------
    ValueError
        On a key that is neither an int nor a string of digits (optionally signed).
    """
    if not isinstance(v, dict):
        return v
    out = {}
    for k, val in v.items():
        if isinstance(k, bool):
            raise ValueError(f"{what} {k!r} is not an integer")  # noqa: TRY004 (pydantic)
        if isinstance(k, int):
            out[k] = val
            continue
        if isinstance(k, str) and k.strip().lstrip("+-").isdigit():
            out[int(k)] = val
            continue
        raise ValueError(f"{what} {k!r} is not an integer")
    return out


__all__ = ["MAX_TOKENS_REPRESENTABLE", "StrictModel", "int_keys"]
