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
    from simulator.cli import main
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
    from simulator.cli import main
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
