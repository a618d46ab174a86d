"""Fixtures for the daemon's end-to-end tests: a real mosquitto, a real pusher-local, the daemon."""

from __future__ import annotations

import sys

import pytest

from bridge_testkit.fixtures import pusher, workdir  # noqa: F401 (fixtures, by name)
from bridge_testkit.harness import Bridge, Mosquitto


@pytest.fixture
def broker(workdir):
    b = Mosquitto(workdir).start()
    yield b
    b.stop()


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
