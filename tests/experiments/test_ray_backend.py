"""The Ray backend gives the same sweep table as the local one (skipped without Ray; slow)."""
from __future__ import annotations

import pandas as pd
import pytest
from planner_testlib import comparable, sweep_spec

from simulator.experiments.executor import ray_available
from simulator.planner.sweep import run_sweep

pytestmark = [pytest.mark.skipif(not ray_available(), reason="ray is not installed"),
              pytest.mark.slow]  # starts a local Ray cluster (seconds, more on a loaded machine)


def test_ray_table_equals_local_table(tmp_path):
    spec = sweep_spec()
    local = run_sweep(spec, tmp_path, outdir=tmp_path / "local", jobs=1, write=False)
    ray_res = run_sweep(spec, tmp_path, outdir=tmp_path / "ray", backend="ray", jobs=2,
                        write=False)
    assert ray_res.num_simulated == 4
    pd.testing.assert_frame_equal(comparable(ray_res.table), comparable(local.table))
