"""Heartbeat latency behind a QoS 1 backlog: do QoS 0 heartbeats overtake queued QoS 1 data?

A cluster member's heartbeats go out on `<membership_topic>/heartbeat/<instance>` (the daemon
publishes them at QoS 0, Sources/BridgeCore/Supervisor/SupervisedCluster.swift) and reach the other
members through the membership filter, subscribed at QoS 1 -- in partition mode by the same session
that receives every data topic at QoS 1. ejabberd 23.01 (`mod_mqtt`) sends a session one QoS 1
message at a time (docs/brokers.md), so heartbeats can queue behind the data. This measures, for a
subscriber whose session has a QoS 1 backlog, the delivery latency of heartbeat-like messages (one
every `--hb-interval`, send time in the payload) when

  a  heartbeats are published at QoS 1 (subscription QoS 1, same session as the data),
  b  heartbeats are published at QoS 0 (subscription QoS 1, so delivered at QoS 0, same session),
  c  heartbeats go to a second, dedicated connection/session of the subscriber process (QoS 1),

on a two-node ejabberd cluster (bridge_testkit.ejabberd) and on mosquitto (bridge_testkit.harness).
A flood publisher sends `--rate` QoS 1 messages a second for `--duration` s (`--rate 100000
--duration 0.03`: a burst of 3,000 at once); the subscriber (paho, MQTT 5) spends `--work-ms` in
on_message per data message (a sleep), and paho sends the PUBACK after on_message returns (the
daemon's libmosquitto acknowledges on receipt instead: `--work-ms 0` is closer to it). Every client
is its own process; latencies use CLOCK_MONOTONIC (system-wide). Per run: heartbeat latency
(median/p95/max over the heartbeats sent while the backlog existed), the largest gap between
heartbeat arrivals (what a receipt-time `member_timeout` sees), the subscriber's data rate, and the
largest kernel receive queue of its sockets (where the backlog sits when the broker already wrote it).

Before the runs, probes answer the key question directly: the subscriber withholds its PUBACKs (paho
manual_ack) while 1 or 30 QoS 1 data, then a QoS 0 and a QoS 1 heartbeat are published (optionally
after 500 QoS 1 acknowledged at once); what arrives while the first PUBACK is withheld?

    PYTHONPATH=Tests/testkit .venv/bin/python Benchmarks/ejabberd-heartbeats/heartbeat_latency.py
    options: --brokers ejabberd,mosquitto[,mosquitto-if1] --cases a,b,c --placements cross,same
             --runs 3 --rate 500 --duration 10 --work-ms 2 --hb-interval 0.2
             --probe-only | --no-probe   --json FILE

Brokers: `ejabberd` (two nodes; placement `cross` = subscriber on node 1, both publishers on node 2,
`same` = all on node 1), `mosquitto` (the harness's config, max_inflight_messages left at its default
20), `mosquitto-if<N>` (the same with max_inflight_messages N). Each invocation starts and stops its
brokers by PID; one ejabberd cluster start takes 5-40 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.properties import Properties
from paho.mqtt.packettypes import PacketTypes

USERNAME = "bridge"          # ejabberd's login_anon accepts any; mosquitto allows anonymous
PASSWORD = "bridge-password"
HERE = Path(__file__).resolve()


def now() -> float:
    return time.monotonic()


def emit(obj) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def client(client_id: str, manual_ack: bool = False) -> mqtt.Client:
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5,
                    manual_ack=manual_ack)
    c.username_pw_set(USERNAME, PASSWORD)
    return c


def connect(c: mqtt.Client, port: int, timeout: float = 15.0, receive_maximum: int = 0) -> None:
    ready = threading.Event()
    result = {}

    def on_connect(_c, _u, _f, rc, _p=None):
        result["rc"] = rc
        ready.set()

    c.on_connect = on_connect
    props = Properties(PacketTypes.CONNECT)
    props.SessionExpiryInterval = 0
    if receive_maximum:
        props.ReceiveMaximum = receive_maximum
    c.connect("127.0.0.1", port, keepalive=30, clean_start=True, properties=props)
    c.loop_start()
    if not ready.wait(timeout) or result["rc"].is_failure:
        raise RuntimeError(f"connect to {port}: {result.get('rc')}")


def subscribe(c: mqtt.Client, filters: list[tuple[str, int]], timeout: float = 15.0) -> None:
    done = threading.Event()
    c.on_subscribe = lambda *_a, **_k: done.set()
    c.subscribe(filters)
    if not done.wait(timeout):
        raise RuntimeError(f"no SUBACK for {filters}")


# ----------------------------------------------------------------------------------------------
# roles (each runs in its own process)

def role_sub(a) -> None:
    """Subscriber: data filter at QoS 1; heartbeat filter on the same connection (mode same) or on a
    second connection (mode control). Exits when `expect` data messages arrived (+ linger) or on timeout."""
    data_filter, hb_filter = f"{a.prefix}/data/#", f"{a.prefix}/members/#"
    lock = threading.Lock()
    hbs: list[list] = []      # [seq, sent, received, qos, connection]
    data = {"n": 0, "first": None, "last": None, "qos": {}}
    done = threading.Event()
    work = a.work_ms / 1000.0

    def on_hb(conn):
        def handler(_c, _u, msg):
            t = now()
            body = json.loads(msg.payload)
            with lock:
                hbs.append([body["seq"], body["t"], t, msg.qos, conn])
        return handler

    def on_message(_c, _u, msg):
        if msg.topic.startswith(f"{a.prefix}/members/"):
            return on_hb("main")(_c, _u, msg)
        t = now()
        with lock:
            data["n"] += 1
            data["first"] = data["first"] or t
            data["last"] = t
            data["qos"][msg.qos] = data["qos"].get(msg.qos, 0) + 1
            if data["n"] >= a.expect:
                done.set()
        if work:
            time.sleep(work)

    main = client(f"{a.prefix}-sub")
    main.on_message = on_message
    connect(main, a.port, receive_maximum=a.receive_maximum)
    clients = [main]
    if a.hb_conn == "control":
        ctl = client(f"{a.prefix}-sub-ctl")
        ctl.on_message = on_hb("control")
        connect(ctl, a.port)
        subscribe(ctl, [(hb_filter, 1)])
        clients.append(ctl)
        subscribe(main, [(data_filter, 1)])
    else:
        subscribe(main, [(data_filter, 1), (hb_filter, 1)])
    emit({"ready": True})
    finished = done.wait(a.timeout)
    time.sleep(a.linger)
    for c in clients:
        c.disconnect()
        c.loop_stop()
    with lock:
        emit({"complete": finished, "data": data, "hbs": hbs, "end": now()})


def role_hb(a) -> None:
    """Heartbeat publisher: one message every `interval` s at `qos` until stdin closes."""
    c = client(f"{a.prefix}-hb")
    connect(c, a.port)
    sent = []
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    seq = 0
    nxt = now()
    while not stop.is_set():
        t = now()
        c.publish(f"{a.prefix}/members/heartbeat/hb1", json.dumps({"seq": seq, "t": t, "pad": "x" * 80}),
                  qos=a.qos)
        sent.append([seq, t])
        seq += 1
        nxt += a.interval
        stop.wait(max(0.0, nxt - now()))
    c.disconnect()
    c.loop_stop()
    emit({"sent": sent})


def role_flood(a) -> None:
    """Flood publisher: `count` QoS 1 messages at `rate` a second over 50 topics; waits for the PUBACKs."""
    c = client(f"{a.prefix}-flood")
    c.max_inflight_messages_set(2000)
    acked = {"n": 0}
    all_acked = threading.Event()

    def on_publish(*_args):
        acked["n"] += 1
        if acked["n"] >= a.count:
            all_acked.set()

    c.on_publish = on_publish
    connect(c, a.port)
    payload = "d" * 200
    start = now()
    sent = 0
    while sent < a.count:
        target = min(a.count, int((now() - start) * a.rate) + 1)
        while sent < target:
            c.publish(f"{a.prefix}/data/{sent % 50}", payload, qos=1)
            sent += 1
        time.sleep(0.005)
    end = now()
    all_acked.wait(60)
    c.disconnect()
    c.loop_stop()
    emit({"start": start, "end": end, "sent": sent, "acked": acked["n"], "acked_at": now()})


def role_probe(a) -> None:
    """Probe: optionally `prime` QoS 1 messages first, acknowledged at once; then the subscriber
    withholds its PUBACKs (manual ack) for `hold` s while a publisher sends `count` QoS 1 data, then
    one QoS 0 and one QoS 1 heartbeat. Reports, in arrival order, what arrived during the hold (the
    first PUBACK still withheld) and after the release."""
    data_filter, hb_filter = f"{a.prefix}/data/#", f"{a.prefix}/members/#"
    arrivals = []
    lock = threading.Lock()
    held = []
    phase = {"now": "prime", "primed": 0}

    def on_message(c, _u, msg):
        with lock:
            priming = phase["now"] == "prime"
        if priming:
            if a.prime_work_ms:
                time.sleep(a.prime_work_ms / 1000)  # a slow consumer: the broker queues meanwhile
            with lock:
                phase["primed"] += 1
            c.ack(msg.mid, msg.qos)
            return
        with lock:
            arrivals.append({"t": now(), "topic": msg.topic.split("/", 1)[1], "qos": msg.qos, "phase": phase["now"]})
            if msg.qos > 0:
                if phase["now"] == "after":
                    c.ack(msg.mid, msg.qos)
                else:
                    held.append((msg.mid, msg.qos))

    sub = client(f"{a.prefix}-psub", manual_ack=True)
    sub.on_message = on_message
    connect(sub, a.sub_port)
    subscribe(sub, [(data_filter, 1), (hb_filter, 1)])
    pub = client(f"{a.prefix}-ppub")
    pub.max_inflight_messages_set(1000)
    connect(pub, a.pub_port)
    time.sleep(0.3)
    t0 = now()
    for i in range(a.prime):
        if a.prime_rate:
            time.sleep(max(0.0, t0 + i / a.prime_rate - now()))
        pub.publish(f"{a.prefix}/data/p{i}", "p" * 200, qos=1)
    deadline = now() + 20
    while phase["primed"] < a.prime and now() < deadline:
        time.sleep(0.01)
    with lock:
        primed = phase["primed"]
        phase["now"] = "hold"
    infos = [pub.publish(f"{a.prefix}/data/{i}", f"d{i}", qos=1) for i in range(a.count)]
    for i in infos:
        i.wait_for_publish(5)
    time.sleep(0.2)
    pub.publish(f"{a.prefix}/members/heartbeat/qos0", "hb", qos=0)
    time.sleep(0.1)
    pub.publish(f"{a.prefix}/members/heartbeat/qos1", "hb", qos=1).wait_for_publish(5)
    time.sleep(a.hold)
    with lock:
        during = [dict(x) for x in arrivals]
        phase["now"] = "after"
        for mid, qos in held:
            sub.ack(mid, qos)
    time.sleep(2.0)
    for c in (pub, sub):
        c.disconnect()
        c.loop_stop()

    def brief(xs):
        out, run = [], None
        for x in xs:
            name = "data" if x["topic"].startswith("data/") else x["topic"].rsplit("/", 1)[-1] + "-hb"
            label = f"{name}@qos{x['qos']}"
            if run and run[0] == label:
                run[1] += 1
            else:
                run = [label, 1]
                out.append(run)
        return " ".join(f"{n}x{label}" if label.startswith("data") else label for label, n in out) or "nothing"
    emit({"primed": primed, "during_hold": brief(during),
          "after_release": brief([x for x in arrivals if x["phase"] == "after"])})


# ----------------------------------------------------------------------------------------------
# orchestration

def spawn(role: str, **kw) -> subprocess.Popen:
    argv = [sys.executable, str(HERE), "--role", role]
    for k, v in kw.items():
        argv += [f"--{k.replace('_', '-')}", str(v)]
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def last_json(proc: subprocess.Popen, timeout: float) -> dict:
    out, _ = proc.communicate(timeout=timeout)
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"role exited {proc.returncode} without a result")
    return json.loads(lines[-1])


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(p / 100 * (len(v) - 1)))))]


class RecvQSampler:
    """Largest kernel receive queue (bytes not yet read by the client) over the subscriber's TCP
    connections, from `ss` every 0.25 s: where a backlog sits when the broker has already written it."""

    def __init__(self, pid: int):
        self.pid, self.max_bytes, self._stop = pid, 0, threading.Event()

    def start(self):
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.wait(0.25):
            out = subprocess.run(["ss", "-tnpH", "state", "established"], capture_output=True, text=True).stdout
            total = sum(int(ln.split()[0]) for ln in out.splitlines() if f"pid={self.pid}," in ln)
            self.max_bytes = max(self.max_bytes, total)

    def stop(self):
        self._stop.set()
        self._thread.join(2)


def run_case(sub_port: int, pub_port: int, case: str, a, tag: str) -> dict:
    prefix = f"hbl{os.getpid()}x{tag}x{int(time.time() * 1000) % 10**8}"
    count = int(a.rate * a.duration)
    hb_qos = 0 if case == "b" else 1
    sub = spawn("sub", port=sub_port, prefix=prefix, expect=count, work_ms=a.work_ms,
                hb_conn="control" if case == "c" else "same", timeout=a.timeout, linger=1.5)
    procs = [sub]
    try:
        first = sub.stdout.readline()
        if '"ready"' not in first:
            raise RuntimeError(f"subscriber not ready: {first!r}")
        hb = spawn("hb", port=pub_port, prefix=prefix, qos=hb_qos, interval=a.hb_interval)
        procs.append(hb)
        time.sleep(1.5)  # baseline heartbeats before the flood
        flood = spawn("flood", port=pub_port, prefix=prefix, count=count, rate=a.rate)
        procs.append(flood)
        sampler = RecvQSampler(sub.pid).start()
        fr = last_json(flood, a.timeout + 60)
        sr = last_json(sub, a.timeout + 30)
        sampler.stop()
        hr = last_json(hb, 30)  # communicate() closes its stdin: the publisher stops
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)
    received = {s: (sent, recv, qos) for s, sent, recv, qos, _conn in sr["hbs"]}
    data = sr["data"]
    window_end = data["last"] or sr["end"]
    lat, baseline, lost, hb_qos_seen = [], [], 0, set()
    for seq, sent in hr["sent"]:
        r = received.get(seq)
        if sent < fr["start"]:
            if r:
                baseline.append(r[1] - sent)
            continue
        if sent > window_end:
            continue
        if r:
            lat.append(r[1] - sent)
            hb_qos_seen.add(r[2])
        else:
            lost += 1
            lat.append(sr["end"] - sent)  # a lower bound
    # largest gap between heartbeat arrivals while the backlog existed (what member_timeout sees)
    arrivals = sorted(r[1] for r in received.values() if fr["start"] <= r[1] <= window_end + 1.0)
    points = [fr["start"]] + arrivals
    gaps = [b - a_ for a_, b in zip(points, points[1:])]
    if arrivals and window_end > arrivals[-1]:
        gaps.append(window_end - arrivals[-1])
    span = (data["last"] - data["first"]) if data["first"] and data["last"] and data["last"] > data["first"] else 0
    return {
        "case": case, "complete": sr["complete"], "data_received": data["n"], "data_sent": fr["sent"],
        "pub_rate": fr["sent"] / max(1e-9, fr["end"] - fr["start"]),
        "sub_rate": data["n"] / span if span else float("nan"),
        "drain_s": window_end - fr["end"], "hb_n": len(lat), "hb_lost": lost,
        "hb_qos_delivered": sorted(hb_qos_seen),
        "lat_median": statistics.median(lat) if lat else float("nan"),
        "lat_p95": pct(lat, 95), "lat_max": max(lat) if lat else float("nan"),
        "over_3s": sum(1 for x in lat if x > 3.0), "max_gap": max(gaps) if gaps else float("nan"),
        "baseline_median": statistics.median(baseline) if baseline else float("nan"),
        "sub_recvq_max_kb": sampler.max_bytes / 1024,
    }


def probe(sub_port: int, pub_port: int, count: int, prime: int, prime_work_ms: float = 0, prime_rate: float = 0,
          hold: float = 3.0) -> dict:
    prefix = f"probe{os.getpid()}x{int(time.time() * 1000) % 10**8}"
    p = spawn("probe", sub_port=sub_port, pub_port=pub_port, prefix=prefix, hold=hold, count=count, prime=prime,
              prime_work_ms=prime_work_ms, prime_rate=prime_rate)
    return last_json(p, 60)


# (data messages published while PUBACKs are withheld, messages acknowledged at once before that)
PROBES = [(1, 0), (30, 0), (30, 500)]


def summarise(rows: list[dict]) -> dict:
    keys = ["lat_median", "lat_p95", "lat_max", "max_gap", "over_3s", "hb_n", "hb_lost", "sub_rate",
            "pub_rate", "drain_s", "baseline_median", "sub_recvq_max_kb"]
    return {k: statistics.median([r[k] for r in rows]) for k in keys} | {"runs": len(rows)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--role")
    ap.add_argument("--port", type=int)
    ap.add_argument("--sub-port", type=int)
    ap.add_argument("--pub-port", type=int)
    ap.add_argument("--prefix")
    ap.add_argument("--expect", type=int)
    ap.add_argument("--count", type=int)
    ap.add_argument("--qos", type=int)
    ap.add_argument("--interval", type=float)
    ap.add_argument("--hold", type=float, default=3.0)
    ap.add_argument("--prime", type=int, default=0)
    ap.add_argument("--prime-work-ms", type=float, default=0)
    ap.add_argument("--prime-rate", type=float, default=0, help="probe: pace the priming messages (0: at once)")
    ap.add_argument("--hb-conn", default="same")
    ap.add_argument("--receive-maximum", type=int, default=0, help="subscriber's CONNECT Receive Maximum (0: none sent)")
    ap.add_argument("--linger", type=float, default=1.5)
    ap.add_argument("--brokers", default="ejabberd,mosquitto")
    ap.add_argument("--cases", default="a,b,c")
    ap.add_argument("--placements", default="cross,same", help="ejabberd only: cross, same")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rate", type=float, default=500)
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--work-ms", type=float, default=2)
    ap.add_argument("--hb-interval", type=float, default=0.2)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--probe-only", action="store_true")
    ap.add_argument("--no-probe", action="store_true")
    ap.add_argument("--json", help="write every run's numbers here")
    a = ap.parse_args()
    if a.role:
        {"sub": role_sub, "hb": role_hb, "flood": role_flood, "probe": role_probe}[a.role](a)
        return

    from bridge_testkit import ejabberd
    from bridge_testkit.harness import Mosquitto

    results: dict = {"params": {k: getattr(a, k) for k in ("rate", "duration", "work_ms", "hb_interval", "runs")},
                     "probes": {}, "runs": {}}
    cases = a.cases.split(",")
    with tempfile.TemporaryDirectory(prefix="hb-latency-") as tmp:
        for broker in a.brokers.split(","):
            if broker == "ejabberd":
                if not ejabberd.installed():
                    print("ejabberd is not installed: skipped", flush=True)
                    continue
                d = Path(tmp) / "ejabberd"
                d.mkdir()
                cluster = ejabberd.EjabberdCluster(d)
                stop = cluster.close
                t0 = now()
                cluster.start()
                print(f"ejabberd cluster up in {now() - t0:.1f}s", flush=True)
                n1, n2 = cluster.nodes[0].mqtt_port, cluster.nodes[1].mqtt_port
                places = {"cross": (n1, n2), "same": (n1, n1)}
                places = {k: v for k, v in places.items() if k in a.placements.split(",")}
            elif broker.startswith("mosquitto"):
                # "mosquitto" (the harness's config: max_inflight_messages left at 20) or
                # "mosquitto-if<N>" (max_inflight_messages N added)
                d = Path(tmp) / broker
                d.mkdir()
                mosq = Mosquitto(d)
                if broker.startswith("mosquitto-if"):
                    mosq.conf.write_text(mosq.conf.read_text() + f"max_inflight_messages {int(broker[12:])}\n")
                mosq.start()
                stop = mosq.stop
                places = {"same": (mosq.port, mosq.port)}
            else:
                raise SystemExit(f"unknown broker {broker}")
            try:
                if not a.no_probe:
                    for place, (sp, pp) in places.items():
                        for count, prime in PROBES:
                            r = probe(sp, pp, count, prime)
                            results["probes"][f"{broker}/{place}/count={count}/prime={prime}"] = r
                            print(f"PROBE {broker}/{place} ({prime} QoS 1 acked first, primed {r['primed']}; then "
                                  f"{count} QoS 1 data, a QoS 0 and a QoS 1 heartbeat, PUBACKs withheld): "
                                  f"during the hold: {r['during_hold']}; after release: {r['after_release']}",
                                  flush=True)
                if a.probe_only:
                    continue
                for run in range(a.runs):
                    for place, (sp, pp) in places.items():
                        for case in cases:
                            key = f"{broker}/{place}/{case}"
                            r = run_case(sp, pp, case, a, f"{place}{case}{run}")
                            results["runs"].setdefault(key, []).append(r)
                            print(f"RUN {key} #{run + 1}: " + ", ".join(
                                f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()),
                                flush=True)
            finally:
                stop()
    print("\nmedian over runs (latencies in s; rates in msg/s)")
    hdr = ["broker/placement/case", "runs", "hb_n", "lat_median", "lat_p95", "lat_max", "max_gap", "over_3s",
           "hb_lost", "sub_rate", "pub_rate", "drain_s", "baseline_median", "sub_recvq_max_kb"]
    print(" | ".join(hdr))
    for key, rows in results["runs"].items():
        s = summarise(rows)
        results.setdefault("summary", {})[key] = s
        print(" | ".join([key] + [f"{s[h]:.3f}" if isinstance(s[h], float) else str(s[h]) for h in hdr[1:]]))
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
