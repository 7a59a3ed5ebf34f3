"""Several table sets of one engine version (simulator/perf/tables/sets.py): the primary set
(folder ``<engine>-<version>``) answers, a variant set (``vllm-0.19.0-lss``) answers when it is
the only one or is named; labels list every source file of a record."""
from __future__ import annotations

import shutil

import pandas as pd
import pytest
import yaml

from simulator.catalog.hardware import get_gpu, load_gpu_spec
from simulator.perf.tables.sets import TableSet, select_table_set, table_sets


def _set(folder, version, t_s, files, project="src-a"):
    folder.mkdir(parents=True)
    pd.DataFrame({"dtype": "bf16", "m": [1, 2], "n": 64, "k": 64,
                  "median_s": [t_s, t_s]}).to_csv(folder / "gemm.csv", index=False)
    (folder / "provenance.yaml").write_text(yaml.safe_dump({
        "kind": "measured", "engine": "vllm", "engine_version": version,
        "device_name": "Toy GPU", "tables": {"gemm": {"source_project": project,
                                                      "commit": "0123456789", "file": files}}}))


@pytest.fixture
def profile(tmp_path):
    p = tmp_path / "toy-gpu"
    p.mkdir()
    (p / "spec.yaml").write_text(yaml.safe_dump({
        "name": "toy-gpu", "bf16_flops_per_s": 1e14, "hbm_bytes": 8e10,
        "hbm_bandwidth_bytes_per_s": 1e12}))
    _set(p / "tables" / "vllm-0.19.0", "0.19.0", 1e-5, "data/gemm_perf.parquet")
    # a variant set whose folder name sorts before the primary one
    _set(p / "tables" / "a-lss", "0.19.0", 2e-5, ["x/tp1/dense.csv", "x/tp2/dense.csv",
                                                  "x/tp1/per_sequence.csv"], "src-b")
    _set(p / "tables" / "vllm-0.22.0", "0.22.0", 3e-5, "data/gemm_perf.parquet")
    return p


def test_primary_set_answers_its_version(profile):
    gpu = load_gpu_spec(profile / "spec.yaml")
    assert [s.name for s in table_sets(gpu)] == ["vllm-0.22.0", "vllm-0.19.0", "a-lss"]
    ts = select_table_set(gpu, "vllm", "0.19.0")
    assert ts.name == "vllm-0.19.0" and ts.is_primary
    assert ts.gemm(1, 64, 64) == pytest.approx(1e-5, rel=1e-12)
    assert select_table_set(gpu).name == "vllm-0.22.0"


def test_variant_set_answers_when_alone_or_named(profile):
    gpu = load_gpu_spec(profile / "spec.yaml")
    shutil.rmtree(profile / "tables" / "vllm-0.19.0")
    ts = select_table_set(gpu, "vllm", "0.19.0")
    assert ts.name == "a-lss" and not ts.is_primary
    assert ts.gemm(2, 64, 64) == pytest.approx(2e-5, rel=1e-12)


def test_variant_named_by_folder(profile):
    gpu = load_gpu_spec(profile / "spec.yaml")
    _set(profile / "tables" / "vllm-0.19.0-lss", "0.19.0", 4e-5, "y/dense.csv")
    assert select_table_set(gpu, "vllm", "0.19.0").name == "vllm-0.19.0"
    assert select_table_set(gpu, "vllm", "0.19.0-lss").name == "vllm-0.19.0-lss"
    assert select_table_set(gpu, "vllm", "vllm-0.19.0-lss").name == "vllm-0.19.0-lss"
    with pytest.raises(ValueError, match=r"no vllm 0.18.0 tables; available: 0.22.0, 0.19.0, "
                                         r"0.19.0, 0.19.0-lss"):
        select_table_set(gpu, "vllm", "0.18.0")


def test_label_lists_every_source_file_once(profile):
    gpu = load_gpu_spec(profile / "spec.yaml")
    ts = TableSet(profile / "tables" / "a-lss", gpu)
    assert ts.label("gemm") == ("measured (Toy GPU, vLLM 0.19.0; src-b 0123456 dense.csv, "
                                "per_sequence.csv)")
    one = TableSet(profile / "tables" / "vllm-0.19.0", gpu)
    assert one.label("gemm") == "measured (Toy GPU, vLLM 0.19.0; src-a 0123456 gemm_perf.parquet)"


def test_shipped_rtx_pro_keeps_the_aiconfigurator_set():
    ts = select_table_set(get_gpu("rtx-pro-6000-server"), "vllm", "0.19.0")
    assert ts.name == "vllm-0.19.0" and ts.provenance("gemm")["source_project"] == \
        "aiconfigurator"
