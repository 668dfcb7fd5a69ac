"""What a publication run is asked to do (:class:`RunOptions`), its progress events, and the
destination storages it opens once per run (:class:`DestinationPool`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from distributor_core import __version__
from distributor_core.config import Destination, Environment, Pipeline
from distributor_core.storage.base import Storage
from distributor_core.storage.errors import StorageError
from distributor_core.storage.factory import open_destination_storage
from distributor_core.timefmt import Clock

if TYPE_CHECKING:
    from distributor_core.execute.executor import Progress


class RunSelectionError(ValueError):
    """The selection of a run is not allowed (for example ``--force`` on several destinations)."""


class RunEvent(msgspec.Struct, frozen=True):
    """Progress notification: ``kind`` is ``validate``, ``publish`` or ``done``."""

    kind: str
    pipeline_id: str
    destination_id: str = ""
    bundle_path: str = ""
    progress: Progress | None = None
    bytes_done: int = 0


EventCallback = Callable[[RunEvent], None]


class RunOptions(msgspec.Struct):
    dry_run: bool = False
    force: bool = False
    republish: bool = False
    pipeline_id: str | None = None
    destination_id: str | None = None
    bundle_path: str | None = None
    clock: Clock | None = None
    version: str = __version__
    holder: str | None = None
    events: EventCallback | None = None
    lock_wait: float = 30.0


class DestinationPool:
    """Opens each destination's storage once per run (one SFTP connection reused) and closes all."""

    def __init__(self, env: Environment, *, dry_run: bool) -> None:
        self.env = env
        self.dry_run = dry_run
        self._open: dict[tuple[str, str], Storage | StorageError | Exception] = {}

    def get(self, pipeline: Pipeline, destination: Destination) -> Storage:
        key = (pipeline.id, destination.id)
        if key not in self._open:
            try:
                self._open[key] = open_destination_storage(destination, self.env, dry_run=self.dry_run)
            except Exception as exc:  # remembered so every bundle reports the same failure
                self._open[key] = exc
        value = self._open[key]
        if isinstance(value, Exception):
            raise value
        return value

    def close(self) -> None:
        for value in self._open.values():
            if isinstance(value, Storage):
                try:
                    value.close()
                except Exception:
                    pass
        self._open.clear()

    def __enter__(self) -> DestinationPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
