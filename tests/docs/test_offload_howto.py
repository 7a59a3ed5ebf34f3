"""The KV offload / multi-turn how-to (docs/howto/offload.md) does what it says, on a smaller
workload: the shipped scenario runs and reports its tiers, the compare over CPU tier sizes has
the run without a tier (size 0) and the tier's section, and a plan may vary the tier's size."""
from __future__ import annotations

import json

from helpers import REPO_ROOT

from simulator.cli.main import main

SMALL = ["--set", "workload.synthetic_sessions.num_sessions=30"]


def test_run_and_compare_over_tier_sizes(tmp_path):
    assert main(["run", "chat_multi_turn_offload", "-o", str(tmp_path / "run"), "-q",
                 "--no-figures", *SMALL]) == 0
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["num_requests"] == s["num_completed"] + s["num_rejected"] + s["num_cancelled"] \
        + s["num_unfinished"]
    assert [t["medium"] for t in s["kv_offload"]["tiers"]] == ["cpu"]
    assert "## KV offload tiers" in (tmp_path / "run" / "report.md").read_text()
    assert main(["compare", "chat_multi_turn_offload", "--vary",
                 "kv_cache.offload.tiers.0.size_gib=0,16", "-o", str(tmp_path / "cmp"), "-q",
                 "--no-figures", *SMALL]) == 0
    runs = sorted(p for p in (tmp_path / "cmp").iterdir() if p.is_dir())
    offload = [json.loads((p / "summary.json").read_text()).get("kv_offload") for p in runs]
    assert sorted(bool(o) for o in offload) == [False, True]   # size 0: no tier at all


def test_the_shipped_sweep_names_three_tier_setups():
    import yaml
    grid = yaml.safe_load((REPO_ROOT / "scenarios/sweep_chat_offload.yaml").read_text())["grid"]
    tiers = [o and [t["medium"] for t in o["tiers"]] for o in grid["kv_cache.offload"]]
    assert tiers == [None, ["cpu"], ["cpu", "disk"]]


def test_a_grid_path_may_index_a_list_section():
    """Sweep grids and plan search spaces set ``kv_cache.offload.tiers.0.size_gib``."""
    import pytest

    from simulator.experiments.grid import get_path, set_path
    raw = {"kv_cache": {"offload": {"tiers": [{"medium": "cpu", "size_gib": 64}]}}}
    set_path(raw, "kv_cache.offload.tiers.0.size_gib", 0)
    assert raw["kv_cache"]["offload"]["tiers"] == [{"medium": "cpu", "size_gib": 0}]
    assert get_path(raw, "kv_cache.offload.tiers.0.medium") == "cpu"
    with pytest.raises(ValueError, match=r"'1' is not an index of 'kv_cache.offload.tiers'"):
        set_path(raw, "kv_cache.offload.tiers.1.size_gib", 1)


def test_the_result_cache_tells_think_times_apart():
    """Two workloads that differ only in a session turn's think time are not one cache entry
    (closed-loop arrivals depend on it)."""
    from helpers import spec

    from simulator.experiments.cache import specs_fingerprint
    a = [spec(0, 0.0, 100, 10, session_id=1, turn_index=0),
         spec(1, 1.0, 150, 10, session_id=1, turn_index=1, think_time_s=5.0)]
    b = [a[0], spec(1, 1.0, 150, 10, session_id=1, turn_index=1, think_time_s=9.0)]
    plain = [spec(0, 0.0, 100, 10), spec(1, 1.0, 150, 10)]
    assert specs_fingerprint(a) != specs_fingerprint(b)
    assert specs_fingerprint(plain) == specs_fingerprint(list(plain))


def test_the_compare_table_shows_the_tiers(tmp_path):
    assert main(["compare", "chat_multi_turn_offload", "--vary",
                 "kv_cache.offload.tiers.0.size_gib=0,64", "-o", str(tmp_path), "-q",
                 "--no-figures", *SMALL]) == 0
    text = (tmp_path / "compare.md").read_text()
    row = next(line for line in text.splitlines() if "KV offload tier hit rate" in line)
    assert row.split("|")[2].strip() == "-"          # size 0: no tier
    assert "*KV offload tier hit rate* is" in text


def test_sweep_labels_name_the_tiers():
    from simulator.experiments.grid import config_label
    cpu = {"medium": "cpu", "size_gib": 64}
    disk = {"medium": "disk", "size_gib": 1024, "bandwidth_bytes_per_s": 6e9, "latency_s": 1e-4}
    assert [config_label({"kv_cache.offload": o}) for o in
            (None, {"tiers": [cpu]}, {"tiers": [cpu, disk]})] == [
        "offload=off", "offload=cpu64G", "offload=cpu64G+disk1024G"]
