"""A network partition between two namespaces of our own, with `ip netns` and iptables.

Topology (nothing is added to or changed in the root namespace's addresses or firewall):

    netns <prefix>-br  (the bridge daemon)        netns <prefix>-srv (mosquitto, pusher-local)
      veth <prefix>b  10.213.0.1/30  <------------>  veth <prefix>s  10.213.0.2/30

The partition is iptables DROP rules inside the bridge's namespace (INPUT and OUTPUT for the
server's address): packets vanish, connections hang, as on a real network cut. Healing deletes
the rules; TCP retransmits what was dropped. The test's own clients reach the servers through
proxies whose upstream side runs inside the server namespace (proxy.netns_executor).
"""

from __future__ import annotations

import subprocess

BRIDGE_ADDR = "10.213.0.1"
SERVER_ADDR = "10.213.0.2"


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, timeout=15)


class Cut:
    """iptables DROP rules added by `drop` and taken away by `restore` (once); `_rules(op)` adds
    (`-A`) or deletes (`-D`) them."""

    cut = False

    def _rules(self, op: str):
        raise NotImplementedError

    def drop(self):
        self._rules("-A")
        self.cut = True

    def restore(self):
        if self.cut:
            self._rules("-D")
            self.cut = False


class Partition(Cut):
    def __init__(self, prefix: str = "pmbf"):
        self.bridge_ns, self.server_ns = f"{prefix}-br", f"{prefix}-srv"
        self.veth_b, self.veth_s = f"{prefix}b", f"{prefix}s"
        self.cut = False

    def __enter__(self):
        self.teardown()  # leftovers of an interrupted earlier run, by name
        _run("ip", "netns", "add", self.bridge_ns)
        _run("ip", "netns", "add", self.server_ns)
        # Created inside the bridge namespace, so the pair never appears in the root namespace.
        _run("ip", "-n", self.bridge_ns, "link", "add", self.veth_b, "type", "veth", "peer", "name", self.veth_s)
        _run("ip", "-n", self.bridge_ns, "link", "set", self.veth_s, "netns", self.server_ns)
        for ns, dev, addr in ((self.bridge_ns, self.veth_b, BRIDGE_ADDR), (self.server_ns, self.veth_s, SERVER_ADDR)):
            _run("ip", "-n", ns, "addr", "add", f"{addr}/30", "dev", dev)
            _run("ip", "-n", ns, "link", "set", dev, "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
        _run("ip", "netns", "exec", self.bridge_ns, "ping", "-c1", "-W2", SERVER_ADDR, check=False)
        return self

    def exec_prefix(self, ns: str) -> list[str]:
        return ["ip", "netns", "exec", ns]

    def _rules(self, op: str):
        _run("ip", "netns", "exec", self.bridge_ns, "iptables", op, "INPUT", "-s", SERVER_ADDR, "-j", "DROP")
        _run("ip", "netns", "exec", self.bridge_ns, "iptables", op, "OUTPUT", "-d", SERVER_ADDR, "-j", "DROP")


    def teardown(self):
        for ns in (self.bridge_ns, self.server_ns):
            _run("ip", "netns", "del", ns, check=False)

    def __exit__(self, *exc):
        self.teardown()
