"""pytest fixtures shared by the suites that run the daemon against a real pusher-local (Tests/e2e,
Tests/ejabberd): a conftest imports them by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge_testkit.harness import PusherLocal


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """The test's own directory: configs, logs, state and the brokers' data."""
    return tmp_path


@pytest.fixture
def pusher(workdir):
    """pusher-local with a 2 s activity timeout, so that tests see pings and dead connections soon."""
    p = PusherLocal(workdir, extra=["--activity-timeout", "2"]).start()
    yield p
    p.stop()
