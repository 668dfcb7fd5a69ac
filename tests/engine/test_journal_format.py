"""The journal is the indented JSON ``jsonfmt.dumps_indented`` writes for its fields in their
documented order, and parses back to the same journal."""

from __future__ import annotations

from distributor_core import jsonfmt
from distributor_core.execute.journal import JOURNAL_SCHEMA_VERSION, Journal, JournalWrite, parse_journal


def _journal(count: int) -> Journal:
    writes = tuple(
        JournalWrite(
            path=f"dir {i % 3}/é-{i}.bin",
            temp=f"dir {i % 3}/.distributor-tmp-{i}" if i % 2 else None,
            backup=f"dir/.distributor-bak-{i}" if i % 5 == 0 else None,
            sha256=f"{i:064x}" if i % 4 else "",
        )
        for i in range(count)
    )
    return Journal(
        bundle_path="reports/<daily>", state_sha256="ab" * 32, writes=writes, deletes=("old & gone.txt", "x/y"),
        holder="host:1234", created_at="2026-12-01T18:00:00Z",
    )


def test_journal_bytes_equal_the_indented_encoder_and_parse_back() -> None:
    for count in (0, 1, 7, 1000):
        journal = _journal(count)
        expected = jsonfmt.dumps_indented_bytes(
            {
                "schema_version": JOURNAL_SCHEMA_VERSION,
                "bundle_path": journal.bundle_path,
                "holder": journal.holder,
                "created_at": journal.created_at,
                "state_sha256": journal.state_sha256,
                "writes": [w.to_obj() for w in journal.writes],
                "deletes": list(journal.deletes),
            }
        )
        assert journal.to_bytes() == expected
        assert parse_journal(journal.to_bytes()) == journal
