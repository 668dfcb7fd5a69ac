"""Small parsers for network addresses written in the config: ``host:port`` and http(s) URLs."""

from __future__ import annotations

from urllib.parse import urlsplit

_PORT_DIGITS = frozenset("0123456789")


def split_host_port(address: str) -> tuple[str, int]:
    """Split ``host:port`` (IPv6 as ``[::1]:8080``); port 0–65535. Raises ``ValueError``."""
    if address.startswith("["):
        end = address.find("]")
        if end < 0:
            raise ValueError(f"missing ']' in address {address!r}")
        host, rest = address[1:end], address[end + 1 :]
        if not rest.startswith(":"):
            raise ValueError(f"missing port in address {address!r}")
        port_text = rest[1:]
        if ":" not in host:
            raise ValueError(f"only IPv6 hosts go in brackets: {address!r}")
    else:
        host, sep, port_text = address.rpartition(":")
        if not sep:
            raise ValueError(f"missing port in address {address!r}")
        if ":" in host:
            raise ValueError(f"IPv6 hosts must be written in brackets: {address!r}")
    if host == "" or any(ch.isspace() or ch in "/[]" for ch in host):
        raise ValueError(f"invalid host in address {address!r}")
    if not port_text or len(port_text) > 5 or not set(port_text) <= _PORT_DIGITS:
        raise ValueError(f"invalid port in address {address!r}")
    port = int(port_text)
    if port > 65535:
        raise ValueError(f"port out of range in address {address!r}")
    return host, port


def is_http_url(value: str) -> bool:
    """True for an absolute ``http``/``https`` URL with a host (and a valid port, if any)."""
    try:
        parts = urlsplit(value)
        _ = parts.port
    except ValueError:
        return False
    if any(ch.isspace() for ch in value):
        return False
    return parts.scheme.lower() in ("http", "https") and bool(parts.hostname)


def has_query_or_fragment(value: str) -> bool:
    parts = urlsplit(value)
    return bool(parts.query or parts.fragment) or value.rstrip().endswith(("?", "#"))
