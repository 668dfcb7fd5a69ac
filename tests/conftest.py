"""Shared pytest configuration: real test peers are session fixtures in tests/peers/."""

pytest_plugins = ["tests.peers.sshd", "tests.peers.moto", "tests.peers.postgres"]
