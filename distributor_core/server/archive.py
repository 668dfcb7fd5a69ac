"""Safe extraction of an uploaded tar or gzip-compressed tar into a fresh directory
(interfaces §3.6, resolutions D1).

Safe by construction, not by filtering a general-purpose extractor (Python 3.11's tarfile
filters have known bypasses): members are read one by one from a streaming :mod:`tarfile`
reader and only regular files and directories are ever created, each with
``O_EXCL``/``O_NOFOLLOW`` or ``mkdir`` relative to a directory descriptor this module created
itself, at a name that passed the bundle path rules. Links, devices, FIFOs, sparse files and every
other type are refused; so are absolute names, ``..``, backslashes, duplicates, names that collide
with a file or directory already extracted.

Every limit of :class:`~distributor_core.config.UploadLimits` is checked while the archive
streams, before anything of an entry is read or written: entry count, directories named or
implied (remembered in a tree of path segments, so memory grows with the number of directories
and the length of their own names, never with the length of every ancestor path), path depth,
segment and path length, the PAX/GNU extension headers of one entry, their bytes and how many
are chained (before tarfile reads them: a subclass of ``TarInfo`` checks each header block first,
so a chain of empty headers cannot make tarfile's reader recurse until ``RecursionError``) and the
size of ``manifest.json``; so is ``max_bytes`` of file content and of decompressed stream beyond
a small allowance per entry, and, when the caller gives one, whether a file's path fits the
server's file system where it is staged and published (``path_check``). ``extractall`` and
tarfile filters are never used.

After extraction the archive must hold exactly one root-level ``manifest.json`` and exactly the
files it lists, and every listed file must match its size and sha256. Each file is hashed as it is
written (this module created it, in a private tree, and nothing else writes there), so the check
reads nothing again; a file that does not match is checked once more the way
:func:`~distributor_core.bundle.validate_bundle` checks it, so the error is the one it gives.
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import os
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import msgspec

from distributor_core import paths as lp
from distributor_core.bundle import (
    DIGEST_PREFIX,
    MANIFEST_NAME,
    BundleError,
    Manifest,
    ManifestFile,
    check_upload_id,
    load_manifest,
    validate_manifest,
    verify,
)
from distributor_core.bundle.disk import iter_fd, open_regular
from distributor_core.config import UploadLimits
from distributor_core.jsonfmt import go_json_string

DEFAULT_LIMITS = UploadLimits()
MAX_ENTRIES = DEFAULT_LIMITS.max_entries
#: characters of an entry name quoted in an error message
SHOWN_NAME = 100
#: decompressed tar bytes allowed per entry on top of file content (header, PAX data, padding)
HEADER_ALLOWANCE = 2048
CHUNK = 1024 * 1024
#: ``path_check(bundle path)``: why a file there cannot be staged or published here, or None
PathCheck = Callable[[str], "str | None"]

_REGULAR = frozenset({tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.CONTTYPE})
_REFUSED_TYPES = {
    tarfile.SYMTYPE: "symbolic link",
    tarfile.LNKTYPE: "hard link",
    tarfile.CHRTYPE: "character device",
    tarfile.BLKTYPE: "block device",
    tarfile.FIFOTYPE: "fifo",
    tarfile.GNUTYPE_SPARSE: "sparse file",
}
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class StagingError(Exception):
    """An upload was refused while staging; ``str()`` is the HTTP error message."""

    status_code = 400

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class ArchiveError(StagingError):
    """Malformed archive, unsafe/extra/missing entries, too many entries (400)."""

    def __str__(self) -> str:
        return f"invalid upload archive: {self.detail}"


class InvalidBundleError(StagingError):
    """The extracted bundle is not a valid source bundle (400)."""

    def __str__(self) -> str:
        return f"invalid source bundle: {self.detail}"


class TooLargeError(StagingError):
    """The body, the decompressed stream or the extracted content is over the limit (413)."""

    status_code = 413

    def __init__(self, detail: str = "") -> None:
        super().__init__(detail)

    def __str__(self) -> str:
        return "upload exceeds maximum size"


class _CappedReader:
    """A read-only stream that raises :class:`TooLargeError` past ``cap`` bytes."""

    def __init__(self, inner: BinaryIO, cap: int) -> None:
        self._inner = inner
        self._left = cap

    def read(self, size: int = -1) -> bytes:
        want = self._left + 1 if size is None or size < 0 else min(size, self._left + 1)
        data = self._inner.read(want)
        self._left -= len(data)
        if self._left < 0:
            raise TooLargeError("decompressed archive")
        return data


def _entry(name: str) -> str:
    shown = name if len(name) <= SHOWN_NAME else name[:SHOWN_NAME] + "..."
    return f"entry {go_json_string(shown)}"


def _limit(value: int, knob: str) -> str:
    return f"the limit is {value} (server.http.limits.{knob})"


#: types whose data is read into memory by tarfile as metadata of the next member
_EXTENSION_TYPES = frozenset({tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE, tarfile.GNUTYPE_LONGNAME,
                              tarfile.GNUTYPE_LONGLINK})


class _HeaderBudget:
    """Extension header bytes of the entry being read, and of global PAX headers (which tarfile
    merges into every later member, so they count for the whole archive); and how many extension
    headers are chained in front of the entry being read. tarfile reads each header of a chain
    by calling itself again, so a long chain (even of empty headers) would end in
    ``RecursionError``: the count is checked on each header block before tarfile goes on to the
    next one, so the recursion stays a few frames per allowed header deep."""

    def __init__(self, limit: int, max_count: int = DEFAULT_LIMITS.max_header_count) -> None:
        self.limit = limit
        self.max_count = max_count
        self.entry = 0
        self.count = 0
        self.globals = 0
        self.index = 1

    def charge(self, info: tarfile.TarInfo) -> None:
        if info.type not in _EXTENSION_TYPES:
            if info.type == tarfile.GNUTYPE_SPARSE:  # refused before its extension blocks are read
                raise ArchiveError(f"entry {self.index} is a sparse file; only regular files and directories "
                                   "are allowed")
            self.entry = 0
            self.count = 0
            self.index += 1
            return
        self.count += 1
        if self.count > self.max_count:
            raise ArchiveError(f"entry {self.index}: more than {self.max_count} extended headers in a row; "
                               f"{_limit(self.max_count, 'max_header_count')}")
        if info.size < 0:
            raise ArchiveError(f"entry {self.index} has an invalid extended header size")
        self.entry += info.size
        if info.type == tarfile.XGLTYPE:
            self.globals += info.size
        used = max(self.entry, self.globals)
        if used > self.limit:
            raise ArchiveError(f"entry {self.index}: extended headers of {used} bytes; "
                               f"{_limit(self.limit, 'max_header_size')}")


def _tarinfo_class(budget: _HeaderBudget) -> type[tarfile.TarInfo]:
    class BudgetedTarInfo(tarfile.TarInfo):
        # ``_proc_member`` is tarfile's documented extension point for subclasses (see its
        # comment in tarfile.py); the header block is parsed, its data not read yet.
        def _proc_member(self, tarfile: tarfile.TarFile) -> tarfile.TarInfo:  # type: ignore[override]
            budget.charge(self)
            return super()._proc_member(tarfile)  # type: ignore[misc]

    return BudgetedTarInfo


def _limits_problem(name: str, limits: UploadLimits) -> str | None:
    """The first limit of ``limits`` that the entry name ``name`` breaks, or ``None``."""
    encoded = len(name.encode("utf-8", "surrogatepass"))
    if encoded > limits.max_path_length:
        return f"path is {encoded} bytes; {_limit(limits.max_path_length, 'max_path_length')}"
    depth = name.count("/") + 1
    if depth > limits.max_path_depth:
        return f"path is {depth} levels deep; {_limit(limits.max_path_depth, 'max_path_depth')}"
    if encoded > limits.max_name_length:
        for segment in name.split("/"):
            size = len(segment.encode("utf-8", "surrogatepass"))
            if size > limits.max_name_length:
                return f"path segment of {size} bytes; {_limit(limits.max_name_length, 'max_name_length')}"
    return None


def _kind_problem(member: tarfile.TarInfo) -> str | None:
    if member.sparse is not None:
        return "sparse file"
    if member.type in _REGULAR or member.type == tarfile.DIRTYPE:
        return None
    return _REFUSED_TYPES.get(member.type, "unsupported entry type")


def _normalise(member: tarfile.TarInfo) -> str | None:
    """The bundle-relative name of a member, or ``None`` for an ignorable ``.``/``./`` entry."""
    name = member.name
    if member.type == tarfile.DIRTYPE:
        if name in (".", "./", ""):
            return None
        if name.endswith("/"):
            name = name[:-1]
    if name.startswith("./"):
        name = name[2:]
    return name


def _name_problem(name: str, *, is_file: bool) -> str | None:
    problem = lp.check_path(name)
    if problem:
        return problem
    if is_file and name == MANIFEST_NAME:
        return None
    return lp.check_bundle_path(name)


#: a file's place in :class:`_Dir` ``children``
_FILE = None
#: what ``children.get`` answers for a name not there
_MISSING = object()


class _Dir:
    """One directory of the archive's tree: its children by segment name (a ``_Dir``, or
    ``_FILE`` for a file), whether an entry named it, whether it was created on disk."""

    __slots__ = ("children", "made", "named")

    def __init__(self) -> None:
        self.children: dict[str, _Dir | None] = {}
        self.named = False
        self.made = False


class _Extractor:
    """Creates files below ``root`` through directory descriptors, never following links.

    Directory entries are only recorded (checked for conflicts); a directory is created when a
    file needs it, so empty or unlisted directories never reach the disk. Every directory named
    by an entry or implied as an ancestor of one is a node of a tree keyed by path segment, and
    counts against ``max_directories``: remembering one costs its own segment name, not its
    whole path. A file's directory is opened with one ``openat`` from the root once it exists
    (the tree is this module's own: every directory in it was made by ``mkdir`` here and nothing
    in it is a link), and missing segments are made one by one below the deepest existing one;
    the descriptor of the last file's directory stays open, so consecutive files of one
    directory cost one open each.
    """

    def __init__(self, root: Path, limits: UploadLimits) -> None:
        self.root = root
        self.limits = limits
        self.tree = _Dir()
        self.tree.made = True
        #: directories in ``tree`` (the root not counted)
        self.directories = 0
        self.files: dict[str, int] = {}
        #: "sha256:<hex>" of each file, hashed as it was written
        self.digests: dict[str, str] = {}
        os.mkdir(root, 0o700)
        self.root_fd = os.open(root, _DIR_FLAGS)
        #: (relative path, descriptor) of the last file's directory below the root
        self._last: tuple[str, int] | None = None

    def close(self) -> None:
        self._forget()
        os.close(self.root_fd)

    def _forget(self) -> None:
        if self._last is not None:
            os.close(self._last[1])
            self._last = None

    def _parent_of(self, name: str, segments: list[str]) -> _Dir:
        """The node of the directory holding ``name`` (whose segments are ``segments``),
        remembering every missing ancestor; a file in the way is a conflict."""
        node = self.tree
        for depth, segment in enumerate(segments[:-1]):
            child = node.children.get(segment, _MISSING)
            if child is _FILE:
                ancestor = "/".join(segments[: depth + 1])
                raise ArchiveError(f"{_entry(name)} conflicts with file {go_json_string(ancestor)}")
            if child is _MISSING:
                child = node.children[segment] = self._new_dir()
            node = child  # type: ignore[assignment]
        return node

    def _new_dir(self) -> _Dir:
        if self.directories >= self.limits.max_directories:
            raise ArchiveError(f"too many directories (more than {self.limits.max_directories}): "
                               "server.http.limits.max_directories")
        self.directories += 1
        return _Dir()

    def _open_dir(self, segments: list[str]) -> int:
        """A borrowed descriptor of the directory ``segments`` (``[]`` is the root), creating
        missing segments (every one of them is in the tree already)."""
        if not segments:
            return self.root_fd
        rel_dir = "/".join(segments)
        if self._last is not None and self._last[0] == rel_dir:
            return self._last[1]
        self._forget()
        nodes = []
        node = self.tree
        for segment in segments:
            node = node.children[segment]  # type: ignore[assignment,union-attr]
            nodes.append(node)
        existing = len(segments)
        while existing and not nodes[existing - 1].made:
            existing -= 1
        fd = os.open("/".join(segments[:existing]), _DIR_FLAGS, dir_fd=self.root_fd) if existing else self.root_fd
        try:
            for index in range(existing, len(segments)):
                os.mkdir(segments[index], 0o700, dir_fd=fd)
                nodes[index].made = True
                child = os.open(segments[index], _DIR_FLAGS, dir_fd=fd)
                if fd != self.root_fd:
                    os.close(fd)
                fd = child
        except BaseException:
            if fd != self.root_fd:
                os.close(fd)
            raise
        self._last = (rel_dir, fd)
        return fd

    def add_dir(self, name: str) -> None:
        segments = name.split("/")
        parent = self._parent_of(name, segments)
        node = parent.children.get(segments[-1], _MISSING)
        if node is _FILE:
            raise ArchiveError(f"{_entry(name)} conflicts with a file")
        if node is _MISSING:
            node = parent.children[segments[-1]] = self._new_dir()
        if node.named:  # type: ignore[union-attr]
            raise ArchiveError(f"duplicate {_entry(name)}")
        node.named = True  # type: ignore[union-attr]

    def add_file(self, name: str, size: int, source: BinaryIO | None) -> None:
        segments = name.split("/")
        if name in self.files:
            raise ArchiveError(f"duplicate {_entry(name)}")
        parent = self._parent_of(name, segments)
        if segments[-1] in parent.children:
            raise ArchiveError(f"{_entry(name)} conflicts with a directory")
        dir_fd = self._open_dir(segments[:-1])
        fd = os.open(segments[-1], _FILE_FLAGS, 0o600, dir_fd=dir_fd)
        parent.children[segments[-1]] = _FILE
        self.files[name] = size
        hasher = hashlib.sha256()
        try:
            written = 0
            while source is not None and written < size:
                chunk = _read_member(source, min(CHUNK, size - written))
                if not chunk:
                    raise ArchiveError(f"{_entry(name)} is truncated")
                hasher.update(chunk)
                view = memoryview(chunk)
                while view:
                    count = os.write(fd, view)
                    view = view[count:]
                written += len(chunk)
            if written != size:
                raise ArchiveError(f"{_entry(name)} is truncated")
            self.digests[name] = DIGEST_PREFIX + hasher.hexdigest()
        finally:
            os.close(fd)


def _read_member(source: BinaryIO, size: int) -> bytes:
    try:
        return source.read(size)
    except TooLargeError:
        raise
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise ArchiveError(_describe(exc)) from None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, gzip.BadGzipFile):
        return "not a gzip stream"
    if isinstance(exc, EOFError):
        return "archive is truncated"
    if isinstance(exc, zlib.error):
        return "corrupt gzip stream"
    if isinstance(exc, UnicodeError):
        return "entry name is not valid UTF-8"
    if isinstance(exc, tarfile.ReadError):
        text = str(exc)
        if text in ("empty file", "unexpected end of data"):
            return "archive is truncated" if text != "empty file" else "archive is empty"
        return "not a valid tar archive"
    return "not a valid tar archive"


def extract_bundle(
    archive: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    compressed: bool,
    max_bytes: int,
    max_entries: int | None = None,
    limits: UploadLimits = DEFAULT_LIMITS,
    path_check: PathCheck | None = None,
) -> Manifest:
    """Extract ``archive`` into the new directory ``dest`` and validate it as one source bundle.

    ``limits`` bounds the archive (``max_entries``, when given, overrides its entry count).
    ``path_check`` is asked about every file's bundle path before it is written, and answers
    why it cannot be staged or published on this server, or ``None``.
    Raises :class:`ArchiveError`, :class:`InvalidBundleError` or :class:`TooLargeError`; the
    caller removes ``dest`` on failure. ``dest`` must not exist. Nothing is fsynced here: the
    caller makes an accepted upload durable (``PipelineStaging.sync_bundle`` and ``settle``).
    """
    if max_entries is not None:
        limits = msgspec.structs.replace(limits, max_entries=max_entries)
    dest_path = Path(dest)
    extractor = _Extractor(dest_path, limits)
    try:
        with open(archive, "rb") as raw:
            stream: BinaryIO = gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw  # type: ignore[assignment]
            cap = max_bytes + HEADER_ALLOWANCE * (limits.max_entries + 2)
            _extract_members(_CappedReader(stream, cap), extractor, max_bytes=max_bytes, limits=limits,
                             path_check=path_check)
        return _check_bundle(dest_path, extractor)
    finally:
        extractor.close()


def _extract_members(
    stream: _CappedReader, extractor: _Extractor, *, max_bytes: int, limits: UploadLimits,
    path_check: PathCheck | None = None,
) -> None:
    budget = _HeaderBudget(limits.max_header_size, limits.max_header_count)
    try:
        tar = tarfile.open(  # noqa: SIM115 - closed by the ``with tar`` below
            fileobj=stream, mode="r|", encoding="utf-8", errors="strict",  # type: ignore[call-overload]
            tarinfo=_tarinfo_class(budget),
        )
    except (TooLargeError, ArchiveError):
        raise
    except (tarfile.TarError, EOFError, zlib.error, OSError, UnicodeError) as exc:
        raise ArchiveError(_describe(exc)) from None
    except RecursionError:  # bounded by max_header_count first; never a 500 all the same
        raise ArchiveError(f"entry {budget.index}: extended headers nested too deeply") from None
    entries = 0
    total = 0
    with tar:
        while True:
            try:
                member = tar.next()
            except (TooLargeError, ArchiveError):
                raise
            except (tarfile.TarError, EOFError, zlib.error, OSError, UnicodeError, ValueError) as exc:
                raise ArchiveError(_describe(exc)) from None
            except RecursionError:  # bounded by max_header_count first; never a 500 all the same
                raise ArchiveError(f"entry {budget.index}: extended headers nested too deeply") from None
            if member is None:
                return
            # a streaming reader never goes back: forget the members read so far (tarfile keeps
            # every TarInfo, PAX headers included, in ``members``)
            del tar.members[:]
            entries += 1
            if entries > limits.max_entries:
                raise ArchiveError(f"too many entries (more than {limits.max_entries}): "
                                   "server.http.limits.max_entries")
            name = _normalise(member)
            if name is None:
                continue
            problem = _limits_problem(name, limits)
            if problem:
                raise ArchiveError(f"{_entry(name)}: {problem}")
            kind = _kind_problem(member)
            if kind is not None:
                raise ArchiveError(f"{_entry(name)} is a {kind}; only regular files and directories are allowed")
            is_file = member.type != tarfile.DIRTYPE
            problem = _name_problem(name, is_file=is_file)
            if problem:
                raise ArchiveError(f"{_entry(name)}: {problem}")
            try:
                if not is_file:
                    extractor.add_dir(name)
                    continue
                if member.size < 0:
                    raise ArchiveError(f"{_entry(name)} has an invalid size")
                if name == MANIFEST_NAME and member.size > limits.max_manifest_size:
                    raise ArchiveError(f"{MANIFEST_NAME} is {member.size} bytes; "
                                       f"{_limit(limits.max_manifest_size, 'max_manifest_size')}")
                total += member.size
                if total > max_bytes:
                    raise TooLargeError("extracted content")
                if path_check is not None and (problem := path_check(name)):
                    raise ArchiveError(f"{_entry(name)}: {problem}")
                source = tar.extractfile(member) if member.size else None
                extractor.add_file(name, member.size, source)  # type: ignore[arg-type]
            except OSError as exc:
                if exc.errno == errno.ENAMETOOLONG:
                    raise ArchiveError(f"{_entry(name)} name is too long") from None
                raise


def _check_bundle(root: Path, extractor: _Extractor) -> Manifest:
    if MANIFEST_NAME not in extractor.files:
        raise ArchiveError(f"archive has no root-level {MANIFEST_NAME}")
    try:
        manifest = load_manifest(root)
    except BundleError as exc:
        raise InvalidBundleError(str(exc)) from None
    try:
        check_upload_id(manifest.id)
    except BundleError as exc:
        raise InvalidBundleError(str(exc)) from None
    listed = [record.path for record in manifest.files]
    listed_set = set(listed)
    unlisted = sorted(name for name in extractor.files if name != MANIFEST_NAME and name not in listed_set)
    if unlisted:
        raise ArchiveError(f"file {go_json_string(unlisted[0])} is not listed in {MANIFEST_NAME}")
    for path in listed:
        if path not in extractor.files:
            raise ArchiveError(f"listed file {go_json_string(path)} is missing")
    try:
        validate_manifest(manifest)
        for record in manifest.files:
            if extractor.files[record.path] != record.size or extractor.digests.get(record.path) != record.sha256:
                _recheck(root, record)  # raises the error validate_bundle gives for it
    except BundleError as exc:
        raise InvalidBundleError(str(exc)) from None
    return manifest


def _recheck(root: Path, record: ManifestFile) -> None:
    """Check one listed file from the disk as :func:`~distributor_core.bundle.validate_bundle`
    does (same order, same errors)."""
    fd, size = open_regular(root, record.path)
    try:
        verify.check_size(record, size)
        verify.check_content(record, iter_fd(fd))
    except OSError as exc:
        raise verify.unreadable(record.path, exc.strerror or type(exc).__name__) from None
    finally:
        os.close(fd)
