"""The validation cache of local sources (issue 17, P3): which file identities last hashed to which
sha256, so a re-run over an unchanged source need not read every file again.

An entry is keyed by the file's storage path below the source root and holds its identity
(``st_dev``, ``st_ino``, ``st_size``, ``st_mtime_ns``, ``st_ctime_ns``, as git's index does) and
the sha256 its bytes had. Validation trusts an entry only when every identity field equals the
file's current ``lstat`` *and* the manifest records the same size and sha256; anything else is
hashed as without a cache. A ``write``, ``truncate`` or rename changes a file's ctime (which no
user call can set back), so a file changed that way, replaced, or restored with
``touch``/``os.utime`` is hashed again. A write through a shared memory map is the exception: the
kernel stamps mtime and ctime when a clean page is first written, not again while the page stays
dirty (until it is written back), so bytes changed through a map that was already dirty keep the
stamps (the docs say so; such sources turn the cache off).

Racily clean entries (git's term): a file changed within the same timestamp tick as the moment its
identity was taken would keep an identical stamp. So an entry is recorded, and trusted, only when
the file's mtime and ctime are older than the moment validation began (``checked_ns``, stored in
the cache) by a margin: :data:`SUBSECOND_MARGIN_NS` where both stamps have sub-second parts (a
file system with fine timestamps; the margin covers the kernel's coarse clock and granularities up
to a large fraction of it), :data:`WHOLE_SECOND_MARGIN_NS` otherwise (1 s or 2 s granularity: FAT,
ext3, HFS+, some network file systems). A cache whose ``checked_ns`` lies in the future (the clock
went back) is ignored.

Storage: one file per source root, ``<cache dir>/validation/<sha256 of the absolute root>``, where
the cache dir is ``$DISTRIBUTOR_CACHE_DIR``, else ``$XDG_CACHE_HOME/distributor``, else
``~/.cache/distributor``; msgpack (msgspec's typed decoder: a 10,000-entry cache loads in a few
ms), written to a temporary and renamed into place, holding only the files of the last run's
validation. Any problem reading or writing it (missing, corrupt, another root's, unwritable) is
ignored: validation then hashes as without a cache, and the run never fails because of it.
``DISTRIBUTOR_VALIDATION_CACHE=off`` (or a pipeline's ``validation.cache: false``) turns it off.

Its location is trusted only when it is private (issue 26, item 7): the cache directory, its
``validation/`` directory and the cache file must each be owned by the current user, not writable
by group or others, and not a symbolic link (each is opened with ``O_NOFOLLOW`` below a
descriptor of its checked parent, and checked with ``fstat``; the file must be a regular file).
Anything else is ignored with a warning (:attr:`ValidationCache.warnings`), as if there were no
cache: nothing is read from it and nothing is written there. Directories above the cache
directory (``~/.cache``) are not checked.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import stat
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "CACHE_DIR_ENV",
    "SUBSECOND_MARGIN_NS",
    "SWITCH_ENV",
    "WHOLE_SECOND_MARGIN_NS",
    "ValidationCache",
    "cache_dir",
    "cache_file",
    "enabled_by_env",
]

#: overrides the cache directory (``<dir>/validation/...``)
CACHE_DIR_ENV = "DISTRIBUTOR_CACHE_DIR"
#: ``off`` (also ``0``, ``false``, ``no``) turns the validation cache off for every pipeline
SWITCH_ENV = "DISTRIBUTOR_VALIDATION_CACHE"
_OFF = frozenset({"off", "0", "false", "no"})

#: margin for files whose stamps have sub-second parts (nanosecond file systems)
SUBSECOND_MARGIN_NS = 1_000_000_000
#: margin for files with whole-second stamps (1 s or 2 s timestamp granularity)
WHOLE_SECOND_MARGIN_NS = 3_000_000_000
_SECOND = 1_000_000_000

#: bumped whenever the file layout changes (an older file is then ignored)
FORMAT = 1
VALIDATION_DIR = "validation"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
#: a cache file larger than this is not read
MAX_FILE_SIZE = 1 << 30


class _Untrusted(Exception):
    """The cache location may not be trusted; ``str()`` says why (the warning)."""


def _problem(info: os.stat_result, what: str, path: Path) -> str | None:
    """Why an opened cache directory or file may not be trusted, or None."""
    if info.st_uid != os.geteuid():
        return f"validation cache {what} {path} is owned by another user (uid {info.st_uid})"
    if info.st_mode & 0o022:
        return f"validation cache {what} {path} is writable by group or others (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def _open_checked(name: str | Path, flags: int, what: str, path: Path, *, dir_fd: int | None = None,
                  directory: bool = True) -> int:
    """Open ``name`` without following a symbolic link and check it (:func:`_problem`); raises
    :class:`_Untrusted` for a link or an entry another user could have written, and ``OSError``
    when it cannot be used (missing, not a directory or not a regular file: ignored silently, like
    any unusable cache)."""
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            try:
                is_link = stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
            except OSError:
                is_link = False
            if is_link:
                raise _Untrusted(f"validation cache {what} {path} is a symbolic link") from None
        raise
    try:
        info = os.fstat(fd)
        problem = _problem(info, what, path)
        if problem is None and not (stat.S_ISDIR(info.st_mode) if directory else stat.S_ISREG(info.st_mode)):
            raise OSError(errno.ENOTDIR if directory else errno.EINVAL, "not usable as the cache")
    except OSError:
        os.close(fd)
        raise
    if problem is not None:
        os.close(fd)
        raise _Untrusted(problem)
    return fd

#: (st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)
Identity = tuple[int, int, int, int, int]
#: the identity followed by the sha256 (``sha256:<hex>``, as the manifest records it)
_Entry = tuple[int, int, int, int, int, str]


@functools.cache
def _codec() -> tuple[Any, Any, Any, type[Exception]]:
    """The file's msgspec type, encoder, typed decoder and decode error, built on first use (a
    run over an empty source imports no msgspec)."""
    import msgspec

    class CacheFile(msgspec.Struct, array_like=True):
        format: int
        root: str
        checked_ns: int
        entries: dict[str, _Entry]

    return CacheFile, msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(CacheFile), msgspec.DecodeError


def encode(root: str, checked_ns: int, entries: Mapping[str, _Entry], *, format: int = FORMAT) -> bytes:
    """The bytes of a cache file (what :meth:`ValidationCache.save` writes)."""
    cache_type, encoder, _, _ = _codec()
    return encoder.encode(cache_type(format, root, checked_ns, dict(entries)))


def enabled_by_env(environ: Mapping[str, str] = os.environ) -> bool:
    """False when ``DISTRIBUTOR_VALIDATION_CACHE`` says ``off``."""
    return environ.get(SWITCH_ENV, "").strip().lower() not in _OFF


def cache_dir(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The distributor cache directory, or None when there is no usable one."""
    explicit = environ.get(CACHE_DIR_ENV, "")
    if explicit:
        return Path(explicit)
    xdg = environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):  # the XDG spec: a relative value is ignored
        return Path(xdg) / "distributor"
    try:
        return Path.home() / ".cache" / "distributor"
    except (RuntimeError, KeyError, OSError):
        return None


def cache_file(root: str, environ: Mapping[str, str] = os.environ) -> Path | None:
    """Where the cache of the source root ``root`` (an absolute path) lives."""
    base = cache_dir(environ)
    if base is None:
        return None
    name = hashlib.sha256(os.fsencode(root)).hexdigest()
    return base / "validation" / name


def _margin(mtime_ns: int, ctime_ns: int) -> int:
    if mtime_ns % _SECOND and ctime_ns % _SECOND:
        return SUBSECOND_MARGIN_NS
    return WHOLE_SECOND_MARGIN_NS


def settled(identity: Identity, checked_ns: int) -> bool:
    """True when the stamps of ``identity`` are older than ``checked_ns`` by the safety margin
    (a change after ``checked_ns`` cannot leave them as they are)."""
    mtime_ns, ctime_ns = identity[3], identity[4]
    limit = checked_ns - _margin(mtime_ns, ctime_ns)
    return mtime_ns < limit and ctime_ns < limit


class ValidationCache:
    """The cache of one source root for one run: what the last run recorded (``load``), what this
    run has seen (``trusted`` hits and ``record``-ed hashes), written back by ``save``.

    ``hits`` and ``misses`` count lookups (for reports and tests); ``warnings`` says why a cache
    location was ignored."""

    __slots__ = ("_new", "_old", "_stored_ns", "checked_ns", "file", "hits", "misses", "root", "warnings")

    def __init__(self, root: str, file: Path | None, *, checked_ns: int | None = None) -> None:
        self.root = root
        self.file = file
        #: what the last run recorded; None until first needed (read from ``file`` then)
        self._old: dict[str, _Entry] | None = None
        self._new: dict[str, _Entry] = {}
        #: ``checked_ns`` of the stored cache (its entries must have settled by then)
        self._stored_ns = 0
        #: this run's reference moment: taken before any file of this run is looked at
        self.checked_ns = time.time_ns() if checked_ns is None else checked_ns
        self.hits = 0
        self.misses = 0
        #: why the cache's location was not trusted (each once), for the run's report
        self.warnings: list[str] = []

    @classmethod
    def load(cls, root: str, environ: Mapping[str, str] = os.environ) -> ValidationCache:
        """The cache of ``root`` as the last run left it (read when first consulted); empty when
        there is none or it cannot be used (never raises for a bad file)."""
        root = os.path.abspath(root)
        return cls(root, cache_file(root, environ))

    def _entries(self) -> dict[str, _Entry]:
        old = self._old
        if old is None:
            old = self._old = self._read()
        return old

    def _warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def _open_validation_dir(self, *, create: bool) -> int | None:
        """A descriptor of the checked ``validation/`` directory holding :attr:`file` (made, with
        the cache directory, when ``create``), or None (missing, or untrusted: warned)."""
        assert self.file is not None
        validation = self.file.parent
        base = validation.parent
        try:
            if create:
                base.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.mkdir(base, 0o700)
                except FileExistsError:
                    pass
            base_fd = _open_checked(base, _DIR_FLAGS, "directory", base)
            try:
                if create:
                    try:
                        os.mkdir(VALIDATION_DIR, 0o700, dir_fd=base_fd)
                    except FileExistsError:
                        pass
                return _open_checked(VALIDATION_DIR, _DIR_FLAGS, "directory", validation, dir_fd=base_fd)
            finally:
                os.close(base_fd)
        except _Untrusted as exc:
            self._warn(f"{exc}; ignored")
        except OSError:
            pass
        return None

    def _read(self) -> dict[str, _Entry]:
        if self.file is None:
            return {}
        directory = self._open_validation_dir(create=False)
        if directory is None:
            return {}
        try:
            fd = _open_checked(self.file.name, _READ_FLAGS, "file", self.file, dir_fd=directory, directory=False)
        except _Untrusted as exc:
            self._warn(f"{exc}; ignored")
            return {}
        except OSError:
            return {}
        finally:
            os.close(directory)
        try:
            with os.fdopen(fd, "rb") as stream:
                data = stream.read(MAX_FILE_SIZE)
        except OSError:
            return {}
        _, _, decoder, decode_error = _codec()
        try:
            stored = decoder.decode(data)
        except (decode_error, ValueError, TypeError):
            return {}
        if stored.format != FORMAT or stored.root != self.root or stored.checked_ns > self.checked_ns:
            return {}  # another layout, a hash collision, or the clock went back
        self._stored_ns = stored.checked_ns
        return stored.entries  # each entry's margin is checked when it is looked up

    def __len__(self) -> int:
        """Entries of the stored cache that may be trusted."""
        entries = self._entries()
        return sum(1 for entry in entries.values() if settled(entry, self._stored_ns))

    def trusted(self, path: str, identity: Identity | None, size: object, sha256: object) -> bool:
        """True when ``path`` last hashed to ``sha256`` with exactly this ``identity`` (and
        ``size``); the entry is then kept for the next run."""
        if identity is not None:
            entry = self._entries().get(path)
            if (
                entry is not None
                and entry[:5] == identity
                and entry[2] == size
                and entry[5] == sha256
                and settled(identity, self._stored_ns)
            ):
                self._new[path] = entry
                self.hits += 1
                return True
        self.misses += 1
        return False

    def untrusted(
        self, paths: Sequence[str], identities: Sequence[Identity | None], records: Sequence[Any]
    ) -> list[int]:
        """Indexes of the files that must be hashed: :meth:`trusted` for each path, its current
        identity and its manifest record (``size``, ``sha256``), in one pass."""
        entries = self._entries()
        new = self._new
        subsecond = self._stored_ns - SUBSECOND_MARGIN_NS
        whole = self._stored_ns - WHOLE_SECOND_MARGIN_NS
        pending: list[int] = []
        for index, (path, identity, record) in enumerate(zip(paths, identities, records, strict=True)):
            entry = entries.get(path) if identity is not None else None
            if entry is not None and entry[:5] == identity and entry[2] == record.size and entry[5] == record.sha256:
                mtime_ns, ctime_ns = entry[3], entry[4]
                limit = subsecond if mtime_ns % _SECOND and ctime_ns % _SECOND else whole
                if mtime_ns < limit and ctime_ns < limit:  # settled(entry, stored_ns), inline
                    new[path] = entry
                    continue
            pending.append(index)
        self.hits += len(paths) - len(pending)
        self.misses += len(pending)
        return pending

    def record(self, path: str, identity: Identity | None, sha256: str) -> None:
        """``path``, whose identity was ``identity`` before it was read, hashed to ``sha256``."""
        if identity is not None and settled(identity, self.checked_ns):
            self._new[path] = (*identity, sha256)

    def save(self) -> bool:
        """Write what this run saw (hits and recorded hashes) in place of the old cache; False
        when it could not be written (ignored: the next run hashes again), or the location is not
        trusted (warned). Every step goes through a descriptor of the checked ``validation/``
        directory: nothing is written through a symbolic link."""
        file = self.file
        if file is None:
            return False
        directory = self._open_validation_dir(create=bool(self._new))
        if directory is None:
            return not self._new and not self.warnings  # nothing to keep and nothing there
        try:
            if not self._new:  # nothing seen (no bundle, every file changed): nothing to keep
                try:
                    os.unlink(file.name, dir_fd=directory)
                except FileNotFoundError:
                    pass
                return True
            return self._write(directory, file.name)
        except OSError:
            return False
        finally:
            os.close(directory)

    def _write(self, directory: int, name: str) -> bool:
        data = encode(self.root, self.checked_ns, self._new)
        # mkstemp's rule (exclusive create, 0600, a random name) without importing tempfile,
        # which brings shutil, bz2 and lzma onto every run's start-up path
        temp = f".tmp-{os.urandom(8).hex()}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600,
                     dir_fd=directory)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(temp, name, src_dir_fd=directory, dst_dir_fd=directory)
        except OSError:
            try:
                os.unlink(temp, dir_fd=directory)
            except OSError:
                pass
            return False
        return True
