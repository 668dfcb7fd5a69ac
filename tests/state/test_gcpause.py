"""The collector pause used while parsing large state files and planning large manifests."""

from __future__ import annotations

import gc

import pytest

from distributor_core.gcpause import gc_paused
from distributor_core.state import codec


def test_pause_disables_then_restores() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():  # nested: the inner block must not re-enable early
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_pause_restores_after_an_error_and_can_be_skipped() -> None:
    with pytest.raises(ValueError), gc_paused():
        raise ValueError("boom")
    assert gc.isenabled()
    with gc_paused(enabled=False):
        assert gc.isenabled()


def test_an_invalid_large_state_still_restores_the_collector() -> None:
    data = b'{"schema_version": 2, "pipeline_id": "' + b"x" * codec.LARGE_DOCUMENT + b'"}'
    with pytest.raises(codec.StateError):
        codec.parse_state_document(data)
    assert gc.isenabled()


def test_objects_made_during_a_pause_join_the_oldest_generation_and_cycles_are_still_collected() -> None:
    import weakref

    class Node:
        pass

    gc.collect()
    with gc_paused():
        made = [Node() for _ in range(1000)]
        cycle = Node()
        cycle.self = cycle
        alive = weakref.ref(cycle)
        del cycle
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert gc.get_count()[0] < 100  # not 1,000+ young objects waiting for a young collection
    assert alive() is not None  # the cycle waits for a full collection ...
    gc.collect()
    assert alive() is None  # ... which finds it
    assert len(made) == 1000


def test_objects_someone_froze_stay_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with gc_paused():
            _ = [object() for _ in range(10)]
        assert gc.get_freeze_count() == frozen and gc.isenabled()
    finally:
        gc.unfreeze()
