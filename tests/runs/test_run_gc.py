"""run_scenario makes the summary and writes the outputs with the objects of the finished
simulation out of the garbage collector's scans (gc frozen) and hands them back when it
returns; the results are those of an unfrozen run."""
import gc

from helpers import make_scenario, summary_without_wall, synthetic_workload

import simulator.runs.scenario as runs_scenario


def test_outputs_are_made_frozen_and_unfrozen_after(tmp_path, monkeypatch):
    seen = []
    real = runs_scenario.write_run_folder

    def spy(*a, **k):
        seen.append(gc.get_freeze_count())
        return real(*a, **k)

    monkeypatch.setattr(runs_scenario, "write_run_folder", spy)
    sc = make_scenario(workload=synthetic_workload(30))
    assert gc.get_freeze_count() == 0
    res = runs_scenario.run_scenario(sc, outdir=tmp_path / "a", figures=False)
    assert seen and seen[0] > 0          # frozen while the outputs were written
    assert gc.get_freeze_count() == 0    # handed back afterwards
    # the same summary and tables as a run whose caller froze everything already (the
    # block then does nothing)
    gc.freeze()
    try:
        again = runs_scenario.run_scenario(sc, outdir=tmp_path / "b", figures=False)
    finally:
        gc.unfreeze()
    assert summary_without_wall(res.summary) == summary_without_wall(again.summary)
    assert (tmp_path / "a" / "steps.parquet").read_bytes() == \
        (tmp_path / "b" / "steps.parquet").read_bytes()
