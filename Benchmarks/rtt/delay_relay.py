"""A TCP relay that adds a fixed one-way delay to every byte, both ways: for `make bench-rtt` where
the kernel has no `sch_netem` (Benchmarks/rtt/bench_rtt.py falls back to it and says so).

    python delay_relay.py LISTEN_PORT UPSTREAM_HOST UPSTREAM_PORT ONE_WAY_MS

Listens on 127.0.0.1:LISTEN_PORT (of the network namespace it runs in), prints "ready", and for
each connection opens one to UPSTREAM_HOST:UPSTREAM_PORT. Whatever is read on one side is written
to the other ONE_WAY_MS later, in order; reading goes on meanwhile, so the delay adds latency but no
throughput limit of its own (unlike netem it adds no TCP round-trip effects: the relay's own
connections have the namespace's RTT). A round trip through it takes 2 × ONE_WAY_MS more.
"""

from __future__ import annotations

import asyncio
import sys


async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float):
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()

    async def send():
        while True:
            due, chunk = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if chunk is None:
                break
            writer.write(chunk)
            await writer.drain()
        try:
            writer.write_eof()
        except (OSError, RuntimeError):
            pass

    sender = asyncio.create_task(send())
    try:
        while True:
            chunk = await reader.read(65536)
            queue.put_nowait((loop.time() + delay, chunk or None))
            if not chunk:
                break
        await sender
    except (OSError, asyncio.IncompleteReadError):
        sender.cancel()
    finally:
        writer.close()


async def main(listen_port: int, host: str, port: int, delay: float):
    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter):
        try:
            upstream_r, upstream_w = await asyncio.open_connection(host, port)
        except OSError:
            client_w.close()
            return
        for w in (client_w, upstream_w):
            sock = w.get_extra_info("socket")
            if sock is not None:
                import socket
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(pump(client_r, upstream_w, delay), pump(upstream_r, client_w, delay), return_exceptions=True)

    server = await asyncio.start_server(handle, "127.0.0.1", listen_port)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit("usage: delay_relay.py LISTEN_PORT UPSTREAM_HOST UPSTREAM_PORT ONE_WAY_MS")
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4]) / 1000))
