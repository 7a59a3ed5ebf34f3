"""One scheduler configuration: the scenario's ``scheduler:`` section, read by the schedulers
themselves, plus :class:`SchedulerLimits`, derived once per replica and frozen.

Expected limits by hand: Llama-3.1-8B has bf16 KV of 2 x 32 layers x 8 KV heads x 128 dims x
2 B = 131,072 B a token, so a 16-token block is 2**21 B and 4 GiB of swap holds 4 x 2**30 /
2**21 = 2,048 blocks; its ``max_position_embeddings`` is 131,072. A tenant share of 0.3 of 10
sequences is 3; 0.05 of 10 is 0.5, floored to 0 and raised to the minimum of 1.
"""
from __future__ import annotations

import dataclasses

import pytest
from helpers import make_scenario, synthetic_workload

from simulator.catalog.hardware import get_gpu
from simulator.cluster.replica import Replica
from simulator.cluster.setup import build_setup
from simulator.metrics.records import RunRecorder
from simulator.scenario.config import SchedulerConfig
from simulator.scheduling.limits import SchedulerLimits
from simulator.scheduling.static import StaticScheduler


def test_limits_of_a_replica_by_hand():
    sc = make_scenario({"scheduler": {"max_num_seqs": 10, "preemption_mode": "swap",
                                      "admission": {"tenant_max_share": 0.3}},
                        "kv_cache": {"block_size": 16, "swap_space_gb": 4.0}},
                       workload=synthetic_workload(5))
    lim = build_setup(sc).limits
    assert lim.swap_block_bytes == 2**21
    assert lim.swap_space_blocks == 2_048
    assert lim.max_model_len == 131_072  # unset in the scenario: the model's
    assert lim.tenant_max_seqs == 3
    assert lim.host_link_bandwidth_bytes_per_s == get_gpu("h100-sxm") \
        .host_link_bandwidth_bytes_per_s
    assert lim.reserve_full_isl is False  # the vLLM V0 profile of make_scenario


@pytest.mark.parametrize(("share", "seqs", "cap"), [(0.3, 10, 3), (0.05, 10, 1), (None, 10, None)])
def test_tenant_cap(share, seqs, cap):
    section = SchedulerConfig(max_num_seqs=seqs, admission={"tenant_max_share": share})
    lim = SchedulerLimits.for_replica(section, make_scenario().kv_cache, max_model_len=100,
                                      block_bytes=2**21, host_link_bandwidth_bytes_per_s=1e9,
                                      reserve_full_isl=False)
    assert lim.tenant_max_seqs == cap


def test_limits_are_frozen():
    lim = SchedulerLimits(max_model_len=100)
    with pytest.raises(dataclasses.FrozenInstanceError):
        lim.max_model_len = 200


def test_no_limit_renames_a_scenario_key():
    """A limit may share a name with a scheduler key only for that key's resolved value."""
    shared = {f.name for f in dataclasses.fields(SchedulerLimits)} & set(SchedulerConfig.model_fields)
    assert shared == {"max_model_len"}


@pytest.mark.parametrize("policy", ["continuous", "static"])
def test_schedulers_read_the_scenario_section(policy):
    sc = make_scenario({"scheduler": {"policy": policy, "queue_policy": "priority",
                                      "max_model_len": 4096, "max_batch_size": 5,
                                      "batch_timeout_s": 0.25}},
                       workload=synthetic_workload(5))
    setup = build_setup(sc)
    sched = Replica(0, setup, sc, RunRecorder()).sched
    assert sched.cfg is sc.scheduler and sched.limits is setup.limits
    assert isinstance(sched, StaticScheduler) == (policy == "static")
    assert sched.priority and sched.limits.max_model_len == 4096
    if policy == "static":  # min(max_batch_size 5, max_num_seqs 256) slots
        assert (sched.capacity, sched.batch_timeout_s) == (5, 0.25)
