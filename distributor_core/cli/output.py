"""Rendering shared by every command: the JSON envelope, ``Label: key=value`` text lines,
``distributor: `` diagnostics and terminal-only progress (interfaces §2.2–2.3, resolutions C4)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TextIO

from distributor_core.jsonfmt import dumps_indented
from distributor_core.textfmt import format_value, record_line

PROGRAM = "distributor"

__all__ = ["PROGRAM", "Output", "Progress", "envelope", "format_value", "human_bytes", "record_line"]

def envelope(
    command: str,
    result: Any,
    *,
    ok: bool = True,
    error: str | None = None,
    warnings: list[str] | None = None,
    refusal: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON envelope: ``command``, ``ok``, ``error``, ``refusal`` (where and how to fix a
    failure that stopped the command) and ``warnings`` (omitted when empty), then ``result``."""
    doc: dict[str, Any] = {"command": command, "ok": ok}
    if error:
        doc["error"] = error
    if refusal:
        doc["refusal"] = refusal
    if warnings:
        doc["warnings"] = list(warnings)
    doc["result"] = result
    return doc


def _is_tty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):
        return False


def human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover - loop always returns


class Progress:
    """A one-line byte counter on stderr, redrawn in place at most every ``interval`` seconds.

    Disabled (every call a no-op) unless stderr is a terminal and the format is text.
    """

    def __init__(
        self,
        stream: TextIO,
        label: str,
        total: int | None,
        *,
        enabled: bool,
        interval: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.label = label
        self.total = total
        self.enabled = enabled
        self.done = 0
        self._interval = interval
        self._clock = clock
        self._last = float("-inf")
        self._drawn = False

    def __call__(self, count: int) -> None:
        self.advance(count)

    def advance(self, count: int) -> None:
        if not self.enabled:
            return
        self.done += count
        now = self._clock()
        if now - self._last < self._interval and self.done != self.total:
            return
        self._last = now
        if self.total:
            percent = min(100, self.done * 100 // self.total)
            text = f"{self.label}: {human_bytes(self.done)} / {human_bytes(self.total)} ({percent}%)"
        else:
            text = f"{self.label}: {human_bytes(self.done)}"
        self.stream.write(f"\r{PROGRAM}: {text}\x1b[K")
        self.stream.flush()
        self._drawn = True

    def finish(self) -> None:
        """Erase the progress line (only if one was drawn)."""
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()


class Output:
    """Writers bound to one command run and its ``--format``."""

    def __init__(self, command: str, fmt: str, stdout: TextIO, stderr: TextIO) -> None:
        self.command = command
        self.format = fmt
        self.stdout = stdout
        self.stderr = stderr

    @property
    def json(self) -> bool:
        return self.format == "json"

    def line(self, text: str) -> None:
        self.stdout.write(text + "\n")

    def record(self, label: str, **fields: Any) -> None:
        self.line(record_line(label, fields))

    def diagnostic(self, message: str) -> None:
        """``distributor: <message>`` on stderr."""
        self.stderr.write(f"{PROGRAM}: {message}\n")
        self.stderr.flush()

    def emit_json(self, document: Any) -> None:
        self.stdout.write(dumps_indented(document))

    def emit_envelope(
        self,
        result: Any,
        *,
        ok: bool = True,
        error: str | None = None,
        warnings: list[str] | None = None,
        refusal: dict[str, Any] | None = None,
    ) -> None:
        self.emit_json(envelope(self.command, result, ok=ok, error=error, warnings=warnings, refusal=refusal))

    def progress_enabled(self) -> bool:
        return not self.json and _is_tty(self.stderr)

    def progress(self, label: str, total: int | None = None) -> Progress:
        return Progress(self.stderr, label, total, enabled=self.progress_enabled())
