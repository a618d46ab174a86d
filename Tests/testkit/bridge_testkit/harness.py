"""Real processes for end-to-end tests: mosquitto, pusher-local and the bridge daemon.

Every process is started by the test on a free 127.0.0.1 port, with its output in a log file under
the test's temporary directory, and is stopped by PID (never by name) when the test ends.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import ssl
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import paho.mqtt.client as mqtt
import pusher as pusher_http

REPO = Path(__file__).resolve().parents[3]


def binary(env_name: str, name: str) -> str:
    path = os.environ.get(env_name) or str(REPO / ".build" / "debug" / name)
    if not os.path.exists(path):
        raise RuntimeError(f"{name} not built: {path} (run `swift build` or set {env_name})")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.02, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class Process:
    """A child process with its log in a file; stopped by PID."""

    def __init__(self, name: str, argv: list[str], workdir: Path, env: dict | None = None):
        self.name, self.argv, self.workdir = name, argv, workdir
        self.env = {**os.environ, **(env or {})}
        self.log_path = workdir / f"{name}.log"
        self.proc: subprocess.Popen | None = None

    def start(self, stdout=None):
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self.argv, stdout=stdout or self._log, stderr=self._log, env=self.env, cwd=self.workdir
        )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def send_signal(self, sig: int):
        if self.running():
            os.kill(self.proc.pid, sig)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        return self.proc.returncode

    def kill(self):
        return self.stop(signal.SIGKILL)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


class TestCA:
    """A certificate authority made with the `openssl` CLI in `directory` (EC P-256, valid 2 days),
    issuing server and client certificates for the TLS tests."""

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(self, directory: Path, name: str = "ca"):
        self.directory, self.name = directory, name
        directory.mkdir(parents=True, exist_ok=True)
        self.cert, self.key = directory / f"{name}.pem", directory / f"{name}.key"
        self._openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                      "-keyout", self.key, "-out", self.cert, "-days", "2", "-subj", f"/CN=pusher-mqtt-bridge test {name}")

    def issue(self, name: str, *, dns: tuple[str, ...] = (), ips: tuple[str, ...] = (),
              client: bool = False) -> tuple[Path, Path]:
        """A certificate (with these subjectAltNames) and its key, signed by this CA: (cert, key)."""
        cert, key = self.directory / f"{name}.pem", self.directory / f"{name}.key"
        csr, ext = self.directory / f"{name}.csr", self.directory / f"{name}.ext"
        self._openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
                      "-out", csr, "-subj", f"/CN={name}")
        lines = ["basicConstraints=CA:FALSE", f"extendedKeyUsage={'clientAuth' if client else 'serverAuth'}"]
        names = [f"DNS:{d}" for d in dns] + [f"IP:{i}" for i in ips]
        if names:
            lines.append("subjectAltName=" + ",".join(names))
        ext.write_text("\n".join(lines) + "\n")
        self._openssl("x509", "-req", "-in", csr, "-CA", self.cert, "-CAkey", self.key, "-CAcreateserial", "-out", cert,
                      "-days", "2", "-extfile", ext)
        return cert, key

    def _openssl(self, *args):
        done = subprocess.run(["openssl", *map(str, args)], cwd=self.directory, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"openssl {args[0]} failed: {done.stderr}")


@dataclass
class BrokerTLS:
    """A TLS listener for Mosquitto: its CA (which client certificates must chain to), its
    certificate and key; `require_certificate` makes every client present a certificate."""
    ca_file: Path
    cert_file: Path
    key_file: Path
    require_certificate: bool = True


class Mosquitto(Process):
    """mosquitto on a free port with a generated config (persistence on, so restarts keep sessions);
    with `tls`, the one listener speaks TLS (mqtts)."""

    def __init__(self, workdir: Path, port: int | None = None, tls: BrokerTLS | None = None):
        self.tls = tls
        self.port = port or free_port()
        self.data = workdir / f"mosquitto-{self.port}"
        self.data.mkdir(parents=True, exist_ok=True)
        self.conf = self.data / "mosquitto.conf"
        self.conf.write_text(
            f"listener {self.port} 127.0.0.1\nallow_anonymous true\nset_tcp_nodelay true\n"
            f"max_queued_messages 0\npersistence true\npersistence_location {self.data}/\n"
            "autosave_interval 1\n"
            + (f"cafile {tls.ca_file}\ncertfile {tls.cert_file}\nkeyfile {tls.key_file}\n"
               f"require_certificate {'true' if tls.require_certificate else 'false'}\n" if tls else "")
            # Run as root, mosquitto would switch to the `mosquitto` user and could not write its
            # persistence file here: sessions would silently not survive a broker restart.
            + ("user root\n" if os.geteuid() == 0 else "")
        )
        super().__init__(f"mosquitto-{self.port}", ["mosquitto", "-c", str(self.conf)], workdir)

    def start(self, stdout=None):
        super().start(stdout)
        wait_until(lambda: port_open(self.port) or not self.running(), 10, what="mosquitto to listen")
        if not self.running():
            raise RuntimeError("mosquitto did not start:\n" + self.log())
        return self


class PusherLocal(Process):
    """pusher-local on a free port; the ready line on stdout gives the port. With `tls` (a
    certificate and key) it serves https:// and wss://, and `ca_file` is what its clients here trust.
    The one launcher of pusher-local for every suite (e2e, interop, faults, packaging) and benchmark."""

    host = "127.0.0.1"

    def __init__(self, workdir: Path, app_id="1", key="app-key", secret="app-secret", port: int = 0, extra=(),
                 tls: tuple[Path, Path] | None = None, ca_file: Path | None = None):
        self.app_id, self.key, self.secret = app_id, key, secret
        self.requested_port = port
        self.port = 0
        self.ready_line = ""
        self.tls, self.ca_file = tls, ca_file
        tls_args = ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])] if tls else []
        argv = [binary("PUSHER_LOCAL_BIN", "pusher-local"), "--host", "127.0.0.1", "--port", str(port),
                "--app-id", app_id, "--key", key, "--secret", secret, *tls_args, *extra]
        super().__init__(f"pusher-local-{port or 'any'}-{id(self)}", argv, workdir)

    def start(self, stdout=None):
        super().start(stdout=subprocess.PIPE)
        line_queue: queue.Queue = queue.Queue()

        def pump():
            for raw in self.proc.stdout:
                line_queue.put(raw.decode(errors="replace"))

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                line = line_queue.get(timeout=0.2)
            except queue.Empty:
                if not self.running():
                    break
                continue
            m = re.search(r"listening on [^\s:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                self.ready_line = line
                return self
        raise RuntimeError("pusher-local printed no ready line:\n" + self.log())

    @property
    def process(self) -> subprocess.Popen:
        assert self.proc is not None
        return self.proc

    @property
    def ws_url(self) -> str:
        return f"{'wss' if self.tls else 'ws'}://{self.host}:{self.port}/app/{self.key}?protocol=7"

    @property
    def http_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    @property
    def stderr_lines(self) -> list[str]:
        """What it has written to stderr so far (its log file), line by line."""
        return self.log().splitlines(keepends=True)

    def app_control(self, method: str, path: str, body: str | None = None) -> tuple[int, str]:
        """A control endpoint of the first app, `/pusher-local/apps/ID/<path>`: (status, text)."""
        data = body.encode() if body is not None else (b"" if method == "POST" else None)
        status, raw = self.control(method, f"/pusher-local/apps/{self.app_id}/{path}", data, timeout=10)
        return status, raw.decode()

    def control(self, method: str, path: str, body: bytes | None = None, timeout: float = 5) -> tuple[int, bytes]:
        import urllib.request

        scheme = "https" if self.tls else "http"
        req = urllib.request.Request(f"{scheme}://127.0.0.1:{self.port}{path}", data=body, method=method)
        context = ssl.create_default_context(cafile=str(self.ca_file)) if self.tls and self.ca_file else None
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def http_client(self) -> pusher_http.Pusher:
        """The official Pusher server library, pointed at this server (it signs every request);
        over https with TLS, verifying against `ca_file`."""
        if self.tls:
            return https_pusher_client(self.app_id, self.key, self.secret, "127.0.0.1", self.port, self.ca_file)
        return pusher_http.Pusher(app_id=self.app_id, key=self.key, secret=self.secret,
                                  host="127.0.0.1", port=self.port, ssl=False)


def https_pusher_client(app_id: str, key: str, secret: str, host: str, port: int, ca_file) -> pusher_http.Pusher:
    """The official `pusher` library over https, verifying the server against `ca_file`.

    With `ssl=True` the library pins its own bundled cacert.pem (`verify=` in its requests
    backend), so REQUESTS_CA_BUNDLE is ignored; a backend that verifies against `ca_file` instead
    keeps verification on with a private CA."""
    from pusher.requests import RequestsBackend

    class VerifyAgainstCA(RequestsBackend):
        def __init__(self, client, **options):
            super().__init__(client, **options)
            self.options["verify"] = str(ca_file)

    return pusher_http.Pusher(app_id=app_id, key=key, secret=secret, host=host, port=port, ssl=True,
                              backend=VerifyAgainstCA)


class Bridge(Process):
    """The pusher-mqtt-bridge daemon on a generated config."""

    def __init__(self, workdir: Path, config: str, name: str = "bridge", env: dict | None = None):
        self.config_path = workdir / f"{name}.conf"
        self.config_path.write_text(config)
        super().__init__(name, [binary("BRIDGE_BIN", "pusher-mqtt-bridge"), "run", "--config", str(self.config_path)],
                         workdir, env)

    def write_config(self, config: str):
        self.config_path.write_text(config)

    def cli(self, *args: str, timeout: float = 30, env: dict | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([binary("BRIDGE_BIN", "pusher-mqtt-bridge"), *args], capture_output=True,
                              text=True, timeout=timeout, env={**self.env, **(env or {})}, cwd=self.workdir)


@dataclass
class ClientTLS:
    """TLS for a paho-mqtt client: the CA to verify the broker with (host name checked) and an
    optional client certificate."""
    ca_file: Path
    cert_file: Path | None = None
    key_file: Path | None = None

    def apply(self, client: mqtt.Client):
        client.tls_set(ca_certs=str(self.ca_file), certfile=self.cert_file and str(self.cert_file),
                       keyfile=self.key_file and str(self.key_file), cert_reqs=ssl.CERT_REQUIRED)


class MQTTCollector:
    """A paho-mqtt subscriber that records every message (topic, payload bytes, retain, properties)."""

    def __init__(self, port: int, topics: list[str], qos: int = 1, client_id: str | None = None, v5: bool = True,
                 tls: ClientTLS | None = None):
        self.messages: list = []
        self.lock = threading.Lock()
        self.connected = threading.Event()
        protocol = mqtt.MQTTv5 if v5 else mqtt.MQTTv311
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id or f"collector-{id(self)}",
                                  protocol=protocol)
        self.topics, self.qos = topics, qos

        def on_connect(client, userdata, flags, reason_code, properties=None):
            for t in self.topics:
                client.subscribe(t, qos)
            self.connected.set()

        def on_message(client, userdata, msg):
            with self.lock:
                self.messages.append(msg)

        self.client.on_connect = on_connect
        self.client.on_message = on_message
        if tls:
            tls.apply(self.client)
        self.client.connect("127.0.0.1", port, keepalive=30)
        self.client.loop_start()
        if not self.connected.wait(10):
            raise RuntimeError("collector could not connect")
        time.sleep(0.2)  # SUBACK

    def payloads(self, topic: str | None = None) -> list[bytes]:
        with self.lock:
            return [m.payload for m in self.messages if topic is None or m.topic == topic]

    def snapshot(self) -> list:
        with self.lock:
            return list(self.messages)

    def close(self):
        self.client.loop_stop()
        self.client.disconnect()


def publish(port: int, topic: str, payload: bytes | str, qos: int = 1, retain: bool = False,
            tls: ClientTLS | None = None):
    """One message from a fresh paho-mqtt client, waiting for the broker's ack."""
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"pub-{time.monotonic_ns()}")
    if tls:
        tls.apply(client)
    client.connect("127.0.0.1", port)
    client.loop_start()
    info = client.publish(topic, payload, qos=qos, retain=retain)
    info.wait_for_publish(10)
    client.loop_stop()
    client.disconnect()


def retained(port: int, topic_filter: str, settle: float = 0.5) -> dict[str, bytes]:
    """The retained messages under a filter, as a fresh subscriber sees them."""
    c = MQTTCollector(port, [topic_filter], client_id=f"retained-{time.monotonic_ns()}")
    time.sleep(settle)
    c.close()
    return {m.topic: m.payload for m in c.snapshot() if m.retain}


def json_lines(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def rule(name: str, source: str, **fields) -> str:
    """One `[[bridge.rule]]` table (docs/configuration.md): `name`, `from = source`, then `fields` in
    their order, each a TOML value (strings quoted, lists as arrays, numbers bare). Placeholders
    such as `{channel}` or `{1}` are written as they are."""
    lines = ["", "[[bridge.rule]]", f'name = "{name}"', f'from = "{source}"']
    lines += [f"{key} = {json.dumps(value)}" for key, value in fields.items()]
    return "\n".join(lines) + "\n"


def bridge_tables(name: str, pusher, broker, pusher_lines: str = "", mqtt_lines: str = "") -> str:
    """A `[[bridge]]` named `name` with its `[bridge.pusher]` and `[bridge.mqtt]` tables for a plain
    pusher-local and mosquitto on 127.0.0.1 (client id `bridge-<name>`); `pusher_lines` and
    `mqtt_lines` end each table (the MQTT table is left open for more)."""
    return f"""[[bridge]]
name = "{name}"

[bridge.pusher]
key = "{pusher.key}"
app_id = "{pusher.app_id}"
secret = "{pusher.secret}"
host = "127.0.0.1"
port = {pusher.port}
tls = false
{pusher_lines}
[bridge.mqtt]
host = "127.0.0.1"
port = {broker.port}
client_id = "bridge-{name}"
{mqtt_lines}
"""


def bridge_config(pusher: PusherLocal, broker: Mosquitto, workdir: Path, rules: str = "", *,
                  name: str = "e2e", protocol: int = 5, extra_pusher: str = "", extra_mqtt: str = "",
                  daemon: str = "", buffer: str = "") -> str:
    """A bridges.conf for one bridge between the given pusher-local and mosquitto."""
    tables = bridge_tables(name, pusher, broker, f'activity_timeout = "2s"\npong_timeout = "1s"\n{extra_pusher}\n',
                           f"protocol = {protocol}")
    return f"""
[daemon]
log_level = "debug"
metrics = ""
state_dir = "{workdir / 'state'}"
shutdown_grace = "5s"
{daemon}

{tables}clean_session = false
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


# ---- clusters (docs/contract.md §7.4) ---------------------------------------------------------

def http_get(url: str, timeout: float = 3) -> tuple[int, str]:
    """(status, body) of a GET; (0, reason) when nothing answered."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except OSError as e:
        return 0, str(e)


def readyz(port: int) -> tuple[int, str]:
    """(status, body) of the daemon's /readyz on `port`; (0, reason) while nothing answers."""
    return http_get(f"http://127.0.0.1:{port}/readyz", timeout=2)


def metric_value(text: str, series: str) -> float | None:
    """The value of one exposition line (`name{labels}` exactly as written), or None."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None


class ClusterMember(Bridge):
    """One instance of a clustered bridge: every instance runs the SAME config file (so the
    instance name and the metrics port come from the environment: `instance = "${BRIDGE_INSTANCE}"`,
    `metrics = "127.0.0.1:${METRICS_PORT}"`). `process_name` names the log file (a second process
    with the same instance name needs another one)."""

    def __init__(self, workdir: Path, config_path: Path, instance: str, metrics_port: int | None = None,
                 env: dict | None = None, process_name: str | None = None):
        self.instance = instance
        self.metrics_port = metrics_port or free_port()
        self.config_path = config_path
        Process.__init__(self, process_name or f"bridge-{instance}",
                         [binary("BRIDGE_BIN", "pusher-mqtt-bridge"), "run", "--config", str(config_path)], workdir,
                         {"BRIDGE_INSTANCE": instance, "METRICS_PORT": str(self.metrics_port), **(env or {})})

    def restart(self, down: float = 0.0, sig: int = signal.SIGKILL):
        """Stop with `sig` (SIGKILL: no handover) and start again after `down` seconds."""
        self.stop(sig)
        time.sleep(down)
        self.start()
        return self

    def metrics(self) -> str:
        status, body = http_get(f"http://127.0.0.1:{self.metrics_port}/metrics")
        return body if status == 200 else ""

    def metric(self, series: str) -> float | None:
        return metric_value(self.metrics(), series)

    def readyz(self) -> tuple[int, str]:
        return http_get(f"http://127.0.0.1:{self.metrics_port}/readyz")


def start_cluster(workdir: Path, config: str, instances: list[str], env: dict | None = None,
                  config_name: str = "cluster.conf") -> list[ClusterMember]:
    """Writes the one config file and starts one ClusterMember per instance name (each with its
    own metrics port and log; state directories are `<state_dir>/<instance>` by the contract)."""
    path = workdir / config_name
    path.write_text(config)
    return [ClusterMember(workdir, path, name, env=env).start() for name in instances]


def pusher_connections(pusher: PusherLocal) -> list[dict]:
    """pusher-local's connection records (`GET /pusher-local/apps/ID/connections`): socket id,
    sorted channels, presence user id, remote ip:port. [] when it does not answer."""
    try:
        status, body = pusher.control("GET", f"/pusher-local/apps/{pusher.app_id}/connections")
    except OSError:
        return []
    return json.loads(body) if status == 200 else []


def holders(pusher: PusherLocal, channels) -> dict[str, int]:
    """For each channel, how many connections hold it right now (from the connection records)."""
    counts = {c: 0 for c in channels}
    for record in pusher_connections(pusher):
        for c in record["channels"]:
            if c in counts:
                counts[c] += 1
    return counts
