"""Shared factories for the core-simulator tests (invariants, unit, property, fidelity).

Everything here builds *inputs* (scenarios, request lists, a constant-time performance model)
or *checks* state; nothing here computes an expected value from the code under test.

Import with ``from helpers import ...`` (``tests/conftest.py`` puts this folder on the path).
"""
from __future__ import annotations

import copy
import dataclasses
import math
import os
import warnings
from pathlib import Path

import numpy as np

from simulator.base.request import RequestSpec
from simulator.cluster.setup import build_setup
from simulator.engine.loop import SimOutput, simulate
from simulator.kv import KVCacheManager
from simulator.metrics.records import RunRecorder
from simulator.scenario.config import Scenario, SchedulerConfig, validate_scenario
from simulator.scheduling.continuous import ContinuousScheduler
from simulator.scheduling.limits import SchedulerLimits
from simulator.scheduling.state import ReqState

REPO_ROOT = Path(__file__).resolve().parents[1]
#: environment variable naming the project's shared folder (public traces, reference data)
SHARED_ENV = "SERVESIM_SHARED"


def shared_root() -> tuple[Path, bool]:
    """The shared folder and whether it was set explicitly.

    ``$SERVESIM_SHARED`` when set (explicit), else ``shared/`` next to the repository (the
    workspace layout ``<work>/main`` + ``<work>/shared``; not explicit).
    """
    env = os.environ.get(SHARED_ENV)
    if env is not None and env.strip():
        return Path(env).expanduser(), True
    return REPO_ROOT.parent / "shared", False


#: the project's shared folder (traces, reference); ``$SERVESIM_SHARED`` or next to the repo
SHARED_DIR = shared_root()[0]


def shared_path(rel: str, *, kind: str = "file") -> Path:
    """``SHARED_DIR / rel`` for a test that needs public data.

    When the folder was *not* set explicitly and ``rel`` is absent, the test is skipped, with
    the way to enable it. When ``$SERVESIM_SHARED`` is set and ``rel`` is not there, the test
    **fails** (a mistyped path must not turn data tests into silent skips).

    Parameters
    ----------
    rel : str
        Path inside the shared folder, e.g. ``traces/azure_llm_2023/x.csv``.
    kind : {"file", "dir"}
    """
    import pytest
    root, explicit = shared_root()
    p = root / rel
    ok = p.is_file() if kind == "file" else p.is_dir()
    if ok:
        return p
    if explicit:
        why = "is not a folder" if not root.is_dir() else f"has no {kind} {rel}"
        pytest.fail(f"{SHARED_ENV}={os.environ[SHARED_ENV]!r} {why}; point it at the "
                    f"project's shared folder (with traces/ and reference/) or unset it",
                    pytrace=False)
    pytest.skip(f"public data {rel} not found in {root}; set {SHARED_ENV}=/path/to/shared "
                "to run this test")

UNFINISHED = ("waiting", "running")
FINAL = ("completed", "rejected", "cancelled")


# ---------------------------------------------------------------------------- scenarios
def synthetic_workload(n: int = 200, rate_rps: float = 20.0, *, prompt_median: float = 300,
                       prompt_sigma: float = 0.8, prompt_max: int = 3000,
                       output_median: float = 100, output_sigma: float = 0.8,
                       output_max: int = 1000, **extra) -> dict:
    """A raw ``workload`` section: Poisson arrivals x lognormal prompt and output lengths."""
    w = {"synthetic": {
        "arrival": {"process": "poisson", "rate_rps": rate_rps},
        "num_requests": n,
        "prompt_tokens": {"dist": "lognormal", "median": prompt_median, "sigma": prompt_sigma,
                          "max": prompt_max},
        "output_tokens": {"dist": "lognormal", "median": output_median, "sigma": output_sigma,
                          "max": output_max},
    }}
    w.update(extra)
    return w


def roofline_scenario_text(name: str, num_requests: int, prompt: str, output: str, *,
                           rate_rps: float = 20) -> str:
    """The YAML text of a small CLI scenario: Llama-3.1-8B on one H100 SXM, datasheet roofline,
    Poisson arrivals, ``prompt`` / ``output`` length distributions in YAML flow style (e.g.
    ``"{dist: fixed, value: 10}"``); what the hostile-input and CLI tests write to a file."""
    return (f"name: {name}\nmodel: llama-3.1-8b\nhardware: {{gpu: h100-sxm}}\n"
            "perf: {source: roofline}\nworkload:\n  synthetic:\n"
            f"    arrival: {{process: poisson, rate_rps: {rate_rps}}}\n"
            f"    num_requests: {num_requests}\n    prompt_tokens: {prompt}\n"
            f"    output_tokens: {output}\n")


def deep_update(base: dict, upd: dict) -> dict:
    """Recursively merge ``upd`` into a copy of ``base`` (dicts merge, other values replace)."""
    out = copy.deepcopy(base)
    for k, v in upd.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_update(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def make_scenario(overrides: dict | None = None, *, workload: dict | None = None) -> Scenario:
    """A validated scenario: Llama-3.1-8B on one H100 SXM, datasheet roofline operators and the
    vLLM V0 engine profile (both fixed: independent of shipped tables and fitted constants),
    plus ``overrides``."""
    raw = {"name": "test", "model": "llama-3.1-8b", "hardware": {"gpu": "h100-sxm"},
           "perf": {"source": "roofline", "engine": "vllm-v0"}, "seed": 0,
           "workload": workload if workload is not None else synthetic_workload()}
    return validate_scenario(deep_update(raw, overrides or {}))


def load_specs(scenario: Scenario) -> list[RequestSpec]:
    from simulator.workload import WorkloadWarning, load_workload
    with warnings.catch_warnings():
        # the suites that declare workload.max_tokens (contiguous KV, the oracle boundary)
        # cap the lognormal length tail on purpose: the reader's note that it clips is expected
        warnings.filterwarnings("ignore", r".*workload\.max_tokens=\d+ clips the output",
                                WorkloadWarning)
        return load_workload(scenario.workload, scenario.seed, REPO_ROOT)


def run_sim(scenario: Scenario, specs: list[RequestSpec] | None = None, *, perf=None,
            check_transitions: bool = True, until_s: float | None = None,
            fast_forward: bool = True) -> SimOutput:
    """``simulate`` with transitions checked; ``perf`` replaces the performance model;
    ``fast_forward=False`` steps every iteration."""
    setup = build_setup(scenario)
    if perf is not None:
        setup.perf = perf
    if specs is None:
        specs = load_specs(scenario)
    return simulate(scenario, setup, specs, check_transitions=check_transitions,
                    until_s=until_s, fast_forward=fast_forward)


# ---------------------------------------------------------------------------- requests
def spec(request_id: int, arrival: float, prompt: int, output: int, **kw) -> RequestSpec:
    return RequestSpec(request_id=request_id, arrival_time_s=float(arrival),
                       num_prompt_tokens=int(prompt), num_output_tokens=int(output), **kw)


def specs_from_rows(rows) -> list[RequestSpec]:
    """Rows of (arrival_s, prompt, output[, kwargs dict]) -> specs with ids 0..n-1."""
    out = []
    for i, row in enumerate(rows):
        kw = row[3] if len(row) > 3 else {}
        out.append(spec(i, row[0], row[1], row[2], **kw))
    return out


def poisson_specs(n: int, rate_rps: float, prompt: int, output: int, seed: int = 0,
                  **kw) -> list[RequestSpec]:
    """``n`` requests with exponential gaps (mean 1/rate) and fixed lengths."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(1.0 / rate_rps, n))
    return [spec(i, float(t[i]), prompt, output, **kw) for i in range(n)]


# ---------------------------------------------------------------------------- perf stub
class ConstantStepPerf:
    """Every engine step takes ``step_s`` seconds, whatever its shape."""

    kind = "constant"

    def __init__(self, step_s: float):
        self.step_s = float(step_s)

    def step_time(self, shape) -> float:
        return self.step_s

    def decode_step_times(self, num_seqs, ctx_totals):
        return np.full(len(ctx_totals), self.step_s)

    def provenance(self) -> dict:
        return {}


# ---------------------------------------------------------------------------- scheduler factory
def make_scheduler(*, num_blocks: int = 64, block_size: int = 4, prefix: bool = False,
                   allocation: str = "paged", watermark: float = 0.0,
                   max_model_len: int = 1 << 20, **cfg) -> ContinuousScheduler:
    """A bare scheduler (no SimPy) with its own KV manager and a checking recorder; ``cfg``:
    keys of the scenario's ``scheduler:`` section, or fields of :class:`SchedulerLimits`
    (``swap_space_blocks``, ``swap_block_bytes``, ``host_link_bandwidth_bytes_per_s``, ...)."""
    limit_names = {f.name for f in dataclasses.fields(SchedulerLimits)} - {"max_model_len"}
    limits = SchedulerLimits(max_model_len=max_model_len,
                             **{k: cfg.pop(k) for k in list(cfg) if k in limit_names})
    kv = KVCacheManager(num_blocks, block_size, enable_prefix_caching=prefix,
                        allocation=allocation, max_model_len=max_model_len,
                        watermark=watermark)
    return ContinuousScheduler(SchedulerConfig(**cfg), limits, kv,
                               RunRecorder(check_transitions=True), 0)


def req(request_id: int, prompt: int, output: int, arrival: float = 0.0, **kw) -> ReqState:
    return ReqState(spec(request_id, arrival, prompt, output, **kw))


# ---------------------------------------------------------------------------- KV audit
class KVAudit:
    """Checks DESIGN.md invariant 4 after every scheduler call that moves KV blocks.

    Installed with ``monkeypatch`` around ``ContinuousScheduler.schedule``, ``update`` and
    ``commit_decode_run``. After each call, for the scheduler's pool:

    - ``BlockPool.check_invariants()`` (free + held == total, no negative ref, no block
      both free and held);
    - ownership: each block's ref count equals the number of live requests (running or
      waiting on that replica) listing it, so no finished request still holds a block and
      no block is referenced by nobody;
    - a waiting request holds no blocks (preemption and cancellation free everything), but
      for one whose KV load from an offload tier landed: it holds its whole sequence's blocks;
    - after ``schedule``: every scheduled request holds the blocks for the tokens it will
      have computed after the step (paged: ceil((computed + n) / block_size)).

    Counters (for non-vacuity): ``checks``, ``max_ref`` (largest ref count seen),
    ``preempted`` (victims seen in step outputs), ``full_steps`` (checks where the pool had
    no free block).
    """

    def __init__(self):
        self.checks = 0
        self.max_ref = 0
        self.preempted = 0
        self.full_steps = 0
        self.decode_runs = 0
        #: requests seen parked for a KV load, and checks of offload tiers' capacity
        self.loading = 0
        self.landed = 0
        self.tier_checks = 0

    def install(self, monkeypatch) -> KVAudit:
        orig_schedule = ContinuousScheduler.schedule
        orig_update = ContinuousScheduler.update
        orig_commit = ContinuousScheduler.commit_decode_run
        audit = self

        def schedule(sched, now):
            out = orig_schedule(sched, now)
            if out is not None:
                audit.preempted += len(out.preempted)
                kv = sched.kv
                for r, n in zip(out.reqs, out.ntoks):
                    need = kv.blocks_for(r.num_computed_tokens + n)
                    assert len(r.blocks) >= need, (r, n)
            audit.check(sched)
            return out

        def update(sched, out, start, end):
            orig_update(sched, out, start, end)
            audit.check(sched)

        def commit(sched, out, k, start, ends):
            orig_commit(sched, out, k, start, ends)
            if k > 1:
                audit.decode_runs += 1
            audit.check(sched)

        monkeypatch.setattr(ContinuousScheduler, "schedule", schedule)
        monkeypatch.setattr(ContinuousScheduler, "update", update)
        monkeypatch.setattr(ContinuousScheduler, "commit_decode_run", commit)
        return self

    def check(self, sched) -> None:
        pool = sched.kv.pool
        pool.check_invariants()
        owners = [0] * pool.num_blocks
        waiting = sched.waiting_requests()
        for r in waiting:  # nothing, unless a KV load landed for it (it holds what it loaded)
            if r.blocks and getattr(r, "kv_load_target_tokens", 0):
                assert r.num_computed_tokens == r.kv_load_target_tokens, r
                assert len(r.blocks) == sched.kv.blocks_for(r.num_tokens), r
                for b in r.blocks:
                    owners[b] += 1
                self.landed += 1
                continue
            assert not r.blocks, f"waiting request {r.request_id} holds blocks {r.blocks}"
        for r in sched.running:
            assert r.status == "running", r
            for b in r.blocks:
                owners[b] += 1
        for r in getattr(sched, "loading", ()):  # parked for a KV load: waiting, holds blocks
            assert r.status == "waiting", r
            assert len(r.blocks) == sched.kv.blocks_for(r.num_tokens), r
            for b in r.blocks:
                owners[b] += 1
            self.loading += 1
        assert owners == pool.ref_cnt, "ref counts differ from the requests holding blocks"
        off = getattr(sched.kv, "offload", None)
        if off is not None:  # invariant 4 in every tier: none over its capacity
            off.check_invariants()
            self.tier_checks += 1
        free = set(pool.free_block_ids())
        held = {b for b, c in enumerate(pool.ref_cnt) if c > 0}
        assert not (free & held)
        assert len(free) + len(held) == pool.num_blocks
        self.max_ref = max(self.max_ref, max(pool.ref_cnt))
        if not free:
            self.full_steps += 1
        self.checks += 1


# ---------------------------------------------------------------------------- record checks
def isnan(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def summary_without_wall(summary: dict) -> dict:
    """A run summary minus the wall-clock figures (the only non-deterministic ones)."""
    return {k: v for k, v in summary.items() if k not in ("sim_wall_s", "sim_speedup")}


# ---------------------------------------------------------------------------- scenario suite
def prefix_specs(n: int = 200, rate_rps: float = 20.0, seed: int = 1, *, groups: int = 5,
                 block_tokens: int = 16) -> list[RequestSpec]:
    """Requests sharing prompt prefixes: group ``g`` declares prefix ids ``(g*100, g*100+1,
    ...)`` of 4..12 blocks of ``block_tokens`` tokens (sometimes truncated, so chains diverge
    part-way), followed by a private suffix."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(1.0 / rate_rps, n))
    plen = [int(x) for x in rng.integers(4, 13, groups)]
    out = []
    for i in range(n):
        g = int(rng.integers(groups))
        k = plen[g] if rng.random() < 0.7 else int(rng.integers(1, plen[g] + 1))
        ids = tuple(g * 100 + j for j in range(k))
        if rng.random() < 0.2:  # diverge after the first half
            ids = ids[: max(1, k // 2)] + tuple(9000 + i * 50 + j for j in range(k - k // 2))
        prompt = k * block_tokens + int(rng.integers(1, 200))
        out.append(spec(i, float(t[i]), prompt, int(rng.integers(1, 150)),
                        prefix_hash_ids=ids, prefix_block_tokens=block_tokens))
    return out


#: name -> (scenario overrides, workload section or a spec factory, until_s). Small scenarios
#: (<= 400 requests) that drive the engine through preemption, chunking, priorities, prefix
#: caching, several replicas, cancellations, admission limits, contiguous allocation,
#: max_model_len and the sequence limit. Shared by the invariant tests.
SUITE = {
    "preempt_chunked": ({"kv_cache": {"num_gpu_blocks": 120},
                         "scheduler": {"max_num_batched_tokens": 512}},
                        synthetic_workload(200, 20), None),
    "no_chunking": ({"kv_cache": {"num_gpu_blocks": 200},
                     "scheduler": {"enable_chunked_prefill": False,
                                   "max_num_batched_tokens": 2048}},
                    synthetic_workload(200, 20), None),
    "priority": ({"kv_cache": {"num_gpu_blocks": 120},
                  "scheduler": {"queue_policy": "priority", "max_num_batched_tokens": 1024}},
                 synthetic_workload(200, 25, priorities={0: 0.3, 1: 0.3, 2: 0.4}), None),
    "prefix_caching": ({"kv_cache": {"num_gpu_blocks": 90, "enable_prefix_caching": True},
                        "scheduler": {"max_num_batched_tokens": 1024}},
                       "prefix_specs", None),
    "prefix_mooncake": ({"kv_cache": {"num_gpu_blocks": 330, "enable_prefix_caching": True}},
                        {"trace": "traces/tiny_mooncake_like.jsonl", "format": "mooncake",
                         "rate_scale": 4.0}, None),
    "multi_replica": ({"cluster": {"num_replicas": 3, "router": "least_kv"},
                       "kv_cache": {"num_gpu_blocks": 100}},
                      synthetic_workload(300, 60), None),
    "cancel_admission": ({"kv_cache": {"num_gpu_blocks": 150},
                          "scheduler": {"max_num_batched_tokens": 256,
                                        "admission": {"max_waiting": 30,
                                                      "max_queue_delay_s": 5.0}}},
                         # 16 req/s of 600-token prompts through a 256-token budget: the
                         # queue fills (queue_full) and stale waiters time out (queue_timeout)
                         synthetic_workload(200, 16, prompt_median=600, output_median=50,
                                            patience={"dist": "uniform", "low": 0.01,
                                                      "high": 2.0, "fraction": 0.5}), None),
    "contiguous": ({"kv_cache": {"num_gpu_blocks": 600, "allocation": "contiguous"}},
                   synthetic_workload(200, 20, max_tokens=400), None),
    "max_model_len": ({"kv_cache": {"num_gpu_blocks": 200},
                       "scheduler": {"max_model_len": 700}},
                      synthetic_workload(200, 20), None),
    "swap_preemption": ({"kv_cache": {"num_gpu_blocks": 120, "swap_space_gb": 0.05},
                         "scheduler": {"preemption_mode": "swap"}},
                        synthetic_workload(200, 20), None),
    "tenant_share": ({"kv_cache": {"num_gpu_blocks": 300},
                      "scheduler": {"max_num_seqs": 8,
                                    "admission": {"tenant_max_share": 0.5}}},
                     synthetic_workload(200, 20, tenants={"a": 0.7, "b": 0.2, "c": 0.1}),
                     None),
    "light_load": ({"cluster": {"num_replicas": 2, "router": "least_outstanding"},
                    "kv_cache": {"num_gpu_blocks": 1500}},
                   synthetic_workload(150, 3), None),
    "seq_limit_until": ({"cluster": {"num_replicas": 2, "router": "round_robin"},
                         "kv_cache": {"num_gpu_blocks": 150},
                         "scheduler": {"max_num_seqs": 4}},
                        synthetic_workload(300, 40), 6.0),
    # KV offload tiers (simulator.kv.tiers): a GPU of 90 blocks of 2 MiB, a CPU tier of 100
    # blocks and a disk tier of 400, both evicting; answers stored too; asynchronous loads
    "offload_vllm": ({"kv_cache": {"num_gpu_blocks": 90, "enable_prefix_caching": True,
                                   "offload": {"offload_prompt_only": False, "tiers": [
                                       {"medium": "cpu", "cpu_bytes_to_use": 100 * 2**21},
                                       {"medium": "disk", "cpu_bytes_to_use": 400 * 2**21,
                                        "bandwidth_bytes_per_s": 5e9, "latency_s": 1e-4}]}},
                      "scheduler": {"max_num_batched_tokens": 1024}},
                     "prefix_specs", None),
    # closed-loop multi-turn sessions on a small GPU with CPU + disk tiers (answers stored):
    # turns arrive after their predecessor's end, history reloads, preemption resumes
    "multi_turn_offload": ({"kv_cache": {"num_gpu_blocks": 150, "enable_prefix_caching": True,
                                         "offload": {"offload_prompt_only": False, "tiers": [
                                             {"medium": "cpu",
                                              "cpu_bytes_to_use": 200 * 2**21},
                                             {"medium": "disk",
                                              "cpu_bytes_to_use": 2000 * 2**21,
                                              "bandwidth_bytes_per_s": 5e9,
                                              "latency_s": 1e-4}]}},
                            "scheduler": {"max_num_batched_tokens": 1024}},
                           {"synthetic_sessions": {
                               "arrival": {"process": "poisson", "rate_rps": 2.0},
                               "num_sessions": 60,
                               "turns": {"dist": "uniform", "low": 2, "high": 6},
                               "think_time": {"dist": "exponential", "mean_s": 3.0},
                               "system_prompt_tokens": 200,
                               "message_tokens": {"dist": "uniform", "low": 20, "high": 200},
                               "answer_tokens": {"dist": "uniform", "low": 10, "high": 150},
                               "max_context_tokens": 2000}}, None),
    # LMCache: two replicas sharing one store, 256-token chunks, synchronous loads
    "offload_lmcache_shared": ({"cluster": {"num_replicas": 2, "router": "round_robin"},
                                "kv_cache": {"num_gpu_blocks": 90, "enable_prefix_caching": True,
                                             "offload": {"connector": "lmcache", "shared": True,
                                                         "tiers": [{"medium": "cpu",
                                                                    "cpu_bytes_to_use":
                                                                    150 * 2**21}]}},
                                "scheduler": {"max_num_batched_tokens": 1024}},
                               "prefix_specs", None),
}


def suite_case(name: str):
    """(scenario, specs, until_s) of ``SUITE[name]``."""
    overrides, workload, until = SUITE[name]
    if workload == "prefix_specs":
        sc = make_scenario(overrides)
        specs = prefix_specs()
    else:
        sc = make_scenario(overrides, workload=workload)
        specs = load_specs(sc)
    return sc, specs, until


class SuiteRun:
    """A finished run of a ``SUITE`` scenario."""

    def __init__(self, name, scenario, specs, until, out):
        self.name, self.scenario, self.specs, self.until = name, scenario, specs, until
        self.out = out
        #: fast-forwarded decode runs recorded (the recorder's count of step chunks)
        self.decode_runs = out.recorder.num_step_chunks


_SUITE_CACHE: dict[str, SuiteRun] = {}


def suite_run(name: str) -> SuiteRun:
    """Run ``SUITE[name]`` once per test session (transitions checked) and cache it.

    For tests that only *read* records; tests that patch the engine run their own.
    """
    if name not in _SUITE_CACHE:
        sc, specs, until = suite_case(name)
        out = run_sim(sc, specs, until_s=until, check_transitions=True)
        _SUITE_CACHE[name] = SuiteRun(name, sc, specs, until, out)
    return _SUITE_CACHE[name]


def small_grid():
    """A 2 x 3 measured grid whose values a test can check by hand: axes a = (1, 4)
    (u = log2 = (0, 2)) and b = (2, 8, 32) (u = (1, 3, 5)), raw log values v[a, b]."""
    from simulator.perf.tables.grid import _Grid
    raw = np.array([[0.0, 1.0, 5.0], [2.0, 4.0, 6.0]])
    return _Grid.from_cells(["a", "b"], [np.array([1.0, 4.0]), np.array([2.0, 8.0, 32.0])],
                            [False, False], raw)


# ---------------------------------------------------------------------------- small runs
def small_scenario(**over) -> Scenario:
    """A validated one-request scenario (Llama-3.1-8B, one H100 SXM, roofline operators, the
    default engine profile); each keyword replaces a top-level key, a dict value merged one
    level deep into that section."""
    raw = {"name": "h", "model": "llama-3.1-8b", "hardware": {"gpu": "h100-sxm"},
           "perf": {"source": "roofline"},
           "workload": {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1},
                                      "num_requests": 1,
                                      "prompt_tokens": {"dist": "fixed", "value": 10},
                                      "output_tokens": {"dist": "fixed", "value": 10}}}}
    for k, v in over.items():
        raw[k] = {**raw.get(k, {}), **v} if isinstance(v, dict) else v
    return validate_scenario(raw)


def run_constant_step(sc: Scenario, specs, step_s: float = 0.01):
    """``simulate`` of ``sc`` on ``specs`` with every step lasting ``step_s`` seconds; returns
    ``(SimOutput, setup)``."""
    setup = build_setup(sc)
    setup.perf = ConstantStepPerf(step_s)
    return simulate(sc, setup, specs, check_transitions=True), setup


def cli_error_line(capsys, argv) -> str:
    """Run ``servesim ARGV`` in-process and return its error: the test fails unless it exits 2
    with exactly one line on stderr and no traceback."""
    from simulator.cli.main import main
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def load_file_module(path, name: str):
    """The module in file ``path`` (a script or a benchmark, not an importable package module),
    loaded under ``name`` and registered in ``sys.modules`` (dataclasses look their module up
    there)."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def micro_llama():
    """The micro Llama of the calibration tests (2 layers, hidden 64, 4 query / 2 KV heads of
    16, vocabulary 256): a ``calibration.tiny_model.TinyConfig``."""
    from calibration.tiny_model import TinyConfig

    return TinyConfig(name="micro-llama", num_layers=2, hidden_size=64, num_attention_heads=4,
                      num_kv_heads=2, head_dim=16, intermediate_size=128, vocab_size=256,
                      max_position_embeddings=512)
