"""The full-disk scenario (docs/contract.md §7.6) of Tests/e2e/test_disk_full.py, which is also the
`disk-full` row of the fault matrix (Tests/faults/matrix.py); see the test's docstring."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import paho.mqtt.client as mqtt

from bridge_testkit.clients import NotifySocket
from bridge_testkit.prometheus import books_balance
from bridge_testkit.harness import Bridge, Mosquitto, PusherLocal, bridge_config, free_port, rule, wait_until

CHANNEL = "disk-full"
STREAM = f"p2m/{CHANNEL}"
RULE = rule("disk", "pusher", channel=CHANNEL, events=["tagged"], topic="disk/{channel}", qos=1)
LIVE_EVENTS = 10
DEGRADED = 'pusher_mqtt_bridge_spool_degraded{bridge="disk",direction="pusher_to_mqtt"}'
# Log lines about the degraded spool (Sources/BridgeDaemon/Queues/Outbox+Spool.swift).
DEGRADED_LINES = ("spool degraded", "spool still degraded")


class MountRefused(Exception):
    """The tmpfs could not be mounted (not root, no CAP_SYS_ADMIN): the scenario cannot run."""


def metric(port: int, name: str) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[-1])
    except OSError:
        return None
    return None


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def run_disk_full(workdir: Path, events: int = 3000, second_events: int = 500, size: int = 1024, free_kib: int = 192) -> dict:
    """Runs the scenario (and sends LIVE_EVENTS more at the end, once all is back); returns sent and received records ({stream: [(seq, time)]}), when the broker
    came back, observations and failures. Raises MountRefused when no tmpfs can be mounted."""
    workdir.mkdir(parents=True, exist_ok=True)
    state = workdir / "state"
    state.mkdir(exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(state)], capture_output=True, text=True)
    if mounted.returncode != 0:
        raise MountRefused(f"mount -t tmpfs failed ({mounted.stderr.strip() or mounted.returncode}); needs root")
    out = {"sent": {STREAM: []}, "received": {}, "broker_back": None, "observations": [], "failures": []}
    notes, failures = out["observations"], out["failures"]
    broker = pusher = bridge = receiver = None
    try:
        broker = Mosquitto(workdir).start()
        pusher = PusherLocal(workdir, extra=["--activity-timeout", "2"]).start()
        metrics_port = free_port()
        config = bridge_config(pusher, broker, workdir, RULE, name="disk")
        config = config.replace('metrics = ""', f'metrics = "127.0.0.1:{metrics_port}"').replace(
            'log_level = "debug"', 'log_level = "info"')
        notify = NotifySocket(str(workdir / "notify.sock"))
        bridge = Bridge(workdir, config, env={"NOTIFY_SOCKET": notify.path}).start()
        http = pusher.http_client()
        wait_until(lambda: http.channel_info(CHANNEL).get("occupied"), 20, 0.1, f"the bridge to subscribe {CHANNEL}")
        wait_until(lambda: metric(metrics_port, DEGRADED) == 0, 10, 0.1, "spool_degraded 0 (zero series)")

        received: dict[str, list[tuple[int, float]]] = {}
        receiver = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"disk-recv-{os.getpid()}", clean_session=False)
        receiver.reconnect_delay_set(0.1, 1)
        connected = []
        receiver.on_connect = lambda c, u, f, rc, p=None: (c.subscribe("disk/#", 1), connected.append(1))

        def on_message(client, userdata, msg):
            seq = json.loads(msg.payload).get("seq")
            received.setdefault(STREAM, []).append((seq, time.monotonic()))

        receiver.on_message = on_message
        receiver.connect("127.0.0.1", broker.port, keepalive=5)
        receiver.loop_start()
        wait_until(lambda: connected, 10, what="the receiver to connect")
        out["received"] = received

        # Fill the disk up to FREE_KIB: the spool takes ~FREE_KIB of records, the rest must wait in memory.
        filler = state / "filler"
        with open(filler, "wb") as f:
            f.write(b"\0" * max(0, free_bytes(state) - free_kib * 1024))
        notes.append(f"tmpfs free after the filler: {free_bytes(state) // 1024} KiB")

        broker.stop(signal.SIGTERM)
        wait_until(lambda: "mqtt down" in bridge.log() or "mqtt" in bridge.log(), 5, what="the bridge to notice")
        time.sleep(1.0)
        pad = "x" * max(0, size - 40)

        def send(first: int, last: int):
            for start in range(first, last, 10):
                seqs = range(start, min(start + 10, last))
                http.trigger_batch([{"channel": CHANNEL, "name": "tagged", "data": json.dumps({"seq": s, "pad": pad})}
                                    for s in seqs])
                now = time.monotonic()
                out["sent"][STREAM] += [(s, now) for s in seqs]

        def delivered() -> int:
            return len({s for s, _ in received.get(STREAM, [])})

        send(0, events)
        saw_degraded = wait_until_value(metrics_port, DEGRADED, 1, 10)
        notes.append(f"spool_degraded 1 while the broker was down: {saw_degraded}")
        if not saw_degraded:
            failures.append("spool_degraded never went to 1")
        # systemd's STATUS= line names the degraded spool and how much waits in memory only.
        status_degraded = wait_until_true(lambda: any("pusher_to_mqtt spool degraded (" in m and "in memory only)" in m
                                                      for m in notify.seen("STATUS=")), 5)
        notes.append(f"STATUS= named the degraded spool: {status_degraded}")
        if not status_degraded:
            failures.append(f"no STATUS= line named the degraded spool: {notify.seen('STATUS=')[-3:]}")
        spool_errors = metric(metrics_port, 'pusher_mqtt_bridge_errors_total{bridge="disk",kind="spool"}') or 0
        notes.append(f"errors_total{{kind=spool}} while degraded (one a second): {spool_errors:g}")
        if spool_errors < 1:
            failures.append("errors_total{kind=spool} did not count the degraded spool")
        buffered = 'pusher_mqtt_bridge_buffered_messages{bridge="disk",direction="pusher_to_mqtt"}'
        all_in = wait_until_value(metrics_port, buffered, events, 20)
        notes.append(f"buffered_messages while the broker was down: {metric(metrics_port, buffered):g}")
        if not all_in:
            failures.append(f"the bridge did not buffer all {events} events")

        broker.start()
        out["broker_back"] = time.monotonic()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and delivered() < events:
            time.sleep(0.2)
        notes.append(f"delivered {delivered()}/{events} {time.monotonic() - out['broker_back']:.1f} s after the broker came back")
        # Everything in the spool is delivered: it frees its own segment and resumes.
        resumed = wait_until_value(metrics_port, DEGRADED, 0, 5)
        time.sleep(1.5)  # buffered_messages is set each housekeeping second
        received_total, outcomes, buffered_now = books_balance(metrics_port)
        notes.append(f"P->M counters: received {received_total:g} = outcomes {outcomes:g} + buffered {buffered_now:g}")
        if received_total != outcomes + buffered_now or received_total < events:
            failures.append("the counters do not add up after the disk-full outage")
        notes.append(f"spool_degraded 0 after delivery, filler still there (the spool freed its delivered records): {resumed}")
        if not resumed:
            failures.append("spool_degraded did not go back to 0 once everything was delivered")
        status_clear = wait_until_true(lambda: "degraded" not in (notify.seen("STATUS=") or [""])[-1], 3)
        notes.append(f"STATUS= without 'degraded' once the spool resumed: {status_clear}")
        if not status_clear:
            failures.append(f"STATUS= still says degraded after the spool resumed: {notify.seen('STATUS=')[-1:]}")

        if second_events:
            broker.stop(signal.SIGTERM)
            time.sleep(1.0)
            send(events, events + second_events)
            again = wait_until_value(metrics_port, DEGRADED, 1, 10)
            notes.append(f"second outage, {second_events} events: spool_degraded 1 again: {again}")
            if not again:
                failures.append("spool_degraded did not go to 1 in the second outage")
            filler.unlink()
            freed = time.monotonic()
            resumed = wait_until_value(metrics_port, DEGRADED, 0, 10)
            notes.append(f"spool_degraded 0 {time.monotonic() - freed:.1f} s after the filler was deleted "
                         f"(broker still away): {resumed}")
            if not resumed:
                failures.append("spool_degraded did not go back to 0 after space was freed")
            time.sleep(0.5)
            bridge.kill()  # what only memory held would be lost now; the spool must have it all
            bridge.start()
            broker.start()
            out["broker_back"] = time.monotonic()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and delivered() < events + second_events:
                time.sleep(0.2)
            notes.append(f"after SIGKILL + restart: delivered {delivered()}/{events + second_events}")
        # A few events after the broker came back: the flow is live again (the matrix's recovery time).
        total = events + second_events
        wait_until(lambda: http.channel_info(CHANNEL).get("occupied"), 20, 0.1, f"the bridge to subscribe {CHANNEL}")
        send(total, total + LIVE_EVENTS)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and delivered() < total + LIVE_EVENTS:
            time.sleep(0.1)
        time.sleep(1.5)  # late duplicates; buffered_messages is set each housekeeping second

        # The restarted process counts what it recovered from the spool as arrivals (docs/contract.md §7.6).
        received_total, outcomes, buffered_now = books_balance(metrics_port)
        notes.append(f"P->M counters at the end: received {received_total:g} = outcomes {outcomes:g} + buffered {buffered_now:g}")
        mark = "=" if received_total == outcomes + buffered_now else "!="
        out["identity"] = {"pusher_to_mqtt": f"{received_total:g} {mark} {outcomes:g} + {buffered_now:g}"}
        if received_total != outcomes + buffered_now:
            failures.append("the counters do not add up at the end of the run")

        log = bridge.log()
        minutes = (time.monotonic() - out["broker_back"]) / 60 + 1
        degraded_lines = sum(1 for line in log.splitlines() if any(m in line for m in DEGRADED_LINES))
        # Per-message spool errors: the old "spool write failed" and today's "spool refused".
        per_message = log.count("spool write failed") + log.count("spool refused")
        notes.append(f"log: {degraded_lines} degraded-spool line(s), {log.count('spool resumed')} resumed, "
                     f"{per_message} per-message spool errors")
        if degraded_lines > int(minutes) + 1 or per_message:
            failures.append(f"the log has {degraded_lines} degraded lines and {per_message} per-message errors")
    finally:
        if bridge is not None:
            bridge.stop(signal.SIGTERM, timeout=10)
        if receiver is not None:
            receiver.loop_stop()
            receiver.disconnect()
        for p in (pusher, broker):
            if p is not None:
                p.stop()
        subprocess.run(["umount", str(state)], capture_output=True)
    return out


def wait_until_true(check, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


def wait_until_value(port: int, name: str, value: float, timeout: float) -> bool:
    """True once the metric `name` reached `value` (>= for counts above 1) within `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        current = metric(port, name)
        if current is not None and (current == value or (value > 1 and current >= value)):
            return True
        time.sleep(0.1)
    return False
