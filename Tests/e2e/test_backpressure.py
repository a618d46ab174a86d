"""Backpressure for MQTT -> Pusher at QoS 1 (docs/contract.md §7.6): a message the broker handed
over is never dropped for lack of room. With the default `overflow` (no key: `backpressure`, because
the rule reads QoS 1) and a small buffer, a burst and a Pusher API outage that each exceed the
buffer arrive complete and in order; the bridge stops reading from the broker instead (the broker's
persistent session holds the rest).

The load comes from Benchmarks/bridge/c_pub.c (libmosquitto, QoS 1, sequence-numbered payloads) and
is counted at the Pusher side by Benchmarks/bridge/ws_sub.c (a plain WebSocket subscriber that
reports missing, duplicated and reordered sequence numbers). Both are compiled into the test's
directory unless BENCH_TOOLS names a directory holding them.

Full scale, by hand (BP_PERSIST=false keeps the outbox in memory, to see the buffer in the RSS):
    BP_COUNT=20000 BP_SIZE=8192 BP_MAX_MESSAGES=100000 BP_MAX_BYTES=64MiB BRIDGE_BIN=.build/release/pusher-mqtt-bridge \\
        .venv/bin/python -m pytest -q -s Tests/e2e/test_backpressure.py -k burst
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

from bridge_testkit.harness import REPO, bridge_config, free_port, wait_until

RULE = """
[[bridge.rule]]
name = "ov"
from = "mqtt"
topic = "ov/+"
channel = "ov-{1}"
event = "bench"
qos = 1
payload = "data"
"""


def tools(workdir: Path) -> Path:
    """c_pub and ws_sub: BENCH_TOOLS, or compiled here (a second each)."""
    given = os.environ.get("BENCH_TOOLS")
    if given:
        return Path(given)
    out = workdir / "tools"
    out.mkdir(exist_ok=True)
    src = REPO / "Benchmarks" / "bridge"
    subprocess.run(["cc", "-O2", "-o", str(out / "c_pub"), str(src / "c_pub.c"), "-lmosquitto", "-lpthread"], check=True)
    subprocess.run(["cc", "-O2", "-o", str(out / "ws_sub"), str(src / "ws_sub.c")], check=True)
    return out


def config(pusher, broker, workdir: Path, max_messages: int, max_bytes: str, metrics_port: int) -> str:
    text = bridge_config(pusher, broker, workdir, RULE, name="bp")
    # No `overflow` key: the default for a rule reading QoS 1 is backpressure.
    old = 'max_messages = 100000\nmax_bytes = "64MiB"\noverflow = "drop-oldest"\n'
    assert old in text
    text = text.replace(old, f'max_messages = {max_messages}\nmax_bytes = "{max_bytes}"\n')
    text = text.replace('metrics = ""', f'metrics = "127.0.0.1:{metrics_port}"')
    if os.environ.get("BP_PERSIST") == "false":  # the outbox in memory: RSS then holds the whole buffer
        text = text.replace("persist = true", "persist = false")
    return text.replace('log_level = "debug"', 'log_level = "info"')


def metrics(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        lines = response.read().decode().splitlines()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in lines if line and not line.startswith("#")}


def m2p(values: dict[str, float], outcome: str) -> float:
    return sum(v for k, v in values.items()
               if k.startswith("pusher_mqtt_bridge_messages_total{") and 'direction="mqtt_to_pusher"' in k
               and f'outcome="{outcome}"' in k)


def identity(values: dict[str, float]) -> tuple[float, float]:
    """MQTT -> Pusher received_total, and the sum of its outcomes + buffered (docs/contract.md §7.6)."""
    received = values.get('pusher_mqtt_bridge_received_total{bridge="bp",direction="mqtt_to_pusher"}', -1.0)
    outcomes = sum(v for k, v in values.items()
                   if k.startswith("pusher_mqtt_bridge_messages_total{") and 'direction="mqtt_to_pusher"' in k)
    buffered = values.get('pusher_mqtt_bridge_buffered_messages{bridge="bp",direction="mqtt_to_pusher"}', 0.0)
    return received, outcomes + buffered


class PeakRSS:
    """Samples the daemon's resident set (VmRSS) every 100 ms; VmHWM is the kernel's own peak."""

    def __init__(self, pid: int):
        self.pid, self.peak_kib, self.stop = pid, 0, threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while not self.stop.is_set():
            try:
                for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        self.peak_kib = max(self.peak_kib, int(line.split()[1]))
            except OSError:
                return
            time.sleep(0.1)


def run_load(pusher, broker, workdir, bridges, *, count: int, size: int, rate: int, max_messages: int, max_bytes: str,
             outage_s: float = 0.0, limit_s: float = 50.0) -> dict:
    bin_dir = tools(workdir)
    metrics_port = free_port()
    bridge = bridges(config(pusher, broker, workdir, max_messages, max_bytes, metrics_port))

    def ready() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/readyz", timeout=1) as response:
                return response.status == 200
        except OSError:
            return False

    wait_until(ready, 20, 0.1, "the bridge to be ready")
    time.sleep(0.5)  # the MQTT subscription follows the CONNACK
    rss = PeakRSS(bridge.pid)
    time.sleep(0.2)
    start_rss_mib = round(rss.peak_kib / 1024, 1)
    receiver = subprocess.Popen([str(bin_dir / "ws_sub"), str(pusher.port), pusher.key, "ov-s", "bench", str(count),
                                 "8", str(int(limit_s)), str(workdir / "latencies.bin")],
                                stdout=subprocess.PIPE, stderr=open(workdir / "ws_sub.log", "ab"))
    assert receiver.stdout.readline().decode().strip() == "ready"
    if outage_s:
        status, _ = pusher.control("POST", f"/pusher-local/apps/{pusher.app_id}/quota?exceeded=true")
        assert status == 200
    started = time.monotonic()
    publisher = subprocess.run([str(bin_dir / "c_pub"), str(broker.port), "ov/s", str(count), "1", str(size), str(rate),
                                "1000", "1"], capture_output=True, timeout=limit_s)
    assert publisher.returncode == 0, publisher.stderr.decode(errors="replace")
    sent = json.loads(publisher.stdout.decode().strip().splitlines()[-1])
    if outage_s:
        time.sleep(max(0.0, outage_s - (time.monotonic() - started)))
        held = metrics(metrics_port)
        status, _ = pusher.control("POST", f"/pusher-local/apps/{pusher.app_id}/quota?exceeded=false")
        assert status == 200
    else:
        held = {}
    out, _ = receiver.communicate(timeout=limit_s + 30)
    received = json.loads(out.decode().strip().splitlines()[-1])
    rss.stop.set()
    time.sleep(1.5)  # `buffered_messages` is refreshed by the housekeeping second
    values = metrics(metrics_port)
    log = bridge.log()
    result = {"sent": sent, "received": received, "dropped": m2p(values, "dropped"),
              "delivered": m2p(values, "delivered"), "start_rss_mib": start_rss_mib, "peak_rss_mib": round(rss.peak_kib / 1024, 1),
              "buffered_during_outage": held.get('pusher_mqtt_bridge_buffered_messages{bridge="bp",direction="mqtt_to_pusher"}'),
              "seconds": round(time.monotonic() - started, 1),
              "keepalive_closes": log.count("keep-alive timeout") // 2,  # two lines per close
              "reading_resumed_lines": log.count("reading from the broker resumed"),
              "held_reconnects": log.count("not reconnecting until the incoming buffer drains"),
              "identity_end": identity(values), "identity_during_outage": identity(held) if held else None}
    print("\nbackpressure run:", json.dumps(result))
    return result


def test_burst_larger_than_the_buffer_is_delivered_complete_and_in_order(pusher, broker, workdir, bridges):
    count = int(os.environ.get("BP_COUNT", "3000"))
    size = int(os.environ.get("BP_SIZE", "8192"))
    result = run_load(pusher, broker, workdir, bridges, count=count, size=size, rate=0,
                      max_messages=int(os.environ.get("BP_MAX_MESSAGES", "200")),
                      max_bytes=os.environ.get("BP_MAX_BYTES", "64MiB"), limit_s=float(os.environ.get("BP_LIMIT_S", "50")))
    got = result["received"]
    assert got["missing"] == 0 and got["unique"] == count, got
    assert got["reordered"] == 0, got
    assert result["dropped"] == 0
    received, accounted = result["identity_end"]
    assert received == accounted == count


def test_pusher_outage_longer_than_the_buffer_and_keepalive_loses_nothing(pusher, broker, workdir, bridges):
    # 500 msg/s for 4 s into a 300-message buffer (1 MiB: the MQTT client pauses reading at a
    # quarter of it, 256 KiB) while Pusher refuses (403) for 14 s: reading pauses, libmosquitto's
    # keep-alive (5 s) closes the paused connection after 2 x 5 s without a read, the bridge holds
    # its reconnect until the backlog drains, and the broker's session delivers the rest.
    # Larger by hand: BP_OUTAGE_COUNT, BP_OUTAGE_RATE, BP_OUTAGE_S, BP_OUTAGE_MAX_MESSAGES, BP_LIMIT_S.
    count = int(os.environ.get("BP_OUTAGE_COUNT", "2000"))
    max_messages = int(os.environ.get("BP_OUTAGE_MAX_MESSAGES", "300"))
    result = run_load(pusher, broker, workdir, bridges, count=count, size=1024,
                      rate=int(os.environ.get("BP_OUTAGE_RATE", "500")), max_messages=max_messages, max_bytes="1MiB",
                      outage_s=float(os.environ.get("BP_OUTAGE_S", "14")), limit_s=float(os.environ.get("BP_LIMIT_S", "50")))
    got = result["received"]
    assert got["missing"] == 0 and got["unique"] == count, got
    assert got["reordered"] == 0, got
    assert result["dropped"] == 0
    # The outbox held no more than its limit (plus one burst of at most 64) while Pusher refused.
    assert result["buffered_during_outage"] is not None and result["buffered_during_outage"] <= max_messages + 64
    # received = outcomes + buffered while held back (nothing moves then) and at the end.
    during = result["identity_during_outage"]
    assert during[0] == during[1] > 0, during
    assert result["identity_end"] == (count, count)
    # The long pause took the keep-alive path: the connection closed and the reconnect was held.
    assert result["keepalive_closes"] >= 1 and result["held_reconnects"] >= 1
