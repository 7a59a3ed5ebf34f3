"""Held-out H100 / A100 check: published ``vllm bench serve`` summaries, replayed.

Usage::

    python benchmarks/bench_public_summaries.py [--records benchmarks/public_summaries.yaml]
        [--only ID_GLOB ...] [--set key.path=value ...] [-o OUT.csv]

No per-request vLLM record on an H100 or A100 is public (none was found by a search on
2026-12-02), but ``vllm bench serve`` reports are: a run's duration and the mean, median and
p99 of TTFT and TPOT and the mean ITL. ``benchmarks/public_summaries.yaml`` holds such reports
with their source (GPUStack's performance lab, vLLM 0.11.0 baselines with the random dataset
and every request sent at once). Each is replayed here the way ``servesim validate --recorded``
replays a record (:func:`simulator.observe.settings.build_replay_scenario`: the engine's
defaults for its version and GPU, the nearest measured-table set, the ``vllm-v1`` engine
profile) and the summary statistics compared. Nothing is fitted on these runs.

The workload (what the report's command line sent): ``num_prompts`` requests all arriving at
t = 0 (request rate inf), each with the client's mean prompt length (``input_tokens_client``,
rounded) plus the chat template the server wraps it in, and ``output_tokens`` tokens out.
The chat template is Qwen3's ChatML turn, 8 tokens: ``<|im_start|>user\\n`` (3) before the
prompt and ``<|im_end|>\\n<|im_start|>assistant\\n`` (5) after it (the models' tokenizer
``chat_template``; all records are Qwen3 models). What cannot be replayed exactly, and is
stated: the client's sending spread (an asyncio loop and the API server's tokenisation, well
under a second against TTFTs of tens of seconds), per-request prompt lengths (random token ids
re-tokenised vary by a few tokens), and early EOS (no ``--ignore-eos``; ``total_generated``
shows how many tokens were short: at most 1.3%).

Statistics as vLLM prints them: TTFT and TPOT over requests (TPOT = (E2E - TTFT) / (output -
1)), percentiles by linear interpolation (``numpy.percentile``, as ``vllm bench serve``), mean
ITL = the mean over every inter-token gap, duration = the last request's finish (all start at
0). Not part of the test run (all eleven records replay in a few seconds).
"""
from __future__ import annotations

import argparse
import fnmatch
import sys
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_fidelity import exit_status, write_csv

from simulator.base.request import RequestSpec
from simulator.base.resources import safe_load_yaml
from simulator.observe.record import RecordedRun, Setting
from simulator.observe.settings import build_replay_scenario
from simulator.observe.validate import run_replay
from simulator.scenario.config import ScenarioError

#: Qwen3 ChatML user turn around the prompt: ``<|im_start|>user\n`` + ``<|im_end|>\n``
#: ``<|im_start|>assistant\n`` (Qwen3 tokenizer_config.json chat_template; special tokens and
#: "user" / "assistant" / "\n" are one token each)
CHAT_TEMPLATE_TOKENS = {"qwen3": 8}
METRICS = ("duration_s", "ttft_mean_ms", "ttft_median_ms", "ttft_p99_ms", "tpot_mean_ms",
           "tpot_median_ms", "tpot_p99_ms", "itl_mean_ms")


def load_records(path: Path) -> list[dict]:
    """The records of a summaries YAML (see ``benchmarks/public_summaries.yaml``).

    Raises
    ------
    ValueError
        The file is missing, not YAML, or has no ``records`` list (one line naming it).
    """
    try:
        raw = safe_load_yaml(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"--records {path}: cannot read it ({e})") from None
    except yaml.YAMLError as e:
        raise ValueError(f"--records {path}: not YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("records"), list):
        raise ValueError(f"--records {path}: no 'records' list (see "  # noqa: TRY004
                         "benchmarks/public_summaries.yaml)")
    return list(raw["records"])


def replay_record(rec: dict, sets: list[str] | None = None, gpu: str | None = None):
    """Simulate one published run; returns ``(metrics, replay)``: the statistics of
    :data:`METRICS` from the simulation and the :class:`ReplayScenario` (settings with their
    sources, approximations)."""
    model = str(rec["model"])
    template = next((n for fam, n in CHAT_TEMPLATE_TOKENS.items() if model.startswith(fam)), 0)
    prompt = round(float(rec["input_tokens_client"])) + template
    out = int(rec["output_tokens"])
    n = int(rec["num_prompts"])
    specs = [RequestSpec(i, 0.0, prompt, out) for i in range(n)]
    settings = {
        "vllm_version": Setting(str(rec["vllm_version"]), "published report"),
        "model": Setting(model, "published report"),
        "tensor_parallel_size": Setting(int(rec["tensor_parallel_size"]), "published report"),
    }
    if rec.get("max_model_len"):
        settings["max_model_len"] = Setting(int(rec["max_model_len"]),
                                            "the model's max_position_embeddings")
    run = RecordedRun(name=str(rec["id"]), path=Path(str(rec["url"])), format="vllm_bench_json",
                      specs=specs, outcomes=None, settings=settings,
                      extra={"backend": "openai-chat"})
    replay = build_replay_scenario(run, gpu=gpu or str(rec["gpu"]), model=model, sets=sets)
    res = run_replay(replay, specs)  # as validate --recorded runs it
    out = summary_metrics(res)
    out["num_gpu_blocks"] = res.summary["num_gpu_blocks"]
    return out, replay


def compare_record(rec: dict, sets: list[str] | None = None, gpu: str | None = None) -> dict:
    """Replay one published run and compare it with its report.

    Returns
    -------
    dict
        ``record`` (its id), ``gpu``, ``metrics`` (``{name: {"published", "simulated",
        "pct_error"}}`` for :data:`METRICS`, signed % (simulated - published) / published),
        ``num_gpu_blocks``, ``engine`` (the engine profile and table set; a lowered
        max_model_len noted), ``max_num_seqs``, ``max_num_batched_tokens``.

    Raises
    ------
    ScenarioError
        A bad ``--set`` (the same for every record).
    ValueError, KeyError
        This record cannot be replayed (one line).
    """
    sim, replay = replay_record(rec, sets, gpu)
    pub = rec["published"]
    sc = replay.scenario
    return {
        "record": str(rec["id"]), "gpu": gpu or str(rec["gpu"]),
        "metrics": {m: {"published": float(pub[m]), "simulated": sim[m],
                        "pct_error": 100 * (sim[m] / float(pub[m]) - 1)} for m in METRICS},
        "num_gpu_blocks": sim["num_gpu_blocks"],
        "engine": (f"{sc.perf.engine} (tables {sc.perf.engine_version})"
                   + ("; max_model_len lowered to the planned KV cache"
                      if any("max_model_len" in a for a in replay.approximations) else "")),
        "max_num_seqs": sc.scheduler.max_num_seqs,
        "max_num_batched_tokens": sc.scheduler.max_num_batched_tokens,
    }


def summary_metrics(res) -> dict[str, float]:
    """:data:`METRICS` of a run, by ``vllm bench serve``'s definitions."""
    req = res.requests
    done = req["status"].to_numpy() == "completed"
    if not done.any():
        reasons = sorted(set(req["reject_reason"].dropna().astype(str)) - {""})
        raise ValueError(f"no request completed in the replay ({len(req)} rejected or "
                         f"unfinished: {', '.join(reasons) or 'no reason recorded'})")
    first = req["first_token_time_s"].to_numpy(float)[done]
    arr = req["arrival_time_s"].to_numpy(float)[done]
    fin = req["finish_time_s"].to_numpy(float)[done]
    k = req["num_emitted_tokens"].to_numpy(float)[done]
    ttft = (first - arr) * 1e3
    multi = k > 1
    tpot = (fin[multi] - first[multi]) / (k[multi] - 1) * 1e3
    gaps = (fin - first).sum() * 1e3
    return {
        "duration_s": float(fin.max() - arr.min()),
        "ttft_mean_ms": float(ttft.mean()), "ttft_median_ms": float(np.percentile(ttft, 50)),
        "ttft_p99_ms": float(np.percentile(ttft, 99)),
        "tpot_mean_ms": float(tpot.mean()), "tpot_median_ms": float(np.percentile(tpot, 50)),
        "tpot_p99_ms": float(np.percentile(tpot, 99)),
        "itl_mean_ms": float(gaps / max((k - 1).sum(), 1)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=Path, default=REPO / "benchmarks" / "public_summaries.yaml")
    ap.add_argument("--only", action="append", metavar="ID_GLOB", help="records to replay")
    ap.add_argument("--set", action="append", metavar="KEY.PATH=VALUE",
                    help="scenario override for every replay (what-if)")
    ap.add_argument("-o", "--output", type=Path, default=None, help="write the table as CSV")
    args = ap.parse_args(argv)
    if args.output is not None and args.output.is_dir():
        ap.error(f"-o {args.output}: a folder; give the CSV file's path")
    try:
        records = load_records(args.records)
    except ValueError as e:
        ap.error(str(e))
    chosen = [r for r in records
              if not args.only or any(fnmatch.fnmatch(str(r.get("id")), g) for g in args.only)]
    if not chosen:
        ap.error(f"--only {' '.join(args.only)}: no record matches; ids: "
                 + ", ".join(str(r.get("id")) for r in records))
    rows = []
    header = ["record", "gpu", *[f"{m}_%" for m in METRICS], "num_gpu_blocks", "engine"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for rec in chosen:
        try:
            cmp = compare_record(rec, args.set)
        except ScenarioError as e:  # a bad --set is the same for every record: stop
            ap.error(str(e).splitlines()[0])
        except (ValueError, KeyError) as e:
            rows.append({"record": rec["id"], "error": str(e).splitlines()[0]})
            print(f"| {rec['id']} | error: {rows[-1]['error']} |", flush=True)
            continue
        row = {"record": rec["id"], "gpu": rec["gpu"]}
        for m, d in cmp["metrics"].items():
            row[f"{m}_%"] = f"{d['pct_error']:+.1f}"
            row[f"{m}_sim"] = f"{d['simulated']:.6g}"
            row[f"{m}_published"] = rec["published"][m]
        row.update({k: cmp[k] for k in ("num_gpu_blocks", "engine", "max_num_seqs",
                                         "max_num_batched_tokens")})
        rows.append(row)
        print("| " + " | ".join(str(row.get(h, "")) for h in header) + " |", flush=True)
    if args.output:
        write_csv(args.output, rows,
                  sorted({k for r in rows for k in r}, key=lambda k: (k != "record", k)))
    return exit_status(sum("error" in r for r in rows), len(rows), "record(s)")


if __name__ == "__main__":
    sys.exit(main())
