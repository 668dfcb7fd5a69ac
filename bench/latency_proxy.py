"""A TCP proxy that adds a fixed one-way delay in each direction (this kernel has no netem).

``python -m bench.latency_proxy TARGET_HOST TARGET_PORT --delay-ms 10`` listens on 127.0.0.1
(an ephemeral port, printed as ``port=<n>`` on the first line of stdout) and forwards every
connection to the target. Each direction is a delay line: bytes read at time t are written at
t + delay, in order, without throttling what follows, so a request/response exchange costs one
round trip of 2 x delay on top of the server's own time, as a link with that latency would;
throughput stays that of the loopback. Used by bench P8 between boto3 and moto.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import sys

CHUNK = 256 * 1024


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def deliver() -> None:
        while True:
            due, data = await queue.get()
            if not data:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        with contextlib.suppress(OSError):
            if writer.can_write_eof():
                writer.write_eof()

    sender = asyncio.create_task(deliver())
    try:
        while True:
            data = await reader.read(CHUNK)
            queue.put_nowait((loop.time() + delay, data))
            if not data:
                break
    except OSError:  # the peer reset: stop forwarding once what was read is delivered
        queue.put_nowait((loop.time(), b""))
    with contextlib.suppress(OSError):
        await sender


async def _serve(target_host: str, target_port: int, delay: float, port: int) -> None:
    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(target_host, target_port)
        except OSError:
            client_writer.close()
            return
        for w in (client_writer, upstream_writer):
            sock = w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            await asyncio.gather(
                _pump(client_reader, upstream_writer, delay),
                _pump(upstream_reader, client_writer, delay),
                return_exceptions=True,
            )
        finally:
            for w in (client_writer, upstream_writer):
                w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=512)
    bound = server.sockets[0].getsockname()[1]
    print(f"port={bound}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target_host")
    parser.add_argument("target_port", type=int)
    parser.add_argument("--delay-ms", type=float, default=10.0, help="one-way delay per direction")
    parser.add_argument("--port", type=int, default=0, help="listening port (0: ephemeral)")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args.target_host, args.target_port, args.delay_ms / 1000, args.port))


if __name__ == "__main__":
    main(sys.argv[1:])
