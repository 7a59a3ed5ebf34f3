"""A run's bytes do not depend on the CPU's SIMD instruction sets (invariant 9).

numpy chooses the code of its transcendental ufuncs by the CPU it runs on; before the table
lookups used the C library's functions (``simulator/perf/tables/libm.py``), the default
scenario's ``steps.csv`` differed in 109 of 21,087 step times between this machine with and
without AVX-512. Here the same scenario runs twice in fresh processes, once with numpy's AVX-512
code switched off (``NPY_DISABLE_CPU_FEATURES``), each with its own empty fill cache (so the
tables' filled grids are computed under each instruction set too), and the tables must be
byte-identical. On a CPU without AVX-512 numpy has no such code to switch off: skipped.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: numpy's names of the AVX-512 feature groups of x86-64 (numpy 2.x; unknown names among them
#: are ignored when absent from the running CPU's list)
AVX512 = ("AVX512F", "AVX512CD", "AVX512_SKX", "AVX512_CLX", "AVX512_CNL", "AVX512_ICL",
          "AVX512_SPR", "X86_V4")


def _cpu_features() -> dict:
    from numpy._core import _multiarray_umath as mu
    return dict(mu.__cpu_features__)


def _run(out: Path, cache: Path, disable: str | None) -> None:
    env = dict(os.environ, SERVESIM_CACHE_DIR=str(cache))
    env.pop("NPY_DISABLE_CPU_FEATURES", None)
    if disable:
        env["NPY_DISABLE_CPU_FEATURES"] = disable
    p = subprocess.run([sys.executable, "-m", "simulator.cli", "run",
                        str(ROOT / "scenarios/default.yaml"), "-q", "--no-figures",
                        "--table-format", "csv", "-o", str(out)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                       check=False)
    assert p.returncode == 0, p.stderr[-2000:]


def _exp_digest(disable: str | None) -> str:
    probe = ("import numpy as np, hashlib; x = np.linspace(-20, -5, 100001); "
             "print(hashlib.sha256(np.exp(x).tobytes()).hexdigest())")
    env = {k: v for k, v in os.environ.items() if k != "NPY_DISABLE_CPU_FEATURES"}
    if disable:
        env["NPY_DISABLE_CPU_FEATURES"] = disable
    return subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                          text=True, check=True).stdout


def test_outputs_are_identical_with_and_without_avx512(tmp_path):
    feats = _cpu_features()
    if not feats.get("AVX512F"):
        pytest.skip("this CPU has no AVX-512: numpy runs the same code either way")
    present = " ".join(f for f in AVX512 if feats.get(f))
    # the switch takes effect: numpy's own exp gives other bits without AVX-512 (else the
    # comparison below could not fail, whatever the code did)
    if _exp_digest(None) == _exp_digest(present):
        pytest.skip("numpy's exp gives the same bits with and without AVX-512 here")
    _run(tmp_path / "native", tmp_path / "cache_native", None)
    _run(tmp_path / "no_avx512", tmp_path / "cache_no_avx512", present)
    for name in ("steps.csv", "requests.csv"):
        a = (tmp_path / "native" / name).read_bytes()
        b = (tmp_path / "no_avx512" / name).read_bytes()
        assert a == b, name
