"""The executor branches on the destination's declared capabilities (issue 16 item 4): staging
under temporaries only with ``atomic_rename``, writing them ``in_place`` only with
``in_place_writes``, writing several outputs at once within ``parallel_writes``, and refusing a
destination that cannot write state conditionally."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from distributor_core import paths as lp
from distributor_core.storage.capabilities import Capabilities, Feature
from distributor_core.storage.local import LocalStorage
from tests.engine.conftest import new_env

MiB = 1024 * 1024
LOCAL = LocalStorage.capabilities


class Recording(LocalStorage):
    """Local storage declaring ``capabilities`` of the test's choice; records every write."""

    def __init__(self, root: Path, capabilities: Capabilities) -> None:
        super().__init__(root, create=True)
        self._declared = capabilities
        self.writes: list[tuple[str, bool, str]] = []
        self.renames: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    @property  # type: ignore[override]
    def capabilities(self) -> Capabilities:
        return self._declared

    def write_stream(self, path: str, chunks: Any, **kwargs: Any) -> Any:
        with self._lock:
            self.writes.append((path, kwargs.get("in_place", False), threading.current_thread().name))
        return super().write_stream(path, chunks, **kwargs)

    def rename(self, src: str, dst: str, *, overwrite: bool) -> None:
        self.renames.append((src, dst))
        super().rename(src, dst, overwrite=overwrite)

    def output_writes(self) -> list[tuple[str, bool, str]]:
        internal = (lp.STATE_FILE_NAME, lp.JOURNAL_NAME, lp.LOCK_NAME)
        return [w for w in self.writes if lp.basename(w[0]) not in internal]


FILES = {"report.md": b"# Report\n", "data/summary.txt": b"Summary\n"}


def _publish(tmp_path: Path, capabilities: Capabilities, files: dict[str, bytes] = FILES) -> tuple[Any, Recording]:
    env = new_env(tmp_path)
    manifest = env.source(files)
    destination = Recording(env.dst_root, capabilities)
    outcome = env.publish(env.request(manifest, dst=destination))
    return outcome, destination


def test_declared_in_place_writes_stage_outputs_in_place(tmp_path: Path) -> None:
    outcome, destination = _publish(tmp_path, LOCAL)
    assert outcome.status == "completed", outcome.error
    writes = destination.output_writes()
    assert [lp.basename(path).startswith(lp.TEMP_PREFIX) for path, _, _ in writes] == [True, True]
    assert all(in_place for _, in_place, _ in writes)
    assert sorted(dst for _, dst in destination.renames) == ["bundle/data/summary.txt", "bundle/report.md"]
    internal = [w for w in destination.writes if w not in writes]  # lock, journal, state
    assert internal and not any(in_place for _, in_place, _ in internal)


def test_without_in_place_writes_temporaries_take_the_ordinary_write(tmp_path: Path) -> None:
    outcome, destination = _publish(tmp_path, LOCAL.without(Feature.IN_PLACE_WRITES))
    assert outcome.status == "completed", outcome.error
    writes = destination.output_writes()
    assert [lp.basename(path).startswith(lp.TEMP_PREFIX) for path, _, _ in writes] == [True, True]
    assert not any(in_place for _, in_place, _ in destination.writes)
    assert (tmp_path / "dst" / "bundle" / "report.md").read_bytes() == FILES["report.md"]


def test_without_atomic_rename_outputs_are_written_to_their_final_names(tmp_path: Path) -> None:
    outcome, destination = _publish(tmp_path, LOCAL.without(Feature.ATOMIC_RENAME))
    assert outcome.status == "completed", outcome.error
    assert sorted(path for path, _, _ in destination.output_writes()) == ["bundle/data/summary.txt", "bundle/report.md"]
    assert not any(in_place for _, in_place, _ in destination.writes)
    assert destination.renames == []


def test_a_destination_without_conditional_writes_is_refused_before_any_output(tmp_path: Path) -> None:
    outcome, destination = _publish(tmp_path, LOCAL.without(Feature.CONDITIONAL_WRITES))
    assert outcome.status == "failed"
    assert outcome.error == (
        "local destination " + destination.root_display + " cannot write .distributor.json conditionally "
        "(the storage does not declare conditional_writes)"
    )
    assert destination.output_writes() == []
    assert not (tmp_path / "dst" / "bundle" / lp.STATE_FILE_NAME).exists()


def test_large_outputs_are_written_on_the_declared_number_of_threads(tmp_path: Path) -> None:
    large = {f"f{n}.bin": bytes([n]) * (2 * MiB) for n in range(4)}
    outcome, destination = _publish(tmp_path, LOCAL, large)
    assert outcome.status == "completed", outcome.error
    threads = {name for _, _, name in destination.output_writes()}
    assert threads == {"distributor-write-0", "distributor-write-1"}
    outcome, destination = _publish(tmp_path / "sequential", Capabilities(LOCAL.flags), large)
    assert outcome.status == "completed", outcome.error
    assert {name for _, _, name in destination.output_writes()} == {threading.main_thread().name}


def test_small_outputs_stay_on_one_thread_whatever_is_declared(tmp_path: Path) -> None:
    outcome, destination = _publish(tmp_path, LOCAL, {f"f{n}.txt": b"x" * 100 for n in range(8)})
    assert outcome.status == "completed", outcome.error
    assert {name for _, _, name in destination.output_writes()} == {threading.main_thread().name}
