"""The run summary's energy block, end to end: the busy energy recomputed from the written step
table by the published formula, the price, pools, and GPUs without a power model."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import make_scenario, spec, synthetic_workload

from simulator.catalog.hardware import get_gpu
from simulator.catalog.models import get_model
from simulator.runs.gateway import run_gateway
from simulator.runs.scenario import run_scenario


def test_energy_is_the_steps_power_times_their_time():
    sc = make_scenario({"cost": {"usd_per_kwh": 0.15}},
                       workload=synthetic_workload(n=60, rate_rps=8.0))
    res = run_scenario(sc, write=False)
    s, e = res.summary, res.summary["energy"]
    assert e["available"] is True
    # by hand from the step table: P = min(700, 98.6 + 336.2 u_c + 475.2 u_m) per GPU
    m, g = get_model("llama-3.1-8b"), get_gpu("h100-sxm")
    st = res.steps.to_pandas() if hasattr(res.steps, "to_pandas") else res.steps
    t0, t1 = s["window_start_s"], s["window_end_s"]
    dt = (st.end_time_s - st.start_time_s).to_numpy()
    ov = np.clip(np.minimum(st.end_time_s, t1) - np.maximum(st.start_time_s, t0), 0, None)
    pf, dec = st.num_prefill_tokens.to_numpy(float), st.num_decode_tokens.to_numpy(float)
    nps = np.maximum(st.num_prefill_seqs.to_numpy(float), 1)
    kv = st.kv_tokens_used.to_numpy(float)
    q = pf / nps
    pairs = nps * q * (q + 1) / 2 + np.maximum(kv - pf, st.num_decode_seqs.to_numpy(float))
    flops = 2 * m.num_params_per_gpu(1) * (pf + dec) + 4 * m.head_dim * m.num_attention_heads \
        * m.num_layers * pairs
    byts = m.weight_bytes_per_gpu("bf16", 1) + kv * m.kv_bytes_per_token("bf16", 1)
    uc = np.clip(flops / (dt * g.bf16_flops_per_s), 0, 1)
    um = np.clip(byts / (dt * g.hbm_bandwidth_bytes_per_s), 0, 1)
    p = np.minimum(700.0, 98.6 + 336.2 * uc + 475.2 * um)
    busy = float((p * ov).sum())
    assert e["busy_energy_j"] == pytest.approx(busy, rel=1e-9)
    # the H100's idle power (a parked vLLM engine, hardware_profiles/h100-sxm/power.yaml):
    # 115 W over the held time the replica did not step
    idle = 115.0 * (s["duration_s"] - float(ov.sum()))
    assert e["idle_counted"] is True
    assert e["idle_energy_j"] == pytest.approx(idle, rel=1e-9, abs=1e-9)
    total = busy + idle
    assert e["energy_j"] == pytest.approx(total, rel=1e-9)
    assert e["joules_per_output_token"] == pytest.approx(total / s["num_output_tokens"])
    assert e["energy_cost_usd"] == pytest.approx(total / 3.6e6 * 0.15)
    assert e["mean_power_w"] == pytest.approx(total / s["duration_s"])
    assert 98.6 <= e["peak_power_w"] <= 700.0
    # a stated idle power counts the held, non-stepping time of the replica
    sc2 = make_scenario({"hardware": {"idle_power_w": 60.0}},
                        workload=synthetic_workload(n=60, rate_rps=8.0))
    e2 = run_scenario(sc2, write=False).summary["energy"]
    idle_s = s["duration_s"] - float(ov.sum())
    assert e2["idle_energy_j"] == pytest.approx(60.0 * idle_s, rel=1e-9, abs=1e-9)
    assert e2["busy_energy_j"] == pytest.approx(busy, rel=1e-12)


def _df(steps):
    return steps.to_pandas() if hasattr(steps, "to_pandas") else steps


def test_a_cap_at_the_default_limit_changes_nothing_but_the_block():
    wl = synthetic_workload(n=40, rate_rps=8.0)
    a = run_scenario(make_scenario(workload=wl), write=False)
    b = run_scenario(make_scenario({"hardware": {"power_cap_w": 700}}, workload=wl), write=False)
    assert _df(a.steps).equals(_df(b.steps))
    assert b.summary["energy"]["power_cap_w"] == 700
    # a binding cap slows the prompt-heavy steps; power never exceeds it
    c = run_scenario(make_scenario({"hardware": {"power_cap_w": 350}}, workload=wl), write=False)
    assert c.summary["energy"]["peak_power_w"] <= 350.0 * (1 + 1e-12)  # a bin mean, rounded
    sa, sc_ = _df(a.steps), _df(c.steps)
    first_a = sa[sa.num_prefill_tokens > 0].step_time_s.iloc[0]
    first_c = sc_[sc_.num_prefill_tokens > 0].step_time_s.iloc[0]
    assert first_c > first_a


def test_a_gpu_without_a_power_model_says_so():
    sc = make_scenario({"hardware": {"gpu": "l40s"}, "cost": {"usd_per_gpu_hour": 1.0}},
                       workload=synthetic_workload(n=10))
    e = run_scenario(sc, write=False).summary["energy"]
    assert e == {"available": False, "reason": e["reason"]} and "l40s" in e["reason"]


def test_pools_report_energy_per_pool():
    sc = make_scenario({"perf": {"source": "roofline"}, "cost": {"usd_per_kwh": 0.1},
                        "pools": [{"name": "A", "match": {"tenants": ["a"]}},
                                  {"name": "B", "match": {"tenants": ["b"]}}]})
    specs = [spec(i, 0.05 * i, 200, 20, tenant="ab"[i % 2]) for i in range(20)]
    res = run_gateway(sc, specs=specs, write=False)
    e = res.summary["energy"]
    assert set(e["by_pool"]) == {"A", "B"}
    tot = sum(p["energy_j"] for p in e["by_pool"].values())
    assert e["energy_j"] == pytest.approx(tot, rel=1e-12)
    assert e["energy_cost_usd"] == pytest.approx(tot / 3.6e6 * 0.1, rel=1e-12)
    assert e["peak_power_w"] <= e["by_pool"]["A"]["peak_power_w"] + e["by_pool"]["B"][
        "peak_power_w"] + 1e-9
