"""Hostile corpus, unknown catalog names: a sweep point or plan candidate naming an unknown
GPU, model, draft model or engine profile is refused before any point runs, naming the file
and the point (``SWEEP_NAMES``); an unknown name or a tensor-parallel size that does not divide
the heads, set in a scenario file, names the file and the key, and the flag when a ``--set``
gave it (``FILE_NAMES``)."""
from __future__ import annotations

import pytest
from command_cases import SCENARIO, SPECULATIVE, _plan_text, _refused, _with

BAD_NAMES = [
    ("hardware.gpu", "[h100-sxm, no-such-gpu]", "gpu=no-such-gpu", "unknown GPU 'no-such-gpu'"),
    ("model", "[llama-3.1-8b, no-such-model]", "model=no-such-model",
     "unknown model 'no-such-model'"),
    ("perf.engine", "[vllm-v1, no-such-engine]", "engine=no-such-engine",
     "unknown engine profile 'no-such-engine'"),
    ("speculative", ("[null, {method: draft_model, draft_model: no-such-draft, "
                    "num_speculative_tokens: 2, acceptance: {acceptance_rate: 0.5}}]"),
     "speculative=", "unknown model 'no-such-draft'"),
]


@pytest.mark.parametrize("key, values, label, why", BAD_NAMES, ids=[b[0] for b in BAD_NAMES])
@pytest.mark.parametrize("family", ["sweep", "plan"])
def test_catalog_names_of_every_point_checked_before_any_runs(capsys, tmp_path, monkeypatch,
                                                              family, key, values, label, why):
    base = tmp_path / "base.yaml"
    base.write_text(SCENARIO)
    f = tmp_path / f"{family}.yaml"
    if family == "sweep":
        f.write_text(f"name: s\nbase: {base}\ngrid:\n  {key}: {values}\n")
    else:
        f.write_text(_plan_text("p", str(base)).replace(
            "scheduler.max_num_seqs: [4, 8]", f"{key}: {values}"))

    def never(*a, **k):
        raise AssertionError("a point ran before every point's names were checked")

    monkeypatch.setattr("simulator.experiments.runner.run_tasks", never)
    point = "sweep point 1" if family == "sweep" else "plan candidate point 1"
    dotted = "speculative.draft_model" if key == "speculative" else key
    _refused(capsys, [family, f, "-q", "-j", "1", "-o", tmp_path / "o"],
             [str(f) if family == "sweep" else point, f"{point} ({label}", f"{dotted}: {why}"])
    assert not (tmp_path / "o").exists()


FILE_NAMES = [
    ("model: nosuch-model\n", "model: unknown model 'nosuch-model'"),
    ("hardware: {gpu: nosuch-gpu}\n", "hardware.gpu: unknown GPU 'nosuch-gpu'"),
    ("perf: {source: roofline, engine: nosuch-engine}\n",
     "perf.engine: unknown engine profile 'nosuch-engine'"),
    ("cluster: {tensor_parallel_size: 3}\n", "cluster.tensor_parallel_size=3 cannot shard"),
]


@pytest.mark.parametrize("section, needle", FILE_NAMES, ids=[n[0].split(":")[0]
                                                             for n in FILE_NAMES])
@pytest.mark.parametrize("cmd", ["run", "spec-sweep", "compare"])
def test_a_bad_name_in_a_scenario_file_names_the_file_and_the_key(capsys, tmp_path, cmd,
                                                                  section, needle):
    s = tmp_path / "s.yaml"
    s.write_text(_with(section) + (SPECULATIVE if cmd == "spec-sweep" else ""))
    extra = {"run": [], "spec-sweep": ["--rates", "1"],
             "compare": ["--vary", "scheduler.max_num_seqs=4,8"]}[cmd]
    _refused(capsys, [cmd, s, "-q", "-o", tmp_path / "o", *extra], [f"{s}: {needle}"])
    assert not (tmp_path / "o").exists()


def test_a_bad_name_set_with_a_flag_names_the_flag_too(capsys, tmp_path):
    s = tmp_path / "s.yaml"
    s.write_text(SCENARIO)
    _refused(capsys, ["run", s, "-q", "-o", tmp_path / "o", "--set", "hardware.gpu=nope"],
             [f"{s}: --set hardware.gpu=nope: hardware.gpu: unknown GPU 'nope'"])
