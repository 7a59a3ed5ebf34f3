"""The measured CPU profile shipped in ``hardware_profiles/cpu-amd-epyc-1t`` (no torch needed).

It holds tables that ``servesim calibrate`` measured for the tiny validation model
(``servesim-tiny-llama/config.json`` in the same folder) on a 2-core AMD EPYC VM with one torch
thread. The checks are loose plausibility bounds (another machine's numbers would differ); they
make sure a real measured profile loads, drives a simulation and labels its provenance.
"""
from __future__ import annotations

import pytest

from simulator.catalog.hardware import get_gpu
from simulator.catalog.models import get_model
from simulator.perf.step_shape import StepShape
from simulator.perf.tables.flat_profile import TablePerfModel, load_table_perf_model
from simulator.runs.scenario import run_scenario
from simulator.scenario.config import validate_scenario

PROFILE = "cpu-amd-epyc-1t"


@pytest.fixture(scope="module")
def gpu():
    return get_gpu(PROFILE)


@pytest.fixture(scope="module")
def tiny(gpu):
    return get_model(str(gpu.profile_dir / "servesim-tiny-llama" / "config.json"))


def test_shipped_cpu_profile_loads_as_tables(gpu, tiny):
    m = load_table_perf_model(tiny, gpu, 1, "bf16", "bf16", required=True)
    assert isinstance(m, TablePerfModel)
    p = m.provenance()
    for op in ("gemm", "attention_prefill", "attention_decode", "elementwise", "lm_head"):
        assert p[op].startswith("measured (AMD EPYC"), (op, p[op])
    assert p["cpu_overhead"].startswith("measured (engine step residuals")
    a, b, c = m.cpu_overhead_params
    assert 0 < a < 2e-3 and b >= 0 and c >= 0
    decode1 = m.step_time(StepShape(num_decode=1, decode_ctx_total=300, num_sampled=1))
    prefill = m.step_time(StepShape(prefill_q=[256], prefill_start=[0], num_sampled=1))
    assert 0.5e-3 < decode1 < 10e-3 and 5e-3 < prefill < 100e-3 and prefill > 4 * decode1


def test_shipped_cpu_profile_drives_a_run(gpu, tiny):
    sc = validate_scenario({
        "name": "cpu-table", "model": str(gpu.profile_dir / "servesim-tiny-llama" / "config.json"),
        "hardware": {"gpu": PROFILE}, "perf": {"source": "table"},
        "scheduler": {"max_num_seqs": 16, "max_num_batched_tokens": 256, "max_model_len": 2048},
        "kv_cache": {"num_gpu_blocks": 20000, "block_size": 16},
        "workload": {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 20.0},
                                   "num_requests": 40,
                                   "prompt_tokens": {"dist": "fixed", "value": 200},
                                   "output_tokens": {"dist": "fixed", "value": 30}}}})
    from simulator.cluster.setup import UnpricedGPUWarning
    with pytest.warns(UnpricedGPUWarning, match="has no price"):  # a CPU profile has none
        res = run_scenario(sc, None, write=False, figures=False)
    assert res.summary["perf_model"] == "table"
    assert res.summary["provenance"]["gemm"].startswith("measured (")
    assert (res.requests["status"] == "completed").all()
