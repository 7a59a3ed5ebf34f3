"""Small, fast inputs shared by the planner tests (synthetic workload on Llama-3.1-8B)."""
from __future__ import annotations


def tiny_scenario(num_requests: int = 150, rate_rps: float = 4.0, **slo) -> dict:
    """An inline scenario: Poisson arrivals, short prompts and outputs, two slices."""
    return {
        "name": "tiny",
        "model": "llama-3.1-8b",
        "hardware": {"gpu": "h100-sxm"},
        "cluster": {"num_replicas": 1, "tensor_parallel_size": 1,
                    "router": "least_outstanding"},
        "scheduler": {"max_num_seqs": 64, "max_num_batched_tokens": 2048},
        "workload": {
            "synthetic": {
                "arrival": {"process": "poisson", "rate_rps": rate_rps},
                "num_requests": num_requests,
                "prompt_tokens": {"dist": "uniform", "low": 64, "high": 512},
                "output_tokens": {"dist": "uniform", "low": 8, "high": 64},
            },
            "slices": {"chat": 0.7, "code": 0.3},
        },
        "slo": {"ttft_s": slo.get("ttft_s", 0.25), "tpot_s": slo.get("tpot_s", 0.05),
                "attainment_target": slo.get("attainment_target", 0.9)},
        "seed": 0,
    }


def tiny_plan(**over) -> dict:
    plan = {
        "name": "tiny",
        "base": tiny_scenario(),
        "target_rate_rps": 20.0,
        "search_space": {"hardware.gpu": ["h100-sxm", "a100-sxm-80gb"],
                         "scheduler.max_num_seqs": [16, 64]},
        "prices": {"h100": 3.0, "a100-sxm-80gb": 2.0},
        "baseline": {"name": "today", "set": {"hardware.gpu": "h100-sxm"}},
        "search": {"window_s": None, "max_requests": 150, "initial_rate_scale": 2.0,
                   "rel_tol": 0.25, "max_probes": 8},
        "top_k": 2,
    }
    plan.update(over)
    return plan


def sweep_spec(**over):
    """A 4-point sweep (GPU x chunked prefill) of a small scenario."""
    from simulator.planner.spec import SweepSpec
    d = {"name": "t", "base": tiny_scenario(num_requests=80),
         "grid": {"hardware.gpu": ["h100-sxm", "a100-sxm-80gb"],
                  "scheduler.enable_chunked_prefill": [True, False]}}
    d.update(over)
    return SweepSpec.model_validate(d)


def comparable(df):
    """A sweep table without its wall-clock columns."""
    from simulator.planner.sweep import NONDETERMINISTIC_COLUMNS
    return df.drop(columns=[c for c in NONDETERMINISTIC_COLUMNS if c in df.columns])
