"""Requests being received, per token, and the idempotency scopes they hold (resolutions D3):
the queue checks every upload request passes before its body is read, shared by the local and
the shared-staging upload services. No lock of its own: the owner calls it under its lock, with
the unfinished uploads it counts under that same lock."""

from __future__ import annotations

from collections.abc import Callable

from distributor_core.server import errors

#: ``(token id, pipeline id, idempotency key)``
Scope = tuple[str, str, str]


class Reservations:
    def __init__(self) -> None:
        self.total = 0
        self._by_token: dict[str, int] = {}
        self._inflight: set[Scope] = set()

    def take(
        self, token_id: str, scope: Scope | None, *, queued: int, queued_of_token: Callable[[], int],
        queue_size: int, token_share: int,
    ) -> None:
        """Admit a request (``queued`` unfinished uploads besides the requests being received):
        ``409`` while its scope is being received, ``503`` when the queue or the token's share is
        full; otherwise hold a slot and the scope until :meth:`give_back`."""
        if scope is not None and scope in self._inflight:
            raise errors.key_in_flight()
        if self.total + queued >= queue_size:
            raise errors.queue_full()
        if self._by_token.get(token_id, 0) + queued_of_token() >= token_share:
            raise errors.token_share_full()
        if scope is not None:
            self._inflight.add(scope)
        self._count(token_id, 1)

    def settle(self, token_id: str) -> None:
        """A request's upload was admitted: it no longer counts as being received (its record does)."""
        self._count(token_id, -1)

    def give_back(self, token_id: str, scope: Scope | None, *, reserved: bool) -> None:
        """A request ended: free its slot (unless :meth:`settle` did) and its scope."""
        if reserved:
            self._count(token_id, -1)
        if scope is not None:
            self._inflight.discard(scope)

    def _count(self, token_id: str, delta: int) -> None:
        self.total += delta
        left = self._by_token.get(token_id, 0) + delta
        if left:
            self._by_token[token_id] = left
        else:
            self._by_token.pop(token_id, None)
