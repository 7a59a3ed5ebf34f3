"""Bottleneck advice names only costs the model has (issue 32 item 4).

- ``perf.source: constant`` prices a step as one synthetic time: no operators, no all-reduce,
  no engine overhead. Its plan note classifies nothing and says why; KV and queueing advice
  (the simulation's own figures) still apply.
- The roofline at TP 1 has no all-reduce: its overhead is the engine CPU alone,
  ``1.0 ms + 48 us x sequences`` (RooflineParams), so a step of 16 decodes carries
  1.0e-3 + 16 x 4.8e-5 = 1.768 ms of it, and the advice does not mention all-reduce or TP.
  At TP 2 the all-reduce appears (two per layer, 32 layers) and the advice names it.
"""
from __future__ import annotations

import pandas as pd
import pytest

from simulator.base.request import RequestSpec
from simulator.catalog.hardware import get_gpu
from simulator.catalog.models import get_model
from simulator.perf import RooflinePerfModel, StepShape
from simulator.perf.step_model import ConstantPerfModel
from simulator.planner.bottleneck import bottleneck_note
from simulator.planner.simulate import compact_summary, simulate_summary, step_bottleneck

SHAPE = StepShape(prefill_q=[], prefill_start=[], num_decode=16, decode_ctx_total=16 * 800,
                  num_sampled=16)


def _steps(perf, n=50) -> pd.DataFrame:
    t = perf.step_time(SHAPE)
    return pd.DataFrame([{"num_prefill_tokens": 0, "num_prefill_seqs": 0, "num_decode_seqs": 16,
                          "num_decode_tokens": 16, "batch_size": 16,
                          "kv_tokens_used": 16 * 800, "step_time_s": t}] * n)


def _row(b, perf_model="roofline", preempt=0):
    return {"confirm_extra": {"bottleneck": b, "queue_share_of_ttft": 0.1,
                              "kv_capacity_rejections": 0, "batch_at_cap_time_share": 0.0,
                              "scheduler": {"max_num_seqs": 64, "max_num_batched_tokens": 8192,
                                            "enable_chunked_prefill": True}},
            "confirm_summary": {"num_preemptions": preempt, "mean_kv_cache_usage": 0.5,
                                "max_kv_cache_usage": 1.0 if preempt else 0.2,
                                "perf_model": perf_model}}


def _mentions_comm(note) -> bool:
    """Whether the note's advice or its share figures name a TP all-reduce or TP degree."""
    said = " ".join(note["advice"]).lower() + " " + (note["summary"].split(";")[0]).lower()
    return "all-reduce" in said or "tp degree" in said


def test_tp1_roofline_overhead_is_the_engine_cpu_only():
    perf = RooflinePerfModel(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), 1)
    ops = perf.op_times(SHAPE)
    assert ops["all_reduce"] == 0.0
    assert ops["cpu_overhead"] == pytest.approx(1.768e-3, rel=1e-12)
    b = step_bottleneck(_steps(perf), perf)
    assert set(b["overhead_terms"]) == {"cpu_overhead"}
    assert b["overhead_terms"]["cpu_overhead"] == pytest.approx(1.768e-3 / perf.step_time(SHAPE))
    assert b["overhead_terms"]["cpu_overhead"] == pytest.approx(b["overhead"])
    note = bottleneck_note(_row({**b, "overhead": 0.3}))   # above the advice threshold
    assert any(a.startswith("per-step overheads are 30% of busy time (engine CPU)")
               for a in note["advice"])
    assert not _mentions_comm(note)
    assert "overheads (engine CPU)" in note["text"]


def test_tp2_roofline_names_the_all_reduce():
    perf = RooflinePerfModel(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), 2)
    ops = perf.op_times(SHAPE)
    assert ops["all_reduce"] == pytest.approx(64 * perf.all_reduce_time(16))  # 2 x 32 layers
    b = step_bottleneck(_steps(perf), perf)
    assert set(b["overhead_terms"]) == {"all_reduce", "cpu_overhead"}
    assert sum(b["overhead_terms"].values()) == pytest.approx(b["overhead"])
    note = bottleneck_note(_row({**b, "overhead": 0.3}))
    adv = [a for a in note["advice"] if a.startswith("per-step overheads")]
    assert len(adv) == 1 and "TP all-reduce" in adv[0]
    assert "a lower TP degree removes all-reduces" in adv[0]


def test_constant_model_classifies_nothing_and_advises_only_what_it_simulates():
    perf = ConstantPerfModel(step_s=0.01)
    assert step_bottleneck(_steps(perf), perf) is None
    note = bottleneck_note(_row(None, perf_model="constant", preempt=4))
    assert note["shares"] is None
    assert "perf.source: constant prices every step as one synthetic time" in note["text"]
    assert note["advice"][0].startswith("KV capacity binds (4 preemption(s)")
    # the KV sentence may suggest a higher TP degree for its memory (the memory plan is real
    # under any step-time model); nothing prices or advises an all-reduce or an overhead
    assert len(note["advice"]) == 1
    assert not any("overhead" in a or "all-reduce" in a for a in note["advice"])


def test_constant_plan_run_end_to_end():
    """A confirmation run on perf.source: constant (TP 2, where the roofline would have
    all-reduces): its extras carry no shares and its note names no all-reduce or TP."""
    sc = {"model": "llama-3.1-8b", "hardware": {"gpu": "h100-sxm"},
          "cluster": {"tensor_parallel_size": 2},
          "perf": {"source": "constant", "constant": {"step_s": 0.01}},
          "scheduler": {"max_num_seqs": 8},
          "workload": {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 5},
                                     "num_requests": 1,
                                     "prompt_tokens": {"dist": "fixed", "value": 10},
                                     "output_tokens": {"dist": "fixed", "value": 10}}}}
    specs = [RequestSpec(i, 0.05 * i, 64, 16) for i in range(40)]
    out = simulate_summary(sc, specs)
    assert out["summary"]["perf_model"] == "constant"
    assert out["extra"]["bottleneck"] is None
    note = bottleneck_note({"confirm_extra": out["extra"],
                            "confirm_summary": compact_summary(out["summary"])})
    assert "perf.source: constant" in note["text"]
    assert not _mentions_comm(note)
    assert not any("overhead" in a for a in note["advice"])
