"""``p2p: false`` prices the host-memory path (issue 32 item 3).

Without peer-to-peer, vLLM turns its custom all-reduce off and NCCL stages each transfer
through host memory; the link model charges half the PCIe link's rate (docs/explanation/step-time.md, the link) and
the provenance says that the factor is an assumption, not a measurement.

Hand figures: Llama-3.1-8B (hidden 4,096), TP 2, 1,024 tokens: one all-reduce of
1,024 x 4,096 x 2 B = 8,388,608 B, ring over p = 2 GPUs: ``t = 2 (p - 1) (alpha + b / (p B))``.

- stated PCIe, 16 GB/s, 20 us, p2p true: 2 x (20e-6 + 8,388,608 / 32e9) = 564.288 us;
- the same with p2p false: B = 16e9 / 2 = 8e9: 2 x (20e-6 + 8,388,608 / 16e9) = 1,088.576 us;
- L40S with only ``p2p: false`` stated (bandwidth not stated): the spec's host link
  32 GB/s / 2 x 0.7 efficiency = 11.2 GB/s, its 10 us: 2 x (10e-6 + 8,388,608 / 22.4e9)
  = 768.9829 us (before: the spec's 32 GB/s P2P rate as is, 282.144 us, the p2p true figure);
- RTX 4090 (spec: PCIe, p2p false, host link 32 GB/s, 24 us): 2 x (24e-6 + 8,388,608 /
  22.4e9) = 796.9829 us (the documented rule, unchanged).
"""
from __future__ import annotations

import warnings

import pytest

from simulator.cluster.setup import build_setup
from simulator.scenario.config import validate_scenario

BYTES = 1024 * 4096 * 2


def _setup(gpu: str, interconnect: dict | None, source: str = "roofline"):
    hw = {"gpu": gpu}
    if interconnect is not None:
        hw["interconnect"] = interconnect
    sc = validate_scenario({
        "model": "llama-3.1-8b", "hardware": hw, "cluster": {"tensor_parallel_size": 2},
        "perf": {"source": source}, "cost": {"usd_per_gpu_hour": 1.0},
        "workload": {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1},
                                   "num_requests": 1,
                                   "prompt_tokens": {"dist": "fixed", "value": 10},
                                   "output_tokens": {"dist": "fixed", "value": 10}}}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_setup(sc)


def _ar(setup, tokens=1024):
    return getattr(setup.perf, "ops", setup.perf).all_reduce_time(tokens)


STATED = {"kind": "pcie", "bandwidth_bytes_per_s": 16e9, "latency_s": 20e-6}


@pytest.mark.parametrize("source", ["roofline", "auto"])
def test_stated_pcie_link_p2p_false_costs_the_host_path(source):
    assert BYTES == 8_388_608
    with_p2p = _setup("l40s", {**STATED, "p2p": True}, source)
    without = _setup("l40s", {**STATED, "p2p": False}, source)
    assert _ar(with_p2p) == pytest.approx(2 * (20e-6 + BYTES / 32e9), rel=1e-12)
    assert _ar(with_p2p) == pytest.approx(564.288e-6, rel=1e-12)
    assert _ar(without) == pytest.approx(2 * (20e-6 + BYTES / 16e9), rel=1e-12)
    assert _ar(without) == pytest.approx(1088.576e-6, rel=1e-12)
    prov = without.perf.provenance()["all_reduce"]
    assert "PCIe without P2P" in prov and "custom all-reduce off" in prov
    assert "8 GB/s per direction" in prov and "assumption, not a measurement" in prov
    assert "assumption" not in with_p2p.perf.provenance()["all_reduce"]


def test_only_p2p_false_stated_uses_the_host_link_not_the_p2p_rate():
    s = _setup("l40s", {"p2p": False})
    assert _ar(s) == pytest.approx(2 * (10e-6 + BYTES / (2 * (32e9 / 2 * 0.7))), rel=1e-12)
    assert _ar(s) == pytest.approx(768.98286e-6, rel=1e-6)
    # p2p true stated alone keeps the spec's P2P rate as before: 2 x (10e-6 + b / (2 x 32e9))
    assert _ar(_setup("l40s", {"p2p": True})) == pytest.approx(282.144e-6, rel=1e-12)


def test_spec_without_p2p_follows_the_readme_rule():
    s = _setup("rtx-4090", None)
    assert _ar(s) == pytest.approx(2 * (24e-6 + BYTES / 22.4e9), rel=1e-12)
    assert _ar(s) == pytest.approx(796.98286e-6, rel=1e-6)
    assert "half the link rate" in s.perf.provenance()["all_reduce"]


def test_nvlink_provenance_unchanged():
    s = _setup("h100-sxm", None)
    assert s.perf.provenance()["all_reduce"] == "datasheet"
