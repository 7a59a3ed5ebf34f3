"""A GPU spec or model config path that does not exist is reported as a missing file, not
as an unknown catalog name."""
from __future__ import annotations

import pytest


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
