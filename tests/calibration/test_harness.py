"""Calibration harness, kernels, tiny model and real engine on CPU with tiny shapes (torch).

Skipped when torch is absent (CI installs ``.[dev]``; ``.[calibrate]`` adds torch).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

torch = pytest.importorskip("torch")
from helpers import micro_llama

from calibration import kernels as K
from calibration.dispatch import calibrate
from calibration.engine import RealEngine, steps_to_shapes
from calibration.harness import default_grid, skewed_contexts
from calibration.timing import Probe, summarize, time_isolated
from calibration.tiny_model import TINY, TinyLlama, resolve_model, shard_config
from simulator.base.request import RequestSpec
from simulator.catalog.hardware import load_gpu_spec
from simulator.catalog.models import get_model
from simulator.perf.tables.flat_profile import load_table_perf_model, read_provenance
from simulator.scenario.config import SchedulerConfig
from simulator.scheduling.limits import SchedulerLimits

MICRO = micro_llama()
pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ---------------------------------------------------------------------- timing
def test_summarize_flags_noisy_points():
    quiet = summarize([1.0, 1.01, 0.99, 1.0, 1.02])
    assert quiet.median_s == pytest.approx(1.0) and not quiet.noisy
    assert quiet.num_samples == 5 and len(quiet.samples_s.split()) == 5
    noisy = summarize([1.0, 2.0, 1.0, 3.0, 1.5])
    assert noisy.noisy and noisy.iqr_rel > 0.2


def test_time_isolated_and_probe_cpu():
    x = torch.randn(64, 64)
    ts = time_isolated(lambda: x @ x, "cpu", warmup=2, repeats=5)
    assert len(ts) == 5 and all(t > 0 for t in ts)
    p = Probe("cpu")
    p.layer = 0
    p.time("mm", torch.matmul, x, x)
    p.time("mm", torch.matmul, x, x)
    got = p.collect()
    assert list(got) == [(0, "mm")] and got[(0, "mm")] > 0
    assert p.collect() == {}


# ---------------------------------------------------------------------- kernels and model
def _reference_attention(q, k, v):
    """Plain causal GQA attention over a whole sequence (T, heads, d)."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = torch.einsum("qhd,khd->hqk", q, k) / q.shape[-1] ** 0.5
    T = q.shape[0]
    s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    return torch.einsum("hqk,khd->qhd", s.softmax(-1), v).reshape(T, -1)


def test_chunked_prefill_and_decode_attention_equal_full_causal_attention():
    torch.manual_seed(0)
    T, nq, nkv, d = 37, 4, 2, 16
    q, k, v = torch.randn(T, nq, d), torch.randn(T, nkv, d), torch.randn(T, nkv, d)
    want = _reference_attention(q, k, v)
    cache = [(torch.zeros(nkv, 64, d), torch.zeros(nkv, 64, d))]
    out = torch.empty(T, nq * d)
    # chunks of 16, 13 (start > 0: explicit mask) then 8 single-token decodes
    pos = 0
    for n in [16, 13] + [1] * 8:
        sl = [K.SeqSlice(0, n, pos, cache)]
        o = torch.empty(n, nq * d)
        K.attention(q[pos:pos + n], k[pos:pos + n], v[pos:pos + n], sl, o, 0)
        out[pos:pos + n] = o
        pos += n
    assert torch.allclose(out, want, atol=1e-5)


def test_tiny_model_shapes_and_spec():
    assert TINY.num_layers == 4 and 256 <= TINY.hidden_size <= 512
    assert TINY.num_kv_heads < TINY.num_attention_heads  # GQA
    spec = TINY.model_spec()
    assert spec.kv_bytes_per_token("fp32") == 2 * 4 * 2 * 64 * 4
    assert resolve_model("tiny") is TINY
    assert resolve_model("llama-3.1-8b").hidden_size == 4096


def test_config_json_round_trips_through_the_simulator(tmp_path):
    p = TINY.write_config_json(tmp_path)
    m = get_model(str(p))
    assert (m.num_layers, m.hidden_size, m.num_attention_heads, m.num_kv_heads, m.head_dim,
            m.intermediate_size, m.vocab_size) == (4, 256, 4, 2, 64, 768, 4096)


def test_shard_config_and_grids():
    s = shard_config(resolve_model("llama-3.1-70b"), 4)
    assert (s.num_attention_heads, s.num_kv_heads, s.intermediate_size) == (16, 2, 7168)
    g = default_grid(TINY, True, 16, 256, 1024)
    assert {63, 64, 65, 127, 128, 129}.issubset(g.prefill_q) and max(g.prefill_q) == 256
    assert max(g.decode_batch) == 16 and max(g.decode_ctx) == 1024
    big = default_grid(resolve_model("llama-3.1-8b"), True, 256, 8192, 8192)
    assert max(big.prefill_q) < 8192 and big.repeats <= 3  # FLOP budget on CPU
    c = skewed_contexts(5, 100)
    assert sum(c) == 500 and max(c) > 150 and min(c) < 50


# ---------------------------------------------------------------------- engine
class _ConstPerf:
    kind = "constant"

    def step_time(self, shape):
        return 1e-3

    def decode_step_times(self, num_seqs, ctx_totals):
        return np.full(len(ctx_totals), 1e-3)

    def provenance(self):
        return {}


def _simulate_const(specs):
    """The simulator's scheduler on the same limits, every step 1 ms."""
    from simulator.cluster.setup import build_setup
    from simulator.engine.loop import simulate
    from simulator.scenario.config import validate_scenario
    sc = validate_scenario({
        "name": "t", "model": "llama-3.1-8b", "perf": {"source": "roofline"},
        "scheduler": {"max_num_seqs": 4, "max_num_batched_tokens": 32,
                      "enable_chunked_prefill": True, "max_model_len": 512},
        "kv_cache": {"num_gpu_blocks": 10_000, "block_size": 16},
        "workload": {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1.0},
                                   "num_requests": 1,
                                   "prompt_tokens": {"dist": "fixed", "value": 8},
                                   "output_tokens": {"dist": "fixed", "value": 2}}}})
    setup = build_setup(sc)
    setup.perf = _ConstPerf()
    return simulate(sc, setup, specs)


def _engine(cfg=MICRO, seqs=4, tokens=32):
    m = TinyLlama(cfg)
    sc = SchedulerConfig(max_num_seqs=seqs, max_num_batched_tokens=tokens,
                         enable_chunked_prefill=True)
    return RealEngine(m, sc, SchedulerLimits(max_model_len=cfg.max_position_embeddings),
                      num_gpu_blocks=10_000)


def test_engine_follows_the_simulator_scheduler():
    rng = np.random.default_rng(3)
    specs = [RequestSpec(i, 0.0, int(rng.integers(5, 60)), int(rng.integers(2, 9)))
             for i in range(10)]
    run = _engine().run(specs, realtime=False)
    st = run.steps
    assert (st["num_seqs"] <= 4).all() and (st["num_tokens"] <= 32).all()
    done = run.requests
    assert (done["status"] == "completed").all()
    assert (done["num_emitted_tokens"] == done["num_output_tokens"]).all()
    # all requests arrive at t=0, so the batches do not depend on step times: the simulator's
    # scheduler with any step-time model must produce the same sequence of batches
    sim = _simulate_const(specs).steps()
    assert len(sim) == len(st)
    assert (sim["num_prefill_tokens"].to_numpy() == st["num_prefill_tokens"].to_numpy()).all()
    assert (sim["num_decode_seqs"].to_numpy() == st["num_decode_seqs"].to_numpy()).all()
    shapes = steps_to_shapes(st)
    assert [s.num_tokens for s in shapes] == st["num_tokens"].tolist()


def test_engine_realtime_respects_arrivals():
    specs = [RequestSpec(0, 0.0, 20, 3), RequestSpec(1, 0.05, 20, 3)]
    run = _engine().run(specs, realtime=True)
    r = run.requests.set_index("request_id")
    first = run.steps["start_time_s"].to_numpy()
    assert first[0] < 0.01
    assert r.loc[1, "first_token_time_s"] >= 0.05
    assert (r["first_token_time_s"] > r["arrival_time_s"]).all()


# ---------------------------------------------------------------------- calibrate
def test_calibrate_tiny_shapes_writes_a_usable_profile(tmp_path):
    # a micro model (2 layers, hidden 64) keeps this test to a few seconds
    cfg_path = tmp_path / "micro" / "config.json"
    cfg_path.parent.mkdir()
    cfg_path.write_text(__import__("json").dumps(MICRO.hf_config()))
    out = calibrate(str(cfg_path), tmp_path / "cpu-test", quick=True, max_num_seqs=3,
                    max_num_batched_tokens=16, max_context=64, log=lambda s: None)
    for f in ("gemm.csv", "attention_prefill.csv", "attention_decode.csv", "elementwise.csv",
              "lm_head.csv", "cpu_overhead.csv", "provenance.yaml", "spec.yaml"):
        assert (out / f).is_file(), f
    g = pd.read_csv(out / "gemm.csv")
    assert {"median_s", "p25_s", "p75_s", "iqr_rel", "noisy", "samples_s"} <= set(g.columns)
    assert set(g["op"]) == {"qkv_proj", "o_proj", "mlp_gate_up", "mlp_down"}
    assert max(g["m"]) == 16 and (g["median_s"] > 0).all()
    d = pd.read_csv(out / "attention_decode.csv")
    assert set(d["dist"]) == {"uniform", "skewed"}
    prov = read_provenance(out)
    assert prov["dtype"] == "float32" and prov["num_threads"] == 1
    assert prov["torch_version"] and prov["cpu_model"] and prov["harness_version"]
    spec = yaml.safe_load((out / "spec.yaml").read_text())
    assert spec["kind"] == "measured" and spec["bf16_flops_per_s"] > 0
    assert "measured" in spec["provenance"]["bf16_flops_per_s"]
    gpu = load_gpu_spec(out)
    m = load_table_perf_model(get_model(str(cfg_path)), gpu, 1, "bf16", "bf16", required=True)
    p = m.provenance()
    assert all(p[k].startswith("measured (") for k in
               ("gemm", "attention_prefill", "attention_decode", "elementwise", "lm_head"))
    assert p["cpu_overhead"].startswith("measured (engine step residuals")
    # a second calibration of the same shapes replaces rows instead of duplicating them
    calibrate(str(cfg_path), out, quick=True, max_num_seqs=3, max_num_batched_tokens=16,
              max_context=64, log=lambda s: None)
    g2 = pd.read_csv(out / "gemm.csv")
    assert len(g2) == len(g)


def test_calibrate_rejects_missing_cuda():
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    with pytest.raises(ValueError, match="CUDA"):
        calibrate("tiny", "/tmp/never", device="cuda", log=lambda s: None)


@pytest.mark.gpu
def test_calibrate_on_cuda(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    cfg_path = tmp_path / "micro" / "config.json"
    cfg_path.parent.mkdir()
    cfg_path.write_text(__import__("json").dumps(MICRO.hf_config()))
    out = calibrate(str(cfg_path), tmp_path / "gpu", device="cuda", quick=True, max_num_seqs=4,
                    max_num_batched_tokens=64, max_context=128, log=lambda s: None,
                    table_format="v1")  # the in-context flat profile (v2: test_operator_harness)
    prov = read_provenance(out)
    assert prov["dtype"] == "bf16" and prov["cuda_version"]
    assert load_table_perf_model(get_model(str(cfg_path)), load_gpu_spec(out), 1, "bf16",
                                 "bf16", required=True) is not None
