"""Commands check their whole input before running anything: an unusable ``-o`` (below a
file, or a file itself) and every ``compare`` variant (names, sharding, fit) are refused in one
line, exit 2, before a single simulation starts."""
from __future__ import annotations

import pytest
from helpers import cli_error_line


@pytest.fixture
def nothing_runs(monkeypatch):
    """Any family run (compare variants, sweep points, plan candidates) fails the test."""
    from simulator.experiments import runner

    def _refuse(*a, **k):
        raise AssertionError("a simulation started before the input was checked")
    monkeypatch.setattr(runner, "run_tasks", _refuse)


@pytest.mark.parametrize("argv", [
    ["run", "default", "-q"],
    ["compare", "default", "-q"],
    ["sweep", "sweep_default", "-q", "-j", "1"],
    ["plan", "plan_default", "-q", "-j", "1"],
])
def test_unusable_output_folder_is_one_line_before_anything_runs(capsys, tmp_path, argv,
                                                                  nothing_runs, monkeypatch):
    """-o below a plain file cannot be created: one line "output folder PATH: cannot create
    it (Not a directory)", exit 2, no workload warning first (sweep used to print one), no
    variant simulated first (compare used to run static-contiguous for ~3 s)."""
    from simulator.cli import main as cli

    def _no_run(*a, **k):
        raise AssertionError("servesim run simulated before checking -o")
    monkeypatch.setattr(cli, "run_scenario", _no_run)
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "afile" / "sub"
    err = cli_error_line(capsys, [*argv, "-o", str(out)])
    assert err == f"servesim: error: output folder {out}: cannot create it (Not a directory)"


def test_compare_checks_every_variant_fits_before_running_any(capsys, tmp_path, nothing_runs):
    """The second variant does not fit its GPU: before, variant 1 ran to the end, left its run
    folder and only then failed."""
    out = tmp_path / "c4"
    err = cli_error_line(capsys, ["compare", "default", "--vary",
                                 "model=llama-3.1-8b,qwen3-235b-a22b", "-o", str(out), "-q"])
    assert err.startswith("servesim: error: variant model=qwen3-235b-a22b: --vary "
                          "model=llama-3.1-8b,qwen3-235b-a22b: model qwen3-235b-a22b does not "
                          "fit: weights 470.20 GB"), err
    assert not out.exists()


def test_output_folder_that_is_a_file_names_it(capsys, tmp_path, nothing_runs):
    f = tmp_path / "afile"
    f.write_text("x")
    err = cli_error_line(capsys, ["compare", "default", "-q", "-o", str(f)])
    assert err == f"servesim: error: output folder {f}: exists and is not a folder"
    assert f.read_text() == "x"


@pytest.mark.parametrize("vary, needle", [
    ("model=llama-3.1-8b,nosuchmodel",
     ("variant model=nosuchmodel: --vary model=llama-3.1-8b,nosuchmodel: model: unknown "
      "model 'nosuchmodel'; known: ")),
    ("hardware.gpu=h100-sxm,nosuchgpu",
     ("variant gpu=nosuchgpu: --vary hardware.gpu=h100-sxm,nosuchgpu: hardware.gpu: "
      "unknown GPU 'nosuchgpu'; known: ")),
    # llama-3.1-8b has 32 attention heads: 32 % 3 != 0
    ("cluster.tensor_parallel_size=1,3",
     ("variant tensor_parallel_size=3: --vary cluster.tensor_parallel_size=1,3: "
      "cluster.tensor_parallel_size=3 cannot shard llama-3.1-8b")),
])
def test_compare_checks_every_variant_before_running_any(capsys, tmp_path, nothing_runs,
                                                         vary, needle):
    """The bad value is the second one: before, variant 1 ran to the end, left its run
    folder and only then failed without the variant prefix."""
    out = tmp_path / "c3"
    err = cli_error_line(capsys, ["compare", "default", "--vary", vary, "--set",
                                 "workload.max_requests=300", "-o", str(out), "-q"])
    assert err.startswith("servesim: error: " + needle), err
    assert not out.exists()
