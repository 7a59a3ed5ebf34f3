"""Regenerate the inputs of the golden report tests (``reports/<case>/input/``) by running the
simulator on small scenarios. Run from the repository root, only on purpose; then refresh and
review the expected outputs (``SERVESIM_UPDATE_GOLDEN=1 python -m pytest
tests/golden/test_golden_reports.py``)::

    python tests/golden/make_report_inputs.py

Tables are stored as Parquet (lossless floats), everything else as JSON. The ``self_check``
case is written by hand (its numbers come from a real engine, not from this script).
"""
from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]

from helpers import make_scenario, synthetic_workload
from planner_testlib import tiny_plan
from record_factories import base_meta, synthetic_stats_rows, write_vllm_run

from simulator.cli.main import main
from simulator.experiments.compare import run_compare
from simulator.experiments.spec_sweep import sweep_rates
from simulator.metrics.summary import json_safe
from simulator.planner.plan import run_plan
from simulator.planner.spec import PlanSpec
from simulator.runs.scenario import run_scenario, scenario_dict
from simulator.scenario.config import Scenario

OUT = HERE / "reports"
SPEC = {"speculative": {"method": "draft_model", "draft_model": "llama-3.2-1b",
                        "num_speculative_tokens": 3,
                        "acceptance": {"model": "iid", "acceptance_rate": 0.5},
                        "acceptance_by_slice": {"code": {"model": "iid",
                                                         "acceptance_rate": 0.85}}},
        "seed": 1}
SPEC_WORKLOAD = {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 4.0},
                               "num_requests": 40,
                               "prompt_tokens": {"dist": "fixed", "value": 128},
                               "output_tokens": {"dist": "fixed", "value": 48}},
                 "slices": {"code": 0.5, "chat": 0.5}}


def _folder(case: str) -> Path:
    d = OUT / case / "input"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _write_json(path: Path, data) -> None:
    path.write_text(json.dumps(json_safe(data), indent=1, sort_keys=True))


def run_case(case: str, sc: Scenario) -> None:
    d = _folder(case)
    res = run_scenario(sc, write=False)
    summary = dict(res.summary)
    summary.pop("sim_wall_s_note", None)
    _write_json(d / "summary.json", summary)
    sd = scenario_dict(res.scenario)
    sd["provenance"] = res.summary.get("provenance", {})
    (d / "scenario.json").write_text(json.dumps(sd, indent=1))
    res.requests.to_parquet(d / "requests.parquet", index=False)
    res.steps.to_parquet(d / "steps.parquet", index=False)


def compare_case(tmp: Path) -> None:
    d = _folder("compare")
    sc = make_scenario({"name": "golden_cmp", "seed": 7, "kv_cache": {"num_gpu_blocks": 1024},
                        "scheduler": {"max_model_len": 2048, "max_batch_size": 8,
                                      "batch_timeout_s": 0.05}, "slo": {"ttft_s": 0.5}},
                       workload={"synthetic": {
                           "arrival": {"process": "poisson", "rate_rps": 4.0},
                           "num_requests": 24,
                           "prompt_tokens": {"dist": "uniform", "low": 50, "high": 600},
                           "output_tokens": {"dist": "uniform", "low": 5, "high": 150}}})
    path = tmp / "compare.yaml"
    path.write_text(yaml.safe_dump(json.loads(sc.model_dump_json())))
    cr = run_compare(path, None, write=False)
    meta = {"scenario_name": cr.scenario_name, "varies": cr.varies,
            "same_requests": cr.same_requests, "num_workloads": cr.num_workloads,
            "variants": [{"name": v.name, "assignments": v.assignments,
                          "scenario": json.loads(v.scenario.model_dump_json()),
                          "block_size": v.block_size,
                          "kv_bytes_per_token_per_gpu": v.kv_bytes_per_token_per_gpu}
                         for v in cr.variants]}
    for v in cr.variants:
        v.requests.to_parquet(d / f"{v.name}_requests.parquet", index=False)
        v.steps.to_parquet(d / f"{v.name}_steps.parquet", index=False)
    cr.table.to_parquet(d / "table.parquet", index=False)
    (d / "compare.json").write_text(json.dumps(meta, indent=1))


def spec_sweep_case() -> None:
    d = _folder("spec_sweep")
    sc = Scenario.model_validate({"name": "tiny_spec", "model": "llama-3.1-8b",
                                  "workload": SPEC_WORKLOAD, **SPEC})
    df, results = sweep_rates(sc, None, [0.5, 2.0, 8.0])
    df.to_parquet(d / "table.parquet", index=False)
    (d / "results.json").write_text(json.dumps({f"{r!r}": v for r, v in results.items()},
                                               indent=1, sort_keys=True))
    (d / "scenario.json").write_text(sc.model_dump_json(indent=1))


def plan_cases(tmp: Path) -> None:
    for case, over in (("plan", {}), ("plan_none", {"slo": {"ttft_s": 0.001}})):
        spec = PlanSpec.model_validate(tiny_plan(**over))
        res = run_plan(spec, None, outdir=tmp / case, jobs=1, use_cache=False, write=False)
        _write_json(_folder(case) / "plan_result.json", {
            "plan": json.loads(spec.model_dump_json()), "status": res.status,
            "recommendation": res.recommendation, "candidates": res.candidates,
            "baseline": res.baseline, "pareto": res.pareto, "workload": res.workload,
            "stats": res.stats, "base_scenario": res.base_scenario, "fallback": res.fallback,
            "last_known_good": res.last_known_good, "quality": res.quality})


def validate_case(tmp: Path) -> None:
    meta = base_meta(max_num_seqs=16, max_num_batched_tokens=512)
    meta["hardware"] = {"device_name": "NVIDIA H100 80GB HBM3"}
    ts = "t,running,waiting,kv_cache_pct\n" + "".join(
        f"{t}.0,{min(t, 5)},0,{10 + t}\n" for t in range(1, 8))
    run = write_vllm_run(tmp / "rec", synthetic_stats_rows(24), meta, timeseries=ts)
    assert main(["validate", "--recorded", str(run), "-o", str(tmp / "val"), "-q",
                 "--no-figures"]) == 0
    shutil.copy(tmp / "val" / "validation.json", _folder("validate") / "validation.json")


def main_() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="servesim-golden-"))
    try:
        run_case("run_plain", make_scenario(
            {"name": "golden_report", "seed": 7,
             "cluster": {"num_replicas": 2, "router": "round_robin"},
             "kv_cache": {"num_gpu_blocks": 300}, "scheduler": {"max_num_seqs": 32},
             "slo": {"ttft_s": 0.25, "tpot_s": 0.02, "e2e_s": 4.0, "attainment_target": 0.9},
             "cost": {"usd_per_gpu_hour": 2.99}},
            workload=synthetic_workload(80, 16, output_median=60,
                                        slices={"chat": 0.6, "code": 0.4},
                                        tenants={"a": 0.5, "b": 0.5})))
        run_case("run_spec", make_scenario({"name": "golden_spec", **SPEC},
                                           workload=SPEC_WORKLOAD))
        compare_case(tmp)
        spec_sweep_case()
        plan_cases(tmp)
        validate_case(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main_()
