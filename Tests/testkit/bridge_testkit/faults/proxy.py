"""Fault proxies on 127.0.0.1, each running an asyncio loop in its own thread, switched by the test.

`TCPFaultProxy` (in front of mosquitto and of pusher-local's WebSocket):
- `pass`: bytes are copied both ways;
- `blackhole`: connections (open and new) are accepted and read, and what is read is discarded;
  nothing is sent either way, so both ends hang until their own timeouts fire. When the
  blackhole ends, connections that were blackholed are reset: their byte streams lost data
  in the middle and cannot be resumed (a healed real network would retransmit instead; the
  peer's keepalive has normally given up on them by then anyway);
- `reset`: open connections are reset (RST, SO_LINGER 0) and new ones reset right after accept.

`HTTPFaultProxy` (in front of pusher-local's HTTP API, the bridge's `rest_host/rest_port`) reads
each HTTP/1.1 request and, by mode:
- `pass`: forwards it to the upstream and copies the response back;
- `status`: answers `fault_status` (429, 500, 503) itself, with `Retry-After: 1` for 429;
- `hang`: reads the request and never answers (the client's request timeout fires);
- `blackhole` / `reset`: as for TCP.
It also records every event of every `batch_events`/`events` request whose upstream answer was
2xx: that is "accepted by the Pusher HTTP API", the boundary of docs/contract.md §5.6's guarantee for MQTT ->
Pusher, independent of any WebSocket subscriber's own reconnects.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import socket
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor


def netns_executor(name: str) -> ThreadPoolExecutor:
    """A one-thread executor whose thread has entered the network namespace `name` (setns(2)
    applies to the calling thread only; sockets it creates live in that namespace)."""
    libc = ctypes.CDLL(None, use_errno=True)
    clone_newnet = 0x40000000

    def enter():
        fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
        try:
            if libc.setns(fd, clone_newnet) != 0:
                raise OSError(ctypes.get_errno(), f"setns into {name} failed")
        finally:
            os.close(fd)

    return ThreadPoolExecutor(max_workers=1, initializer=enter, thread_name_prefix=f"netns-{name}")


class _LoopThread:
    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def call(self, coro, timeout: float = 10):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def _rst(writer: asyncio.StreamWriter):
    """Close with RST: SO_LINGER on with a zero timeout."""
    sock = writer.get_extra_info("socket")
    try:
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    writer.transport.abort() if hasattr(writer.transport, "abort") else writer.close()


class _Conn:
    def __init__(self, client_w: asyncio.StreamWriter):
        self.client_w = client_w
        self.upstream_w: asyncio.StreamWriter | None = None
        self.blackholed = False
        self.serial = 0
        self.tasks: list[asyncio.Task] = []

    def reset(self):
        for t in self.tasks:
            t.cancel()
        _rst(self.client_w)
        if self.upstream_w is not None:
            _rst(self.upstream_w)


class TCPFaultProxy:
    """A TCP proxy with pass / blackhole / reset modes. `port` is where clients connect."""

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1", name: str = "proxy",
                 upstream_netns: str | None = None):
        self.upstream = (upstream_host, upstream_port)
        # Upstream connections made from inside a network namespace (the partition row): a
        # one-thread executor that entered the namespace creates them; the listener stays here.
        self._ns_executor = netns_executor(upstream_netns) if upstream_netns else None
        self.name = name
        self.mode = "pass"
        self.conns: set[_Conn] = set()
        self.accepted = 0
        self._lt = _LoopThread(f"{name}-loop")
        self.server = self._lt.call(self._start())
        self.port = self.server.sockets[0].getsockname()[1]

    async def _open_upstream(self):
        if self._ns_executor is None:
            return await asyncio.open_connection(*self.upstream)
        loop = asyncio.get_running_loop()
        sock = await loop.run_in_executor(self._ns_executor, socket.create_connection, self.upstream, 5)
        sock.setblocking(False)
        return await asyncio.open_connection(sock=sock)

    async def _connect_upstream(self, writer: asyncio.StreamWriter, conn: _Conn):
        """(reader, writer) of a new upstream connection for `conn`; None after resetting the
        client's connection when the upstream cannot be reached."""
        try:
            up_r, up_w = await self._open_upstream()
        except OSError:
            _rst(writer)
            return None
        conn.upstream_w = up_w
        return up_r, up_w

    async def _start(self):
        return await asyncio.start_server(self._handle, "127.0.0.1", 0)

    def set_upstream(self, port: int):
        self.upstream = (self.upstream[0], port)

    def set_mode(self, mode: str):
        assert mode in ("pass", "blackhole", "reset"), mode
        self._lt.call(self._set_mode(mode))

    async def _set_mode(self, mode: str):
        previous, self.mode = self.mode, mode
        if mode == "blackhole":
            for c in self.conns:
                c.blackholed = True
        elif mode == "reset" or (mode == "pass" and previous == "blackhole"):
            for c in list(self.conns):
                if mode == "reset" or c.blackholed:
                    c.reset()
                    self.conns.discard(c)

    def blackhole_oldest(self) -> bool:
        """Black-holes the oldest open connection only (its bytes dropped both ways, the sockets
        left open: a silent peer); new connections pass. False when none is open."""
        return self._lt.call(self._blackhole_oldest())

    async def _blackhole_oldest(self) -> bool:
        open_conns = sorted((c for c in self.conns if not c.blackholed), key=lambda c: c.serial)
        if not open_conns:
            return False
        open_conns[0].blackholed = True
        return True

    def _accept(self, writer: asyncio.StreamWriter) -> "_Conn | None":
        """Counts a new connection; resets it (None) in reset mode, else tracks and returns it."""
        self.accepted += 1
        if self.mode == "reset":
            _rst(writer)
            return None
        conn = _Conn(writer)
        conn.serial = self.accepted
        self.conns.add(conn)
        return conn

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        if (conn := self._accept(writer)) is None:
            return
        try:
            if self.mode == "blackhole":
                conn.blackholed = True
                await self._discard(reader)
                return
            if (upstream := await self._connect_upstream(writer, conn)) is None:
                return
            up_r, up_w = upstream
            a = asyncio.ensure_future(self._pump(reader, up_w, conn))
            b = asyncio.ensure_future(self._pump(up_r, writer, conn))
            conn.tasks = [a, b]
            await asyncio.wait([a, b], return_when=asyncio.FIRST_COMPLETED)
            for t in (a, b):
                t.cancel()
            for w in (writer, up_w):
                try:
                    w.close()
                except Exception:
                    pass
        finally:
            self.conns.discard(conn)

    @staticmethod
    async def _discard(reader: asyncio.StreamReader):
        while await reader.read(65536):
            pass

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: _Conn):
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                if conn.blackholed:
                    continue  # read and discard: nothing reaches the other end
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass

    def close(self):
        async def shutdown():
            self.server.close()
            for c in list(self.conns):
                c.reset()
            # Every connection handler ends before the loop stops (no "Task was destroyed").
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in others:
                t.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        try:
            self._lt.call(shutdown())
        finally:
            self._lt.stop()


class HTTPFaultProxy(TCPFaultProxy):
    """Per-request HTTP/1.1 proxy with pass / status / hang / blackhole / reset modes."""

    def __init__(self, upstream_port: int, name: str = "http-proxy"):
        self.fault_status = 503
        self.requests = {"forwarded": 0, "faulted": 0, "hung": 0}
        self.accepted_events: list[tuple[str, str, float]] = []  # (channel, data, time) accepted upstream
        self._events_lock = threading.Lock()
        super().__init__(upstream_port, name=name)

    def set_mode(self, mode: str, status: int = 503):
        assert mode in ("pass", "status", "hang", "blackhole", "reset"), mode
        self.fault_status = status
        if mode in ("status", "hang"):
            self.mode = mode  # applied per request; open connections stay usable
        else:
            super().set_mode(mode)

    def events(self) -> list[tuple[str, str, float]]:
        with self._events_lock:
            return list(self.accepted_events)

    @staticmethod
    async def _read_message(reader: asyncio.StreamReader) -> tuple[bytes, bytes] | None:
        """(head, body) of one HTTP message with Content-Length (or chunked) framing."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            return None
        length, chunked = 0, False
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
            elif name.strip().lower() == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
        if chunked:
            body = b""
            while True:
                size_line = await reader.readuntil(b"\r\n")
                size = int(size_line.strip().split(b";")[0], 16)
                chunk = await reader.readexactly(size + 2)
                body += chunk[:-2]
                if size == 0:  # the last chunk (no trailers expected)
                    break
            head = b"\r\n".join(l for l in head.split(b"\r\n") if not l.lower().startswith(b"transfer-encoding"))
            head = head[:-4] + f"\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            return head, body
        body = await reader.readexactly(length) if length else b""
        return head, body

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        if (conn := self._accept(writer)) is None:
            return
        up_r = up_w = None
        try:
            while True:
                if self.mode == "blackhole" or conn.blackholed:
                    conn.blackholed = True
                    await self._discard(reader)
                    return
                message = await self._read_message(reader)
                if message is None:
                    return
                head, body = message
                if conn.blackholed:
                    continue
                if self.mode == "hang":
                    self.requests["hung"] += 1
                    await self._discard(reader)  # the client gives up and closes
                    return
                if self.mode == "status":
                    self.requests["faulted"] += 1
                    text = json.dumps({"error": f"fault proxy: {self.fault_status}"}).encode()
                    extra = "Retry-After: 1\r\n" if self.fault_status == 429 else ""
                    writer.write(f"HTTP/1.1 {self.fault_status} Fault\r\nContent-Type: application/json\r\n{extra}"
                                 f"Content-Length: {len(text)}\r\n\r\n".encode() + text)
                    await writer.drain()
                    continue
                if up_w is None:
                    if (upstream := await self._connect_upstream(writer, conn)) is None:
                        return
                    up_r, up_w = upstream
                up_w.write(head + body)
                await up_w.drain()
                response = await self._read_message(up_r)
                if response is None:
                    _rst(writer)
                    return
                r_head, r_body = response
                self.requests["forwarded"] += 1
                status = int(r_head.split(b" ", 2)[1])
                if 200 <= status < 300:
                    self._record(head, body)
                writer.write(r_head + r_body)
                await writer.drain()
        except (ConnectionError, OSError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            self.conns.discard(conn)
            for w in (writer, up_w):
                if w is not None:
                    try:
                        w.close()
                    except Exception:
                        pass

    def _record(self, head: bytes, body: bytes):
        path = head.split(b" ", 2)[1].split(b"?")[0]
        if not (path.endswith(b"/batch_events") or path.endswith(b"/events")):
            return
        try:
            doc = json.loads(body)
        except ValueError:
            return
        now = time.monotonic()
        items = doc.get("batch", []) if path.endswith(b"/batch_events") else [
            {"channel": c, "data": doc.get("data")} for c in doc.get("channels", [doc.get("channel")])]
        with self._events_lock:
            for item in items:
                self.accepted_events.append((item.get("channel"), item.get("data"), now))
