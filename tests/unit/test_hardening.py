"""Regression tests of the hardening issue (13): each expected value is derived by hand.

Covers: declared ``max_tokens`` beyond ``max_model_len`` rejected at arrival; the lazy block
pool (memory in proportion to blocks used); the pre-run memory estimate and budget; the
``random`` router's own stream; YAML 1.2 floats; JSON spelling of priority classes; and
synthetic lengths beyond 2**31 - 1 tokens.
"""
from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest
from helpers import ConstantStepPerf, make_scheduler, req, specs_from_rows

from simulator.base.budget import (
    BYTES_FIXED,
    BYTES_PER_BLOCK,
    BYTES_PER_REPLICA,
    BYTES_PER_REQUEST,
    BYTES_PER_STEP_ROW,
    MemoryBudgetWarning,
    ResourceError,
    check_run_budget,
    estimate_run,
    estimate_scenario_run,
    memory_budget,
)
from simulator.base.rng import stream
from simulator.cluster.setup import build_setup
from simulator.engine.loop import simulate
from simulator.kv import BlockPool
from simulator.metrics.summary import summarize
from simulator.scenario.config import validate_scenario
from simulator.scenario.overrides import parse_override
from simulator.scenario.yaml_files import load_yaml_text
from simulator.workload import WorkloadConfig, WorkloadError, load_workload

STEP_S = 0.01


def _scenario(**over):
    raw = {"name": "h", "model": "llama-3.1-8b", "hardware": {"gpu": "h100-sxm"},
           "perf": {"source": "roofline"},
           "workload": {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1},
                                      "num_requests": 1,
                                      "prompt_tokens": {"dist": "fixed", "value": 10},
                                      "output_tokens": {"dist": "fixed", "value": 10}}}}
    for k, v in over.items():
        raw[k] = {**raw.get(k, {}), **v} if isinstance(v, dict) else v
    return validate_scenario(raw)


def _run(sc, specs):
    setup = build_setup(sc)
    setup.perf = ConstantStepPerf(STEP_S)
    return simulate(sc, setup, specs, check_transitions=True), setup


# ------------------------------------------------------------------ max_tokens vs max_model_len
def test_max_tokens_beyond_max_model_len_is_rejected_at_arrival():
    """max_model_len 1000: 100 + 900 = 1000 fits; 100 + 901 = 1001 does not (vLLM's OpenAI
    server rejects it at arrival: "'max_tokens' ... is too large"); 999 + nothing fits one
    output token (999 + 1 = 1000)."""
    s = make_scheduler(max_model_len=1000, num_blocks=1000)  # 4,000 tokens of KV: all fit
    ok = req(0, 100, 50, max_tokens=900)
    too = req(1, 100, 50, max_tokens=901)
    edge = req(2, 999, 1)
    assert s.add_request(ok, 0.0) and s.add_request(edge, 0.0)
    assert not s.add_request(too, 0.0)
    assert (too.status, too.reject_reason) == ("rejected", "max_tokens_too_large")
    assert math.isnan(too.first_token_time_s) and too.num_emitted == 0


@pytest.mark.parametrize("policy", ["continuous", "static"])
def test_rejected_request_never_generates_and_its_ttft_is_not_counted(policy):
    """Two requests at t = 0 with max_model_len 1000. Request 0 (prompt 100, max_tokens 950,
    output 950) would reach 1000 tokens after 900 outputs: before the fix it was admitted,
    generated 900 tokens and was then rejected with its TTFT in the statistics. Now it is
    rejected at arrival. Request 1 (prompt 100, 5 outputs) runs alone: its prompt fits one
    8192-token step, so its first token comes after one 10 ms step: TTFT = 0.01 s, the only
    TTFT sample."""
    sc = _scenario(scheduler={"max_model_len": 1000, "policy": policy,
                              "batch_timeout_s": 0.0})
    specs = specs_from_rows([(0.0, 100, 950, {"max_tokens": 950}), (0.0, 100, 5)])
    sim, _ = _run(sc, specs)
    df = sim.requests().set_index("request_id")
    assert df.loc[0, "status"] == "rejected"
    assert df.loc[0, "reject_reason"] == "max_tokens_too_large"
    assert df.loc[0, "num_emitted_tokens"] == 0 and np.isnan(df.loc[0, "first_token_time_s"])
    assert df.loc[0, "exit_time_s"] == 0.0  # at arrival
    assert df.loc[1, "status"] == "completed"
    s = summarize(sim.requests(), sim.steps(), slo={}, usd_per_gpu_hour=1.0, num_gpus=1)
    assert s["ttft_s"]["count"] == 1
    assert s["ttft_s"]["mean"] == pytest.approx(STEP_S)
    assert s["reject_reasons"] == {"max_tokens_too_large": 1}


# ------------------------------------------------------------------ lazy block pool
@pytest.mark.parametrize("caching", [True, False])
def test_block_pool_memory_follows_blocks_used_not_owned(caching):
    """A pool of 10^12 blocks (a replica with an absurd num_gpu_blocks) is built at once and
    holds state only for the blocks it handed out: 3 allocated -> 3 ref counts; the ids are
    the lowest three; freeing and re-allocating reuses them (LIFO), so no new id is
    touched."""
    n = 10**12
    p = BlockPool(n, enable_caching=caching)
    assert p.num_free_blocks == n
    assert p.allocate(3) == [0, 1, 2]
    assert len(p._ref) == 3 and p.fresh == 3
    assert p.num_free_blocks == n - 3 and p.num_used_blocks == 3
    p.free([2, 1, 0])
    assert len(p._ref) == 0 and p.num_free_blocks == n
    assert p.allocate(3) == [0, 1, 2]
    assert p.fresh == 3  # nothing beyond the 3 ids ever used


def test_scheduler_on_a_huge_pool_allocates_nothing_per_block():
    s = make_scheduler(num_blocks=10**12, block_size=16)
    r = req(0, 100, 3)
    s.add_request(r, 0.0)
    out = s.schedule(0.0)
    s.update(out, 0.0, 0.01)
    # 100 prompt tokens + the first output need ceil(100 / 16) = 7 blocks after the prefill
    assert len(r.blocks) == 7 and s.kv.pool.fresh == 7 and len(s.kv.pool._ref) == 7


def test_thousands_of_replicas_touch_only_the_blocks_their_requests_need():
    """5,000 replicas, round robin, 12 requests of 20 prompt + 4 output tokens: each request
    needs ceil(24 / 16) = 2 blocks at most, so all pools together touch at most 12 x 2 = 24
    blocks (before the lazy pool, every replica built its whole ~30,000-block free queue)."""
    sc = _scenario(cluster={"num_replicas": 5000})
    specs = specs_from_rows([(0.1 * i, 20, 4) for i in range(12)])
    sim, _ = _run(sc, specs)
    df = sim.requests()
    assert (df.status == "completed").sum() == 12
    assert sum(rep.kv.pool.fresh for rep in sim.replicas) <= 24


# ------------------------------------------------------------------ memory estimate
def _spec_lengths():
    return np.array([100, 300]), np.array([10, 50])


def test_estimate_bounds_by_hand():
    """prompts 100, 300; outputs 10, 50; 2 replicas of 1,000 16-token blocks; max_num_seqs 4;
    256 tokens per step. Step rows: >= max(50 (the longest output, one token per step),
    ceil(60 / (2 x 4))) = 50 and <= 60 outputs + ceil(100/256) + ceil(300/256) = 63.
    Blocks: ceil(110/16) + ceil(350/16) = 7 + 22 = 29 at most; >= 22 (the largest
    request)."""
    p, o = _spec_lengths()
    est = estimate_run(p, o, num_replicas=2, num_gpu_blocks=1000, block_size=16,
                       max_num_seqs=4, max_num_batched_tokens=256)
    assert est.step_rows == (50, 63) and est.blocks == (22, 29)
    low = (BYTES_FIXED + 2 * BYTES_PER_REQUEST + 2 * BYTES_PER_REPLICA
           + 50 * BYTES_PER_STEP_ROW + 22 * BYTES_PER_BLOCK)
    high = (BYTES_FIXED + 2 * BYTES_PER_REQUEST + 2 * BYTES_PER_REPLICA
            + 63 * BYTES_PER_STEP_ROW + 29 * BYTES_PER_BLOCK)
    assert est.bytes_low == pytest.approx(low) and est.bytes_high == pytest.approx(high)
    # speculation (k = 3: up to 4 tokens per step) and uncertain requests lower the floor:
    # ceil(50 / 4) = 13; without the 50-token request: max(10, ceil(10 / 8)) = 10
    assert estimate_run(p, o, num_replicas=2, num_gpu_blocks=1000, block_size=16,
                        max_num_seqs=4, max_num_batched_tokens=256,
                        tokens_per_step=4).step_rows[0] == 13
    assert estimate_run(p, o, num_replicas=2, num_gpu_blocks=1000, block_size=16,
                        max_num_seqs=4, max_num_batched_tokens=256,
                        runs=[True, False]).step_rows[0] == 10
    # with prefix caching every touched block stays cached: the floor is the ceiling
    assert estimate_run(p, o, num_replicas=2, num_gpu_blocks=1000, block_size=16,
                        max_num_seqs=4, max_num_batched_tokens=256,
                        prefix_caching=True).blocks == (29, 29)


def test_scenario_estimate_caps_outputs_at_max_model_len():
    """max_model_len 1000: prompt 100 with 5,000 true outputs stops at 900 (the step-row
    floor is 900); a 2,000-token prompt is rejected at arrival and emits nothing."""
    sc = _scenario(scheduler={"max_model_len": 1000})
    setup = build_setup(sc)
    specs = specs_from_rows([(0.0, 100, 5000), (0.0, 2000, 7000)])
    est = estimate_scenario_run(sc, setup, specs)
    assert est.step_rows[0] == 900


def test_budget_refuses_with_estimate_and_knob(monkeypatch):
    """Budget 0.001 GB = 1,000,000 bytes, below the fixed 7.1 MB alone: refused; the largest
    variable part here is 1,000 replicas x 2,523 B."""
    monkeypatch.setenv("SERVESIM_MEMORY_BUDGET_GB", "0.001")
    assert memory_budget() == (1e6, "$SERVESIM_MEMORY_BUDGET_GB")
    p, o = _spec_lengths()
    est = estimate_run(p, o, num_replicas=1000, num_gpu_blocks=1000, block_size=16,
                       max_num_seqs=4, max_num_batched_tokens=256)
    with pytest.raises(ResourceError) as e:
        check_run_budget(est, "scenario 'x'")
    msg = str(e.value)
    assert msg.startswith("scenario 'x' needs an estimated") and "\n" not in msg
    assert "1,000 replicas" in msg and "fewer cluster.num_replicas" in msg
    assert "memory budget is 0.001 GB ($SERVESIM_MEMORY_BUDGET_GB)" in msg


def test_budget_warns_between_low_and_high(monkeypatch):
    p, o = _spec_lengths()
    est = estimate_run(p, o, num_replicas=1, num_gpu_blocks=1000, block_size=16,
                       max_num_seqs=4, max_num_batched_tokens=256)
    mid_gb = (est.bytes_low + est.bytes_high) / 2 / 1e9
    monkeypatch.setenv("SERVESIM_MEMORY_BUDGET_GB", repr(mid_gb))
    with pytest.warns(MemoryBudgetWarning, match="may need up to"):
        check_run_budget(est)
    monkeypatch.setenv("SERVESIM_MEMORY_BUDGET_GB", repr(2 * est.bytes_high / 1e9))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_run_budget(est)  # fits: silent


@pytest.mark.parametrize("value", ["abc", "0", "-2", "inf", "nan"])
def test_bad_budget_variable_is_an_error(monkeypatch, value):
    monkeypatch.setenv("SERVESIM_MEMORY_BUDGET_GB", value)
    with pytest.raises(ResourceError, match="SERVESIM_MEMORY_BUDGET_GB="):
        memory_budget()


def test_synthetic_request_count_is_refused_before_generation(monkeypatch):
    """10^12 requests x 1,213 B = 1.2e15 B: refused before a single request is drawn."""
    from simulator.workload import loader

    def boom(*a, **k):
        raise AssertionError("generation started")

    monkeypatch.setattr(loader, "generate_synthetic", boom)
    monkeypatch.setenv("SERVESIM_MEMORY_BUDGET_GB", "100")
    cfg = WorkloadConfig.model_validate(
        {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1},
                       "num_requests": 10**12, "prompt_tokens": {"dist": "fixed", "value": 1},
                       "output_tokens": {"dist": "fixed", "value": 1}}})
    from simulator.base.budget import BYTES_PER_REQUEST
    gb = f"{1e12 * BYTES_PER_REQUEST / 1e9:.3g}"  # 10^12 requests x bytes each, in GB
    with pytest.raises(ResourceError, match=r"1,000,000,000,000 requests need an estimated "
                                            + re.escape(gb) + " GB"):
        load_workload(cfg, 0)
    # duration only: the expected count is rate x duration = 1 x 1e13
    cfg = WorkloadConfig.model_validate(
        {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1}, "duration_s": 1e13,
                       "prompt_tokens": {"dist": "fixed", "value": 1},
                       "output_tokens": {"dist": "fixed", "value": 1}}})
    with pytest.raises(ResourceError, match="10,000,000,000,000 requests"):
        load_workload(cfg, 0)


def test_synthetic_lengths_beyond_int32_are_an_error_not_a_clip():
    """lognormal sigma 1000: almost every draw is exp(+-hundreds) (infinite or 0 tokens);
    without an explicit max the draws above 2**31 - 1 are an error."""
    cfg = WorkloadConfig.model_validate(
        {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1}, "num_requests": 50,
                       "prompt_tokens": {"dist": "lognormal", "median": 100, "sigma": 1000},
                       "output_tokens": {"dist": "fixed", "value": 1}}})
    with pytest.raises(WorkloadError, match=r"of 50 samples of lognormal\(median=100, "
                                            r"sigma=1000\) exceed 2,147,483,647 tokens"):
        load_workload(cfg, 0)
    # with an explicit max the same draws are clipped to it, as documented
    cfg = cfg.model_copy(deep=True)
    raw = cfg.model_dump()
    raw["synthetic"]["prompt_tokens"]["max"] = 4096
    lengths = [r.num_prompt_tokens for r in load_workload(WorkloadConfig.model_validate(raw), 0)]
    assert max(lengths) == 4096 and min(lengths) >= 1


# ------------------------------------------------------------------ random streams in a run
def test_random_router_draws_from_its_own_stream():
    """The random router's i-th choice is the i-th ``integers(3)`` draw of stream
    ``router`` (SeedSequence(seed) child 7), whatever the patience sampler does."""
    seed = 11
    sc = _scenario(cluster={"num_replicas": 3, "router": "random"}, seed=seed)
    specs = specs_from_rows([(float(i), 10, 2) for i in range(12)])
    sim, _ = _run(sc, specs)
    got = sim.requests().sort_values("request_id").replica_id.tolist()
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(8)[7])
    assert got == [int(rng.integers(3)) for _ in range(12)]
    assert got == [int(x) for x in stream(seed, "router").integers(3, size=12)]


# ------------------------------------------------------------------ YAML and JSON spellings
def test_yaml_scientific_floats_are_numbers():
    """YAML 1.2 reads 1e9 as a float; PyYAML (YAML 1.1) would read the string "1e9", which
    strict validation then rejects."""
    assert load_yaml_text("a: 1e9\nb: -2.5E-3\nc: 1e\nd: '1e5'") == {
        "a": 1e9, "b": -0.0025, "c": "1e", "d": "1e5"}
    assert parse_override("slo.ttft_s=5e-1") == (["slo", "ttft_s"], 0.5)


def test_priority_classes_round_trip_through_json():
    sc = _scenario(workload={"priorities": {0: 0.25, 2: 0.75}})
    again = validate_scenario(sc.model_dump(mode="json"))
    assert again.workload.priorities == {0: 0.25, 2: 0.75}


# --- a missing spec or config path is reported as a missing file, not an unknown name --------

def test_missing_gpu_spec_path_says_not_found(tmp_path):
    from simulator.catalog.hardware import get_gpu
    with pytest.raises(ValueError, match=r"GPU spec file .*missing\.yaml.*: not found"):
        get_gpu(str(tmp_path / "missing.yaml"))
    with pytest.raises(ValueError, match="a folder with no spec.yaml in it"):
        get_gpu(str(tmp_path))
    with pytest.raises(ValueError, match="unknown GPU 'h100-sxm2'"):
        get_gpu("h100-sxm2")


def test_missing_model_config_path_says_not_found(tmp_path):
    from simulator.catalog.models import get_model
    with pytest.raises(ValueError, match=r"model config file .*config\.json.* not found"):
        get_model(str(tmp_path / "config.json"))
    with pytest.raises(ValueError, match=r"model config file .*absent.* not found"):
        get_model(str(tmp_path / "absent"))
    with pytest.raises(ValueError, match="unknown model 'nobody/unknown-7b'"):
        get_model("nobody/unknown-7b")


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


def test_topology_search_needs_a_family():
    from pydantic import ValidationError

    from simulator.planner.topology import TopologySearch
    with pytest.raises(ValidationError, match="give aggregated, disaggregated or both"):
        TopologySearch.model_validate({})


# ------------------------------------------------------------------ CLI: bad input is one line
def _one_line_rc2(capsys, argv) -> str:
    from simulator.cli.main import main
    rc = main(argv)
    cap = capsys.readouterr()
    err = cap.err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


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
    err = _one_line_rc2(capsys, [*argv, "-o", str(out)])
    assert err == f"servesim: error: output folder {out}: cannot create it (Not a directory)"


def test_compare_checks_every_variant_fits_before_running_any(capsys, tmp_path, nothing_runs):
    """The second variant does not fit its GPU: before, variant 1 ran to the end, left its run
    folder and only then failed."""
    out = tmp_path / "c4"
    err = _one_line_rc2(capsys, ["compare", "default", "--vary",
                                 "model=llama-3.1-8b,qwen3-235b-a22b", "-o", str(out), "-q"])
    assert err.startswith("servesim: error: variant model=qwen3-235b-a22b: --vary "
                          "model=llama-3.1-8b,qwen3-235b-a22b: model qwen3-235b-a22b does not "
                          "fit: weights 470.20 GB"), err
    assert not out.exists()


def test_output_folder_that_is_a_file_names_it(capsys, tmp_path, nothing_runs):
    f = tmp_path / "afile"
    f.write_text("x")
    err = _one_line_rc2(capsys, ["compare", "default", "-q", "-o", str(f)])
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
    err = _one_line_rc2(capsys, ["compare", "default", "--vary", vary, "--set",
                                 "workload.max_requests=300", "-o", str(out), "-q"])
    assert err.startswith("servesim: error: " + needle), err
    assert not out.exists()


@pytest.mark.parametrize("argv, line", [
    (["plan", "plan_default", "--max-requests", "1.5"],
     ("servesim plan: error: argument --max-requests: invalid int value: '1.5' "
      "(expected a whole number, such as 300 or 1e9)")),
    (["compare", "default", "--seed", "nan"],
     ("servesim compare: error: argument --seed: invalid int value: 'nan' "
      "(expected a whole number, such as 300 or 1e9)")),
    (["run", "default", "--seed", "x"],
     "servesim run: error: argument --seed: invalid int value: 'x' (expected a whole number)"),
    (["run"], "servesim run: error: the following arguments are required: scenario"),
    (["kv", "--batch", "x"],
     "servesim kv: error: argument --batch: invalid int value: 'x' (expected a whole number)"),
])
def test_argparse_errors_are_one_line(capsys, argv, line):
    """Before: four lines of usage, then the error."""
    from simulator.cli.main import main
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert capsys.readouterr().err == line + "\n"


def test_help_still_prints_the_usage(capsys):
    from simulator.cli.main import main
    with pytest.raises(SystemExit) as e:
        main(["plan", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: servesim plan [-h]") and "--max-requests MAX_REQUESTS" in out


@pytest.mark.parametrize("text, value", [("300", 300), ("-3", -3), ("1e9", 10**9),
                                         ("300.0", 300), ("2.5e1", 25)])
def test_whole_number_accepts_integer_valued_floats(text, value):
    from simulator.cli.args import whole_number
    got = whole_number(text)
    assert got == value and type(got) is int


@pytest.mark.parametrize("text", ["1.5", "nan", "inf", "-inf", "1e400", "x", ""])
def test_whole_number_refuses_fractions_and_non_numbers(text):
    import argparse

    from simulator.cli.args import whole_number
    with pytest.raises(argparse.ArgumentTypeError, match="invalid int value"):
        whole_number(text)


def test_max_requests_1e9_parses_as_an_int():
    from simulator.cli.main import build_parser
    args = build_parser("plan").parse_args(["plan", "p.yaml", "--max-requests", "1e9"])
    assert args.max_requests == 1_000_000_000 and type(args.max_requests) is int


def test_failed_run_leaves_no_empty_output_folder(capsys, tmp_path, monkeypatch):
    """The simulation fails after -o was created (the check comes first): the folders the
    command created, still empty, are removed; before, `run` left an empty OUT/deep/ behind."""
    from simulator.cli import main as cli

    def _fail(*a, **k):
        raise ValueError("the model does not fit")
    monkeypatch.setattr(cli, "run_scenario", _fail)
    out = tmp_path / "new" / "deep"
    err = _one_line_rc2(capsys, ["run", "default", "-q", "--set", "workload.max_requests=5",
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
    _one_line_rc2(capsys, ["run", "default", "-q", "--set", "workload.max_requests=5",
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


def test_empty_trace_path_is_named(capsys):
    """Before: "scenarios: is a directory, not a trace file" (the empty path resolved to the
    scenario's folder)."""
    err = _one_line_rc2(capsys, ["run", "default", "-q", "--set", "workload.trace="])
    assert err == ("servesim: error: default: --set workload.trace=: workload.trace: value '': "
                   "empty path: give the trace file (or leave trace out for a synthetic "
                   "workload)")


def test_token_budget_below_max_num_seqs_warns_as_vllm_refuses(tmp_path):
    """vLLM's SchedulerConfig refuses max_num_batched_tokens < max_num_seqs; servesim used to
    run it silently (a 40 s run reporting a 60 s mean TTFT)."""
    from simulator.cluster.setup import SchedulerBudgetWarning, build_setup
    from simulator.scenario.config import load_scenario

    sc, base = load_scenario("default", ["scheduler.max_num_batched_tokens=100"])
    with pytest.warns(SchedulerBudgetWarning, match="max_num_batched_tokens 100 is below "
                                                    "scheduler.max_num_seqs 256"):
        build_setup(sc, base)
    sc, base = load_scenario("default", ["scheduler.max_num_batched_tokens=256"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", SchedulerBudgetWarning)
        build_setup(sc, base)  # equal is allowed, as in vLLM
