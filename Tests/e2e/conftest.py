"""Fixtures for the daemon's end-to-end tests: a real mosquitto, a real pusher-local, the daemon."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from harness import Bridge, Mosquitto, PusherLocal  # noqa: E402


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def broker(workdir):
    b = Mosquitto(workdir).start()
    yield b
    b.stop()


@pytest.fixture
def pusher(workdir):
    p = PusherLocal(workdir, extra=["--activity-timeout", "2"]).start()
    yield p
    p.stop()


@pytest.fixture
def bridges(workdir):
    """Starts daemons; every one still running at the end is stopped, and its log shown on failure."""
    started: list[Bridge] = []

    def start(config: str, name: str = "bridge", env: dict | None = None) -> Bridge:
        b = Bridge(workdir, config, name=name, env=env)
        b.start()
        started.append(b)
        return b

    yield start
    for b in started:
        b.stop()
        sys.stderr.write(f"\n----- {b.name} log -----\n{b.log()[-6000:]}\n")


def bridge_config(pusher: PusherLocal, broker: Mosquitto, workdir: Path, rules: str = "", *,
                  name: str = "e2e", protocol: int = 5, extra_pusher: str = "", extra_mqtt: str = "",
                  daemon: str = "", buffer: str = "") -> str:
    """A bridges.conf for one bridge between the given pusher-local and mosquitto."""
    return f"""
[daemon]
log_level = "debug"
metrics = ""
state_dir = "{workdir / 'state'}"
shutdown_grace = "5s"
{daemon}

[[bridge]]
name = "{name}"

[bridge.pusher]
key = "{pusher.key}"
app_id = "{pusher.app_id}"
secret = "{pusher.secret}"
host = "127.0.0.1"
port = {pusher.port}
tls = false
activity_timeout = "2s"
pong_timeout = "1s"
{extra_pusher}

[bridge.mqtt]
host = "127.0.0.1"
port = {broker.port}
client_id = "bridge-{name}"
protocol = {protocol}
clean_session = false
keepalive = "5s"
status_topic = "pusher-mqtt-bridge/{name}/status"
dead_letter_topic = "pusher-mqtt-bridge/{name}/dead-letter"
{extra_mqtt}

[bridge.reconnect]
initial_delay = "200ms"
max_delay = "2s"
multiplier = 2.0
jitter = 0.2

[bridge.buffer]
max_messages = 100000
max_bytes = "64MiB"
overflow = "drop-oldest"
persist = true
{buffer}

{rules}
"""
