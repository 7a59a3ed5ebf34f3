"""Pipeline memory per stage (issue 32 item 5): every stage planned, the fewest blocks kept.

servesim-tiny-llama (4 layers, h 256, 4 heads, 2 KV heads, d 64, I 768, V 4096 untied) as in
``test_planner_vllm.test_tiny_model_every_term_by_hand`` (1e9-byte device at utilisation 0.5,
64 batched tokens, 8 sequences, 4 SMs, compute capability 8.6), with PP 3. vLLM's split of 4
layers over 3 stages: 4 // 3 = 1 each, the 1 left over to the stage before the last:
[1, 2, 1] (layers 0 | 1-2 | 3): the middle stage is the largest, the first is not.

    one layer      = 256 x 8 x 64 + 4 x 64 x 256 + 3 x 256 x 768 + 2 x 256   =   786,944 params
    vocabulary     = 4096 x 256                                              = 1,048,576 params
    rotary cache   = 4096 x 64 x 2 B = 524,288 B; scale scalars 7 x 512 B a layer

    weights  stage 0 = 2 x (786,944 + 1,048,576 embedding) + 524,288 + 3,584      = 4,198,912
             stage 1 = 2 x (2 x 786,944) + 524,288 + 2 x 3,584                     = 3,679,232
             stage 2 = 2 x (786,944 + 1,048,576 LM head + 256 norm) + 524,288 + 3,584
                                                                                   = 4,199,424
    forward 393,216 on every stage; sampler 565,248 on the last only; cuBLAS 9,568,256;
    received activations (stages 1, 2) = 2 x 2 B x 64 x 256 = 65,536
    activations  stage 0 = 393,216 + 9,568,256                                     = 9,961,472
                 stage 1 = 393,216 + 9,568,256 + 65,536                            = 10,027,008
                 stage 2 = 565,248 + 9,568,256 + 65,536                            = 10,199,040
    kv = 5e8 - weights - activations - 268,435,456 (non-torch 0.25 GiB):
         217,404,160 / 217,858,304 / 217,166,080 B
    block bytes = 16 x 2 x layers x 2 x 64 x 2 B = 8,192 / 16,384 / 8,192
    blocks = 26,538 / 13,297 / 26,509 -> the engine gets 13,297 (stage 1's)

Planning the first stage alone (the old rule: 1 layer with the embedding *and* the LM head)
gave (5e8 - 6,296,576 - 10,133,504 - 268,435,456) // 8,192 = 26,261 blocks: twice what the
two-layer middle stage can hold.
"""
from __future__ import annotations

import warnings

import pytest

from simulator.catalog.models import get_model
from simulator.kv.planner import MaxModelLenError
from simulator.kv.stages import plan_pipeline_memory, stage_rows
from simulator.runs.scenario import run_scenario
from simulator.scenario.config import validate_scenario
from simulator.topology.pipeline import stage_layer_ranges, stage_model

KW = {"gpu_memory_utilization": 0.5, "block_size": 16, "max_num_batched_tokens": 64,
      "max_num_seqs": 8, "num_sms": 4, "compute_capability": (8, 6), "max_model_len": 4096}


def test_uneven_split_every_stage_by_hand():
    m = get_model("servesim-tiny-llama")
    assert stage_layer_ranges(4, 3) == [(0, 1), (1, 3), (3, 4)]
    assert stage_model(m, 3, 1).num_layers == 2
    plan = plan_pipeline_memory(m, 1e9, pipeline_parallel_size=3, **KW)
    st = plan.stages
    assert [s.num_layers for s in st] == [1, 2, 1] and [s.first_layer for s in st] == [0, 1, 3]
    assert [s.plan.weight_bytes for s in st] == [4_198_912, 3_679_232, 4_199_424]
    assert [s.plan.activation_bytes for s in st] == [9_961_472, 10_027_008, 10_199_040]
    assert [s.plan.sampler_peak_bytes for s in st] == [0, 0, 565_248]
    assert [s.plan.intermediate_bytes for s in st] == [0, 65_536, 65_536]
    assert [s.plan.kv_bytes for s in st] == [217_404_160, 217_858_304, 217_166_080]
    assert [s.plan.block_bytes for s in st] == [8_192, 16_384, 8_192]
    assert [s.plan.num_gpu_blocks for s in st] == [26_538, 13_297, 26_509]
    assert plan.num_gpu_blocks == 13_297 and plan.pipeline_stage == 1
    assert plan.kv_bytes_per_token == 1_024          # the governing stage's two layers
    rows = stage_rows(plan)
    assert [r["sets_num_gpu_blocks"] for r in rows] == [False, True, False]
    assert "13,297" in plan.notes[-1] and "get_kv_cache_configs" in plan.notes[-1]
    # the old rule: the first stage's layer count with the embedding and the LM head
    old = (5e8 - 6_296_576 - 10_133_504 - 268_435_456) // 8_192
    assert old == 26_261 and old > 1.9 * plan.num_gpu_blocks


def test_a_smaller_gpu_on_one_stage_sets_the_blocks():
    """Stage 2 on a 0.75e9-byte device: kv = 3.75e8 - 4,199,424 - 10,199,040 - 268,435,456
    = 92,166,080 B = 11,250 blocks of 8,192 B, fewer than stage 1's 13,297."""
    m = get_model("servesim-tiny-llama")
    plan = plan_pipeline_memory(m, [1e9, 1e9, 0.75e9], pipeline_parallel_size=3, **KW)
    assert plan.stages[2].plan.kv_bytes == 92_166_080
    assert plan.num_gpu_blocks == 11_250 and plan.pipeline_stage == 2
    with pytest.raises(ValueError, match="2 stage memory sizes for pipeline_parallel_size 3"):
        plan_pipeline_memory(m, [1e9, 1e9], pipeline_parallel_size=3, **KW)


def test_single_stage_is_the_plain_plan():
    m = get_model("servesim-tiny-llama")
    plan = plan_pipeline_memory(m, 1e9, pipeline_parallel_size=1, **KW)
    assert plan.num_gpu_blocks == 6_420 and plan.stages == () and plan.pipeline_stage is None


def test_a_stage_that_cannot_hold_one_request_is_named():
    """Per worker, as vLLM checks: max_model_len 215,000 tokens needs 13,438 blocks of 16;
    stages 0 and 2 hold 26,5xx, stage 1 only 13,297 (212,752 tokens)."""
    m = get_model("servesim-tiny-llama")
    with pytest.raises(MaxModelLenError, match=r"^pipeline stage 1 of 3 \(layers 1-2\): ") as e:
        plan_pipeline_memory(m, 1e9, pipeline_parallel_size=3, **{**KW, "max_model_len": 215_000})
    assert e.value.max_tokens == 13_297 * 16


def test_run_summary_reports_every_stage():
    """Llama-3.1-70B, TP 4 x PP 3 on H100 SXM: 80 layers split [27, 27, 26]; the run's
    num_gpu_blocks is the smallest stage count and the summary lists each stage."""
    sc = validate_scenario({
        "model": "llama-3.1-70b", "hardware": {"gpu": "h100-sxm"},
        "cluster": {"tensor_parallel_size": 4, "pipeline_parallel_size": 3},
        "perf": {"source": "constant", "constant": {"step_s": 0.01}},
        "cost": {"usd_per_gpu_hour": 1.0},
        "workload": {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 5},
                                   "num_requests": 5,
                                   "prompt_tokens": {"dist": "fixed", "value": 32},
                                   "output_tokens": {"dist": "fixed", "value": 4}}}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = run_scenario(sc, write=False)
    rows = res.summary["pipeline_stages"]
    assert [r["num_layers"] for r in rows] == [27, 27, 26]
    assert [r["first_layer"] for r in rows] == [0, 27, 54]
    assert res.summary["num_gpu_blocks"] == min(r["num_gpu_blocks"] for r in rows)
    # 27 layers x 2 (K, V) x 2 KV heads per GPU x 128 x 2 B; 26 layers on the last stage
    assert [r["kv_bytes_per_token"] for r in rows] == [27_648, 27_648, 26_624]
    assert sum(r["sets_num_gpu_blocks"] for r in rows) == 1
    assert res.summary["num_completed"] == 5
