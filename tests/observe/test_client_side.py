"""The engine profile's ``api_server`` terms (schema) and how a replay applies them to the
simulated request table (``simulator.observe.client_side``)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simulator.observe.client_side import client_view
from simulator.perf.engine_profile import get_engine_profile, load_engine_profile


def test_shipped_profiles_state_sourced_api_terms():
    # vllm-v0: no client-side record of that engine exists, so a sourced zero; vllm-v1: the
    # per-request term fitted with its step constant (fit_report), the per-token one still 0
    v0 = get_engine_profile("vllm-v0").api_server
    assert v0.is_zero
    assert all(v["source"].startswith("not measured") for v in v0.constants().values())
    v1 = get_engine_profile("vllm-v1")
    c = v1.api_server.constants()
    assert set(c) == {"api_server.per_request_s", "api_server.per_output_token_s"}
    assert c["api_server.per_request_s"]["value"] > 0
    assert c["api_server.per_request_s"]["source"].startswith("fitted")
    assert c["api_server.per_request_s"]["value"] == \
        v1.fit_report["constants"]["api_server.per_request_s"]
    assert c["api_server.per_output_token_s"]["value"] == 0.0
    # not a step constant: kept out of what a run's step-time provenance lists
    assert not any(k.startswith("api_server") for k in get_engine_profile("vllm-v1").constants())


def test_profile_without_the_section_defaults_to_zero(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("name: p\nengine: vllm\n")
    api = load_engine_profile(p).api_server
    assert api.per_request_s.value == 0.0 and "not modelled" in api.per_request_s.source


@pytest.mark.parametrize("body, msg", [
    ("api_server:\n  per_request_s: {value: 0.001}\n",
     "api_server.per_request_s.source: missing required key"),
    ("api_server:\n  per_request_s: {value: -1, source: xyz}\n", "api_server.per_request_s.value"),
    ("api_server:\n  per_token_s: {value: 1, source: xyz}\n",
     "api_server.per_token_s: unknown key"),
])
def test_bad_api_server_section_is_one_line(tmp_path, body, msg):
    p = tmp_path / "p.yaml"
    p.write_text("name: p\n" + body)
    with pytest.raises(ValueError, match="p.yaml: " + msg.replace(".", r"\.")) as e:
        load_engine_profile(p)
    assert "\n" not in str(e.value)


def test_client_view_adds_the_terms():
    """2 ms per request, 0.5 ms per token after the first: a 5-token request's first token
    + 2 ms, its finish + 2 + 4 x 0.5 = 4 ms; a 1-token request's finish + 2 ms; a request
    without tokens (cancelled) unchanged."""
    req = pd.DataFrame({"request_id": [0, 1, 2], "status": ["completed", "completed",
                                                            "cancelled"],
                        "first_token_time_s": [1.0, 2.0, np.nan],
                        "finish_time_s": [1.5, 2.0, 3.0], "num_emitted_tokens": [5, 1, 0]})
    out = client_view(req, 0.002, 0.0005)
    assert out["first_token_time_s"].tolist()[:2] == pytest.approx([1.002, 2.002])
    assert np.isnan(out["first_token_time_s"].iloc[2])
    assert out["finish_time_s"].tolist() == pytest.approx([1.504, 2.002, 3.0])
    assert req["finish_time_s"].tolist() == [1.5, 2.0, 3.0]        # the input is not changed
    assert client_view(req, 0.0, 0.0) is req
