"""The fault matrix (`make faults`; `FAULTS=row1,row2` runs some rows only).

Each row starts its own mosquitto, pusher-local, proxies and bridge daemon, runs tagged traffic
both ways at RATE messages/s per direction (FAULTS_RATE, default 200, spread over FAULTS_CHANNELS
channels each way, default 2), injects its fault, lets the traffic run on, drains, and classifies
every message with checker.py. The expected outcome of
each row is written below, before it runs; the observed one is measured; the row PASSes when
both directions meet their expectation. The table is printed and written as JSON and markdown
(FAULTS_OUT, default .build/faults/) for RELIABILITY.md.

Pusher -> MQTT is counted at a paho-mqtt QoS 1 subscriber with a persistent session; MQTT ->
Pusher at the Pusher HTTP API (what pusher-local accepted through the HTTP fault proxy: the
boundary of docs/contract.md §5.6's guarantee), and, for information, at a pysher subscriber, which loses
events during its own reconnects (Pusher has no replay) when a row closes every connection.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
import traceback
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from bridge_testkit.faults import rig as rig_module
from bridge_testkit.faults.checker import Expectation
from bridge_testkit.faults.rig import EXTRA_RULE, Rig, judge_direction

# The rows of their own, beside this script.
import cluster_rows
import broker_rows
import dead_letter_rows
import drain_rows
import ejabberd_rows
import fleet_rows
import redundancy_rows
import start_burst_rows
import takeover_rows
import users_rows
from webhook_rows import webhook_outage_row

RATE = float(os.environ.get("FAULTS_RATE", "200"))
WARMUP_S = 3.0
COOLDOWN_S = 4.0


@dataclass
class Row:
    name: str
    fault: str  # what is done, for the table
    p2m: Expectation
    m2p: Expectation
    inject: Callable[[Rig], list[float]]  # does the fault; returns the times each fault ended
    netns: bool = False
    notes: list[str] = field(default_factory=list)
    config: Callable[[str], str] | None = None  # edits the bridge's config before it starts
    # A row with its own setup and traffic instead of the Rig's (disk-full): runs the whole row.
    custom: Callable[[Row, Path], Result] | None = None
    # Checks after the traffic was judged (rig, the Pusher -> MQTT stream reports): adds to rig.failures.
    check: Callable | None = None
    # The rates of this row's traffic when they differ from FAULTS_RATE (messages/s each way).
    rate: float | None = None
    p2m_rate: float | None = None
    # A row of an hour or so: run only when FAULTS names it (its own make target), never by default.
    long: bool = False


# ---- faults ---------------------------------------------------------------------------------

def broker_restarts(sig: int, times: int):
    def inject(rig: Rig) -> list[float]:
        ends = []
        for _ in range(times):
            rig.restart_broker(sig, down=1.0)
            ends.append(time.monotonic())
            time.sleep(3.0)
        return ends
    return inject


def pusher_closes(code: int, times: int):
    def inject(rig: Rig) -> list[float]:
        ends = []
        for _ in range(times):
            opened = rig.stats().get("connections_opened", 0)
            status, _ = rig.pusher_control("POST", f"/pusher-local/apps/{rig.pusher.app_id}/disconnect?code={code}")
            assert status == 200
            ends.append(time.monotonic())
            saw_not_ready = False
            deadline = time.monotonic() + 15
            # The bridge's reconnect (the pysher receiver reconnects too: ours = p2m channels back).
            while time.monotonic() < deadline:
                if code < 4100 and rig.readyz() == 503:
                    saw_not_ready = True
                if rig.stats().get("connections_opened", 0) > opened and rig.subscribed():
                    break
                time.sleep(0.05)
            if code < 4100:
                rig.observations.append(f"/readyz 503 while the bridge waited after {code}: {saw_not_ready}")
            # Each connection lives a few seconds before the next close, like a server that
            # rebalances now and then -- not one that closes every new connection at once.
            time.sleep(2.5)
        return ends
    return inject


def blackhole(side: str, seconds: float = 10.0):
    def inject(rig: Rig) -> list[float]:
        proxies = [rig.mqtt_proxy] if side == "mqtt" else [rig.ws_proxy, rig.http_proxy]
        for p in proxies:
            p.set_mode("blackhole")
        time.sleep(seconds)
        for p in proxies:
            p.set_mode("pass")
        return [time.monotonic()]
    return inject


def partition(seconds: float = 10.0):
    def inject(rig: Rig) -> list[float]:
        rig.netns.drop()
        time.sleep(seconds)
        rig.netns.restore()
        return [time.monotonic()]
    return inject


def http_fault(mode: str, status: int = 503, seconds: float = 5.0):
    def inject(rig: Rig) -> list[float]:
        rig.http_proxy.set_mode(mode, status)
        time.sleep(seconds)
        rig.http_proxy.set_mode("pass")
        rig.observations.append(f"HTTP proxy: {rig.http_proxy.requests}")
        return [time.monotonic()]
    return inject


def pusher_quota(seconds: float = 10.0):
    """pusher-local's HTTP API refuses publishes with 403 (over quota) for `seconds`: the bridge
    must pause MQTT -> Pusher (docs/contract.md §7.3) -- not ready, nothing dead-lettered -- and
    resume in order once Pusher accepts again."""
    def metric_sum(rig: Rig, prefix: str) -> float:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{rig.metrics_port}/metrics", timeout=2) as r:
                lines = r.read().decode().splitlines()
        except OSError:
            return -1.0
        return sum(float(line.split()[-1]) for line in lines if line.startswith(prefix))

    def inject(rig: Rig) -> list[float]:
        status, _ = rig.pusher_control("POST", f"/pusher-local/apps/{rig.pusher.app_id}/quota?exceeded=true")
        assert status == 200
        started = time.monotonic()
        not_ready = []
        while time.monotonic() - started < seconds:
            not_ready.append(rig.readyz() == 503)
            time.sleep(0.25)
        status, _ = rig.pusher_control("POST", f"/pusher-local/apps/{rig.pusher.app_id}/quota?exceeded=false")
        assert status == 200
        ended = time.monotonic()
        paused_share = sum(not_ready[8:]) / max(1, len(not_ready[8:]))  # from 2 s in
        rig.observations.append(f"/readyz 503 while over quota (from 2 s in): {paused_share:.0%} of checks")
        if paused_share < 0.9:
            rig.failures.append("/readyz was not 503 while Pusher answered 403")
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline and rig.readyz() != 200:
            time.sleep(0.1)
        ready_after = rig.readyz() == 200
        rig.observations.append(f"/readyz 200 again {time.monotonic() - ended:.1f} s after the quota was lifted: {ready_after}")
        if not ready_after:
            rig.failures.append("/readyz not 200 within 6 s after the quota was lifted")
        dead_letters = metric_sum(rig, 'pusher_mqtt_bridge_messages_total{bridge="faults",rule="m2p",direction="mqtt_to_pusher",'
                                       'outcome="dead_lettered"}')  # -1: /metrics did not answer
        errors = metric_sum(rig, 'pusher_mqtt_bridge_errors_total{bridge="faults",kind="pusher_http"}')
        rig.observations.append(f"M->P dead letters: {dead_letters:g}; refused HTTP attempts (errors_total pusher_http): {errors:g}; "
                                f"HTTP proxy: {rig.http_proxy.requests}")
        if dead_letters != 0:
            rig.failures.append(f"{dead_letters:g} M->P dead letters for a 403")
        log = rig.bridge.log()
        rig.observations.append(f"log lines: paused {log.count('MQTT→Pusher paused:')}, resumed {log.count('MQTT→Pusher resumed')}")
        return [ended]
    return inject


def small_backpressure_buffer(config: str) -> str:
    """No `overflow` key (the default for the QoS 1 rule m2p: backpressure, docs/contract.md §7.6) and a
    buffer of 500 messages / 1 MiB, so that 15 s of M->P traffic does not fit (the MQTT client then
    pauses reading at a quarter of max_bytes)."""
    old = 'max_messages = 100000\nmax_bytes = "64MiB"\noverflow = "drop-oldest"\n'
    assert old in config
    return config.replace(old, 'max_messages = 500\nmax_bytes = "1MiB"\n')


def mqtt_to_pusher_overload(seconds: float = 15.0):
    """Pusher refuses (403) for `seconds` while M->P traffic goes on: more than the buffer holds, and
    longer than 2 x keepalive (5 s), so the paused connection is closed by libmosquitto's keep-alive
    check and the bridge holds its reconnect until the backlog drains."""
    quota = pusher_quota(seconds)

    def inject(rig: Rig) -> list[float]:
        ends = quota(rig)
        time.sleep(3.0)
        lines = rig.bridge.log().splitlines()
        log = "\n".join(lines)
        dropped = [line for line in lines if "buffer full: message dropped" in line]
        m2p_drops = [line for line in dropped if "direction=mqtt_to_pusher" in line]
        rig.observations.append(f"keep-alive closes while reading was paused: {log.count('keep-alive timeout') // 2}; "
                                f"reconnects held until the backlog drained: {log.count('not reconnecting until')}; "
                                f"'buffer full: message dropped' lines: {len(m2p_drops)} MQTT -> Pusher, "
                                f"{len(dropped) - len(m2p_drops)} Pusher -> MQTT")
        # The promise is MQTT -> Pusher's (backpressure drops nothing, docs/contract.md §7.6). Pusher ->
        # MQTT keeps its bounded buffer and policy (Pusher cannot be held back): while the MQTT
        # connection is held for the backlog, that direction waits in its 500-message buffer, and a
        # drain longer than the buffer lasts drops its oldest (counted and logged, as documented).
        if m2p_drops:
            rig.failures.append("the bridge dropped MQTT -> Pusher messages for lack of room")
        return ends
    return inject


def bridge_sigkill(down: float = 2.0, buffered_for: float = 3.0):
    """The MQTT side is blackholed for `buffered_for` s first, so the daemon holds Pusher -> MQTT
    messages in its buffer and spool when it is killed; they must all arrive after the restart."""
    def inject(rig: Rig) -> list[float]:
        rig.mqtt_proxy.set_mode("blackhole")
        start = time.monotonic()
        time.sleep(buffered_for)
        rig.bridge.kill()
        killed = time.monotonic()
        rig.mqtt_proxy.set_mode("pass")
        time.sleep(down)
        rig.bridge.start()
        # Sent while the broker was unreachable but the daemon alive (minus the last 0.5 s, which
        # may not have reached the daemon): these must come out of the spool.
        rig.spool_window = (start, killed - 0.5)
        return [time.monotonic()]
    return inject


def sighups(times: int = 10, bad_at: int = 5):
    def inject(rig: Rig) -> list[float]:
        opened = rig.stats().get("connections_opened", 0)
        ends = []
        for i in range(times):
            if i == bad_at:
                rig.bridge.write_config(rig.config + "\n[[bridge.rule]]\nname = \"broken\"\nfrom = \"nowhere\"\n")
            else:
                rig.bridge.write_config(rig.config + "".join(EXTRA_RULE.format(n=k) for k in range(i % 3)))
            rig.bridge.send_signal(signal.SIGHUP)
            ends.append(time.monotonic())
            time.sleep(1.0)
        rig.bridge.write_config(rig.config)
        rig.bridge.send_signal(signal.SIGHUP)
        reconnects = rig.stats().get("connections_opened", 0) - opened
        rig.observations.append(f"Pusher connections opened during the SIGHUPs: {reconnects}")
        refused = rig.bridge.log().count("broken")
        rig.observations.append(f"bad config refused, its rule named in the log: {refused > 0}")
        if reconnects:
            rig.failures.append(f"{reconnects} Pusher reconnects on rule-only reloads")
        if not refused:
            rig.failures.append("the bad config's error was not logged")
        if not rig.bridge.running():
            rig.failures.append("the daemon exited")
        return ends
    return inject


def restarting_sighups(times: int = 10):
    """SIGHUPs that change a connection setting (keepalive 5 s <-> 6 s), so each restarts the
    bridge on the same spools (issue 26): each must end with the bridge ready, none may fail to
    start."""
    def inject(rig: Rig) -> list[float]:
        ends = []
        for i in range(times):
            keepalive = "6s" if i % 2 == 0 else "5s"
            rig.bridge.write_config(rig.config.replace('keepalive = "5s"', f'keepalive = "{keepalive}"'))
            rig.bridge.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 15
            while rig.readyz() != 200 and time.monotonic() < deadline:
                time.sleep(0.05)
            ends.append(time.monotonic())
            if rig.readyz() != 200:
                rig.failures.append(f"not ready 15 s after restarting reload {i + 1}")
            time.sleep(0.5)
        log = rig.bridge.log()
        refused = log.count("cannot start bridge")
        rig.observations.append(f"restarts: {log.count('reconnecting it')}, starts refused: {refused}")
        if refused:
            rig.failures.append(f"{refused} restarts could not start the bridge")
        if not rig.bridge.running():
            rig.failures.append("the daemon exited")
        return ends
    return inject


def disk_full_row(row: Row, base: Path) -> Result:
    """A real full disk (docs/contract.md §7.6): Tests/e2e/test_disk_full.py's scenario -- state_dir on a
    1 MiB tmpfs filled to 192 KiB free, mosquitto stopped, 3,000 Pusher events of 1 KB, broker back;
    then 500 more in a second outage, the filler deleted while the broker is away, the daemon
    SIGKILLed and restarted. Only Pusher -> MQTT carries traffic; M->P is not judged."""
    from bridge_testkit.disk_full import MountRefused, run_disk_full

    started = time.monotonic()
    observations: list[str] = []
    observed: dict = {}
    try:
        out = run_disk_full(base / row.name, events=3000, second_events=500)
        observations = out["observations"]
        totals, recovery, misses, _ = judge_direction(out["sent"], out["received"], row.p2m, [out["broker_back"]])
        misses = [f"P->M {m}" for m in misses] + out["failures"]
        observed = {"p2m": fmt_dir(totals, recovery), "identity": out.get("identity", {})}
    except MountRefused as e:
        misses = [f"not run: {e}"]
    except Exception as e:
        misses = [f"row error: {e!r}"]
        observations.append(traceback.format_exc(limit=3))
    return Result(row.name, row.fault, describe(row.p2m), describe(row.m2p), observed,
                  "PASS" if not misses else "MISS", misses, observations, round(time.monotonic() - started, 1))


def not_injected(rig: Rig) -> list[float]:
    raise AssertionError("a custom row runs itself")


# ---- the matrix: expected outcomes, stated before running -----------------------------------
R = RATE
ZERO = "zero loss, order kept, duplicates counted"


def rows() -> list[Row]:
    return [
        Row("broker-sigterm", "mosquitto SIGTERM + restart (1 s down) x5",
            Expectation(0, max_recovery_s=5, why=f"buffered in the bridge while the broker is away; receiver has a persistent session: {ZERO}"),
            Expectation(0, max_recovery_s=5, why=f"broker saves sessions on SIGTERM; bridge resumes its persistent session: {ZERO}"),
            broker_restarts(signal.SIGTERM, 5)),
        Row("broker-sigkill", "mosquitto SIGKILL + restart (1 s down) x3",
            Expectation(int(R * 1.0 * 3), max_recovery_s=5,
                        why="mosquitto (autosave_interval 1 s) loses what it acknowledged but had not saved: <= rate x 1 s per kill"),
            Expectation(int(R * 1.0 * 3), max_recovery_s=5,
                        why="same broker limit: messages the broker acknowledged to the publisher in the last second before a kill"),
            broker_restarts(signal.SIGKILL, 3)),
        Row("close-4200", "pusher-local closes with 4200 x20",
            Expectation(int(R * 1.0 * 20), max_recovery_s=2,
                        why="Pusher has no replay: <= rate x 1 s per close (reconnect at once, spread <= 500 ms, + resubscribe)"),
            Expectation(0, max_recovery_s=2, why=f"the HTTP API is not affected: {ZERO}"),
            pusher_closes(4200, 20)),
        Row("close-4100", "pusher-local closes with 4100 x20",
            Expectation(int(R * 3.0 * 20), max_recovery_s=4,
                        why="backoff (200 ms doubling to the 2 s cap, +-20 %, counter resets after 30 s stable): <= rate x 3 s per close"),
            Expectation(0, max_recovery_s=4, why=f"the HTTP API is not affected: {ZERO}"),
            pusher_closes(4100, 20)),
        Row("close-4001", "pusher-local closes with 4001 x1",
            Expectation(int(R * 3.0), max_recovery_s=4,
                        why="docs/contract.md §5.5: 4000-4099 -> not ready, retry only at max_delay (2 s +-20 %): <= rate x 3 s"),
            Expectation(0, max_recovery_s=4, why=f"the HTTP API is not affected: {ZERO}"),
            pusher_closes(4001, 1)),
        Row("blackhole-mqtt", "10 s blackhole between bridge and mosquitto (proxy)",
            Expectation(0, max_recovery_s=6, why=f"QoS 1 in flight is resent after the reconnect, the rest buffered: {ZERO}"),
            Expectation(0, max_recovery_s=6, why=f"broker queues for the bridge's persistent session: {ZERO}"),
            blackhole("mqtt")),
        Row("blackhole-pusher", "10 s blackhole between bridge and pusher-local, WebSocket and HTTP API (proxy)",
            Expectation(int(R * 14), max_recovery_s=4,
                        why="Pusher has no replay: events while the WebSocket is cut are lost: <= rate x (10 s + 3 s detection + 1 s)"),
            Expectation(0, max_recovery_s=14, why=f"requests time out (10 s) and are retried: {ZERO}"),
            blackhole("pusher")),
        Row("partition", "10 s network partition (ip netns + iptables DROP) between the bridge and both servers",
            Expectation(int(R * 14), max_recovery_s=8,
                        why="Pusher has no replay: <= rate x (10 s + detection + reconnect) ; MQTT side buffered"),
            Expectation(0, max_recovery_s=14, why=f"persistent session on the broker, HTTP retried: {ZERO} (judged at pysher)"),
            partition(), netns=True),
        Row("http-429", "HTTP API answers 429 for 5 s",
            Expectation(0, why=f"not affected: {ZERO}"),
            Expectation(0, max_recovery_s=4, why=f"429 is retried with backoff: {ZERO}"),
            http_fault("status", 429)),
        *(Row(f"http-{status}", f"HTTP API answers {status} for 5 s",
              Expectation(0, why=f"not affected: {ZERO}"),
              Expectation(0, max_recovery_s=4, why=f"5xx is retried with backoff: {ZERO}"),
              http_fault("status", status))
          for status in (503, 500)),
        Row("http-timeout", "HTTP API hangs (no answer) for 5 s",
            Expectation(0, why=f"not affected: {ZERO}"),
            Expectation(0, max_recovery_s=13, why=f"the 10 s request timeout fires, then retried: {ZERO}"),
            http_fault("hang")),
        Row("pusher-quota-403", "HTTP API answers 403 (over quota, pusher-local's quota switch) for 10 s; "
                                "the P->M test sender publishes through the same app, so it is refused too and sends less",
            Expectation(0, why=f"not affected: {ZERO}"),
            Expectation(0, max_recovery_s=5,
                        why="docs/contract.md §7.3: 403 pauses M->P (not ready, buffered, nothing dead-lettered), retried at the "
                            f"2 s cap; then the rate x 10 s backlog drains in order: {ZERO}"),
            pusher_quota()),
        Row("bridge-sigkill", "bridge SIGKILL (3 s into an MQTT blackhole, so it holds a buffer), restarted after 2 s",
            Expectation(int(R * 5), max_recovery_s=6,
                        why="Pusher has no replay: events while no bridge is subscribed are lost (<= rate x (2 s + start + subscribe)); every buffered one comes out of the spool"),
            Expectation(int(R * 0.1), max_recovery_s=6,
                        why="docs/contract.md §5.6: only what libmosquitto acknowledged but the bridge had not spooled (<= rate x 100 ms); the rest waits in the session"),
            bridge_sigkill()),
        Row("sighup", "SIGHUP x10 (rule-only changes), the 6th with an invalid config",
            Expectation(0, max_recovery_s=2, why=f"rule-only reloads keep both connections; a bad file is refused: {ZERO}"),
            Expectation(0, max_recovery_s=2, why=f"{ZERO}"),
            sighups()),
        Row("sighup-restart", "SIGHUP x10 changing keepalive (each restarts the bridge on the same spools), "
                              "each waited for until /readyz is 200",
            Expectation(int(R * 10), max_recovery_s=4,
                        why="Pusher has no replay: each restart is a gap of the order of a reconnect and a resubscribe "
                            "(<= rate x 1 s per restart); nothing the bridge held is lost (the spool carries over)"),
            Expectation(0, max_recovery_s=4,
                        why=f"the QoS 1 session and the spool carry over every restart: {ZERO}"),
            restarting_sighups()),
        Row("mqtt-to-pusher-overload", "HTTP API answers 403 for 15 s with M->P at rate, default overflow (backpressure: the rule "
                                       "reads QoS 1), buffer max_messages 500 / 1 MiB: the backlog exceeds the buffer",
            Expectation(0, why=f"not affected (the P->M test sender is refused by the quota too): {ZERO}"),
            Expectation(0, max_recovery_s=8,
                        why="docs/contract.md §7.6: nothing dropped for lack of room; the bridge stops reading, the keep-alive "
                            "closes the paused connection, the reconnect waits for the backlog, the broker's session "
                            f"holds the rest and redelivers it in order: {ZERO}"),
            mqtt_to_pusher_overload(), config=small_backpressure_buffer),
        Row("disk-full", "state_dir on a 1 MiB tmpfs (192 KiB free) while mosquitto is down: 3,000 Pusher events of 1 KB; "
                         "then 500 more, space freed while the broker is away, daemon SIGKILLed and restarted",
            Expectation(0, max_recovery_s=15,
                        why="docs/contract.md §7.6: ENOSPC degrades the spool, the 3.5 MB wait in the 64 MiB memory buffer: "
                            "0 lost, in order; spool_degraded 1 then 0 when the delivered segment or the filler frees space; "
                            "the tail written back to disk survives the SIGKILL; at most a degraded log line a minute"),
            Expectation(0, why="no MQTT -> Pusher traffic in this row (not judged)"),
            not_injected, custom=disk_full_row),
        Row("webhooks-broker-outage", "webhooks during a broker outage: mosquitto stopped, 300 signed webhook requests "
                                      "(every third sent twice), broker back; once with persist = true, once with persist = false",
            Expectation(0, max_recovery_s=10,
                        why="docs/contract.md §7.2: persist = true answers 200 once the publishes are spooled and delivers "
                            "each event once, in order, when the broker is back (the retries are duplicates: not published); "
                            "persist = false answers 503 while the broker is away, so Pusher keeps the request, and the retry "
                            "after it is back is published: 0 lost, in order"),
            Expectation(0, why="no MQTT -> Pusher traffic in this row (not judged)"),
            not_injected, custom=webhook_outage_row),
        *redundancy_rows.rows(sys.modules[__name__]),
        fleet_rows.discovery_api_failures(sys.modules[__name__]),
        *cluster_rows.rows(sys.modules[__name__]),
        *ejabberd_rows.rows(sys.modules[__name__]),
        *takeover_rows.rows(sys.modules[__name__]),
        *users_rows.rows(sys.modules[__name__]),
        *drain_rows.rows(sys.modules[__name__]),
        *broker_rows.rows(sys.modules[__name__]),
        *dead_letter_rows.rows(sys.modules[__name__]),
        *start_burst_rows.rows(sys.modules[__name__]),
    ]


@dataclass
class Result:
    row: str
    fault: str
    expected_p2m: str
    expected_m2p: str
    observed: dict
    verdict: str
    misses: list[str]
    observations: list[str]
    seconds: float


def fmt_dir(totals, recovery) -> dict:
    return {"sent": totals.sent, "delivered": totals.delivered, "lost": totals.lost, "dup": totals.duplicates,
            "reordered": totals.reordered, "unexpected": totals.unexpected,
            "recovery_s": None if recovery is None else round(recovery, 2)}


def run_row(row: Row, base: Path) -> Result:
    started = time.monotonic()
    workdir = base / row.name
    partition_ctx = None
    rig = None
    misses: list[str] = []
    observed: dict = {}
    try:
        if row.netns:
            from bridge_testkit.faults.netns import Partition
            partition_ctx = Partition().__enter__()
        rig = Rig(workdir, row.name, rate=row.rate or RATE, netns=partition_ctx)
        rig.p2m_rate = row.p2m_rate or rig.rate
        rig.observations, rig.failures = [], []
        original_config = rig_module.bridge_config
        if row.config is not None:
            edit = row.config
            rig_module.bridge_config = lambda *a, **k: edit(original_config(*a, **k))
        try:
            rig.start()
        finally:
            rig_module.bridge_config = original_config
        rig.start_traffic()
        time.sleep(WARMUP_S)
        ends = row.inject(rig)
        time.sleep(COOLDOWN_S)
        rig.stop_traffic()
        observations = rig.observations
        p2m_t, p2m_rec, p2m_miss, p2m_reports = judge_direction(rig.p2m.sent.snapshot(), rig.receiver.received.snapshot(), row.p2m, ends)
        m2p_t, m2p_rec, m2p_miss, m2p_reports = judge_direction(rig.m2p.sent.snapshot(), rig.m2p_received(), row.m2p, ends)
        ws_t, ws_rec, _, _ = judge_direction(rig.m2p.sent.snapshot(), rig.pysher.received.snapshot(), Expectation(), ends)
        observed = {"p2m": fmt_dir(p2m_t, p2m_rec), "m2p": fmt_dir(m2p_t, m2p_rec), "m2p_at_pysher": fmt_dir(ws_t, ws_rec),
                    "sender_errors": {"p2m": rig.p2m.errors, "m2p": rig.m2p.errors}}
        identity = rig.counter_identity()
        observed["identity"] = {d: str(i) for d, i in identity.items()}
        for direction, i in identity.items():
            if not i.holds:
                rig.failures.append(f"counters do not balance for {direction}: received {i}")
        # The raw records, for looking into a MISS afterwards.
        (workdir / "records.json").write_text(json.dumps({
            "fault_ends": ends, "p2m_sent": rig.p2m.sent.snapshot(), "p2m_received": rig.receiver.received.snapshot(),
            "m2p_sent": rig.m2p.sent.snapshot(), "m2p_api": rig.m2p_received(), "m2p_pysher": rig.pysher.received.snapshot()}))
        if row.check is not None:
            row.check(rig, p2m_reports)
        for label, reports in (("P->M", p2m_reports), ("M->P", m2p_reports)):
            reordered = [s for r in reports for s in r.reordered_seqs][:10]
            if reordered:
                observations.append(f"{label} reordered seqs (first 10): {reordered}")
        if hasattr(rig, "spool_window"):
            lo, hi = rig.spool_window
            sent_times = {(st, q): t for st, v in rig.p2m.sent.snapshot().items() for q, t in v}
            in_window = [k for k, t in sent_times.items() if lo <= t <= hi]
            lost_set = {(r.stream, q) for r in p2m_reports for q in r.lost_seqs}
            spool_lost = [k for k in in_window if k in lost_set]
            observations.append(f"P->M buffered when killed (sent in the {hi - lo:.1f} s before): {len(in_window)}, "
                                f"lost {len(spool_lost)}")
            if spool_lost or not in_window:
                rig.failures.append(f"{len(spool_lost)} of {len(in_window)} spooled Pusher -> MQTT messages lost")
        misses = [f"P->M {m}" for m in p2m_miss] + [f"M->P {m}" for m in m2p_miss] + rig.failures
        if not rig.bridge.running():
            misses.append("the bridge is not running at the end")
        if m2p_t.lost:
            lost = [s for r in m2p_reports for s in r.lost_seqs][:10]
            observations.append(f"M->P lost seqs (first 10): {lost}")
    except Exception as e:  # a row that cannot run is a MISS with the reason, never a crash of the matrix
        misses.append(f"row error: {e!r}")
        observations = (rig.observations if rig else []) + [traceback.format_exc(limit=3)]
    finally:
        if rig is not None:
            rig.close()
        if partition_ctx is not None:
            partition_ctx.__exit__(None, None, None)
    return Result(row.name, row.fault, describe(row.p2m), describe(row.m2p), observed,
                  "PASS" if not misses else "MISS", misses, observations, round(time.monotonic() - started, 1))


def describe(e: Expectation) -> str:
    loss = "0 lost" if e.max_lost == 0 else f"<= {e.max_lost} lost"
    rec = f", recovery <= {e.max_recovery_s:g} s" if e.max_recovery_s is not None else ""
    order = "order not judged" if e.allow_reorder else "in order"
    return f"{loss}, {order}{rec} -- {e.why}"


def cell(d: dict) -> str:
    if not d:
        return "-"
    rec = "never" if d["recovery_s"] is None else f"{d['recovery_s']}s"
    return f"{d['delivered']}/{d['sent']} lost {d['lost']} dup {d['dup']} reord {d['reordered']} rec {rec}"


def identity_cell(identity: dict) -> str:
    if not identity:
        return "-"
    return "; ".join(identity.get(d, "-") for d in ("pusher_to_mqtt", "mqtt_to_pusher"))


def markdown(results: list[Result]) -> str:
    out = ["| row | fault | expected P→M | expected M→P | observed P→M | observed M→P (HTTP API) | M→P at pysher | "
           "counters: received = outcomes + buffered (P→M; M→P) | verdict |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        exp_p = r.expected_p2m.split(" -- ")[0]
        exp_m = r.expected_m2p.split(" -- ")[0]
        out.append(f"| {r.row} | {r.fault} | {exp_p} | {exp_m} | {cell(r.observed.get('p2m', {}))} | "
                   f"{cell(r.observed.get('m2p', {}))} | {cell(r.observed.get('m2p_at_pysher', {}))} | "
                   f"{identity_cell(r.observed.get('identity', {}))} | "
                   f"**{r.verdict}**{': ' + '; '.join(r.misses) if r.misses else ''} |")
    return "\n".join(out)


def main() -> int:
    selected = [s for s in os.environ.get("FAULTS", "").split(",") if s]
    all_rows = rows()
    unknown = [s for s in selected if s not in {r.name for r in all_rows}]
    if unknown:
        print(f"unknown rows {unknown}; rows: {', '.join(r.name for r in all_rows)}", file=sys.stderr)
        return 64
    todo = [r for r in all_rows if r.name in selected] if selected else [r for r in all_rows if not r.long]
    if any(r.netns for r in todo) and os.geteuid() != 0:
        print("the partition row needs root (ip netns, iptables)", file=sys.stderr)
        return 1
    out_dir = Path(os.environ.get("FAULTS_OUT", Path(__file__).resolve().parents[2] / ".build" / "faults"))
    out_dir.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="faults-"))
    results = []
    print(f"fault matrix: {len(todo)} rows at {RATE:g} msg/s each way; logs under {base}", flush=True)
    for row in todo:
        print(f"--- {row.name}: {row.fault}", flush=True)
        print(f"    expected P->M: {describe(row.p2m)}\n    expected M->P: {describe(row.m2p)}", flush=True)
        result = row.custom(row, base) if row.custom else run_row(row, base)
        results.append(result)
        print(f"    observed P->M: {cell(result.observed.get('p2m', {}))}", flush=True)
        print(f"    observed M->P: {cell(result.observed.get('m2p', {}))} (pysher: {cell(result.observed.get('m2p_at_pysher', {}))})", flush=True)
        print(f"    counters (received = outcomes + buffered, P->M; M->P): {identity_cell(result.observed.get('identity', {}))}", flush=True)
        for o in result.observations:
            print(f"    note: {o}", flush=True)
        print(f"    {result.verdict} {'; '.join(result.misses)} ({result.seconds}s)", flush=True)
    table = markdown(results)
    (out_dir / "matrix.md").write_text(table + "\n")
    (out_dir / "matrix.json").write_text(json.dumps([r.__dict__ for r in results], indent=1))
    print("\n" + table)
    passed = sum(r.verdict == "PASS" for r in results)
    print(f"\nfaults: {passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
