"""Who may hold a connection slot of ``distributor serve`` (issue 26, item 3).

``max_connections`` used to be one pool, first come first served: a client without a token that
kept reconnecting (or kept its connections idle, or sent heads slowly) held every slot, and other
producers' uploads were refused. Now each connection is in one of three states:

- **idle**: no request in progress (a fresh connection, a head still arriving, a kept-alive
  connection between requests);
- **anonymous**: a request in progress whose head carried no valid upload token (``/healthz``,
  ``/docs``, a ``401``);
- **authenticated**: a request in progress whose ``Authorization: Bearer`` token is one of the
  configured upload tokens.

and three caps hold:

1. the connections of one client address that are not authenticated: at most
   ``max_connections_per_client`` (0: no cap);
2. all connections that are not authenticated: at most ``max_connections - reserved_connections``,
   so ``reserved_connections`` slots are always left for requests with a valid token;
3. all connections: at most ``max_connections``.

A new connection is admitted by making room: when a cap would be exceeded, the oldest *idle*
connection is closed, of the new connection's own address for cap 1, else of the address holding
the most connections that are not authenticated (the oldest of those on a tie). A request in
progress is never cut. When no idle connection can be closed, the new connection is refused
(``503 too many connections``). One client can thus hold at most its cap, many clients together
at most the unreserved slots, and a producer with a token finds a slot as soon as its head is in.
The caps are enforced when a connection is admitted: a connection whose authenticated request
finished is idle again and may briefly take the unauthenticated count over its cap, until the
next admission closes the oldest idle one.

Everything here runs on the server's event loop thread: no locks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

IDLE = "idle"
ANONYMOUS = "anonymous"
AUTHENTICATED = "authenticated"


@dataclass
class _Holder:
    client: str
    state: str
    evict: Callable[[], None]


class ConnectionSlots:
    """The connection slots of one server. Counts are kept as connections change state, so
    admitting one costs a look at each client address at most."""

    def __init__(self, max_connections: int, per_client: int = 0, reserved: int = 0) -> None:
        self.max_connections = max_connections
        self.per_client = per_client
        #: connections without a valid token may hold at most this many
        self.unreserved = max(1, max_connections - reserved)
        self._holders: dict[object, _Holder] = {}
        #: connections that are not authenticated, per client address
        self._unauthenticated: dict[str, int] = {}
        self._unauthenticated_total = 0
        #: idle connections per client address, oldest idle first (dicts keep insertion order)
        self._idle: dict[str, dict[object, None]] = {}
        #: connections closed to make room, and connections refused (for tests and benchmarks)
        self.evicted = 0
        self.refused = 0

    def __len__(self) -> int:
        return len(self._holders)

    def unauthenticated(self, client: str | None = None) -> int:
        """Connections not authenticated (of ``client``, or all)."""
        return self._unauthenticated_total if client is None else self._unauthenticated.get(client, 0)

    def admit(self, conn: object, client: str, evict: Callable[[], None]) -> bool:
        """Register the new connection ``conn`` of ``client``, closing idle connections (calling
        their ``evict``) to make room; False when there is none to close: refuse ``conn``."""
        while True:
            if self.per_client > 0 and self._unauthenticated.get(client, 0) + 1 > self.per_client:
                victim = next(iter(self._idle.get(client, ())), None)
            elif (self._unauthenticated_total + 1 > self.unreserved
                  or len(self._holders) + 1 > self.max_connections):
                victim = self._idle_of_the_largest_client()
            else:
                break
            if victim is None:
                self.refused += 1
                return False
            holder = self._holders[victim]
            self.release(victim)
            self.evicted += 1
            holder.evict()
        self._holders[conn] = _Holder(client, IDLE, evict)
        self._count(client, 1)
        self._idle.setdefault(client, {})[conn] = None
        return True

    def _idle_of_the_largest_client(self) -> object | None:
        """The oldest idle connection of the address holding the most unauthenticated ones."""
        best: str | None = None
        for client, idle in self._idle.items():
            if idle and (best is None or self._unauthenticated[client] > self._unauthenticated[best]):
                best = client
        return next(iter(self._idle[best])) if best is not None else None

    def _count(self, client: str, delta: int) -> None:
        left = self._unauthenticated.get(client, 0) + delta
        if left:
            self._unauthenticated[client] = left
        else:
            self._unauthenticated.pop(client, None)
        self._unauthenticated_total += delta

    def _set(self, conn: object, state: str) -> None:
        holder = self._holders.get(conn)
        if holder is None or holder.state == state:
            return
        if holder.state == IDLE:
            self._forget_idle(conn, holder.client)
        if (holder.state == AUTHENTICATED) != (state == AUTHENTICATED):
            self._count(holder.client, 1 if holder.state == AUTHENTICATED else -1)
        holder.state = state
        if state == IDLE:
            self._idle.setdefault(holder.client, {})[conn] = None

    def _forget_idle(self, conn: object, client: str) -> None:
        idle = self._idle[client]
        idle.pop(conn, None)
        if not idle:
            del self._idle[client]

    def request_started(self, conn: object, *, authenticated: bool) -> None:
        """``conn`` received a complete request head, with a valid upload token or without."""
        self._set(conn, AUTHENTICATED if authenticated else ANONYMOUS)

    def request_finished(self, conn: object) -> None:
        """``conn``'s response was sent: it is idle again (and the youngest idle one)."""
        self._set(conn, IDLE)

    def release(self, conn: object) -> None:
        """``conn`` is gone."""
        holder = self._holders.pop(conn, None)
        if holder is None:
            return
        if holder.state == IDLE:
            self._forget_idle(conn, holder.client)
        if holder.state != AUTHENTICATED:
            self._count(holder.client, -1)
