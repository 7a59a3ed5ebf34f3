"""gc_frozen keeps the objects that exist when it starts out of the collector's scans for its
block and hands them back after it (also after an error); a caller's own freeze is left
alone. gc_paused also switches automatic collection off for its block only. freeze_for_exit
freezes for good."""
import gc

import pytest

from simulator.base.gc_freeze import freeze_for_exit, gc_frozen, gc_paused


@pytest.fixture(autouse=True)
def _unfrozen():
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_frozen_only_inside_the_block():
    held = [object() for _ in range(3)]  # noqa: F841 - alive objects to freeze
    assert gc.get_freeze_count() == 0
    with gc_frozen():
        inside = gc.get_freeze_count()
    assert inside > 0 and gc.get_freeze_count() == 0


def test_unfrozen_after_an_error():
    with pytest.raises(RuntimeError), gc_frozen():
        assert gc.get_freeze_count() > 0
        raise RuntimeError("boom")
    assert gc.get_freeze_count() == 0


def test_a_callers_freeze_is_kept():
    gc.freeze()
    before = gc.get_freeze_count()
    with gc_frozen():
        pass
    assert gc.get_freeze_count() == before > 0  # not unfrozen by the block


def test_freeze_for_exit_is_not_undone():
    freeze_for_exit()
    assert gc.get_freeze_count() > 0


def test_paused_disables_collection_inside_the_block_only():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled() and gc.get_freeze_count() > 0
    assert gc.isenabled() and gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_paused_keeps_a_callers_disabled_collector():
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the caller's choice, not re-enabled by the block
    finally:
        gc.enable()
