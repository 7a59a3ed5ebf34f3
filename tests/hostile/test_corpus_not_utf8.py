"""Hostile corpus, inputs that are not text (``NOT_TEXT``): a YAML / JSON input that is not
UTF-8 (engine profile, GPU spec, model ``config.json``, scenario, sweep, plan, a sweep's base,
a profile folder's ``fitted.yaml``, a ServeGen dataset) is refused in one line naming the file,
the key that named it and "not a text file"."""
from __future__ import annotations

from pathlib import Path

import pytest
from command_cases import SCENARIO, _refused, _sweep_text
from helpers import REPO_ROOT

NOT_UTF8 = b"\xff\xfe name: x\n"  # byte 0xff at offset 0


NOT_TEXT = "not a text file (byte 0xff at offset 0 is not UTF-8)"


def _not_text_case(kind: str, tmp: Path) -> tuple[list, list[str]]:
    """(argv, needles) of a ``NOT_TEXT`` case: the file of ``kind`` holds bytes that are not
    UTF-8."""
    base = tmp / "base.yaml"
    base.write_text(SCENARIO)
    bad = tmp / "bad.yaml"
    bad.write_bytes(NOT_UTF8)
    run = ["run", base, "-q", "--no-figures", "-o", tmp / "o"]
    if kind == "engine profile":
        return [*run, "--set", f"perf.engine={bad}"], ["perf.engine", "--set perf.engine="]
    if kind == "GPU spec":
        return [*run, "--set", f"hardware.gpu={bad}"], ["hardware.gpu", "a GPU spec is YAML"]
    if kind == "model config.json":
        (tmp / "m").mkdir()
        (tmp / "m" / "config.json").write_bytes(NOT_UTF8)
        return [*run, "--set", f"model={tmp / 'm'}"], [str(tmp / "m" / "config.json"), "model"]
    if kind == "fitted.yaml":  # a GPU profile folder of the user's
        prof = tmp / "gpu"
        prof.mkdir()
        (prof / "spec.yaml").write_text((REPO_ROOT / "hardware_profiles/h100-sxm/spec.yaml")
                                        .read_text().replace("name: h100-sxm", "name: mygpu"))
        (prof / kind).write_bytes(NOT_UTF8)
        return ([*run, "--set", f"hardware.gpu={prof}", "--set", "perf.source=auto"],
                [str(prof / kind)])
    if kind == "scenario":
        return ["run", bad, "-q", "-o", tmp / "o"], ["a scenario file is YAML text"]
    if kind == "sweep":
        return ["sweep", bad, "-q", "-o", tmp / "o"], ["a sweep file is YAML text"]
    if kind == "plan":
        return ["plan", bad, "-q", "-o", tmp / "o"], ["a plan file is YAML text"]
    if kind == "sweep base":
        sw = tmp / "sw.yaml"
        sw.write_text(_sweep_text("sw", str(bad)))
        return ["sweep", sw, "-q", "-o", tmp / "o"], ["base: "]
    # a ServeGen dataset (its chunk-N-trace.csv is fine)
    sg = tmp / "sg"
    sg.mkdir()
    (sg / "chunk-1-trace.csv").write_text("0,0.5,1.0,Gamma,1.0,2.0\n")
    (sg / "chunk-1-dataset.json").write_bytes(NOT_UTF8)
    return ["trace", sg], [str(sg / "chunk-1-dataset.json"), "a ServeGen dataset is JSON"]


NOT_TEXT_KINDS = ["engine profile", "GPU spec", "model config.json", "fitted.yaml",
                  "scenario", "sweep", "plan", "sweep base", "ServeGen dataset"]


@pytest.mark.parametrize("kind", NOT_TEXT_KINDS)
def test_input_that_is_not_utf8_names_the_file(capsys, tmp_path, kind):
    argv, needles = _not_text_case(kind, tmp_path)
    line = _refused(capsys, argv, [NOT_TEXT, *needles])
    assert "codec" not in line, line
    assert str(tmp_path) in line, line
