"""``--trace FILE`` replaces the workload source and, by default, detects the trace's format;
a ``workload.format`` or ``workload.columns`` the user states with ``--set`` is kept (it was
replaced silently by the detection's defaults)."""
from __future__ import annotations

from simulator.scenario.overrides import cli_overrides


def _keys(overrides):
    return [str(o) for o in overrides]


def test_the_trace_flag_detects_the_format_by_default():
    got = _keys(cli_overrides(["seed=3"], "t.csv"))
    assert got == ["seed=3", "workload.trace=t.csv", "workload.synthetic=null",
                   "workload.synthetic_sessions=null", "workload.format=auto",
                   "workload.columns=null"]


def test_a_stated_format_or_column_map_is_kept():
    got = _keys(cli_overrides(["workload.format=mooncake", "workload.columns.arrival_time_s=t"],
                              "t.jsonl"))
    assert got == ["workload.format=mooncake", "workload.columns.arrival_time_s=t",
                   "workload.trace=t.jsonl", "workload.synthetic=null",
                   "workload.synthetic_sessions=null"]
    # the trace flag's file wins over a --set of the trace
    got = _keys(cli_overrides(["workload.trace=a.csv"], "b.csv"))
    assert got[-5:][0] == "workload.trace=b.csv"


def test_a_stated_format_that_does_not_fit_the_file_is_an_error(tmp_path, capsys):
    from simulator.cli.main import main
    csv = tmp_path / "t.csv"
    csv.write_text("arrival_time_s,num_prompt_tokens,num_output_tokens\n0,10,5\n")
    rc = main(["run", "default", "--trace", str(csv), "--set", "workload.format=mooncake",
               "-o", str(tmp_path / "out"), "-q", "--no-figures"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "does not look like the stated format 'mooncake'" in err


def test_only_the_format_and_column_map_are_kept_the_trace_replaces_the_rest():
    # a --set of a synthetic workload's key does not keep that workload beside the trace
    got = _keys(cli_overrides(["workload.synthetic_sessions.num_sessions=10"], "t.csv"))
    assert "workload.synthetic_sessions=null" in got and "workload.synthetic=null" in got
    assert got.index("workload.synthetic_sessions=null") > 0  # after the --set: it wins
