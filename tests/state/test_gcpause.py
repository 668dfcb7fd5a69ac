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
