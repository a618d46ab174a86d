"""Shared fixtures of the interoperability suite (Tests/interop)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import pusher_local  # noqa: E402


@pytest.fixture
def pusher_server():
    """A fresh pusher-local on a free port; yields a pusher_local.PusherLocal (host, port,
    app_id, key, secret); stopped by PID afterwards, also when the test fails."""
    server = pusher_local.start()
    try:
        yield server
    finally:
        pusher_local.stop(server.process)
