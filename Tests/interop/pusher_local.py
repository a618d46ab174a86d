"""Start and stop pusher-local for the interoperability tests (and the later MQTT tests).

The binary comes from $PUSHER_LOCAL_BIN (default: .build/debug/pusher-local relative to the
repository root). It is started with --port 0; the ready line on stdout
("pusher-local listening on HOST:PORT (apps: ...)") tells the actual port. The process is
stopped by its PID (SIGTERM, then SIGKILL) when the `with` block or fixture ends, also on failure.
"""
import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
READY = re.compile(r"pusher-local listening on ([0-9.]+):(\d+)")


@dataclass
class PusherLocal:
    """A running pusher-local: where it listens and the credentials of its first app."""
    host: str
    port: int
    app_id: str
    key: str
    secret: str
    process: subprocess.Popen
    stderr_lines: list = field(default_factory=list)
    ready_line: str = ""

    @property
    def tls(self):
        """Whether it serves wss:// and https:// (started with --tls-cert/--tls-key)."""
        return " with TLS " in self.ready_line

    @property
    def ws_url(self):
        return f"{'wss' if self.tls else 'ws'}://{self.host}:{self.port}/app/{self.key}?protocol=7"

    @property
    def http_url(self):
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def control(self, method, path, body=None):
        """Calls a /pusher-local/... control endpoint; returns (status, text)."""
        import urllib.request
        import urllib.error
        request = urllib.request.Request(f"{self.http_url}/pusher-local/apps/{self.app_id}/{path}",
                                         data=body.encode() if body is not None else (b"" if method == "POST" else None),
                                         method=method)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()


def binary_path():
    return Path(os.environ.get("PUSHER_LOCAL_BIN", REPO_ROOT / ".build" / "debug" / "pusher-local"))


def start(app_id="1", key="app-key", secret="app-secret", extra_args=(), timeout=20):
    """Starts pusher-local on a free port and waits for its ready line."""
    binary = binary_path()
    if not binary.exists():
        raise FileNotFoundError(f"pusher-local binary not found at {binary}; run `swift build` or set PUSHER_LOCAL_BIN")
    args = [str(binary), "--host", "127.0.0.1", "--port", "0",
            "--app-id", app_id, "--key", key, "--secret", secret, *extra_args]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stderr_lines = []

    def drain_stderr():
        for line in process.stderr:
            stderr_lines.append(line)

    threading.Thread(target=drain_stderr, daemon=True).start()
    deadline = time.monotonic() + timeout
    ready = []

    def read_ready():
        line = process.stdout.readline()
        ready.append(line)

    reader = threading.Thread(target=read_ready, daemon=True)
    reader.start()
    reader.join(max(0.0, deadline - time.monotonic()))
    if not ready or not READY.search(ready[0]):
        stop(process)
        raise RuntimeError(f"pusher-local did not print its ready line; got {ready!r}; stderr: {''.join(stderr_lines)}")
    match = READY.search(ready[0])
    return PusherLocal(host=match.group(1), port=int(match.group(2)), app_id=app_id, key=key,
                       secret=secret, process=process, stderr_lines=stderr_lines, ready_line=ready[0])


def stop(process, timeout=10):
    """SIGTERM by PID, SIGKILL if it does not exit in time; returns the exit status."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode
