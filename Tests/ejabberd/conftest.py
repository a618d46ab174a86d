"""Fixtures for the ejabberd suite (`make test-ejabberd`, docs/brokers.md): a two-node ejabberd
cluster (bridge_testkit.ejabberd), pusher-local, and the clients' helpers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bridge_testkit import ejabberd
from bridge_testkit.fixtures import pusher, workdir  # noqa: F401 (fixtures, by name)

if not ejabberd.installed():
    pytest.exit("ejabberd is not installed: run scripts/setup.sh --ejabberd (make test-ejabberd does)", returncode=2)


def _cluster(directory: Path, **options):
    cluster = ejabberd.EjabberdCluster(directory, **options)
    try:
        cluster.start()
    except BaseException:
        sys.stderr.write(cluster.logs())
        cluster.close()
        raise
    return cluster


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory):
    """One cluster for a module's tests that stop no node (starting one takes 10-40 s)."""
    cluster = _cluster(tmp_path_factory.mktemp("ejabberd"))
    yield cluster
    cluster.close()


@pytest.fixture
def own_cluster(workdir):
    """A cluster of the test's own, for tests that stop or restart a node."""
    cluster = _cluster(workdir)
    yield cluster
    cluster.close()


