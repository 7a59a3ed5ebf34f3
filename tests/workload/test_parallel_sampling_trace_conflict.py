"""``workload.parallel_sampling`` with a trace that has its own ``n`` column is refused,
naming the file, instead of overwriting the trace's values."""
from __future__ import annotations

import pytest


def test_parallel_sampling_key_and_trace_n_column_conflict(tmp_path):
    """A trace with its own ``n`` column and ``workload.parallel_sampling`` would silently
    overwrite the trace's values: refused, naming the file."""
    from simulator.workload import WorkloadConfig, load_workload
    from simulator.workload.errors import WorkloadError

    t = tmp_path / "nt.csv"
    t.write_text("arrival_time_s,num_prompt_tokens,num_output_tokens,n\n0,10,5,2\n0.1,10,5,1\n")
    cfg = WorkloadConfig.model_validate({"trace": str(t), "parallel_sampling": {"n": 3}})
    with pytest.raises(WorkloadError, match=r"nt\.csv: workload\.parallel_sampling would "
                                            r"replace the trace's own n"):
        load_workload(cfg, seed=0)
    plain = WorkloadConfig.model_validate({"trace": str(t)})
    assert [s.n for s in load_workload(plain, seed=0)] == [2, 1]
