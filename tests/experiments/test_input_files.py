"""The cache keys of sweeps and plans follow the contents of the files a scenario names
(:mod:`simulator.experiments.input_files`): an edited GPU profile given by path, or a changed
table in its folder, is simulated again instead of being answered from the cache."""
from __future__ import annotations

import os
import shutil

import yaml
from planner_testlib import sweep_spec, tiny_scenario

from simulator.base.resources import data_dir
from simulator.experiments.input_files import inputs_fingerprint
from simulator.planner.sweep import run_sweep


def _profile_copy(tmp_path, name="my-gpu"):
    """The a100-sxm-80gb profile folder copied under another name (spec, tables and all)."""
    folder = tmp_path / name
    shutil.copytree(data_dir("hardware_profiles") / "a100-sxm-80gb", folder)
    spec = folder / "spec.yaml"
    raw = yaml.safe_load(spec.read_text())
    raw.update(name=name, aliases=[])
    spec.write_text(yaml.safe_dump(raw))
    return folder


def _set_bandwidth(folder, value: float) -> None:
    spec = folder / "spec.yaml"
    raw = yaml.safe_load(spec.read_text())
    raw["hbm_bandwidth_bytes_per_s"] = value
    spec.write_text(yaml.safe_dump(raw))


def _scenario(gpu: str) -> dict:
    raw = tiny_scenario(num_requests=5)
    raw["hardware"] = {"gpu": gpu}
    from simulator.scenario.config import validate_scenario
    return validate_scenario(raw).model_dump()


def test_the_fingerprint_follows_the_contents_not_the_file_times(tmp_path):
    folder = _profile_copy(tmp_path)
    first = inputs_fingerprint(_scenario(str(folder)))
    assert inputs_fingerprint(_scenario(str(folder))) == first
    st = (folder / "spec.yaml").stat()
    os.utime(folder / "spec.yaml", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert inputs_fingerprint(_scenario(str(folder))) == first  # touched: same contents
    _set_bandwidth(folder, 1.0e12)
    edited = inputs_fingerprint(_scenario(str(folder)))
    assert edited != first
    # a file of the profile other than the spec: its fitted efficiencies, a power model
    tables = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "spec.yaml")
    assert tables, "the copied profile holds files beside its spec"
    tables[0].write_bytes(tables[0].read_bytes() + b"\n")
    assert inputs_fingerprint(_scenario(str(folder))) != edited
    # another model, another engine profile: other keys
    other = _scenario(str(folder))
    assert inputs_fingerprint({**other, "model": "llama-3.1-70b"}) != inputs_fingerprint(other)
    assert (inputs_fingerprint({**other, "perf": {**other["perf"], "engine": "none"}})
            != inputs_fingerprint(other))


def test_an_unknown_gpu_enters_as_its_error_and_is_left_to_the_run():
    a = inputs_fingerprint({"hardware": {"gpu": "no-such-gpu"}, "model": "llama-3.1-8b"})
    b = inputs_fingerprint({"hardware": {"gpu": "no-such-gpu-2"}, "model": "llama-3.1-8b"})
    assert a != b


def test_a_sweep_simulates_again_after_its_gpu_profile_is_edited(tmp_path):
    folder = _profile_copy(tmp_path)
    spec = sweep_spec(base={**tiny_scenario(num_requests=40), "hardware": {"gpu": str(folder)},
                            "perf": {"source": "roofline"}},
                      grid={"scheduler.max_num_seqs": [16, 64]})
    out = tmp_path / "sw"
    first = run_sweep(spec, tmp_path, outdir=out, write=False)
    assert first.num_simulated == 2
    again = run_sweep(spec, tmp_path, outdir=out, write=False)
    assert again.num_cached == 2 and again.num_simulated == 0
    _set_bandwidth(folder, 0.2e12)  # a tenth of an A100's: every step slower
    edited = run_sweep(spec, tmp_path, outdir=out, write=False)
    assert edited.num_simulated == 2 and edited.num_cached == 0
    fresh = run_sweep(spec, tmp_path, outdir=out, write=False, use_cache=False)
    for col in ("ttft_s_p99", "tpot_s_mean"):
        assert edited.table[col].tolist() == fresh.table[col].tolist()
        assert all(e > f for e, f in zip(edited.table[col], first.table[col]))


def test_a_relative_path_is_looked_up_in_the_given_folders_first(tmp_path, monkeypatch):
    # a topology plan's base names its GPU relative to its own folder (the set-up looks there)
    base = tmp_path / "plans"
    base.mkdir()
    folder = _profile_copy(base)
    monkeypatch.chdir(tmp_path)  # the working folder has no ./my-gpu
    sc = {**_scenario(str(folder)), "hardware": {"gpu": "./my-gpu"}}
    first = inputs_fingerprint(sc, (base,))
    assert first == inputs_fingerprint(_scenario(str(folder)))
    _set_bandwidth(folder, 1.0e12)
    assert inputs_fingerprint(sc, (base,)) != first


def test_the_engine_profile_enters_by_its_values_not_its_location(tmp_path):
    from simulator.perf.engine_profile import engine_profile_dir
    sc = _scenario("h100-sxm")
    name = sc["perf"]["engine"]
    copy = tmp_path / f"{name}.yaml"
    shutil.copy(engine_profile_dir() / f"{name}.yaml", copy)
    by_path = {**sc, "perf": {**sc["perf"], "engine": str(copy)}}
    assert inputs_fingerprint(by_path) == inputs_fingerprint(sc)
