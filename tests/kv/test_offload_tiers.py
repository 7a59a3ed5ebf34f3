"""KV offload tiers (simulator.kv.tiers): LRU, capacity, write-through, chunked lookups, the
load-time formula, and the scheduler's loads on tiny hand-computed schedules (no SimPy:
schedule -> update, block_size 4)."""
from __future__ import annotations

import pytest
from helpers import make_scheduler, req

from simulator.kv.tiers import OffloadStore, OffloadTier, attach_offload, build_store
from simulator.scenario.offload import OffloadConfig


def test_tier_is_lru_with_capacity():
    t = OffloadTier("cpu", 3, 1e9)
    assert t.put_many([1, 2, 3]) == 3
    t.touch(1)                      # 1 is now the most recently used: 2, 3, 1
    assert t.put_many([4]) == 1     # the least recently used (2) goes
    assert t.put_many([3]) == 0     # a block already there is skipped, not refreshed
    assert t.keys_lru() == [3, 1, 4]
    assert (t.num_evicted_blocks, len(t)) == (1, 3)


def test_store_writes_through_and_disk_hits_are_promoted():
    cpu, disk = OffloadTier("cpu", 2, 1e9), OffloadTier("disk", 10, 1e8, 0.001)
    s = OffloadStore("vllm", [cpu, disk])
    assert s.store([11, 12, 13]) == 3          # three device-to-host copies
    assert cpu.keys_lru() == [12, 13] and disk.keys_lru() == [11, 12, 13]
    assert (cpu.num_stored_blocks, disk.num_stored_blocks) == (3, 3)
    where = s.match([11, 12, 13, 14], 0, 4)    # 11 on disk only, 12-13 in CPU, 14 nowhere
    assert where == [1, 0, 0]
    assert s.take([11, 12, 13], where) == [2, 1]
    assert 11 in cpu and 12 not in cpu         # promoted 11 pushed out the LRU block 12
    assert (cpu.num_hit_blocks, disk.num_hit_blocks) == (2, 1)
    assert (cpu.num_stored_blocks, cpu.num_promoted_blocks) == (3, 1)  # a promotion: apart


def test_lmcache_matches_whole_chunks_from_the_prompt_start():
    s = OffloadStore("lmcache", [OffloadTier("cpu", 100, 1e9)], chunk_blocks=4)
    s.store(list(range(10)))
    assert len(s.match(list(range(12)), 0, 12)) == 8   # 10 held: two whole chunks
    assert len(s.match(list(range(12)), 2, 12)) == 6   # from block 2 to the chunk edge at 8
    assert s.match(list(range(12)), 9, 12) == []        # 9 is past the last whole chunk (8)


def test_load_seconds_by_hand():
    s = OffloadStore("vllm", [OffloadTier("cpu", 10, 50e9, 1e-5),
                              OffloadTier("disk", 10, 5e9, 1e-4)])
    block = 2 * 2**20
    # CPU: latency + 3 blocks over min(50e9, host 32e9); disk: latency + 2 over min(5e9, 32e9)
    want = (1e-5 + 3 * block / 32e9) + (1e-4 + 2 * block / 5e9)
    assert s.load_seconds([3, 2], block, 32e9) == pytest.approx(want, rel=1e-15)


def test_build_store_sizes_tiers_in_whole_blocks():
    cfg = OffloadConfig.model_validate({"connector": "lmcache", "tiers": [
        {"medium": "cpu", "size_gib": 1},
        {"medium": "disk", "cpu_bytes_to_use": 10 * 2**20 + 5, "bandwidth_bytes_per_s": 5e9,
         "latency_s": 1e-4}]})
    st = build_store(cfg, 16, replica_block_bytes=2 * 2**20, host_bytes_per_s=64e9)
    assert [t.capacity_blocks for t in st.tiers] == [512, 5]      # 1 GiB / 2 MiB; 10 MiB / 2
    assert st.tiers[0].read_bytes_per_s == 64e9                   # the host link by default
    assert st.chunk_blocks == 256 // 16 and st.sync_loads and not st.store_decode


@pytest.mark.parametrize("bad, words", [
    ({"tiers": [{"medium": "disk", "size_gib": 1, "bandwidth_bytes_per_s": 1e9,
                 "latency_s": 0}]}, "[cpu] or [cpu, disk]"),
    ({"tiers": [{"medium": "cpu"}]}, "exactly one of size_gib and cpu_bytes_to_use"),
    ({"tiers": [{"medium": "cpu", "size_gib": 1}, {"medium": "disk", "size_gib": 9}]},
     "state bandwidth_bytes_per_s and latency_s"),
    ({"tiers": [{"medium": "cpu", "size_gib": 1}], "chunk_size": 256}, "LMCache's"),
    ({"connector": "lmcache", "tiers": [{"medium": "cpu", "size_gib": 1}],
      "offload_prompt_only": False}, "save_decode_cache"),
])
def test_offload_config_errors_say_what_is_wrong(bad, words):
    with pytest.raises(ValueError, match=None) as e:
        OffloadConfig.model_validate(bad)
    assert words in str(e.value)


def _offloading_scheduler(store_decode: bool, **cfg):
    """A bare scheduler (8 blocks of 4 tokens, prefix caching, priority queue) with a CPU
    tier of 100 blocks: a block is 1,000 bytes on each GPU and the host link moves 1e6 B/s,
    so a load takes 1 ms a block."""
    s = make_scheduler(num_blocks=8, block_size=4, prefix=True, queue_policy="priority",
                       max_num_batched_tokens=64, **cfg)
    store = OffloadStore("vllm", [OffloadTier("cpu", 100, 1e9)], store_decode=store_decode)
    attach_offload(s.kv, store, 1000.0, 1000.0, 1e6)
    return s


def _step(s, now: float, dt: float = 0.01):
    out = s.schedule(now)
    assert out is not None
    s.update(out, now, now + dt)
    return out


def test_a_preempted_request_resumes_from_the_cpu_tier():
    s = _offloading_scheduler(store_decode=True)
    x = req(0, 8, 40, priority=5)
    s.add_request(x, 0.0)
    t = 0.0
    for _ in range(6):  # the prefill (8 tokens, first token) and 5 decode steps
        _step(s, t)
        t += 0.01
    assert (x.num_computed_tokens, x.num_emitted) == (13, 6)
    # blocks 0-2 (tokens 0-11) are full: stored as they filled (answers too: store_decode)
    assert s.kv.offload.tiers[0].num_stored_blocks == 3
    y = req(1, 28, 1, priority=0)  # needs 7 of the 8 blocks: x (4 blocks) is preempted
    s.add_request(y, t)
    out = _step(s, t)
    assert out.preempted == [x] and y.status == "completed"
    t += 0.01
    # x's own blocks are not in the GPU prefix cache (it registers declared content only):
    # its three full blocks (tokens 0-11) come back from the CPU tier
    out = s.schedule(t)
    assert out is None and s.loading == [x]            # x waits for blocks 0-2 from the CPU
    assert s.kv.tier_hit_tokens[0] == 12 and s.kv.tier_load_bytes == 3000.0
    assert x.kv_ready_s == pytest.approx(t + 3 * 1000.0 / 1e6, rel=1e-12)
    assert s.idle_until(t) == x.kv_ready_s
    out = s.schedule(x.kv_ready_s)                     # landed: back with 12 tokens computed
    assert out is not None and out.reqs == [x]
    # 14 tokens (8 prompt + 6 emitted): 12 came from the CPU tier, 2 are recomputed
    assert x.num_computed_tokens == 12 and out.ntoks == [2]


def test_without_offload_the_preempted_request_recomputes():
    s = make_scheduler(num_blocks=8, block_size=4, prefix=True, queue_policy="priority",
                       max_num_batched_tokens=64)
    x = req(0, 8, 40, priority=5)
    s.add_request(x, 0.0)
    t = 0.0
    for _ in range(6):
        _step(s, t)
        t += 0.01
    s.add_request(req(1, 28, 1, priority=0), t)
    _step(s, t)
    out = s.schedule(t + 0.01)
    assert out.reqs == [x] and out.ntoks == [14] and x.num_computed_tokens == 0


def test_prompt_only_stores_no_answer_blocks():
    s = _offloading_scheduler(store_decode=False)
    x = req(0, 8, 40)
    s.add_request(x, 0.0)
    t = 0.0
    for _ in range(10):
        _step(s, t)
        t += 0.01
    assert x.num_computed_tokens == 17                  # 4 full blocks, 2 of them prompt
    assert s.kv.offload.tiers[0].num_stored_blocks == 2


def test_cancel_while_loading_frees_its_blocks():
    s = _offloading_scheduler(store_decode=True)
    s.kv.offload.store(s.kv._prefix_keys(req(9, 8, 1, prefix_hash_ids=(1, 2),
                                            prefix_block_tokens=4))[:2])
    x = req(0, 8, 1, prefix_hash_ids=(1, 2), prefix_block_tokens=4)
    s.add_request(x, 0.0)
    assert s.schedule(0.0) is None and s.loading == [x]
    # the first block loads (the last prompt token is computed); both blocks are held
    assert s.kv.num_used_blocks == 2 and x.kv_load_target_tokens == 4
    s.cancel(x, 0.0005)
    assert s.loading == [] and x.status == "cancelled" and s.kv.num_used_blocks == 0
    assert not s.has_work()


def test_loads_that_fill_the_pool_never_wedge_it():
    """Ten requests each loading 8 of their 16 blocks from the CPU tier, on a GPU of 64
    blocks: a parked request holds its whole sequence's blocks from the start, so the ones
    admitted run once landed and the rest follow (before, each took its loaded blocks, none
    could get the rest, and the idle rule rejected them all as kv_capacity, leaking blocks)."""
    from helpers import make_scenario, run_sim, spec
    sc = make_scenario({"kv_cache": {"num_gpu_blocks": 64, "enable_prefix_caching": True,
                                     "offload": {"tiers": [{"medium": "cpu", "size_gib": 10}]}},
                        "scheduler": {"max_num_batched_tokens": 2048}})
    b = 16

    def ids(k):
        return tuple(range(k * 100, k * 100 + 16))
    specs = [spec(i, 0.0, 8 * b + 1, 1, prefix_hash_ids=ids(i)[:8], prefix_block_tokens=b)
             for i in range(10)]                                   # store 8 blocks each
    specs += [spec(10 + i, 100.0, 64 * b, 1) for i in range(2)]    # evict them from the GPU
    specs += [spec(12 + i, 200.0, 16 * b, 1, prefix_hash_ids=ids(i), prefix_block_tokens=b)
              for i in range(10)]
    out = run_sim(sc, specs)
    done = [r for r in out.recorder.all_requests if r.request_id >= 12]
    assert [r.status for r in done] == ["completed"] * 10
    assert [r.num_tier_hit_tokens for r in done] == [8 * b] * 10
    assert out.replicas[0].kv.num_used_blocks == 0


def test_offload_in_a_pool_is_refused_with_its_path():
    from helpers import make_scenario
    pool = {"name": "a", "kv_cache": {"enable_prefix_caching": True, "offload": {
        "tiers": [{"medium": "cpu", "size_gib": 4}]}}}
    with pytest.raises(Exception) as e:
        make_scenario({"pools": [pool]})
    assert "pools.0.kv_cache.offload: KV offload tiers are modelled for one pool" in str(e.value)


def test_a_tier_smaller_than_a_block_is_one_named_error(capsys, tmp_path):
    from helpers import cli_error_line
    err = cli_error_line(capsys, ["run", "chat_multi_turn_offload", "-o", str(tmp_path), "-q",
                                  "--set", "kv_cache.offload.tiers.0.size_gib=null",
                                  "--set", "kv_cache.offload.tiers.0.cpu_bytes_to_use=1000"])
    # Llama-3.1-8B: 2 x 32 layers x 8 KV heads x 128 x 2 bytes x 16 tokens = 2,097,152 bytes
    assert err == ("servesim: error: chat_multi_turn_offload: kv_cache.offload: the cpu tier "
                   "(1000 bytes) is smaller than one KV block (2097152 bytes)")
