"""The command-line flags of a topology plan: ``-j``, ``--backend`` and ``--no-cache`` are
honoured (the rows those of the serial search), ``--plan-set`` is read, and a flag the plan
does not use (``--target-rate``) is refused."""
from __future__ import annotations

import yaml
from planner_testlib import tiny_scenario


def _topology(tmp_path, **over):
    base = tiny_scenario(num_requests=120, rate_rps=30.0)
    base["perf"] = {"source": "constant", "constant": {"step_s": 0.002, "per_token_s": 1e-4}}
    base["slo"] = {"ttft_s": 0.2, "tpot_s": 0.05, "attainment_target": 0.9}
    d = {"name": "t", "base": base, "usd_per_gpu_hour": 2.0,
         "output_dir": str(tmp_path / "o"),
         "topology_search": {"aggregated": {"tensor_parallel_size": [1, 2], "max_replicas": 3},
                             "disaggregated": {"tensor_parallel_size": [1],
                                               "max_prefill_replicas": 2,
                                               "max_decode_replicas": 2,
                                               "kv_transfer": {"bandwidth_bytes_per_s": 50e9}}},
         **over}
    p = tmp_path / "topo.yaml"
    p.write_text(yaml.safe_dump(d))
    return p, d


def _labels(res):
    return [(r["label"], r["passed"], r["order"]) for r in res["rows"]]


def test_topology_plan_jobs_and_cache_keep_the_serial_rows(tmp_path, monkeypatch):
    from simulator.planner import topology
    _p, d = _topology(tmp_path)
    spec = topology.load_topology_plan(d, "topo.yaml")
    calls = []
    real = topology._evaluate
    monkeypatch.setattr(topology, "_evaluate", lambda *a: calls.append(a[0]["label"]) or real(*a))
    serial = topology.run_topology_plan(spec, tmp_path, outdir=tmp_path / "s", jobs=1)
    # the serial search stops each family and degree at its first pass: one row per try
    assert calls == [r["label"] for r in serial["rows"]]
    for fam_layout in {(r["family"], r["layout"]) for r in serial["rows"]}:
        g = [r for r in serial["rows"] if (r["family"], r["layout"]) == fam_layout]
        assert all(not r["passed"] for r in g[:-1])
    calls.clear()
    again = topology.run_topology_plan(spec, tmp_path, outdir=tmp_path / "s", jobs=1)
    assert calls == [] and again["rows"] == serial["rows"]   # every row from the cache
    fresh = topology.run_topology_plan(spec, tmp_path, outdir=tmp_path / "s", jobs=1,
                                       use_cache=False)
    assert len(calls) == len(serial["rows"]) and fresh["rows"] == serial["rows"]
    # three at a time in worker processes: the candidates beyond a pass are dropped
    par = topology.run_topology_plan(spec, tmp_path, outdir=tmp_path / "p", jobs=3)
    assert _labels(par) == _labels(serial) and par["rows"] == serial["rows"]
    assert par["winner"] == serial["winner"]


def test_topology_plan_cli_passes_jobs_backend_and_no_cache(tmp_path, monkeypatch, capsys):
    from simulator.cli.main import main
    from simulator.planner import topology
    p, _d = _topology(tmp_path)
    seen = []
    real = topology.run_tasks

    def spy(fn, tasks, **kw):
        seen.append((kw["jobs"], kw["backend"], kw["address"]))
        return real(fn, tasks, **kw)

    monkeypatch.setattr(topology, "run_tasks", spy)
    # before: -j, --backend, --no-cache were accepted and ignored (always serial, no cache)
    assert main(["plan", str(p), "-q", "-j", "2", "--backend", "local", "--no-cache",
                 "--no-figures"]) == 0
    assert seen and all(s == (2, "local", None) for s in seen)
    capsys.readouterr()
    seen.clear()
    assert main(["plan", str(p), "-q", "-j", "2"]) == 0
    assert seen == []  # everything from the cache the first run wrote
    assert main(["plan", str(p), "-q", "-j", "1", "--no-cache"]) == 0
    assert seen and all(s[0] == 1 for s in seen)


def _topology_file(tmp_path):
    p = tmp_path / "topo.yaml"
    p.write_text(yaml.safe_dump({"name": "t", "base": tiny_scenario(num_requests=20),
                                 "usd_per_gpu_hour": 2.0, "output_dir": str(tmp_path / "o"),
                                 "topology_search": {"aggregated": {"max_replicas": 1}}}))
    return p


def test_topology_plan_reads_plan_set_and_refuses_flags_it_does_not_use(tmp_path, capsys):
    from simulator.cli.main import main
    p = _topology_file(tmp_path)
    # before: --plan-set and --target-rate were ignored silently for a topology plan
    assert main(["plan", str(p), "-q", "--plan-set", "rate_scale=0"]) == 2
    assert "rate_scale: value 0: Input should be greater than 0" in capsys.readouterr().err
    assert main(["plan", str(p), "-q", "--target-rate", "5"]) == 2
    assert "--target-rate: not used by a topology plan" in capsys.readouterr().err
    assert main(["plan", str(p), "-q", "--plan-set", "name=renamed"]) == 0
    assert "renamed" in (tmp_path / "o" / "plan.md").read_text()
