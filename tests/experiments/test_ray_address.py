"""An unreachable Ray address (``--backend ray --address``) is one line, exit 2, in
bounded time, not a retry loop of minutes; the probe's ports, timeout and refusals."""
from __future__ import annotations

import pytest
import yaml
from planner_testlib import tiny_scenario


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
