"""Fault-matrix rows `start-burst-pusher-local` and `start-burst-daemon` (docs/history/reliability.md,
"A Swift runtime crash"): a server of ours started many times (pusher-local 500 times, the daemon
100 times; FAULTS_START_BURST_RUNS sets both), each time with 16 clients already spinning on
connect() to its port, so that the first connections are accepted on both event loops at the same
moment and set up concurrently.

Before the warm-up (Sources/ServerWarmUp), pusher-local crashed in about one start in a few
hundred here: two event loops instantiated the same generic type metadata for the first time at
once and the Swift runtime dereferenced a null metadata pointer (SIGSEGV). The row PASSes when no
start crashed: every process answered its clients and exited 0 on SIGTERM, with no crash report
on stderr. It carries no traffic: both directions' expectations are "not judged".

Run alone, with more starts: `FAULTS=start-burst-pusher-local FAULTS_START_BURST_RUNS=3000 make faults`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
import types
from pathlib import Path

from bridge_testkit.faults.checker import Expectation
from bridge_testkit.harness import binary, free_port, rule

# pusher-local starts and stops in about 0.15 s here, the daemon in about 1.5 s.
RUNS = {"pusher-local": 500, "daemon": 100}
if "FAULTS_START_BURST_RUNS" in os.environ:
    RUNS = dict.fromkeys(RUNS, int(os.environ["FAULTS_START_BURST_RUNS"]))
CLIENTS = 16
UPGRADE = (b"GET /app/app-key?protocol=7 HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
           b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
METRICS = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def _spin_connect(port: int, request: bytes, stop: threading.Event, connected: list[socket.socket]) -> None:
    """Tries to connect until the port listens (or `stop`), then sends `request` and keeps the socket."""
    while not stop.is_set():
        sock = socket.socket()
        try:
            sock.connect(("127.0.0.1", port))
            sock.sendall(request)
            connected.append(sock)
            return
        except OSError:
            sock.close()


def _answered(sock: socket.socket) -> bool:
    """Whether the server sent anything back within 5 s (an HTTP status line or a 101)."""
    sock.settimeout(5)
    try:
        return sock.recv(64).startswith(b"HTTP/1.1 ")
    except OSError:
        return False


def burst_start(argv: list[str], port: int, request: bytes, crash_log: Path) -> str | None:
    """One start under a burst of first connections; None when it went well, else what went wrong."""
    stop = threading.Event()
    connected: list[socket.socket] = []
    clients = [threading.Thread(target=_spin_connect, args=(port, request, stop, connected)) for _ in range(CLIENTS)]
    for client in clients:
        client.start()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    for client in clients:
        client.join(max(0.0, deadline - time.monotonic()))
    stop.set()
    for client in clients:
        client.join()
    unanswered = sum(not _answered(sock) for sock in connected)
    for sock in connected:
        sock.close()
    if process.poll() is None:
        process.terminate()
    try:
        _, stderr = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
        return "did not stop within 30 s of SIGTERM"
    if process.returncode != 0 or b"Program crashed" in stderr:
        crash_log.write_bytes(stderr)
        return f"exit {process.returncode} (stderr kept in {crash_log})"
    if len(connected) < CLIENTS or unanswered:
        return f"{len(connected)} of {CLIENTS} clients connected, {unanswered} not answered"
    return None


def pusher_local_start(workdir: Path) -> tuple[list[str], int, bytes]:
    port = free_port()
    return [binary("PUSHER_LOCAL_BIN", "pusher-local"), "--port", str(port)], port, UPGRADE


def daemon_start(workdir: Path) -> tuple[list[str], int, bytes]:
    """The daemon with one bridge whose servers are not running (it keeps retrying them) and its
    operations endpoint on a fresh port: the burst hits /metrics."""
    port = free_port()
    config = workdir / "bridges.conf"
    config.write_text(f"""[daemon]
metrics = "127.0.0.1:{port}"
state_dir = "{workdir / 'state'}"
shutdown_grace = "1s"

[[bridge]]
name = "burst"

[bridge.pusher]
key = "app-key"
app_id = "1"
secret = "app-secret"
host = "127.0.0.1"
port = {free_port()}
tls = false

[bridge.mqtt]
host = "127.0.0.1"
port = {free_port()}
client_id = "bridge-burst"
""" + rule("burst", "pusher", channel="burst", events=["tick"], topic="burst/{channel}"))
    return [binary("BRIDGE_BIN", "pusher-mqtt-bridge"), "run", "--config", str(config)], port, METRICS


def start_burst_row(start: types.FunctionType, runs: int, matrix: types.ModuleType):
    def run(row, base: Path):
        workdir = base / row.name
        workdir.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        misses: list[str] = []
        for attempt in range(runs):
            argv, port, request = start(workdir)
            problem = burst_start(argv, port, request, workdir / f"crash-{attempt}.log")
            if problem:
                misses.append(f"start {attempt}: {problem}")
        seconds = round(time.monotonic() - began, 1)
        observed = {"starts": runs, "clients_per_start": CLIENTS, "failed_starts": len(misses)}
        return matrix.Result(row.name, row.fault, matrix.describe(row.p2m), matrix.describe(row.m2p), observed,
                             "PASS" if not misses else "MISS", misses,
                             [f"{runs} starts, {len(misses)} failed, {seconds} s"], seconds)
    return run


def rows(matrix: types.ModuleType) -> list:
    not_judged = Expectation(0, why="no traffic in this row (not judged)")
    return [
        matrix.Row("start-burst-pusher-local",
                   f"pusher-local started {RUNS['pusher-local']} times, {CLIENTS} WebSocket clients connecting the moment it listens",
                   Expectation(0, why="docs/history/reliability.md, \"A Swift runtime crash\": the first connections' "
                                      "set-up on two event loops at once must not crash the process (every start "
                                      "answers its clients and exits 0 on SIGTERM)"),
                   not_judged, matrix.not_injected, custom=start_burst_row(pusher_local_start, RUNS["pusher-local"], matrix)),
        matrix.Row("start-burst-daemon",
                   f"the daemon started {RUNS['daemon']} times, {CLIENTS} /metrics clients connecting the moment it listens",
                   Expectation(0, why="the same first-time set-up on the daemon's operations endpoint: no crash, "
                                      "every client answered, exit 0 on SIGTERM"),
                   not_judged, matrix.not_injected, custom=start_burst_row(daemon_start, RUNS["daemon"], matrix)),
    ]
