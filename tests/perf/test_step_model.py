"""The step-time model (simulator/perf/step_model.py) and engine profiles (engine_profile.py).

Expected values are derived by hand from the formulas in the module docstrings: the operator
backend is the datasheet roofline (its own unit tests check it), so every expectation here is
"backend terms at the stated token count" combined by the engine's rule.
"""
from __future__ import annotations

import numpy as np
import pytest
import yaml
from helpers import synthetic_workload

from simulator.catalog.hardware import get_gpu
from simulator.catalog.models import get_model
from simulator.cluster.setup import build_setup
from simulator.perf import (
    ConstantPerfModel,
    RooflinePerfModel,
    StepShape,
    StepTimeModel,
    build_perf_model,
    get_engine_profile,
)
from simulator.perf.engine_profile import EngineProfile, engine_profile_names, load_engine_profile
from simulator.scenario.config import ScenarioError, validate_scenario

MODEL, GPU = get_model("llama-3.1-8b"), get_gpu("h100-sxm")


def _profile(**kw) -> EngineProfile:
    return EngineProfile.model_validate({"name": "t", **kw})


def _c(v):
    return {"value": v, "source": "test value"}


def _token_terms(ops: RooflinePerfModel, T: int) -> float:
    L = MODEL.num_layers
    return (L * sum(ops.gemm_time(op, T) for op in ops.gemms) + L * ops.elementwise_time(T)
            + 2 * L * ops.all_reduce_time(T))


# ------------------------------------------------------------------ capture sizes
def test_vllm_v1_default_capture_sizes():
    cg = get_engine_profile("vllm-v1").cuda_graphs
    # max = min(2 x 256, 512, 2048) = 512: [1, 2, 4] + 8..248 step 8 + 256..512 step 16
    want = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 513, 16))
    assert list(cg.sizes_for(256, 2048)) == want
    assert len(want) == 51  # the recorded vLLM 0.19 resolved config lists 51 sizes
    # max_num_seqs 128 -> 256; max_num_batched_tokens 100 caps it at 96
    assert cg.sizes_for(128, 8192)[-1] == 256
    assert cg.sizes_for(256, 100)[-1] == 96
    # speculative decoding: 2 x 64 x (1 + 3) = 512
    assert cg.sizes_for(64, 8192, 3)[-1] == 512


def test_vllm_v0_capture_sizes():
    cg = get_engine_profile("vllm-v0").cuda_graphs
    assert list(cg.sizes_for(256, 8192)) == [1, 2, 4] + [8 * i for i in range(1, 33)]
    assert cg.sizes_for(20, 8192)[-1] == 16


# ------------------------------------------------------------------ padding and overlap
def test_decode_step_is_padded_to_the_next_capture_size():
    ops = RooflinePerfModel(MODEL, GPU)
    prof = _profile(cuda_graphs={"enabled": True, "mode": "full_and_piecewise",
                                 "capture_sizes": [1, 2, 4, 8, 16]})
    m = StepTimeModel(ops, prof, prof.cuda_graphs.sizes_for(256, 8192))
    shape = StepShape(num_decode=5, decode_ctx_total=5 * 300, num_sampled=5)
    L = MODEL.num_layers
    want = (_token_terms(ops, 8) + L * float(ops.attn_decode_time(5, 1500))
            + ops.lm_head_time(5))
    assert m.step_time(shape) == pytest.approx(want, rel=1e-12)
    assert m.padded_tokens(5) == 8 and m.padded_tokens(16) == 16
    # above the largest capture size the step runs eager, unpadded
    big = StepShape(num_decode=17, decode_ctx_total=17 * 300, num_sampled=17)
    want17 = (_token_terms(ops, 17) + L * float(ops.attn_decode_time(17, 5100))
              + ops.lm_head_time(17))
    assert m.padded_tokens(17) == 17
    assert m.step_time(big) == pytest.approx(want17, rel=1e-12)


def test_full_mode_pads_pure_decode_only():
    ops = RooflinePerfModel(MODEL, GPU)
    prof = _profile(cuda_graphs={"enabled": True, "mode": "full", "capture_sizes": [1, 2, 4, 8]})
    m = StepTimeModel(ops, prof, (1, 2, 4, 8))
    mixed = StepShape(prefill_q=[3], prefill_start=[0], num_decode=2, decode_ctx_total=200,
                      num_sampled=3)
    L = MODEL.num_layers
    want = (_token_terms(ops, 5) + L * ops.attn_prefill_time(3, 0)
            + L * float(ops.attn_decode_time(2, 200)) + ops.lm_head_time(3))
    assert m.step_time(mixed) == pytest.approx(want, rel=1e-12)  # 5 tokens, not padded to 8


def test_async_scheduling_hides_cpu_under_gpu_time():
    ops = RooflinePerfModel(MODEL, GPU)
    cost = {"step_s": _c(2e-3), "per_seq_s": _c(1e-4)}
    sync = {"step_s": _c(5e-4)}
    a = StepTimeModel(ops, _profile(async_scheduling=True, cpu=cost, sync=sync))
    s = StepTimeModel(ops, _profile(async_scheduling=False, cpu=cost, sync=sync))
    shape = StepShape(num_decode=64, decode_ctx_total=64 * 1000, num_sampled=64)
    gpu = a.gpu_step_time(shape)
    cpu = 2e-3 + 1e-4 * 64  # 8.4 ms of CPU work for 64 sequences
    assert a.step_time(shape) == pytest.approx(max(gpu, cpu) + 5e-4, rel=1e-12)
    assert s.step_time(shape) == pytest.approx(gpu + cpu + 5e-4, rel=1e-12)
    assert a.op_times(shape)["engine_overhead"] == pytest.approx(
        max(gpu, cpu) + 5e-4 - gpu, rel=1e-9)


def test_sampler_is_memory_bound_over_the_vocabulary():
    ops = RooflinePerfModel(MODEL, GPU)
    m = StepTimeModel(ops, _profile(sampler={"bytes_per_logit": _c(10)}))
    bw = GPU.hbm_bandwidth_bytes_per_s * ops.params.memory_efficiency
    assert m.sampler_time(64) == pytest.approx(64 * 10 * 128256 / bw, rel=1e-12)


def test_decode_run_equals_single_steps():
    prof = get_engine_profile("vllm-v0")
    m = build_perf_model(MODEL, GPU, 1, source="roofline", engine=prof)
    ctx = np.arange(100, 140) * 24
    run = m.decode_step_times(24, ctx)
    for i, c in enumerate(ctx):
        step = m.step_time(StepShape(num_decode=24, decode_ctx_total=int(c), num_sampled=24))
        assert run[i] == pytest.approx(step, rel=1e-12)
    gpu = m.gpu_decode_step_times(24, ctx)
    cpu = 1.4282e-3 + 4.168e-5 * 24  # vllm-v0: synchronous, CPU adds to every step
    assert np.allclose(run - gpu, cpu, rtol=1e-9)


def test_decode_step_times_are_the_same_bits_however_asked():
    # remembered per (num_seqs, ctx_total): a run asked again, in part or in another
    # batching, gets exactly what a fresh model computes for each step alone
    prof = get_engine_profile("vllm-v1")
    m = build_perf_model(MODEL, GPU, 1, source="roofline", engine=prof)
    ctx = np.arange(100, 140) * 24
    first = m.decode_step_times(24, ctx)
    again = m.decode_step_times(24, ctx[10:30])  # all remembered
    mixed = m.decode_step_times(24, np.arange(130, 150) * 24)  # half remembered
    fresh = build_perf_model(MODEL, GPU, 1, source="roofline", engine=prof)
    alone = [float(fresh.decode_step_times(24, np.array([c]))[0])
             for c in np.arange(100, 150) * 24]
    assert first.tolist() == alone[:40]
    assert again.tolist() == alone[10:30]
    assert mixed.tolist() == alone[30:50]
    assert m.decode_step_times(25, ctx[:3]).tolist() != first[:3].tolist()  # keyed by batch


def test_decode_step_memo_is_bounded():
    prof = get_engine_profile("vllm-v1")
    m = build_perf_model(MODEL, GPU, 1, source="roofline", engine=prof)
    fresh = build_perf_model(MODEL, GPU, 1, source="roofline", engine=prof)
    m.decode_times.memo_max = 8
    ctx = np.arange(100, 112) * 24
    a = m.decode_step_times(24, ctx[:6])   # 6 remembered
    b = m.decode_step_times(24, ctx[4:10])  # 2 hits, then 4 new: the 9th starts afresh
    assert m.decode_times.remembered == 2
    alone = [float(fresh.decode_step_times(24, np.array([c]))[0]) for c in ctx]
    assert a.tolist() == alone[:6] and b.tolist() == alone[4:10]


def test_decode_step_times_follow_a_new_engine_profile():
    # fit-engine sets candidate profiles on one model: remembered times must not outlive one
    m = build_perf_model(MODEL, GPU, 1, source="roofline", engine=get_engine_profile("vllm-v1"))
    ctx = np.arange(100, 104) * 24
    m.decode_step_times(24, ctx)
    v0 = get_engine_profile("vllm-v0")
    m.engine = v0
    fresh = build_perf_model(MODEL, GPU, 1, source="roofline", engine=v0)
    assert m.decode_step_times(24, ctx).tolist() == fresh.decode_step_times(24, ctx).tolist()


def test_none_profile_is_kernel_sum_only():
    m = build_perf_model(MODEL, GPU, 1, source="roofline", engine="none")
    ops = m.ops
    shape = StepShape(prefill_q=[100], prefill_start=[50], num_sampled=1)
    L = MODEL.num_layers
    want = _token_terms(ops, 100) + L * ops.attn_prefill_time(100, 50) + ops.lm_head_time(1)
    assert m.step_time(shape) == pytest.approx(want, rel=1e-12)
    assert m.op_times(shape)["engine_overhead"] == 0.0


def test_provenance_names_engine_and_operators():
    m = build_perf_model(MODEL, GPU, 1, source="roofline", engine="vllm-v0")
    p = m.provenance()
    assert p["engine"].startswith("vllm-v0")
    assert "Vidur" in p["engine_overhead"]
    assert p["gemm"] == "datasheet" and p["all_reduce"] == "none (TP=1)"
    assert p["cuda_graphs"].startswith("full")


# ------------------------------------------------------------------ constant model
def test_constant_model_is_exact():
    m = ConstantPerfModel(step_s=0.01, per_token_s=1e-5, per_seq_s=2e-4)
    shape = StepShape(prefill_q=[100, 20], prefill_start=[0, 0], num_decode=3,
                      decode_ctx_total=900, num_sampled=4)
    # 123 tokens, 5 sequences
    assert m.step_time(shape) == pytest.approx(0.01 + 123e-5 + 5 * 2e-4, rel=1e-15)
    assert np.allclose(m.decode_step_times(7, np.arange(4)), 0.01 + 7 * (1e-5 + 2e-4))


def test_constant_source_through_a_scenario():
    sc = validate_scenario({"workload": synthetic_workload(5),
                            "perf": {"source": "constant",
                                     "constant": {"step_s": 0.02, "per_token_s": 0.0}}})
    setup = build_setup(sc)
    assert isinstance(setup.perf, ConstantPerfModel)
    assert setup.perf.step_time(StepShape(num_decode=9, decode_ctx_total=99)) == 0.02
    with pytest.raises(ScenarioError, match="perf.constant"):
        validate_scenario({"workload": synthetic_workload(5),
                           "perf": {"source": "constant"}})


# ------------------------------------------------------------------ profile files
def test_shipped_profiles_load_and_every_constant_has_a_source():
    names = engine_profile_names()
    assert {"vllm-v1", "vllm-v0", "none"} <= set(names)
    for n in names:
        p = get_engine_profile(n)
        for k, c in p.constants().items():
            assert c["source"] and len(c["source"]) > 3, (n, k)
            assert "placeholder" not in c["source"], (n, k)


@pytest.mark.parametrize("doc, msg", [
    ({"name": "x", "cpu": {"step_s": {"value": 1e-3}}}, "cpu.step_s.source"),
    ({"name": "x", "cpu": {"step_s": 0.001}}, "cpu.step_s"),
    ({"name": "x", "bogus": 1}, "bogus: unknown key"),
    ({"name": "x", "sync": {"step_s": {"value": -1, "source": "abc"}}}, "sync.step_s.value"),
    ({"cpu": {}}, "name: missing required key"),
])
def test_bad_profile_is_one_line_error(tmp_path, doc, msg):
    p = tmp_path / "e.yaml"
    p.write_text(yaml.safe_dump(doc))
    with pytest.raises(ValueError, match=msg.replace(".", r"\.")) as ei:
        load_engine_profile(p)
    assert "\n" not in str(ei.value) and str(p) in str(ei.value)


def test_unknown_profile_lists_the_shipped_ones():
    with pytest.raises(ValueError, match="vllm-v1"):
        get_engine_profile("vllm-v7")


def test_reserve_full_isl_and_null_block_reach_the_replica():
    sc = validate_scenario({"workload": synthetic_workload(5),
                            "kv_cache": {"num_gpu_blocks": 100},
                            "perf": {"source": "roofline", "engine": "vllm-v1"}})
    setup = build_setup(sc)
    assert setup.limits.reserve_full_isl is True
    assert setup.num_gpu_blocks == 100 and setup.num_usable_blocks == 99
    sc0 = sc.model_copy(update={"perf": sc.perf.model_copy(update={"engine": "vllm-v0"})})
    setup0 = build_setup(sc0)
    assert setup0.limits.reserve_full_isl is False and setup0.num_usable_blocks == 100


def test_numpy_counts_give_the_values_of_python_ints():
    # the Python API takes numpy integers (and arrays of context totals) as the pure build
    # always did; the compiled step kernels take Python ints: the model converts
    m = build_perf_model(MODEL, GPU, 1, engine=get_engine_profile("vllm-v1"))
    ref = build_perf_model(MODEL, GPU, 1, engine=get_engine_profile("vllm-v1"))
    plain = StepShape(prefill_q=[100], prefill_start=[0], num_decode=8, decode_ctx_total=8000,
                      num_sampled=9)
    numpy_shape = StepShape(prefill_q=[np.int64(100)], prefill_start=[np.int64(0)],
                            num_decode=np.int64(8), decode_ctx_total=np.int64(8000),
                            decode_q_per_seq=np.int64(1), num_sampled=np.int64(9))
    assert m.step_time(numpy_shape) == ref.step_time(plain)
    assert m.gpu_step_time(numpy_shape) == ref.gpu_step_time(plain)
    want = ref.decode_step_times_list(8, [8000, 8001])
    assert m.decode_step_times_list(8, np.array([8000, 8001])) == want
    assert m.decode_step_times_list(np.int64(8), [np.int64(8000), np.int64(8001)]) == want
    frac = m.decode_step_times_list(8, [8000.5])
    assert frac == ref.decode_step_times(8, np.array([8000.5])).tolist()


def test_a_new_engine_profile_gives_the_model_a_fresh_build_gives():
    # fit-engine and what-ifs set another profile on a built model: its graph mode, sampler,
    # CPU and sync terms follow (not only the linear terms); the capture sizes stay (the same
    # rule here: they follow the scheduler's settings)
    shapes = [StepShape(prefill_q=[700], prefill_start=[0], num_decode=12,
                        decode_ctx_total=12_345, num_sampled=13),
              StepShape(num_decode=24, decode_ctx_total=24 * 1500, num_sampled=24)]
    v1 = get_engine_profile("vllm-v1")
    other = v1.model_copy(update={
        "cuda_graphs": v1.cuda_graphs.model_copy(update={"mode": "full"}),
        "sampler": v1.sampler.model_copy(update={
            "bytes_per_logit": v1.sampler.bytes_per_logit.model_copy(update={"value": 40.0})}),
        "async_scheduling": False})
    ctx = np.array([36_000, 36_024])
    for prof in (get_engine_profile("none"), other):
        m = build_perf_model(MODEL, GPU, 1, engine=v1)
        for s in shapes:
            m.step_time(s)
        m.decode_step_times(24, ctx)
        m.engine = prof
        fresh = build_perf_model(MODEL, GPU, 1, engine=prof)
        for s in shapes:
            assert m.step_time(s) == fresh.step_time(s), prof.name
        assert m.decode_step_times(24, ctx).tolist() == \
            fresh.decode_step_times(24, ctx).tolist(), prof.name


def test_cpu_from_profile_needs_a_measured_cpu_table():
    # an engine profile that reads the GPU profile's measured CPU time per step: refused with
    # the reason on a GPU whose tables have none (before: an internal TypeError mid-run),
    # accepted where the profile measured it (the CPU harness's flat profile)
    prof = get_engine_profile("vllm-v1").model_copy(update={"cpu_from_profile": True})
    with pytest.raises(ValueError, match="cpu_overhead table .* h100-sxm has none"):
        build_perf_model(MODEL, GPU, 1, engine=prof)
    cpu = get_gpu("cpu-amd-epyc-1t")
    m = build_perf_model(get_model("servesim-tiny-llama"), cpu, 1, engine=prof)
    assert m.ops.has_cpu_overhead_table
    s = StepShape(num_decode=4, decode_ctx_total=400, num_sampled=4)
    assert m.step_time(s) > m.gpu_step_time(s) > 0
