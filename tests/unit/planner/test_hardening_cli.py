"""Hardening of the planner's command line (session 6): bad booleans in ``--plan-set`` /
``--sweep-set`` name the spec file as every other spec error does; topology plans honour
``-j``, ``--backend``, ``--no-cache``; an unreachable Ray address fails in bounded time.
Each test fails on the code before its fix."""
from __future__ import annotations

import pytest
import yaml
from planner_testlib import tiny_scenario

from simulator.planner.spec import PlanError, load_plan_spec, load_sweep_spec

BOOL_CHOICES = "use true/false, 1/0, yes/no or on/off (any case)"


# ---------------------------------------------------------------------- --plan-set booleans
def test_sweep_set_bad_boolean_names_the_file_and_the_flag(tmp_path):
    p = tmp_path / "sweep.yaml"
    p.write_text(yaml.safe_dump({"base": tiny_scenario(),
                                 "grid": {"scheduler.max_num_seqs": [8, 16]}}))
    with pytest.raises(PlanError) as e:
        load_sweep_spec(p, ["set.scheduler.enable_chunked_prefill=maybe"])
    # before: "--sweep-set set.scheduler...: ..." without the file (other spec errors have it)
    assert str(e.value) == (f"{p}: --sweep-set set.scheduler.enable_chunked_prefill=maybe: "
                            "set.scheduler.enable_chunked_prefill: value 'maybe' is not a "
                            f"boolean; {BOOL_CHOICES}")


def test_plan_set_bad_boolean_on_the_cli_is_one_line_with_the_file(tmp_path, capsys):
    from simulator.cli.main import main
    p = tmp_path / "plan.yaml"
    p.write_text(yaml.safe_dump({"base": tiny_scenario(),
                                 "search_space": {"scheduler.max_num_seqs": [8]}}))
    assert main(["plan", str(p), "-q", "--plan-set", "search.early_stop=maybe"]) == 2
    err = capsys.readouterr().err
    assert err == (f"servesim: error: {p}: --plan-set search.early_stop=maybe: "
                   f"search.early_stop: value 'maybe' is not a boolean; {BOOL_CHOICES}\n")
    with pytest.raises(PlanError, match=f"^{p}: --plan-set search.early_stop=2: "):
        load_plan_spec(p, ["search.early_stop=2"])


# ---------------------------------------------------------------------- unreachable Ray
def _closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ray_address_nothing_listens_on_is_one_line_not_a_hang(tmp_path, capsys):
    pytest.importorskip("ray")
    from simulator.cli.main import main
    p = tmp_path / "sweep.yaml"
    p.write_text(yaml.safe_dump({"base": tiny_scenario(num_requests=10),
                                 "grid": {"scheduler.max_num_seqs": [8, 16]}}))
    port = _closed_port()
    # before: ray.init retried the address for minutes
    rc = main(["sweep", str(p), "-q", "--backend", "ray", "--address", f"127.0.0.1:{port}",
               "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert err.startswith(f"servesim: error: --address 127.0.0.1:{port}: no Ray cluster "
                          f"reachable at 127.0.0.1:{port} (")


def test_ray_address_probe_is_bounded_by_the_timeout(monkeypatch):
    import socket

    from simulator.experiments import executor
    seen = {}

    def never_answers(addr, timeout=None):
        seen["addr"], seen["timeout"] = addr, timeout
        raise TimeoutError("timed out")

    monkeypatch.setattr(socket, "create_connection", never_answers)
    monkeypatch.setenv(executor.ENV_RAY_CONNECT_TIMEOUT, "0.25")
    with pytest.raises(ValueError, match=r"no Ray cluster reachable at head:10001 \(no answer "
                                         r"within 0\.25 s\)"):
        executor.check_ray_address("ray://head")   # Ray Client's default port
    assert seen == {"addr": ("head", 10001), "timeout": 0.25}
    with pytest.raises(ValueError, match="at ::1:6379"):
        executor.check_ray_address("[::1]")        # the GCS's default port
    monkeypatch.setenv(executor.ENV_RAY_CONNECT_TIMEOUT, "0")
    with pytest.raises(ValueError, match="SERVESIM_RAY_CONNECT_TIMEOUT_S='0': not a positive"):
        executor.check_ray_address("head:6379")
    executor.check_ray_address("auto")  # left to Ray (it fails at once without a cluster)
    with pytest.raises(ValueError, match="--address head:x: not a Ray address"):
        executor.check_ray_address("head:x")


# ---------------------------------------------------------------------- topology plan flags
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
