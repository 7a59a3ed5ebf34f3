"""GPU-to-GPU link fields of a GPU spec (simulator/catalog/hardware.py): kind, latency, P2P."""
from __future__ import annotations

import pytest
import yaml

from simulator.catalog.hardware import get_gpu, load_gpu_spec


def _write(tmp_path, **over):
    d = {"name": "my-gpu", "bf16_flops_per_s": 100e12, "hbm_bytes": 24e9,
         "hbm_bandwidth_bytes_per_s": 1e12}
    d.update(over)
    p = tmp_path / "spec.yaml"
    p.write_text(yaml.safe_dump(d))
    return p


def test_link_fields_load(tmp_path):
    g = load_gpu_spec(_write(tmp_path, interconnect_kind="pcie", p2p=False,
                             interconnect_bandwidth_bytes_per_s=32e9,
                             interconnect_latency_s=2.4e-5))
    assert (g.interconnect_kind, g.link_kind, g.p2p) == ("pcie", "pcie", False)
    assert g.interconnect_bandwidth_bytes_per_s == 32e9 and g.interconnect_latency_s == 2.4e-5


def test_old_specs_still_load_and_infer_the_kind(tmp_path):
    g = load_gpu_spec(_write(tmp_path, interconnect="NVLink 4",
                             interconnect_bandwidth_bytes_per_s=450e9))
    assert g.interconnect_kind == "" and g.link_kind == "nvlink" and g.p2p is None
    g = load_gpu_spec(_write(tmp_path))
    assert g.link_kind == "none" and g.interconnect_latency_s == 0.0
    g = load_gpu_spec(_write(tmp_path, interconnect="PCIe Gen4",
                             interconnect_bandwidth_bytes_per_s=32e9))
    assert g.link_kind == "pcie"


@pytest.mark.parametrize("over,match", [
    ({"interconnect_kind": "infiniband"}, "interconnect_kind='infiniband' must be one of"),
    ({"p2p": "yes"}, "p2p='yes' must be true or false"),
    ({"interconnect_latency_s": -1}, "must be positive"),
    ({"interconnect_latency_s": "fast"}, "not a number"),
    ({"interconnect_kind": "none", "interconnect_bandwidth_bytes_per_s": 1e9},
     "contradicts"),
    ({"nvlink_bandwidth": 1}, "unknown GPU spec key"),
    ({"interconnect_max_gpus": 1}, "interconnect_max_gpus=1 must be an integer >= 2"),
    ({"interconnect_max_gpus": 2.5}, "interconnect_max_gpus=2.5 must be an integer >= 2"),
    ({"interconnect_max_gpus": True}, "interconnect_max_gpus=True must be an integer >= 2"),
])
def test_bad_link_fields(tmp_path, over, match):
    with pytest.raises(ValueError, match=match):
        load_gpu_spec(_write(tmp_path, **over))


def test_shipped_links():
    # NVLink 4 on HGX H100/H200 (450 GB/s per direction), NVLink 3 on A100 (300 GB/s)
    assert get_gpu("h100").link_kind == "nvlink" and get_gpu("h100").p2p is True
    assert get_gpu("h200").interconnect_bandwidth_bytes_per_s == 450e9
    assert get_gpu("a100").interconnect_bandwidth_bytes_per_s == 300e9
    # PCIe-only boards: Gen4 x16 = 32 GB/s per direction (L40S, RTX 4090), Gen5 = 64 GB/s
    for name, bw, p2p in (("l40s", 32e9, True), ("rtx-pro-6000-server", 64e9, True),
                          ("rtx-4090", 32e9, False)):
        g = get_gpu(name)
        assert (g.link_kind, g.interconnect_bandwidth_bytes_per_s, g.p2p) == ("pcie", bw, p2p)
    assert get_gpu("NVIDIA RTX PRO 6000 Blackwell Server Edition").name == "rtx-pro-6000-server"
    assert get_gpu("NVIDIA L40S").name == "l40s"
    assert get_gpu("NVIDIA GeForce RTX 4090").bf16_flops_per_s == 165.2e12


def test_tp_group_beyond_an_nvlink_bridge_warns_unless_the_link_is_stated():
    """H100 PCIe cards are bridged in pairs: TP 2 stays on the bridge (no warning); TP 4 is
    costed on the bridge's 300 GB/s but crosses PCIe Gen5 (64 GB/s per direction), so it warns
    and names the host link; a stated link (hardware.interconnect) silences it. SXM boards
    (NVSwitch, no reach stated) never warn."""
    import warnings

    from simulator.cluster.setup import LinkReachWarning, warn_link_reach, with_stated_link
    from simulator.scenario.config import InterconnectConfig
    g = get_gpu("h100-pcie")
    assert g.interconnect_max_gpus == 2 and get_gpu("h100-sxm").interconnect_max_gpus == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_link_reach(g, 2)
        warn_link_reach(get_gpu("h100-sxm"), 8)
        warn_link_reach(with_stated_link(g, InterconnectConfig(kind="pcie",
                                                               bandwidth_bytes_per_s=64e9)), 4)
    with pytest.warns(LinkReachWarning) as w:
        warn_link_reach(g, 4)
    msg = str(w[0].message)
    assert "joins 2 GPUs" in msg and "tensor_parallel_size is 4" in msg and "300 GB/s" in msg
    assert "hardware.interconnect.bandwidth_bytes_per_s=6.4e+10" in msg
