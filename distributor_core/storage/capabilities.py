"""What a storage backend can do, declared once per adapter (in the manner of rclone's
``fs.Features``).

Callers branch on these declarations instead of probing attributes: the executor refuses a
destination without ``CONDITIONAL_WRITES``, stages outputs under temporaries only where
``ATOMIC_RENAME`` holds, writes those temporaries ``in_place`` where ``IN_PLACE_WRITES`` holds,
and writes or validates several files at once within the declared thread counts; source
validation opens small files before a ``stat`` only where ``NONBLOCKING_OPEN`` holds;
``distributor run`` consults its validation cache only where ``FILE_IDENTITY`` holds. The others
state guarantees callers rely on without a branch (``EXCLUSIVE_CREATE`` and ``REVISIONS`` for the
lock and the state file, ``BATCHED_DELETES`` for what a failed delete may have removed,
``STORED_SHA256`` for a ``Storage.sha256`` that reads nothing where the object carries its checksum).

Every adapter states its :class:`Capabilities` as ``Storage.capabilities`` (an abstract member of
the protocol: a class that does not state it cannot be instantiated), and a wrapper such as the
fault injector reports the wrapped backend's declaration, less only what it knowingly does not
offer itself, so no feature is dropped silently. ``tests/storage/test_capabilities.py`` checks
every declaration against what local disk, a real sshd and moto do, bare and wrapped.
"""

from __future__ import annotations

from enum import StrEnum

import msgspec


class Feature(StrEnum):
    """One optional behaviour of a backend. Absent means callers must not rely on it."""

    #: ``rename`` is one atomic metadata operation (never copy + delete), so staging under a
    #: temporary and renaming into place publishes atomically.
    ATOMIC_RENAME = "atomic_rename"
    #: ``write_stream(..., in_place=True)`` writes straight to a name the caller owns (exclusive
    #: create, removed again on any failure) without a temporary of the backend's own. Without
    #: the feature an ``in_place`` write is refused with ``unsupported``.
    IN_PLACE_WRITES = "in_place_writes"
    #: ``write_stream`` with ``if_revision`` fails with ``conflict`` when the stored revision
    #: differs (``""``: when any entry exists); the state-file write of resolutions A3.
    CONDITIONAL_WRITES = "conditional_writes"
    #: ``overwrite=False`` never clobbers an entry, including one a racing writer created
    #: between the check and the publication (the lock of resolutions A1 builds on it).
    EXCLUSIVE_CREATE = "exclusive_create"
    #: ``stat`` and listings report a ``revision`` that ``if_revision`` accepts.
    REVISIONS = "revisions"
    #: ``delete_paths`` and ``delete_prefix`` remove many entries per request (S3
    #: ``DeleteObjects``, up to 1,000 keys) instead of one ``delete_file`` per target. Targets are
    #: still checked first, so a missing target or a directory stops the call before anything at or
    #: after it is removed; but when the batch request fails for one key, others of its batch
    #: (planned after it included) may be gone, and the error's ``deleted`` lists the deletions
    #: the store confirmed. Without the feature a failed delete leaves every later target untouched.
    BATCHED_DELETES = "batched_deletes"
    #: ``open_read`` returns at once, refusing it, for anything that is not a regular file
    #: (a FIFO or device is never waited on), so a reader may open a small file before it stats.
    NONBLOCKING_OPEN = "nonblocking_open"
    #: ``sha256`` answers from a sha256 of the whole content that the backend stored and
    #: verified itself, when the object carries one (S3 ``ChecksumSHA256`` of the whole object),
    #: so nothing is read (rclone's ``Object.Hash`` from stored metadata). Every backend answers
    #: ``sha256``; without the feature (or where an object has no such checksum) it streams the
    #: bytes. Callers never branch on it: it says what a digest audit costs.
    STORED_SHA256 = "stored_sha256"
    #: ``file_identities`` reports the device, inode, size, mtime and ctime (ns) of regular files
    #: reached without a symlink below the root, so source validation may trust its validation
    #: cache for a file whose identity is unchanged. Without the feature ``file_identities`` is
    #: refused with ``unsupported`` and every file is hashed.
    FILE_IDENTITY = "file_identity"
    #: ``walk`` lists everything under a prefix in a few paged requests whatever the directory
    #: structure (S3 ``ListObjectsV2`` without a delimiter; rclone's ``ListR``), so one walk is
    #: cheaper than listing directory by directory. Without it a directory costs a listing of its
    #: own, and source discovery lists only the directories above the bundles.
    RECURSIVE_LISTING = "recursive_listing"
    #: several outputs may be written at once (``Capabilities.parallel_writes`` > 1).
    PARALLEL_WRITES = "parallel_writes"
    #: several files may be streamed at once (``Capabilities.parallel_reads`` > 1).
    PARALLEL_READS = "parallel_reads"


#: features that follow from the thread counts rather than being listed
_COUNTED = frozenset({Feature.PARALLEL_WRITES, Feature.PARALLEL_READS})


class Capabilities(msgspec.Struct, frozen=True):
    """A backend's declared features and how many threads its callers may use.

    ``parallel_min_file_size``: files must be at least this large on average for the parallel
    thread counts to apply (``0``: always); smaller batches run on one thread, where extra threads
    would only contend for the interpreter.
    """

    flags: frozenset[Feature] = frozenset()
    parallel_writes: int = 1
    parallel_reads: int = 1
    parallel_min_file_size: int = 0

    def __post_init__(self) -> None:
        msgspec.structs.force_setattr(self, "flags", frozenset(Feature(f) for f in self.flags))
        counted = self.flags & _COUNTED
        if counted:
            names = ", ".join(sorted(counted))
            raise ValueError(f"{names} follow from the thread counts; do not list them")
        if self.parallel_writes < 1 or self.parallel_reads < 1:
            raise ValueError("thread counts must be at least 1")
        if self.parallel_min_file_size < 0:
            raise ValueError("parallel_min_file_size must not be negative")

    @property
    def features(self) -> frozenset[Feature]:
        """Every declared feature, the counted ones included."""
        counted = {Feature.PARALLEL_WRITES} if self.parallel_writes > 1 else set()
        if self.parallel_reads > 1:
            counted.add(Feature.PARALLEL_READS)
        return self.flags | counted

    def __contains__(self, feature: object) -> bool:
        return feature in self.features

    def without(self, *features: Feature) -> Capabilities:
        """This declaration less ``features`` (a counted one drops its thread count to 1): for a
        backend variant, or a wrapper that knowingly cannot offer one of them."""
        removed = frozenset(Feature(f) for f in features) & self.features
        if not removed:
            return self
        return msgspec.structs.replace(
            self,
            flags=self.flags - removed,
            parallel_writes=1 if Feature.PARALLEL_WRITES in removed else self.parallel_writes,
            parallel_reads=1 if Feature.PARALLEL_READS in removed else self.parallel_reads,
        )

    def names(self) -> list[str]:
        """The declared features' names, sorted (for reports and documentation)."""
        return sorted(self.features)

    def write_threads(self, count: int, total_size: int) -> int:
        """Threads for writing ``count`` files of ``total_size`` bytes in all."""
        return self._threads(self.parallel_writes, count, total_size)

    def read_threads(self, count: int, total_size: int) -> int:
        """Threads for streaming ``count`` files of ``total_size`` bytes in all."""
        return self._threads(self.parallel_reads, count, total_size)

    def _threads(self, limit: int, count: int, total_size: int) -> int:
        if limit <= 1 or count <= 1:
            return 1
        floor = self.parallel_min_file_size
        if floor and total_size < floor * count:
            return 1  # small files: threads would only contend for the GIL
        return min(limit, count)
