"""Unit tests for simulator.report.figures: files written, deterministic bytes, fast binning."""
from __future__ import annotations

import numpy as np
import pytest

from simulator.report.figures import (
    FIGURE_FILES,
    plot_kv_usage,
    plot_queue_length,
    plot_ttft_cdf,
    write_figures,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_write_figures_creates_pngs(tmp_path, tables):
    requests, steps = tables()
    paths = write_figures(tmp_path, requests, steps, slo={"ttft_s": 0.5, "e2e_s": 2.0})
    assert set(paths) == set(FIGURE_FILES)
    for name, path in paths.items():
        assert path == tmp_path / FIGURE_FILES[name]
        data = path.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 1000
        assert b"Software" not in data and b"matplotlib" not in data.lower()


def test_pngs_are_byte_identical_across_runs(tmp_path, tables):
    requests, steps = tables(n_steps=3000, n_replicas=3)  # binned path too
    a = write_figures(tmp_path / "a", requests, steps)
    b = write_figures(tmp_path / "b", requests, steps)
    for name in FIGURE_FILES:
        assert a[name].read_bytes() == b[name].read_bytes(), name


@pytest.mark.parametrize("n_replicas", [1, 12])  # one line each / mean with min-max band
def test_time_series_modes(tmp_path, tables, n_replicas):
    _, steps = tables(n_steps=2400, n_replicas=n_replicas)
    assert plot_queue_length(steps, tmp_path / "q.png").stat().st_size > 1000


def test_empty_tables_still_plot(tmp_path, tables):
    requests, steps = tables()
    paths = write_figures(tmp_path, requests.iloc[:0], steps.iloc[:0])
    assert all(p.stat().st_size > 0 for p in paths.values())
    # a TTFT CDF with no first token at all
    none = requests.assign(first_token_time_s=np.nan)
    assert plot_ttft_cdf(none, tmp_path / "t.png").stat().st_size > 0


def test_large_run_plots(tmp_path, tables):
    """A large run still plots (its speed is measured in benchmarks/, never asserted here)."""
    requests, steps = tables(n_steps=300_000, n_replicas=4, n_requests=100_000)
    assert plot_kv_usage(steps, tmp_path / "kv.png").stat().st_size > 1000
    assert plot_ttft_cdf(requests, tmp_path / "ttft.png").stat().st_size > 1000
