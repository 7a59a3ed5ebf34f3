from __future__ import annotations

import pytest

from simulator.experiments.grid import (
    config_label,
    expand_grid,
    flatten_inputs,
    flatten_summary,
    get_path,
    set_path,
)


def test_set_path_creates_sections_and_replaces_none():
    raw = {"speculative": None, "cluster": {"num_replicas": 1}}
    set_path(raw, "cluster.tensor_parallel_size", 2)
    set_path(raw, "speculative.num_speculative_tokens", 4)
    set_path(raw, "kv_cache.kv_cache_dtype", "fp8")
    assert raw == {"speculative": {"num_speculative_tokens": 4},
                   "cluster": {"num_replicas": 1, "tensor_parallel_size": 2},
                   "kv_cache": {"kv_cache_dtype": "fp8"}}
    assert get_path(raw, "cluster.tensor_parallel_size") == 2
    assert get_path(raw, "cluster.nope", "x") == "x"


def test_set_path_value_is_copied_and_errors_name_the_path():
    value = {"method": "draft_model"}
    raw: dict = {}
    set_path(raw, "speculative", value)
    value["method"] = "changed"
    assert raw["speculative"] == {"method": "draft_model"}
    with pytest.raises(ValueError, match="'model' is not a section"):
        set_path({"model": "llama-3.1-8b"}, "model.layers", 3)
    with pytest.raises(ValueError, match="empty component"):
        set_path({}, "a..b", 1)


def test_expand_grid_is_a_product_in_written_order():
    pts = expand_grid({"a": [1, 2], "b.c": ["x", "y", "z"]})
    assert len(pts) == 6
    assert pts[0] == {"a": 1, "b.c": "x"} and pts[1] == {"a": 1, "b.c": "y"}
    assert pts[-1] == {"a": 2, "b.c": "z"}


def test_expand_grid_combines_points_with_the_product():
    pts = expand_grid({"a": [1, 2]}, [{"s": None}, {"s": {"method": "ngram"}, "a": 9}])
    assert pts == [{"s": None, "a": 1}, {"s": None, "a": 2},
                   {"s": {"method": "ngram"}, "a": 1}, {"s": {"method": "ngram"}, "a": 2}]
    assert expand_grid({}) == [{}]
    with pytest.raises(ValueError, match="non-empty list"):
        expand_grid({"a": []})


def test_flatten_summary_and_inputs():
    s = {"ttft_s": {"p99": 0.5, "mean": 0.1}, "by_slice": {"code": {"ttft_s": {"p99": 2.0}}},
         "reject_reasons": {}, "num_requests": 3, "x": float("nan")}
    f = flatten_summary(s)
    assert f["ttft_s_p99"] == 0.5 and f["by_slice_code_ttft_s_p99"] == 2.0
    assert f["reject_reasons"] is None and f["num_requests"] == 3 and f["x"] is None
    i = flatten_inputs({"cluster": {"tensor_parallel_size": 2}, "speculative": None,
                        "workload": {"slices": {"a": 1.0}, "columns": None},
                        "lst": [1, 2]})
    assert i == {"cluster.tensor_parallel_size": 2, "speculative": None,
                 "workload.slices.a": 1.0, "workload.columns": None, "lst": "[1, 2]"}


def test_config_label():
    assert config_label({}) == "base"
    lab = config_label({"hardware.gpu": "h100-sxm", "cluster.tensor_parallel_size": 2,
                        "scheduler.enable_chunked_prefill": False,
                        "speculative": {"method": "draft_model", "num_speculative_tokens": 4}})
    assert lab == "gpu=h100-sxm tp=2 chunked=off speculative=draft_modelx4"
    assert config_label({"speculative": None}) == "speculative=off"
