"""A two-node ejabberd cluster (Debian 12's ejabberd 23.01, `mod_mqtt`, Mnesia) on one host, for the
findings in docs/brokers.md and `make test-ejabberd`.

Everything runs as the user running the tests (no root, no `su`): one `epmd` on a free loopback port
(ERL_EPMD_PORT), then one Erlang node per ejabberd (`ejabberd1@localhost`, `ejabberd2@localhost`), each
with its own config file, Mnesia spool, log and free loopback ports -- MQTT on 127.0.0.1 only, the
distribution port fixed (inet_dist_listen_min = max) and bound to 127.0.0.1, no XMPP, s2s or HTTP
listener. Node 2 joins node 1 with `ejabberdctl join_cluster` (ejabberd_ctl run from a hidden node of
ours, as ejabberdctl does). Readiness is an MQTT CONNECT answered with success, never a sleep. Every
process is stopped by its PID; the system's ejabberd service (scripts/setup.sh --ejabberd keeps it
from starting) is neither used nor touched.

Authentication: `mod_mqtt` in 23.01 refuses a CONNECT without a password, so the nodes run the
anonymous backend (`login_anon`: any user name and password are accepted) and clients use
USERNAME / PASSWORD below. A session's identity is `<user>@localhost/<client id>`.
"""

from __future__ import annotations

import glob
import os
import secrets
import signal
import subprocess
import threading
import time
from pathlib import Path

import paho.mqtt.client as mqtt

from .harness import Process, free_port, port_open, wait_until

USERNAME = "bridge"
PASSWORD = "bridge-password"
HOST = "localhost"
START_TIMEOUT = 90.0  # a node starts in 3-12 s on an idle 2-core machine; a build beside it slows it down


def ejabberd_libs() -> str:
    """The folder holding ejabberd-<version>/ (Debian: /usr/lib/<triplet>), which ERL_LIBS must name."""
    found = sorted(glob.glob("/usr/lib/*/ejabberd-*/ebin/ejabberd.app"))
    if not found:
        raise RuntimeError("ejabberd is not installed (scripts/setup.sh --ejabberd)")
    return str(Path(found[-1]).parents[2])


def installed() -> bool:
    try:
        ejabberd_libs()
        return True
    except RuntimeError:
        return False


def node_config(mqtt_port: int, session_expiry: int, max_payload: int | None) -> str:
    payload = f"    max_payload_size: {max_payload}\n" if max_payload else ""
    return f"""hosts:
  - "{HOST}"
loglevel: info
log_rotate_count: 0
auth_method: [anonymous]
anonymous_protocol: login_anon
listen:
  -
    port: {mqtt_port}
    ip: "127.0.0.1"
    module: mod_mqtt
    backlog: 1000
{payload}acl:
  local:
    user_regexp: ""
access_rules:
  local:
    allow: all
modules:
  mod_mqtt:
    session_expiry: {session_expiry}
    max_queue: 100000
"""


def mqtt_connect_ok(port: int, timeout: float = 3.0) -> bool:
    """True when an MQTT 5 CONNECT on `port` is answered with success (and then closed cleanly)."""
    if not port_open(port):
        return False
    answered = threading.Event()
    result: dict = {}
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"ready-{time.monotonic_ns()}",
                         protocol=mqtt.MQTTv5)
    client.username_pw_set(USERNAME, PASSWORD)

    def on_connect(_c, _u, _flags, reason_code, _props=None):
        result["rc"] = reason_code
        answered.set()

    client.on_connect = on_connect
    try:
        client.connect("127.0.0.1", port, keepalive=10)
    except OSError:
        return False
    client.loop_start()
    try:
        return answered.wait(timeout) and not result["rc"].is_failure
    finally:
        client.disconnect()
        client.loop_stop()


class EjabberdNode(Process):
    """One ejabberd node: `erl` execs erlexec, which execs beam.smp, so the PID is the node's own."""

    def __init__(self, workdir: Path, index: int, epmd_port: int, cookie: str, session_expiry: int,
                 max_payload: int | None):
        self.index = index
        self.node = f"ejabberd{index}@{HOST}"
        self.mqtt_port, self.dist_port = free_port(), free_port()
        self.home = workdir / f"ejabberd{index}"
        self.spool = self.home / "spool"
        self.spool.mkdir(parents=True, exist_ok=True)
        self.config = self.home / "ejabberd.yml"
        self.config.write_text(node_config(self.mqtt_port, session_expiry, max_payload))
        argv = ["erl", "-sname", self.node, "-noinput", "-start_epmd", "false", "-setcookie", cookie,
                "-kernel", "inet_dist_use_interface", "{127,0,0,1}",
                "inet_dist_listen_min", str(self.dist_port), "inet_dist_listen_max", str(self.dist_port),
                "-mnesia", "dir", f'"{self.spool}"', "-s", "ejabberd"]
        env = {"ERL_EPMD_PORT": str(epmd_port), "ERL_EPMD_ADDRESS": "127.0.0.1", "ERL_LIBS": ejabberd_libs(),
               "EJABBERD_CONFIG_PATH": str(self.config), "EJABBERD_LOG_PATH": str(self.home / "ejabberd.log"),
               "ERL_CRASH_DUMP": str(self.home / "erl_crash.dump"), "ERL_CRASH_DUMP_BYTES": "0",
               "HOME": str(self.home)}
        super().__init__(f"ejabberd{index}", argv, workdir, env)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.mqtt_port}"

    def wait_ready(self, timeout: float = START_TIMEOUT):
        wait_until(lambda: not self.running() or mqtt_connect_ok(self.mqtt_port), timeout, 0.25,
                   f"{self.node} to accept an MQTT connection")
        if not self.running():
            raise RuntimeError(f"{self.node} exited:\n{self.log()[-3000:]}\n{self.ejabberd_log()[-3000:]}")
        return self

    def ejabberd_log(self) -> str:
        try:
            return (self.home / "ejabberd.log").read_text(errors="replace")
        except FileNotFoundError:
            return ""


class EjabberdCluster:
    """`nodes` ejabberd nodes clustered through Mnesia: `start()`, `nodes[i]`, `stop_node(i)`,
    `start_node(i)` (rejoins from its spool), `node_of(pid)`, `close()`."""

    def __init__(self, workdir: Path, nodes: int = 2, session_expiry: int = 3600, max_payload: int | None = None):
        self.workdir = workdir
        self.cookie = secrets.token_hex(16)
        self.epmd_port = free_port()
        self.epmd = Process("epmd", ["epmd", "-port", str(self.epmd_port), "-address", "127.0.0.1"], workdir)
        self.nodes = [EjabberdNode(workdir, i + 1, self.epmd_port, self.cookie, session_expiry, max_payload)
                      for i in range(nodes)]

    def start(self) -> EjabberdCluster:
        self.epmd.start()
        wait_until(lambda: port_open(self.epmd_port) or not self.epmd.running(), 10, what="epmd to listen")
        for node in self.nodes:
            node.start()
        for node in self.nodes:
            node.wait_ready()
        for node in self.nodes[1:]:
            self.ctl(node, "join_cluster", self.nodes[0].node)
            # join_cluster restarts ejabberd on the joining node: ready again once it answers MQTT
            # and sees every node.
            wait_until(lambda n=node: set(self.running_nodes(n)) >= {m.node for m in self.nodes[:n.index]},
                       START_TIMEOUT, 0.25, f"{node.node} to run in the cluster")
            node.wait_ready()
        return self

    def ctl(self, node: EjabberdNode, *args: str, timeout: float = 60) -> str:
        """`ejabberdctl <args>` against `node`: ejabberd_ctl in a hidden node of ours. Raises on failure."""
        argv = ["erl", "-sname", f"ctl{secrets.token_hex(4)}@{HOST}", "-hidden", "-noinput", "-start_epmd", "false",
                "-setcookie", self.cookie, "-kernel", "inet_dist_use_interface", "{127,0,0,1}",
                "-s", "ejabberd_ctl", "-extra", node.node, *args]
        env = {**os.environ, "ERL_EPMD_PORT": str(self.epmd_port), "ERL_LIBS": ejabberd_libs()}
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=self.workdir)
        if done.returncode != 0:
            raise RuntimeError(f"ejabberdctl {' '.join(args)} on {node.node}: exit {done.returncode}\n"
                               f"{done.stdout}{done.stderr}")
        return done.stdout

    def running_nodes(self, node: EjabberdNode) -> list[str]:
        """The cluster's nodes as `node` sees them (`ejabberdctl list_cluster`); [] when it does not answer."""
        try:
            return self.ctl(node, "list_cluster", timeout=20).split()
        except (RuntimeError, subprocess.TimeoutExpired):
            return []

    def stop_node(self, index: int, sig: int = signal.SIGTERM):
        """Stops node `index` (0-based) by its PID: SIGTERM is a clean `init:stop()`, SIGKILL a crash."""
        self.nodes[index].stop(sig, timeout=30)

    def start_node(self, index: int):
        """Starts node `index` again from its spool (it rejoins the cluster by itself) and waits until
        it answers MQTT."""
        node = self.nodes[index]
        node.start()
        node.wait_ready()

    def node_of(self, pid: int) -> int | None:
        """Which node (1-based) process `pid` has an established TCP connection to, from the kernel's
        socket table (`ss`, from iproute2); None while it has none to any node's MQTT port."""
        out = subprocess.run(["ss", "-tnpH", "state", "established"], capture_output=True, text=True, timeout=10).stdout
        ports = {n.mqtt_port: n.index for n in self.nodes}
        for line in out.splitlines():
            fields = line.split()
            if f"pid={pid}," not in line or len(fields) < 4:
                continue
            peer = fields[3].rsplit(":", 1)[-1]
            if peer.isdigit() and int(peer) in ports:
                return ports[int(peer)]
        return None

    def close(self):
        for node in self.nodes:
            node.stop(signal.SIGTERM, timeout=30)
        self.epmd.stop(signal.SIGTERM, timeout=5)

    def logs(self) -> str:
        return "\n".join(f"----- {n.node} -----\n{n.log()[-2000:]}\n{n.ejabberd_log()[-4000:]}" for n in self.nodes)
