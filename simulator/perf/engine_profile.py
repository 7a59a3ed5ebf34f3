"""Engine profiles: what a serving engine adds to the kernels of a step (DESIGN.md section 3).

The GPU runs kernels; the *engine* decides how much of the wall clock a step takes beyond
them. That belongs to an engine and version, not to a GPU, so it lives in named profiles
(``engine_profiles/<name>.yaml``, listed by ``servesim profiles``; a scenario names one with
``perf.engine``, or gives a path to its own YAML). A profile states:

- ``async_scheduling``: vLLM V1 with ``--async-scheduling`` prepares step ``n + 1`` on the CPU
  while the GPU runs step ``n``; only the part of the CPU work that does not overlap costs time.
  A step then lasts ``max(gpu_s, cpu_s) + sync_s``; without it (vLLM V0, V1 sync) it lasts
  ``gpu_s + cpu_s + sync_s``.
- ``cpu``: the per-step CPU work (scheduling, input preparation, output processing) as
  ``step_s + per_seq_s x sequences + per_token_s x tokens`` seconds;
- ``sync``: the per-step time that never overlaps (device-to-host copy of sampled tokens,
  launch gaps between steps), same form;
- ``cuda_graphs``: whether decode batches run as captured CUDA graphs, the capture sizes a
  step's token count is padded up to (vLLM pads ``num_tokens`` to the next capture size and
  runs the GEMMs, norms and collectives at the padded size), and the mode
  (``full_and_piecewise``: full graphs for pure-decode steps, piecewise graphs with eager
  attention for mixed steps; ``piecewise``; ``none``);
- ``sampler``: bytes of memory traffic per logit the sampler moves (memory-bound);
- ``scheduler``: engine scheduling rules the simulator applies (``reserve_full_isl``: admit a
  waiting request only when KV blocks for its whole current sequence are free, vLLM >= 0.10's
  ``scheduler_reserve_full_isl``; ``null_block``: the block pool keeps one block unused);
- ``api_server``: what the engine's HTTP front end adds to latencies measured at the client
  (``per_request_s``: request parsing, prompt tokenisation, connection and response set-up,
  on the first token and so on every latency; ``per_output_token_s``: detokenisation and
  streaming of each token after the first, on every inter-token gap). Not part of a step: the
  simulation leaves it out, and ``servesim validate --recorded`` adds it to the simulated
  latencies only when the record was measured at the client (inference-perf, GuideLLM,
  ``vllm bench serve``), never to engine-side records (vLLM ``RequestStateStats``).

Every constant is written ``{value: ..., source: "..."}``: a constant without a source is an
error. ``source`` says whether it was measured (where), fitted (to which recorded runs, with its
leave-one-run-out error) or taken from the engine's code or documentation.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import ConfigDict, Field, ValidationError, field_validator

from simulator.base.input_limits import InputLimitError
from simulator.base.resources import (
    data_dir,
    not_a_file_reason,
    not_text_reason,
    not_yaml_reason,
    path_problem,
    safe_load_yaml,
)
from simulator.base.schema import StrictModel

#: the profile ``perf.engine: none`` names: no engine overhead, no padding (kernel sums only)
NONE_PROFILE = "none"


class _Strict(StrictModel):
    # the project's strict base (no unknown keys, no coercion, no inf/NaN), immutable
    model_config = ConfigDict(**StrictModel.model_config, frozen=True)


class Constant(_Strict):
    """One engine constant with its provenance."""

    value: float = Field(ge=0)
    source: str = Field(min_length=3)

    @field_validator("value", mode="before")
    @classmethod
    def _intlike(cls, v):
        return float(v) if isinstance(v, int) and not isinstance(v, bool) else v


def _zero(what: str) -> Constant:
    return Constant(value=0.0, source=f"not modelled ({what})")


class LinearCost(_Strict):
    """``step_s + per_seq_s x sequences + per_token_s x tokens`` seconds per step."""

    step_s: Constant = Field(default_factory=lambda: _zero("no fixed term"))
    per_seq_s: Constant = Field(default_factory=lambda: _zero("no per-sequence term"))
    per_token_s: Constant = Field(default_factory=lambda: _zero("no per-token term"))

    def __call__(self, num_seqs, num_tokens):
        """Seconds for a step of ``num_seqs`` sequences and ``num_tokens`` tokens (arrays ok)."""
        return (self.step_s.value + self.per_seq_s.value * num_seqs
                + self.per_token_s.value * num_tokens)

    @property
    def is_zero(self) -> bool:
        return not (self.step_s.value or self.per_seq_s.value or self.per_token_s.value)


class CudaGraphs(_Strict):
    """CUDA-graph capture of the engine (vLLM ``compilation_config``).

    ``capture_sizes``: an explicit list, or ``None`` for the engine's default rule
    (``rule: vllm-v1``: ``[1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16)`` with
    ``max = min(2 x max_num_seqs x (1 + num_speculative_tokens), 512, max_num_batched_tokens)``,
    vLLM ``VllmConfig._set_cudagraph_sizes``; ``rule: vllm-v0``: ``[1, 2, 4] + 8 x (1..32)``
    capped at ``max_num_seqs``, vLLM 0.6 ``_BATCH_SIZES_TO_CAPTURE``).
    """

    enabled: bool = False
    mode: Literal["full_and_piecewise", "piecewise", "full", "none"] = "none"
    capture_sizes: tuple[int, ...] | None = None
    rule: Literal["vllm-v1", "vllm-v0", "explicit"] = "explicit"
    max_capture_size: int = Field(default=512, ge=1)
    source: str = "not captured"

    @field_validator("capture_sizes", mode="before")
    @classmethod
    def _as_tuple(cls, v):
        return tuple(v) if isinstance(v, list) else v

    def sizes_for(self, max_num_seqs: int, max_num_batched_tokens: int,
                  num_speculative_tokens: int = 0) -> tuple[int, ...]:
        """The capture sizes (tokens per step) an engine configured this way captures."""
        if not self.enabled or self.mode == "none":
            return ()
        if self.rule == "explicit" or self.capture_sizes is not None:
            return tuple(sorted(self.capture_sizes or ()))
        if self.rule == "vllm-v0":
            top = min(int(max_num_seqs), self.max_capture_size)
            return tuple(s for s in [1, 2, 4] + [8 * i for i in range(1, 33)] if s <= top)
        top = min(2 * int(max_num_seqs) * (1 + int(num_speculative_tokens)),
                  self.max_capture_size, int(max_num_batched_tokens))
        sizes = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, top + 1, 16))
        return tuple(s for s in sizes if s <= top)


class Sampler(_Strict):
    """Sampler cost: ``bytes_per_logit`` bytes of memory traffic per vocabulary entry of each
    sampled row (the fp32 cast, argmax or softmax/top-p passes), costed memory-bound."""

    bytes_per_logit: Constant = Field(default_factory=lambda: _zero("sampler not costed"))


class SchedulerRules(_Strict):
    """Engine scheduling rules the simulator applies."""

    reserve_full_isl: bool = False
    null_block: bool = False
    source: str = "none"


class ApiServer(_Strict):
    """The HTTP front end's share of client-measured latencies (module docstring).

    A request's client-side TTFT is the engine's TTFT plus ``per_request_s``; each later
    token's gap grows by ``per_output_token_s`` (TPOT and ITL by that much, E2E by
    ``per_request_s + per_output_token_s x (output tokens - 1)``).
    """

    per_request_s: Constant = Field(default_factory=lambda: _zero(
        "no API-server time per request"))
    per_output_token_s: Constant = Field(default_factory=lambda: _zero(
        "no API-server time per streamed token"))

    @property
    def is_zero(self) -> bool:
        return not (self.per_request_s.value or self.per_output_token_s.value)

    def constants(self) -> dict[str, dict]:
        """``{api_server.<name>: {"value": v, "source": s}}`` (not step constants: kept out
        of :meth:`EngineProfile.constants`, which a run's step-time provenance lists)."""
        return {f"api_server.{k}": {"value": getattr(self, k).value,
                                    "source": getattr(self, k).source}
                for k in ("per_request_s", "per_output_token_s")}


class EngineProfile(_Strict):
    """A named engine profile (see the module docstring).

    Attributes
    ----------
    name : str
        Profile id (``vllm-v1``).
    engine : str
        Engine family (``vllm``); the measured tables of that engine are preferred.
    description : str
    async_scheduling : bool
    cpu, sync : LinearCost
    cuda_graphs : CudaGraphs
    sampler : Sampler
    scheduler : SchedulerRules
    api_server : ApiServer
        Client-side latency terms of the HTTP front end (not part of a step).
    fitted_on : list of str
        Recorded runs the fitted constants came from (empty: nothing fitted).
    fit_report : dict
        The fit's error and leave-one-run-out figures (``servesim calibrate fit-engine``).
    """

    name: str
    engine: str = "none"
    description: str = ""
    async_scheduling: bool = False
    #: take the CPU term from the GPU profile's measured ``cpu_overhead`` table (our harness's
    #: engine-step residuals) instead of ``cpu``
    cpu_from_profile: bool = False
    cpu: LinearCost = Field(default_factory=LinearCost)
    sync: LinearCost = Field(default_factory=LinearCost)
    cuda_graphs: CudaGraphs = Field(default_factory=CudaGraphs)
    sampler: Sampler = Field(default_factory=Sampler)
    scheduler: SchedulerRules = Field(default_factory=SchedulerRules)
    api_server: ApiServer = Field(default_factory=ApiServer)
    fitted_on: tuple[str, ...] = ()
    fit_report: dict = Field(default_factory=dict)
    path: str | None = None

    @field_validator("fitted_on", mode="before")
    @classmethod
    def _fit_tuple(cls, v):
        return tuple(v) if isinstance(v, list) else v

    # ---------------------------------------------------------------- behaviour
    def step_seconds(self, gpu_s, num_seqs, num_tokens):
        """Wall-clock seconds of a step whose kernels take ``gpu_s`` (arrays broadcast)."""
        import numpy as np
        cpu = self.cpu(num_seqs, num_tokens)
        sync = self.sync(num_seqs, num_tokens)
        if self.async_scheduling:
            return np.maximum(gpu_s, cpu) + sync
        return gpu_s + cpu + sync

    def label(self) -> str:
        """One line for summaries and reports."""
        parts = [self.name]
        if self.fitted_on:
            parts.append(f"constants fitted on {len(self.fitted_on)} recorded run(s)")
        return " ".join(parts[:1]) + (f" ({'; '.join(parts[1:])})" if parts[1:] else "")

    def constants(self) -> dict[str, dict]:
        """Every constant as ``{dotted.name: {"value": v, "source": s}}``."""
        out = {}
        for sec in ("cpu", "sync"):
            lc = getattr(self, sec)
            for k in ("step_s", "per_seq_s", "per_token_s"):
                c = getattr(lc, k)
                out[f"{sec}.{k}"] = {"value": c.value, "source": c.source}
        c = self.sampler.bytes_per_logit
        out["sampler.bytes_per_logit"] = {"value": c.value, "source": c.source}
        return out


def engine_profile_dir() -> Path:
    """The shipped ``engine_profiles/`` folder."""
    return data_dir("engine_profiles")


def engine_profile_names() -> list[str]:
    """Names of the shipped engine profiles (plus ``none``)."""
    try:
        d = engine_profile_dir()
    except FileNotFoundError:
        return [NONE_PROFILE]
    return sorted([p.stem for p in d.glob("*.yaml")] + [NONE_PROFILE])


def load_engine_profile(path: str | Path) -> EngineProfile:
    """Read and validate an engine-profile YAML.

    Raises
    ------
    ValueError
        One line naming the file and the bad key (unknown keys, constants without a source,
        negative values, not YAML).
    """
    p = Path(path)
    try:
        raw = safe_load_yaml(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"{p}: {not_text_reason(e)}; an engine profile is YAML text") from None
    except OSError as e:
        raise ValueError(f"engine profile {str(path)!r}: cannot read ({e.strerror})") from None
    except InputLimitError as e:  # an alias bomb, nesting, an integer of too many digits
        raise ValueError(e.at(str(p))) from None
    except yaml.YAMLError as e:
        raise ValueError(not_yaml_reason(p, e)) from None
    if not isinstance(raw, dict):
        raise ValueError(f"{p}: an engine profile must be a YAML mapping")  # noqa: TRY004
    raw = dict(raw)
    raw["path"] = str(p)
    try:
        return EngineProfile.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "missing":
            msg = "missing required key"
        raise ValueError(f"{p}: {loc}: {msg}") from None


@lru_cache(maxsize=64)
def _cached(path: str, mtime: float) -> EngineProfile:
    return load_engine_profile(path)


def get_engine_profile(name_or_path: str | None) -> EngineProfile:
    """An engine profile by shipped name (``vllm-v1``, ``vllm-v0``, ``none``) or YAML path.

    Raises
    ------
    ValueError
        Unknown name (the message lists the shipped ones) or an invalid file.
    """
    key = (name_or_path or NONE_PROFILE).strip()
    if key == NONE_PROFILE:
        return EngineProfile(name=NONE_PROFILE, description="kernel sums only: no engine "
                             "overhead, no CUDA-graph padding, no sampler cost")
    cand = []
    try:
        cand.append(engine_profile_dir() / f"{key}.yaml")
    except FileNotFoundError:
        pass
    cand.append(Path(key).expanduser())
    for c in cand:
        if c.is_file():
            return _cached(str(c.resolve()), c.stat().st_mtime)
    if cand[-1].exists() or path_problem(cand[-1]):  # a FIFO, a folder, a link loop
        raise ValueError(f"engine profile {key!r}: "
                         f"{not_a_file_reason(cand[-1], 'engine profile file')}")
    raise ValueError(f"unknown engine profile {key!r}; shipped: "
                     + ", ".join(engine_profile_names()) + " (or give a path to a profile YAML)")
