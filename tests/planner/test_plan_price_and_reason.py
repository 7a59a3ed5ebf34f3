"""Prices and the recommendation's reason. A GPU whose profile has no price
(``usd_per_gpu_hour: 0``, e.g. ``a100-pcie-40gb``) is refused by a capacity plan unless the
plan prices it (it would rank as free), and a run on it warns that every cost figure is $0."""
from __future__ import annotations

import warnings

import pytest
from planner_testlib import tiny_plan, tiny_scenario

from simulator.catalog.hardware import get_gpu
from simulator.cluster.setup import UnpricedGPUWarning, build_setup
from simulator.planner.plan import run_plan
from simulator.planner.spec import PlanError, PlanSpec
from simulator.scenario.config import validate_scenario


def _plan(prices: dict) -> PlanSpec:
    d = tiny_plan(search_space={"hardware.gpu": ["h100-sxm", "a100-pcie-40gb"]},
                  prices=prices, baseline={"name": "today", "set": {"hardware.gpu": "h100-sxm"}})
    return PlanSpec.model_validate(d)


def test_the_profile_has_no_price():
    assert get_gpu("a100-pcie-40gb").usd_per_gpu_hour == 0.0


def test_a_plan_refuses_an_unpriced_gpu_before_simulating(tmp_path):
    with pytest.raises(PlanError, match=r"^plan candidate point 1 \(gpu=a100-pcie-40gb\): "
                                        r"hardware.gpu a100-pcie-40gb has no price .* "
                                        r"set prices.a100-pcie-40gb"):
        run_plan(_plan({"h100-sxm": 2.99}), None, outdir=tmp_path, jobs=1, write=False)
    assert not (tmp_path / ".cache").exists() or not any((tmp_path / ".cache").iterdir())


def test_a_plan_that_prices_it_is_accepted(tmp_path):
    spec = _plan({"h100-sxm": 2.99, "a100-pcie-40gb": 1.1})
    spec.search.max_probes = 2
    res = run_plan(spec, None, outdir=tmp_path, jobs=1, write=False)
    got = {r["gpu"]: r["usd_per_gpu_hour"] for r in res.candidates}
    assert got["a100-pcie-40gb"] == 1.1 and got["h100-sxm"] == 2.99


def test_a_run_on_an_unpriced_gpu_warns_once_and_a_stated_price_silences_it():
    raw = tiny_scenario(num_requests=5)
    raw["hardware"] = {"gpu": "a100-pcie-40gb"}
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        setup = build_setup(validate_scenario(raw))
    msgs = [str(w.message) for w in got if issubclass(w.category, UnpricedGPUWarning)]
    assert msgs == [("a100-pcie-40gb: its profile has no price, so every cost figure is $0; "
                     "set cost.usd_per_gpu_hour (e.g. --set cost.usd_per_gpu_hour=2.0)")]
    assert setup.usd_per_gpu_hour == 0.0
    raw["cost"] = {"usd_per_gpu_hour": 1.5}
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        setup = build_setup(validate_scenario(raw))
    assert not [w for w in got if issubclass(w.category, UnpricedGPUWarning)]
    assert setup.usd_per_gpu_hour == 1.5


def test_a_cheapest_candidate_that_is_the_baseline_says_keep_it(tmp_path):
    """The candidate with the baseline's own configuration wins (equal preference, so the
    status stays ``candidate``): the reason says it is what runs today. The plan's run counts
    count its shared evaluation once, as ``stats.num_simulations`` does."""
    from simulator.planner.report import _speedups_text
    d = tiny_plan(search_space={"hardware.gpu": ["h100-sxm"]},
                  baseline={"name": "today", "set": {"hardware.gpu": "h100-sxm"}},
                  prices={"h100-sxm": 2.99})
    d["search"].update(max_probes=3)
    res = run_plan(PlanSpec.model_validate(d), None, outdir=tmp_path, jobs=1, write=False)
    rec = res.recommendation
    assert rec["status"] == "candidate", rec
    assert rec["reason"].endswith("it is the baseline's configuration, so the recommendation "
                                  "is to keep it")
    (cand,) = res.candidates
    assert cand["same_config_as"] == "baseline"
    n_runs = len(res.baseline["probes"]) + len(res.baseline["confirmations"])
    assert res.stats["num_simulations"] == n_runs  # one evaluation for the two rows
    res.baseline["probes"][0]["stopped_early"] = True
    cand["probes"][0]["stopped_early"] = True  # the same run, seen through the candidate
    assert _speedups_text(res).startswith(f"1 of {n_runs} probe and confirmation runs stopped")


def _spec_copy(tmp_path, name: str, price: float, bandwidth: float | None = None):
    """A GPU spec file copied from the h100-sxm profile's, renamed (not in the catalog)."""
    import yaml

    from simulator.base.resources import data_dir
    raw = yaml.safe_load((data_dir("hardware_profiles") / "h100-sxm" / "spec.yaml").read_text())
    raw.update(name=name, aliases=[], usd_per_gpu_hour=price)
    if bandwidth is not None:
        raw["hbm_bandwidth_bytes_per_s"] = bandwidth
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    (folder / "spec.yaml").write_text(yaml.safe_dump(raw))
    return folder / "spec.yaml"


def test_a_plan_prices_a_gpu_given_by_path_from_its_own_spec(tmp_path):
    # a profile given by path was looked up again by its name for its price: "unknown GPU"
    path = _spec_copy(tmp_path, "my-gpu", 1.25)
    d = tiny_plan(search_space={"hardware.gpu": [str(path), "h100-sxm"]}, prices={})
    d["base"]["perf"] = {"source": "roofline"}
    spec = PlanSpec.model_validate(d)
    spec.search.max_probes = 2
    res = run_plan(spec, None, outdir=tmp_path / "out", jobs=1, write=False)
    got = {r["gpu"]: (r["usd_per_gpu_hour"], r["price_source"]) for r in res.candidates}
    assert got["my-gpu"] == (1.25, "my-gpu profile")
    assert got["h100-sxm"] == (get_gpu("h100-sxm").usd_per_gpu_hour, "h100-sxm profile")


def test_a_price_keyed_by_a_relative_spec_path_resolves_from_the_plan_folder(tmp_path,
                                                                             monkeypatch):
    _spec_copy(tmp_path, "my-gpu", 0.0)  # no price of its own: the plan's must be found
    rel = "./my-gpu/spec.yaml"
    d = tiny_plan(search_space={"hardware.gpu": [rel, "h100-sxm"]}, prices={rel: 1.5})
    d["base"]["perf"] = {"source": "roofline"}
    spec = PlanSpec.model_validate(d)
    spec.search.max_probes = 2
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the plan's folder is not the working folder
    res = run_plan(spec, tmp_path, outdir=tmp_path / "out", jobs=1, write=False)
    got = {r["gpu"]: (r["usd_per_gpu_hour"], r["price_source"]) for r in res.candidates}
    assert got["my-gpu"] == (1.5, "plan prices")
