"""KV planner against vLLM 0.19's own memory figures (not part of the test run).

Usage::

    python benchmarks/bench_kv_planner.py [--shared ../shared] [--json OUT.json]

1. **The recorded RTX 4090 run** (shared/reference/groundtruth/llmservingsim/bench/examples/
   RTX4090/Llama-3.1-8B/vllm/meta.json, vLLM 0.19.0): every planner term, the planned blocks
   against the 2,588 vLLM profiled, and the non-torch memory the recorded figure implies.
2. **The activation peak** (``torch peak memory increase``) of vLLM 0.19.0 startup logs on
   H100-80GB (``vllm serve`` defaults there: 8,192 batched tokens, 1,024 sequences; 132 SMs,
   compute capability 9.0), as published in llm-d-incubation/llm-d-planner
   accuracy/accuracy_report.md (figures quoted there, or there derived as planner constant /
   (1 + relative error) and rounded to 0.01 GiB): the planner's
   :func:`~simulator.kv.profile_terms.activation_bytes` for the same models. Nothing here is fitted:
   the planner's terms come from vLLM's and PyTorch's code (simulator/kv/planner.py).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.catalog.models import ModelSpec, get_model
from simulator.kv.planner import plan_memory
from simulator.kv.profile_terms import GiB, activation_bytes

_CFG = "Hugging Face config.json of "
#: models of the llm-d-planner report that are not in servesim's catalog
EXTRA = {
    "codellama-7b": ModelSpec("codellama-7b", "codellama/CodeLlama-7b-hf", 32, 4096, 32, 32, 128,
                              11008, 32016, 16384, source=_CFG + "codellama/CodeLlama-7b-hf"),
    "granite-3.1-2b": ModelSpec("granite-3.1-2b", "ibm-granite/granite-3.1-2b-instruct", 40, 2048,
                                32, 8, 64, 8192, 49155, 131072, tie_word_embeddings=True,
                                source=_CFG + "ibm-granite/granite-3.1-2b-instruct"),
    "granite-3.1-8b": ModelSpec("granite-3.1-8b", "ibm-granite/granite-3.1-8b-instruct", 40, 4096,
                                32, 8, 128, 12800, 49155, 131072, tie_word_embeddings=True,
                                source=_CFG + "ibm-granite/granite-3.1-8b-instruct"),
    "deepseek-v2-lite": ModelSpec(
        "deepseek-v2-lite", "deepseek-ai/DeepSeek-V2-Lite-Chat", 27, 2048, 16, 16, 192, 1408,
        102400, 163840, num_experts=64, experts_per_token=6, dense_intermediate_size=10944,
        dense_layer_indices=(0,), num_shared_experts=2, shared_expert_intermediate_size=2816,
        attention_kind="mla", q_lora_rank=None, kv_lora_rank=512, qk_rope_head_dim=64,
        qk_nope_head_dim=128, v_head_dim=128, source=_CFG + "deepseek-ai/DeepSeek-V2-Lite-Chat"),
}

#: (model, tensor parallel size, measured torch peak increase GiB) -- vLLM 0.19.0, H100-80GB
H100_ACTIVATION = [
    ("llama-3.1-8b", 1, 1.89),       # Llama-3.1-8B-Instruct, quoted (TP table)
    ("llama-3.1-8b", 2, 1.89),
    ("qwen2.5-7b", 1, 2.21),         # Qwen2.5-7B-Instruct, quoted (TP table)
    ("qwen3-8b", 1, 2.21),           # Qwen3 range
    ("codellama-7b", 1, 0.77),       # 4.8 / (1 + 5.2338)
    ("granite-3.1-2b", 1, 0.75),     # 5.5 / (1 + 6.3333)
    ("granite-3.1-8b", 1, 0.85),     # 5.5 / (1 + 5.4706)
    ("qwen3-30b-a3b", 1, 2.68),      # Qwen3Moe
    ("deepseek-v2-lite", 1, 1.93),   # DeepseekV2
    ("mixtral-8x7b", 2, 1.21),       # Mixtral-8x7B-Instruct TP 2
]


def _model(name: str) -> ModelSpec:
    return EXTRA[name] if name in EXTRA else get_model(name)


def rtx4090(shared: Path) -> dict | None:
    meta_path = (shared / "reference/groundtruth/llmservingsim/bench/examples/RTX4090/"
                 "Llama-3.1-8B/vllm/meta.json")
    if not meta_path.is_file():
        print(f"(no {meta_path}: RTX 4090 comparison skipped)")
        return None
    meta = json.loads(meta_path.read_text())
    ek, kv, hw = meta["engine_kwargs"], meta["kv_cache"], meta["hardware"]
    p = plan_memory(get_model(meta["model"]), hw["device_total_memory_bytes"],
                    gpu_memory_utilization=kv["gpu_memory_utilization"], block_size=kv["block_size"],
                    max_num_batched_tokens=ek["max_num_batched_tokens"],
                    max_num_seqs=ek["max_num_seqs"], max_model_len=ek["max_model_len"],
                    num_sms=128, compute_capability=(8, 9))
    rec = kv["num_gpu_blocks"]
    implied = p.budget_bytes - p.weight_bytes - p.activation_bytes - rec * p.block_bytes
    rows = [("requested (total x util)", p.budget_bytes), ("weights (incl. rotary cache)", p.weight_bytes),
            ("  rotary cache", p.rope_cache_bytes), ("activation peak", p.activation_bytes),
            ("  forward peak", p.forward_peak_bytes), ("  sampler peak", p.sampler_peak_bytes),
            ("  cuBLAS workspaces", p.cublas_workspace_bytes), ("non-torch (vLLM 0.19, TP1)", p.non_torch_bytes),
            ("KV memory", p.kv_bytes)]
    print(f"RTX 4090, {meta['model']}, vLLM {meta['vllm_version']}")
    for label, b in rows:
        print(f"  {label:32s} {b:>18,.0f} B  {b / GiB:8.4f} GiB")
    err = (p.num_gpu_blocks - rec) / rec * 100
    print(f"  planned blocks {p.num_gpu_blocks:,} vs recorded {rec:,} ({err:+.2f}%)")
    print(f"  non-torch implied by the recorded blocks: {implied / GiB:.3f}-"
          f"{(implied + p.block_bytes) / GiB:.3f} GiB (planner: {p.non_torch_bytes / GiB:.3f} GiB)")
    return {"planned_blocks": p.num_gpu_blocks, "recorded_blocks": rec, "pct_error": err,
            "terms_bytes": dict(rows), "implied_non_torch_bytes": [implied, implied + p.block_bytes]}


def h100_activation() -> list[dict]:
    print("\nvLLM 0.19.0 torch peak increase on H100-80GB (8192 batched tokens, 1024 seqs)")
    out = []
    for name, tp, meas in H100_ACTIVATION:
        m = _model(name)
        pred = activation_bytes(m, 8192, 1024, tp, num_sms=132, compute_capability=(9, 0)) / GiB
        err = (pred - meas) / meas * 100
        print(f"  {name:18s} TP{tp}  measured {meas:5.2f} GiB  planner {pred:5.2f} GiB  ({err:+6.1f}%)")
        out.append({"model": name, "tp": tp, "measured_gib": meas, "planner_gib": pred, "pct_error": err})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", default=str(ROOT.parent / "shared"))
    ap.add_argument("--json", default=None, help="write the figures to this JSON file")
    a = ap.parse_args(argv)
    res = {"rtx4090": rtx4090(Path(a.shared)), "h100_activation": h100_activation()}
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
