"""Topology plan: aggregated vs disaggregated (xPyD) deployments, priced, under the SLOs.

A plan file with a ``topology_search`` section (``servesim plan FILE``) replays the base
scenario's workload (at the base's ``workload.rate_scale`` times the plan's ``rate_scale``,
over ``window_s``; a base with ``pools`` is refused: the plan builds the pools) on

- **aggregated** deployments: ``N`` identical replicas of each listed TP x PP x EP layout,
  each serving whole requests (vLLM V1 mixed steps);
- **disaggregated** deployments: ``x`` prefill replicas and ``y`` decode replicas (xPyD) of
  degree ``t``, the KV of each prompt crossing ``kv_transfer``
  (:mod:`simulator.runs.gateway`);

and, for each family and degree, finds the cheapest that meets the plan's SLOs (attainment
>= target, nothing rejected or left unfinished) by trying the candidates in order of GPU
count (cheapest first) until one passes. The winner is the cheapest over all families; the
report explains it with the figures that decide it: GPUs and $/hour, attainment, TTFT and
TPOT percentiles, which SLO the next smaller deployment of each family misses, and how busy
each pool is.
"""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
from pydantic import Field, ValidationError, model_validator

from simulator.base.outdir import clear_outputs, make_output_folder, named_output_folder
from simulator.base.progress import progress as progress_of
from simulator.base.schema import StrictModel
from simulator.experiments.cache import ResultCache, cache_key, scenario_identity, specs_fingerprint
from simulator.experiments.executor import run_tasks
from simulator.experiments.input_files import inputs_fingerprint
from simulator.experiments.runner import guard_outputs, spec_file
from simulator.experiments.warned import recording, reemit
from simulator.planner.spec import (
    PlanError,
    format_spec_error,
    resolve_base,
    resolve_base_source,
    slo_text,
)
from simulator.report.escape import Md, md_code
from simulator.report.format import ms, pct, usd
from simulator.report.render import write_report
from simulator.report.tables import markdown_table
from simulator.runs.gateway import run_gateway
from simulator.runs.scenario import run_scenario
from simulator.scenario.config import KVTransferConfig, SLOConfig, validate_scenario
from simulator.scenario.overrides import apply_overrides, blame_override, cli_overrides
from simulator.workload import load_workload


class FamilySearch(StrictModel):
    """Aggregated family: every TP x PP x EP combination listed, 1 .. ``max_replicas``
    replicas each (``enable_expert_parallel: [false, true]`` for an MoE model)."""

    tensor_parallel_size: list[int] = Field(default=[1], min_length=1)
    pipeline_parallel_size: list[int] = Field(default=[1], min_length=1)
    enable_expert_parallel: list[bool] = Field(default=[False], min_length=1)
    max_replicas: int = Field(default=8, ge=1)


class DisaggregatedSearch(StrictModel):
    tensor_parallel_size: list[int] = Field(default=[1], min_length=1)
    max_prefill_replicas: int = Field(default=4, ge=1)
    max_decode_replicas: int = Field(default=4, ge=1)
    kv_transfer: KVTransferConfig


class TopologySearch(StrictModel):
    aggregated: FamilySearch | None = None
    disaggregated: DisaggregatedSearch | None = None

    @model_validator(mode="after")
    def _not_empty(self):
        if self.aggregated is None and self.disaggregated is None:
            raise ValueError("give aggregated, disaggregated or both (nothing to search)")
        return self


class TopologyPlanSpec(StrictModel):
    """A topology plan file (see the module docstring)."""

    name: str = "topology_plan"
    base: str | dict
    topology_search: TopologySearch
    slo: SLOConfig | None = None
    usd_per_gpu_hour: float = Field(gt=0)
    window_s: float | None = Field(default=None, gt=0)
    rate_scale: float = Field(default=1.0, gt=0)
    output_dir: str = "reports/plan_{name}"


def load_topology_plan(raw: dict, source: str, overrides=None) -> TopologyPlanSpec:
    """Validate a topology plan mapping.

    Parameters
    ----------
    raw : dict
        The plan file's mapping, its ``--plan-set`` overrides already applied.
    source : str
        The plan file's name, leading every error.
    overrides : list of Override, optional
        The ``--plan-set`` items applied to ``raw``: an error on a key one of them set
        names that flag, as a capacity plan's errors do.

    Returns
    -------
    TopologyPlanSpec
        The validated spec.

    Raises
    ------
    PlanError
        One line naming the file, the ``--plan-set`` item responsible (if any), the key path
        and what is allowed.
    """
    try:
        return TopologyPlanSpec.model_validate({k: v for k, v in raw.items()
                                                if k != "__file__"})
    except ValidationError as e:
        who = blame_override(e, overrides)
        src = f"{source}: {who}" if who else str(source)
        raise PlanError(format_spec_error(e, TopologyPlanSpec, src)) from None


def _candidates(spec: TopologyPlanSpec) -> list[dict]:
    """Every deployment to try, as ``{family, layout, label, gpus, set}`` (``set``: overrides of
    the base scenario), cheapest (fewest GPUs) first within a family and degree."""
    out = []
    ts = spec.topology_search
    a = ts.aggregated
    if a is not None:
        for tp, pp, ep in itertools.product(a.tensor_parallel_size, a.pipeline_parallel_size,
                                            a.enable_expert_parallel):
            tag = f"TP{tp}" + (f" PP{pp}" if pp > 1 else "") + (" EP" if ep else "")
            for n in range(1, a.max_replicas + 1):
                out.append({"family": "aggregated", "layout": tag, "gpus": n * tp * pp,
                            "label": f"aggregated {n}x {tag}",
                            "set": {"cluster": {"num_replicas": n, "tensor_parallel_size": tp,
                                                "pipeline_parallel_size": pp,
                                                "enable_expert_parallel": ep}}})
    d = ts.disaggregated
    if d is not None:
        link = json.loads(d.kv_transfer.model_dump_json())
        for tp in d.tensor_parallel_size:
            combos = [(x, y) for x in range(1, d.max_prefill_replicas + 1)
                      for y in range(1, d.max_decode_replicas + 1)]
            for x, y in sorted(combos, key=lambda c: (c[0] + c[1], c[0])):
                pools = [{"name": "prefill", "role": "prefill", "decode_pool": "decode",
                          "kv_transfer": link,
                          "cluster": {"num_replicas": x, "tensor_parallel_size": tp,
                                      "router": "least_outstanding"}},
                         {"name": "decode", "role": "decode",
                          "cluster": {"num_replicas": y, "tensor_parallel_size": tp,
                                      "router": "least_outstanding"}}]
                out.append({"family": "disaggregated", "layout": f"TP{tp}", "gpus": (x + y) * tp,
                            "label": f"disaggregated {x}P{y}D TP{tp}", "set": {"pools": pools}})
    return out


def _slo_misses(req, slo: SLOConfig) -> dict[str, float]:
    """Share of requests over each SLO bound (TTFT, TPOT) or not completed."""
    n = max(1, len(req))
    ttft = (req["first_token_time_s"] - req["arrival_time_s"]).to_numpy(float)
    em = req["num_emitted_tokens"].to_numpy(float)
    tpot = np.where(em > 1, (req["finish_time_s"] - req["first_token_time_s"]).to_numpy(float)
                    / np.maximum(em - 1, 1), 0.0)
    out = {"not_completed": float((req["status"] != "completed").sum()) / n}
    if slo.ttft_s is not None:
        out["ttft"] = float(np.sum(~(ttft <= slo.ttft_s))) / n
    if slo.tpot_s is not None:
        out["tpot"] = float(np.sum(~(tpot <= slo.tpot_s))) / n
    return out


def _busy(steps, duration_s: float, replicas: int) -> float:
    """Busy share of a pool's replicas: summed step time over replicas x duration."""
    if not duration_s or not replicas:
        return 0.0
    return float(steps["step_time_s"].sum()) / (duration_s * replicas)


def _candidate_raw(cand: dict, base_raw: dict) -> dict:
    """The base scenario with a candidate's deployment (``cand["set"]``) applied."""
    raw = apply_overrides(base_raw, [])
    if "pools" in cand["set"]:
        # the pools state their own clusters: the base's top-level one would go unused
        raw.pop("cluster", None)
    raw.update({k: v for k, v in cand["set"].items() if k == "pools"})
    if "cluster" in cand["set"]:
        raw["cluster"] = {**raw.get("cluster", {}), **cand["set"]["cluster"]}
    return raw


def topology_worker(task: dict, shared: dict) -> dict:
    """Evaluate one candidate (runs in a worker): ``{"row", "warnings"}`` (the warnings its
    run raised, kept so that a cached row shows them again)."""
    with recording() as warned:
        row = _evaluate(task["cand"], task["base_raw"], shared["specs"], task["spec"],
                        task["base_dir"])
    return {"row": row, "warnings": warned}


def _evaluate(cand: dict, base_raw: dict, specs, spec: TopologyPlanSpec, base_dir) -> dict:
    raw = _candidate_raw(cand, base_raw)
    sc = validate_scenario(raw, source=f"{spec.name}: {cand['label']}")
    if sc.pools:
        res = run_gateway(sc, base_dir, specs=specs, write=False)
        busy = {n: _busy(r.result.steps, res.summary["duration_s"],
                         r.scenario.cluster.num_replicas) for n, r in res.pools.items()}
    else:
        res = run_scenario(sc, base_dir, specs=specs, write=False, figures=False)
        busy = {"replicas": _busy(res.steps, res.summary["duration_s"],
                                  sc.cluster.num_replicas)}
    sm, slo = res.summary, sc.slo
    passed = bool(sm.get("slo_met")) and not sm["num_rejected"] and not sm["num_unfinished"]
    return {**{k: cand[k] for k in ("family", "layout", "gpus", "label")},
            "usd_per_hour": cand["gpus"] * spec.usd_per_gpu_hour, "passed": passed,
            "slo_attainment": sm.get("slo_attainment"),
            "ttft_p90_s": sm["ttft_s"].get("p90"), "ttft_p99_s": sm["ttft_s"].get("p99"),
            "tpot_p90_s": sm["tpot_s"].get("p90"), "tpot_p99_s": sm["tpot_s"].get("p99"),
            "misses": _slo_misses(res.requests, slo), "busy": busy,
            "kv_transfer_p99_s": (sm.get("disaggregation") or {}).get(
                "kv_transfer_s", {}).get("p99"),
            "num_requests": sm["num_requests"], "num_completed": sm["num_completed"]}


def run_topology_plan(spec: TopologyPlanSpec, spec_dir: Path | None, *, trace: str | None = None,
                      scenario_overrides=None, outdir=None, progress=None, jobs: int = 1,
                      backend: str = "local", address: str | None = None,
                      use_cache: bool = True, source: str | Path | None = None) -> dict:
    """Search the families of ``spec`` and write ``plan.json`` and ``plan.md``.

    Within a family and degree the candidates are tried cheapest first up to the first that
    passes. With ``jobs`` > 1 the next ``jobs`` candidates still needed run at once (through
    :func:`~simulator.experiments.executor.run_tasks`); a candidate beyond a passing one of
    its family and degree is then dropped, so the rows are the serial search's whatever
    ``jobs``. Each evaluated candidate is cached in ``OUTDIR/.cache/`` by its resolved
    scenario, the request list and the price, with the warnings its run raised (shown again
    on a hit).

    Parameters
    ----------
    jobs, backend, address
        See :func:`simulator.experiments.executor.run_tasks`.
    use_cache : bool
        Read cached candidates (new ones are always written).
    source : path, optional
        The plan file (an input no output may overwrite).

    Returns
    -------
    dict
        ``winner`` (the cheapest passing row or None), ``best`` (cheapest passing per family),
        ``rows`` (every evaluated candidate), ``explanation`` (text), ``files``.
    """
    base_raw, base_dir = resolve_base(spec.base, spec_dir)
    base_path = spec.base
    if base_raw.get("pools") is not None:  # the candidates are pools this plan builds
        raise PlanError(f"{base_path}: the base scenario declares pools: a topology plan builds "
                        "its own pools (topology_search) from one replica set, so the base's "
                        "would be replaced; give a base without pools (one model, one GPU)")
    ov = cli_overrides(scenario_overrides, trace)
    # the plan's rate_scale multiplies the base's (a base at 6x its trace stays at 6x)
    wl = apply_overrides(base_raw, ov).get("workload") or {}
    base_rate = wl.get("rate_scale") if isinstance(wl, dict) else None
    ov += [f"workload.rate_scale={spec.rate_scale * float(base_rate or 1.0)!r}"]
    if spec.window_s is not None:
        ov.append(f"workload.end_s={spec.window_s}")
    if spec.slo is not None:
        ov += [f"slo.{k}={'null' if v is None else v}" for k, v in spec.slo.model_dump().items()]
    base_raw = apply_overrides(base_raw, ov)
    base_sc = validate_scenario(base_raw, source=str(base_path), overrides=ov)
    specs = load_workload(base_sc.workload, base_sc.seed, base_dir)
    out_dir = make_output_folder(Path(outdir) if outdir else named_output_folder(
        spec.output_dir, spec.name, "plan name", PlanError), PlanError)  # before any runs
    guard_outputs(out_dir, [*TOPOLOGY_PLAN_FILES, ".cache/"],
                  [spec_file(source, "plan"), None if isinstance(spec.base, dict) else
                   resolve_base_source(spec.base, spec_dir)[2]],
                  [base_raw], base_dir, PlanError)
    cache = ResultCache(out_dir / ".cache", enabled=use_cache)
    rows = _search(spec, base_raw, base_dir, specs, cache,
                   {"jobs": jobs, "backend": backend, "address": address,
                    "progress": progress})
    best = {(r["family"], r["layout"]): r for r in rows if r["passed"]}  # one per group
    fam_best = {}
    for (fam, _layout), row in best.items():
        if fam not in fam_best or _rank(row) < _rank(fam_best[fam]):
            fam_best[fam] = row
    winner = min(fam_best.values(), key=_rank, default=None)
    out = {"name": spec.name, "base": str(base_path), "rate_scale": spec.rate_scale,
           "window_s": spec.window_s, "num_requests": len(specs),
           "slo": base_sc.slo.model_dump(), "usd_per_gpu_hour": spec.usd_per_gpu_hour,
           "winner": winner, "best": fam_best, "rows": rows}
    out["explanation"] = explain(out)
    out["files"] = write_topology_plan(out, out_dir)
    return out


def _search(spec: TopologyPlanSpec, base_raw: dict, base_dir, specs, cache: ResultCache,
            ex: dict) -> list[dict]:
    """The rows of the search: every candidate up to the first passing one of its family and
    degree, in candidate order (``order``: its index among the rows). Cache hits are taken
    first; the rest run ``ex["jobs"]`` at a time through the executor."""
    cands = _candidates(spec)
    fp = specs_fingerprint(specs)
    resolved = [json.loads(validate_scenario(_candidate_raw(c, base_raw),
                                             source=f"{spec.name}: {c['label']}")
                           .model_dump_json()) for c in cands]
    keys = [cache_key("topology_candidate", {
        "scenario": scenario_identity(r), "inputs": inputs_fingerprint(r, (base_dir,)),
        "specs": fp,
        "candidate": c, "usd_per_gpu_hour": spec.usd_per_gpu_hour})
        for c, r in zip(cands, resolved)]
    done: dict[int, dict] = {}
    shown: set = set()

    def needed() -> list[int]:
        # a candidate is needed unless an earlier one of its family and degree passed
        out, stopped = [], set()
        for i, c in enumerate(cands):
            g = (c["family"], c["layout"])
            if g not in stopped:
                out.append(i)
                if i in done and done[i]["passed"]:
                    stopped.add(g)
        return out

    while True:
        wave, hit = [], None
        for i in (j for j in needed() if j not in done):
            hit = cache.get(keys[i])
            if hit is not None:
                done[i] = hit["row"]
                reemit(hit.get("warnings"), shown)
                break  # a cached pass may end its family's search: choose again
            wave.append(i)
            if len(wave) == max(1, ex["jobs"]):
                break
        if hit is not None:
            continue
        if not wave:
            break

        def keep(j: int, r: dict, wave=wave) -> None:
            # cached as each candidate finishes: a stopped plan resumes from them
            cache.put(keys[wave[j]], r)
            done[wave[j]] = r["row"]
            reemit(r["warnings"], shown)

        run_tasks(topology_worker, [{"cand": cands[i], "base_raw": base_raw,
                                     "spec": spec, "base_dir": base_dir} for i in wave],
                  shared={"specs": specs}, backend=ex["backend"], jobs=ex["jobs"],
                  address=ex["address"], on_result=keep,
                  stop_note=lambda _d, _n: f"{len(done)} topology candidates finished; "
                                           f"they are cached in {cache.folder}: a rerun "
                                           "uses them")
        if ex["progress"] is not None:
            ex["progress"](len(done), None)  # the total is not known in advance
    rows = [dict(done[i]) for i in needed()]
    for n, row in enumerate(rows):
        row["order"] = n  # list order: the last tie-breaker of _rank
    return rows


def _rank(row: dict) -> tuple:
    """Cheapest first; at equal price fewer GPUs, then the higher SLO attainment (more
    headroom), then list order (the plan's tie rule, :data:`simulator.planner.recommend.TIE_RULE`,
    without a baseline)."""
    return (row["usd_per_hour"], row["gpus"], -(row["slo_attainment"] or 0.0), row["order"])


def _why_fail(row: dict) -> str:
    m = row["misses"]
    worst = max(m, key=m.get)
    what = {"ttft": "TTFT", "tpot": "TPOT", "not_completed": "completion"}[worst]
    return f"{row['label']} misses the {what} SLO for {pct(m[worst])} of requests"


def explain(plan: dict) -> str:
    """Plain-text verdict: which family is cheaper under the SLOs, and the figures why."""
    best, rows = plan["best"], plan["rows"]
    if plan["winner"] is None:
        fails = "; ".join(_why_fail(r) for r in rows[-2:])
        return f"No candidate meets the SLOs within the search bounds ({fails})."
    w = plan["winner"]
    parts = [(f"Cheapest under the SLOs: {w['label']}, {w['gpus']} GPUs at "
              f"{usd(w['usd_per_hour'])}/h (attainment {pct(w['slo_attainment'])}, "
              f"TTFT p99 {ms(w['ttft_p99_s'])}, TPOT p99 {ms(w['tpot_p99_s'])}).")]
    other = [r for f, r in best.items() if f != w["family"]]
    for o in other:
        d = (o["usd_per_hour"] - w["usd_per_hour"]) / w["usd_per_hour"]
        cost = (f"{pct(d)} more" if d > 0 else
                f"the same price; the tie goes to the higher attainment, "
                f"{pct(w['slo_attainment'])} vs {pct(o['slo_attainment'])}")
        parts.append(f"The cheapest {o['family']} deployment, {o['label']}, needs "
                     f"{o['gpus']} GPUs ({usd(o['usd_per_hour'])}/h, {cost}; "
                     f"TTFT p99 {ms(o['ttft_p99_s'])}, TPOT p99 {ms(o['tpot_p99_s'])}).")
    for fam in ("aggregated", "disaggregated"):
        fails = [r for r in rows if r["family"] == fam and not r["passed"]]
        if fails:
            near = max(fails, key=lambda r: (r["slo_attainment"] or 0.0, -r["gpus"]))
            parts.append(f"Closest {fam} miss: {_why_fail(near)}.")
    busy = "; ".join(f"{k} {pct(v)}" for k, v in w["busy"].items())
    parts.append(f"Busy share of the winner's replicas: {busy}.")
    if w["family"] == "disaggregated":
        parts.append("Prefill and decode no longer share steps, so long prompts do not stall "
                     "decodes (TPOT) and decodes do not delay first tokens (TTFT); each pool is "
                     "sized to its own phase.")
    elif best.get("disaggregated") is not None:
        parts.append("Splitting the phases costs whole replicas: at this load the prefill pool "
                     "and the decode pool each need their own GPUs, while the aggregated "
                     "replicas share idle capacity between the phases.")
    return " ".join(parts)


#: The files a topology plan writes in its output folder (beside its ``.cache/``)
TOPOLOGY_PLAN_FILES = ("plan.json", "plan.md", "plan.html")


def write_topology_plan(plan: dict, out: Path) -> dict[str, str]:
    """Write ``plan.json``, ``plan.md`` and its self-contained ``plan.html`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    clear_outputs(out, TOPOLOGY_PLAN_FILES)
    (out / "plan.json").write_text(json.dumps(plan, indent=2, sort_keys=True, default=str)
                                   + "\n")
    header = ["candidate", "GPUs", "$/h", "attainment", "TTFT p99", "TPOT p99",
              "KV transfer p99", "passed"]
    rows = [[r["label"], r["gpus"], usd(r["usd_per_hour"]), pct(r["slo_attainment"]),
             ms(r["ttft_p99_s"]), ms(r["tpot_p99_s"]), ms(r["kv_transfer_p99_s"]),
             "yes" if r["passed"] else "no"] for r in plan["rows"]]
    window = ("whole workload" if plan["window_s"] is None else
              f"window {plan['window_s']:g} s")
    # Md.format escapes every value as Markdown text (names and labels are the user's)
    md = Md("# servesim plan (topology): {}\n\nBase {}, {} requests (rate x{:g}, {}), SLOs "
            "per request {} (attainment >= {}), {} per GPU-hour.\n\n**Verdict.** {}\n\n{}\n"
            ).format(plan["name"], md_code(plan["base"]), plan["num_requests"],
                     plan["rate_scale"], window, slo_text(plan["slo"]),
                     pct(plan["slo"]["attainment_target"]), usd(plan["usd_per_gpu_hour"]),
                     plan["explanation"], markdown_table(header, rows))
    pages = write_report(out, "plan", md, title=f"servesim plan (topology): {plan['name']}")
    return {"json": str(out / "plan.json"), "md": str(pages["md"]), "html": str(pages["html"])}


def cmd_topology_plan(args, raw: dict, folder: Path, jobs: int, plan_set=None) -> int:
    """``servesim plan FILE`` for a file with ``topology_search``: run it, print the verdict.

    ``-j``/``--jobs``, ``--backend``, ``--address``, ``--no-cache``, ``-q`` and ``--progress``
    apply as for a capacity plan; ``--no-figures`` has nothing to skip (a topology plan
    draws no figure: ``plan.json`` and ``plan.md`` only)."""
    spec = load_topology_plan(raw, args.plan, plan_set)
    with progress_of("topology candidates", enabled=not args.quiet,
                     force=args.progress) as cb:
        res = run_topology_plan(spec, folder, trace=args.trace, scenario_overrides=args.set,
                                outdir=args.output, progress=cb, jobs=jobs,
                                backend=args.backend, address=args.address,
                                use_cache=not args.no_cache, source=args.plan)
    print(res["explanation"])
    if not args.quiet:
        for r in res["rows"]:
            print(f"  {r['label']:<28} {r['gpus']:>3} GPUs {usd(r['usd_per_hour']):>9}/h  "
                  f"attainment {pct(r['slo_attainment']):>6}  TTFT p99 {ms(r['ttft_p99_s']):>8}"
                  f"  TPOT p99 {ms(r['tpot_p99_s']):>7}  {'pass' if r['passed'] else 'fail'}")
        print(f"report: {res['files']['md']}, {res['files']['html']}, {res['files']['json']}")
    return 0
