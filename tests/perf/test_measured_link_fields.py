"""perf/measured.py reads the GPU link fields as plain attributes (session 6): a spec object
without them fails loudly instead of reading as "no NVLink, no P2P, link not stated" (the
getattr-with-a-default pattern that once hid a missing SM count)."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from simulator.catalog.hardware import get_gpu
from simulator.perf.measured import custom_allreduce_possible


def test_custom_allreduce_follows_the_spec_link():
    # by the rule vLLM applies: NVLink, or peer-to-peer over PCIe, allows the custom kernel
    assert custom_allreduce_possible(get_gpu("h100-sxm")) is True       # NVLink 4
    assert custom_allreduce_possible(get_gpu("l40s")) is True           # PCIe with P2P
    # PCIe, no P2P; before: True, its interconnect text "PCIe Gen4 x16 (no NVLink, no P2P)"
    # contains "nvlink"
    assert custom_allreduce_possible(get_gpu("rtx-4090")) is False
    pcie_no_p2p = dataclasses.replace(get_gpu("l40s"), p2p=None)        # P2P not stated
    assert custom_allreduce_possible(pcie_no_p2p) is False


@pytest.mark.parametrize("missing", ["link_kind", "p2p"])
def test_a_spec_without_a_link_field_fails_loudly(missing):
    fields = {"link_kind": "pcie", "p2p": True}
    del fields[missing]
    # before: getattr defaults read the missing field as "" / False and answered silently
    with pytest.raises(AttributeError, match=missing):
        custom_allreduce_possible(SimpleNamespace(**fields))
