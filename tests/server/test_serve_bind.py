"""``distributor serve --bind HOST:PORT`` / ``--port PORT`` override ``server.http.bind`` without
copying the config; a bad address is a usage error naming the flag."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from tests.server.harness import free_socket, start_serve, write_setup

DISTRIBUTOR = str(Path(sys.executable).parent / "distributor")


def free_port() -> int:
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    return port


def test_bind_and_port_override_the_configs_address(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")  # server.http.bind: 127.0.0.1:0
    port = free_port()
    server = start_serve(setup, "--bind", f"127.0.0.1:{port}")
    try:
        assert server.first_line == f"distributor: serving HTTP upload API on 127.0.0.1:{port}\n"
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").json() == {"status": "ok"}
    finally:
        assert server.stop()[0] == 0
    port = free_port()
    server = start_serve(setup, "--port", str(port))
    try:
        assert server.url == f"http://127.0.0.1:{port}"  # the config's host, this port
        assert httpx.get(f"{server.url}/healthz").status_code == 200
    finally:
        assert server.stop()[0] == 0


def test_a_bad_address_is_a_usage_error_naming_the_flag(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    cases = {
        ("--bind", "localhost"): "distributor: serve: --bind must be a host:port address such as 127.0.0.1:8080 "
                                 "(missing port in address 'localhost')\n",
        ("--port", "80x"): "distributor: serve: --port must be a port number 0-65535, not '80x'\n",
        ("--bind", "127.0.0.1:1", "--port", "2"): "distributor: serve: --bind and --port exclude each other "
                                                  "(--bind takes host:port)\n",
    }
    for args, message in cases.items():
        result = subprocess.run([DISTRIBUTOR, "serve", "--config", str(setup.config_path), *args],
                                env={**os.environ, **setup.environ}, capture_output=True, text=True, timeout=60)
        assert (result.returncode, result.stdout, result.stderr) == (2, "", message)
