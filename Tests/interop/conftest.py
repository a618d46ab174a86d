"""Shared fixtures of the interoperability suite (Tests/interop)."""

import pytest

from bridge_testkit.harness import PusherLocal


@pytest.fixture
def pusher_server(tmp_path):
    """A fresh pusher-local on a free port (bridge_testkit.harness.PusherLocal: host, port, app_id,
    key, secret); stopped by PID afterwards, also when the test fails."""
    server = PusherLocal(tmp_path).start()
    try:
        yield server
    finally:
        server.stop()
