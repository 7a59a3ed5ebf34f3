"""simulate() keeps the objects that exist before a run out of the garbage collector's scans
and collects nothing while it runs (gc.freeze, gc.disable) and hands everything back
afterwards, even when the run fails; a caller's own freeze is left alone. The results are those
of an unfrozen run."""
import gc

import pytest

from simulator.base.gc_freeze import gc_frozen
from simulator.cluster.setup import build_setup
from simulator.engine.loop import simulate
from tests.helpers import load_specs, make_scenario, run_sim, synthetic_workload


def _outputs(sim):
    t = sim.step_table()
    return (sim.end_time_s, t.column("end_time_s").tolist(),
            sim.requests().sort_values("request_id")["finish_time_s"].tolist())


def test_simulate_pauses_the_collector_only_during_the_run():
    sc = make_scenario(workload=synthetic_workload(40))
    seen = []  # (collector enabled, frozen objects) at each progress report of the run
    sim = simulate(sc, build_setup(sc), load_specs(sc),
                   progress=lambda done, total: seen.append((gc.isenabled(),
                                                              gc.get_freeze_count())))
    assert seen and all(not enabled and frozen > 0 for enabled, frozen in seen)
    assert gc.isenabled() and gc.get_freeze_count() == 0  # handed back afterwards
    # the same results with the collector left as it is (a caller's freeze: nothing done)
    gc.freeze()
    try:
        again = run_sim(sc)
        assert gc.get_freeze_count() > 0  # still the caller's (freed objects leave it)
    finally:
        gc.unfreeze()
    assert _outputs(sim) == _outputs(again)


def test_unfrozen_after_an_error():
    with pytest.raises(RuntimeError), gc_frozen():
        raise RuntimeError("boom")
    assert gc.get_freeze_count() == 0
