"""A failed command removes the output folders it created and left empty; a folder that
existed before, or holds files, stays, and so does a successful run's."""
from __future__ import annotations

from helpers import cli_error_line


def test_failed_run_leaves_no_empty_output_folder(capsys, tmp_path, monkeypatch):
    """The simulation fails after -o was created (the check comes first): the folders the
    command created, still empty, are removed; before, `run` left an empty OUT/deep/ behind."""
    from simulator.cli import main as cli

    def _fail(*a, **k):
        raise ValueError("the model does not fit")
    monkeypatch.setattr(cli, "run_scenario", _fail)
    out = tmp_path / "new" / "deep"
    err = cli_error_line(capsys, ["run", "default", "-q", "--set", "workload.max_requests=5",
                                 "-o", str(out)])
    assert err == "servesim: error: the model does not fit"
    assert not (tmp_path / "new").exists()
    assert list(tmp_path.iterdir()) == []


def test_failed_run_keeps_a_folder_that_existed_or_holds_files(capsys, tmp_path, monkeypatch):
    """Only folders the command itself created and left empty go: an existing -o (even
    empty) and a created one holding a file stay."""
    from simulator.base.outdir import discard_empty_created, make_output_folder
    from simulator.cli import main as cli

    monkeypatch.setattr(cli, "run_scenario",
                        lambda *a, **k: (_ for _ in ()).throw(ValueError("boom")))
    existing = tmp_path / "existing"
    existing.mkdir()
    cli_error_line(capsys, ["run", "default", "-q", "--set", "workload.max_requests=5",
                           "-o", str(existing)])
    assert existing.is_dir()
    made = make_output_folder(tmp_path / "a" / "b")
    (made / "partial.csv").write_text("x")
    assert discard_empty_created() == []
    assert (tmp_path / "a" / "b" / "partial.csv").is_file()
    make_output_folder(tmp_path / "c" / "d")
    assert discard_empty_created() == [tmp_path / "c" / "d", tmp_path / "c"]
    assert not (tmp_path / "c").exists()


def test_successful_run_keeps_its_output_folder(capsys, tmp_path):
    from simulator.cli.main import main

    out = tmp_path / "ok" / "run"
    assert main(["run", "default", "-q", "--no-figures", "--set", "workload.max_requests=5",
                 "-o", str(out)]) == 0
    assert (out / "summary.json").is_file()
