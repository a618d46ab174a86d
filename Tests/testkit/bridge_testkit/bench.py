"""`make bench`: pusher-mqtt-bridge against the broker's ceiling and a Python baseline, in one run.

    .venv/bin/python Benchmarks/bridge/bench.py --bin-dir .build/release --tools-dir DIR
        [--runs 3] [--quick] [--scenarios ceiling,sources,p2m,m2p,latency] [--impls bridge,python]
        [--sizes 100,1024,8192] [--qos 0,1] [--out Benchmarks/results]

A few cells only, e.g. the 100 B throughput cells of both directions with their ceilings (~6 min):
    --scenarios ceiling,p2m,m2p --impls bridge,python --sizes 100

(scripts/bench.sh builds everything and calls this; see BENCHMARKS.md for the method.)

Every process is started here, on free 127.0.0.1 ports, and stopped by PID, also on failure or
Ctrl-C: one mosquitto (generated config) and one pusher-local for the whole run; for each bridge
measurement a fresh bridge (the daemon with a generated bridges.conf, or
Benchmarks/bridge/python_bridge.py) with its own client id and state directory, so that no
session, spool or backlog leaks from one measurement into the next.

Payloads are {"seq":N,"sent_at_ns":T,"pad":"…"} padded to the size: written by c_pub (MQTT
side) or by pusher-local's generated stream (Pusher side). The receivers (c_sub on MQTT,
pusher-bench-subscriber on Pusher) count distinct sequence numbers, duplicates and reordering,
and write one latency per message (arrival wall clock - sent_at_ns). Throughput = messages
received / time from the first to the last arrival at the receiver.

CPU per message: utime + stime from /proc/PID/stat of the bridge and of the broker, both read when
the load starts and when the receiver finished, divided by the messages received. The broker
receives, routes and sends every message of the run -- work comparable to the bridge's -- so
"bridge ÷ broker" (issue 16) is the bridge's cost in units of a C program moving the same messages,
measured on the same machine at the same moment.
"""

from __future__ import annotations

import argparse
import array
import atexit
import datetime
import json
import os
import platform
import re
import selectors
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from bridge_testkit.harness import REPO, Bridge, MQTTCollector, Mosquitto, Process, PusherLocal, bridge_config, publish


SIZES = [100, 1024, 8192]
QOS_LEVELS = [0, 1]
RATES = [1000, 5000, 20000]
ALL_SCENARIOS = ["ceiling", "sources", "p2m", "m2p", "latency"]
ALL_IMPLS = ["bridge", "bridge-memory", "python"]  # bridge-memory: buffer persist = false
# Not in a default run: bridge-2conn = the daemon with [bridge.pusher] connections = 2 (issue 28:
# Pusher -> MQTT CPU per message and latency against `bridge` in the same run).
EXTRA_IMPLS = ["bridge-2conn"]
DAEMON_IMPLS = ("bridge", "bridge-memory", "bridge-2conn")
P2M_CHANNEL, P2M_TOPIC = "bench-p2m", "bench/p2m/bench"
# MQTT -> Pusher runs over M2P_CHANNELS topics/channels (sensors/+/x -> sensor-{1}): the bridge keeps
# order per channel with one batch_events in flight per channel, so one channel alone is capped at
# 10 events per HTTP round trip (BENCHMARKS.md).
M2P_CHANNELS = 8
M2P_CHANNEL, M2P_TOPIC = "bench-m2p-%d", "bench/m2p/%d"
CEILING_TOPIC = "bench/ceiling"

# The goals of issue 7, checked at the end of every run.
GOAL_P2M_QOS0, GOAL_P2M_QOS1, GOAL_M2P = 50_000, 30_000, 20_000
GOAL_P99_MS_AT_5K, GOAL_RSS_MB, GOAL_VS_PYTHON = 2.0, 50.0, 10.0
# Issue 16 (100 B): bridge CPU per message ÷ the broker's in the same run, at most; throughput ÷ the
# broker's ceiling, at least. Keyed by (direction, QoS).
GOAL_CPU_VS_BROKER = {("p2m", 0): 1.2, ("p2m", 1): 1.0, ("m2p", 0): 2.0, ("m2p", 1): 2.0}
GOAL_VS_CEILING = {("p2m", 0): 0.6, ("p2m", 1): 0.75, ("m2p", 0): 0.45, ("m2p", 1): 0.55}


class BenchError(RuntimeError):
    """A measurement could not be made; the message says which and why."""


# ---------------------------------------------------------------------------------------------
# processes

STARTED: list = []  # everything this driver started, stopped in reverse order at exit


def stop_all():
    while STARTED:
        item = STARTED.pop()
        try:
            if isinstance(item, Process):
                item.stop(timeout=10)
            elif item.poll() is None:
                item.terminate()
                try:
                    item.wait(5)
                except subprocess.TimeoutExpired:
                    item.kill()
                    item.wait(5)
        except Exception as error:  # keep stopping the others
            print(f"bench: stopping {item}: {error}", file=sys.stderr)


def on_signal(signum, _frame):
    stop_all()
    sys.exit(128 + signum)


class BenchMosquitto(Mosquitto):
    """The harness broker, tuned like scripts/bench-mqtt.sh: no persistence (we measure the bridge,
    not the disk) and 1000 QoS 1 messages in flight per client (the default 20 would cap every
    QoS 1 stream, ours and the baseline's alike)."""

    def __init__(self, workdir: Path):
        super().__init__(workdir)
        text = self.conf.read_text()
        text = re.sub(r"persistence true\n.*\nautosave_interval 1\n", "persistence false\n", text)
        self.conf.write_text(text + "max_inflight_messages 1000\nlog_dest none\n")


def start_receiver(argv: list[str], name: str, workdir: Path) -> subprocess.Popen:
    """Starts c_sub or pusher-bench-subscriber and waits for its "ready" line."""
    log = open(workdir / f"{name}.log", "ab")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log)
    STARTED.append(proc)
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if selector.select(0.2):
            line = proc.stdout.readline().decode(errors="replace").strip()
            if line == "ready":
                return proc
            if not line and proc.poll() is not None:
                break
    proc.kill()
    raise BenchError(f"{name} did not become ready: {(workdir / f'{name}.log').read_text(errors='replace')[-2000:]}")


def finish_receiver(proc: subprocess.Popen, name: str, workdir: Path, timeout: float) -> dict:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise BenchError(f"{name} did not finish within {timeout:.0f}s")
    if proc in STARTED:
        STARTED.remove(proc)
    lines = [line for line in out.decode(errors="replace").splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise BenchError(f"{name} exited {proc.returncode}: {(workdir / f'{name}.log').read_text(errors='replace')[-2000:]}")
    return json.loads(lines[-1])


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class ProcessSampler:
    """Samples VmRSS of a process every 100 ms; reads VmHWM and CPU seconds (utime + stime)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.samples: list[int] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def status_kb(self, field: str) -> int | None:
        try:
            text = Path(f"/proc/{self.pid}/status").read_text()
        except OSError:
            return None
        m = re.search(rf"^{field}:\s+(\d+) kB", text, re.M)
        return int(m.group(1)) if m else None

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def _run(self):
        while not self.stopping.wait(0.1):
            kb = self.status_kb("VmRSS")
            if kb is not None:
                self.samples.append(kb)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stopping.set()
        self.thread.join(2)


def latency_stats(path: Path) -> tuple[dict, array.array]:
    values = array.array("q")
    with open(path, "rb") as f:
        values.frombytes(f.read())
    if not values:
        return {}, values
    ordered = sorted(values)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] / 1e6

    return {"p50_ms": pct(50), "p99_ms": pct(99), "p999_ms": pct(99.9), "max_ms": ordered[-1] / 1e6,
            "mean_ms": sum(ordered) / len(ordered) / 1e6}, values


# ---------------------------------------------------------------------------------------------
# one measurement


class Bench:
    def __init__(self, args):
        self.args = args
        self.bin_dir = Path(args.bin_dir).resolve()
        self.tools = Path(args.tools_dir).resolve()
        self.work = Path(tempfile.mkdtemp(prefix="bench-bridge-"))
        self.results: list[dict] = []
        self.latency_samples: dict[str, array.array] = {}
        self.counter = 0
        os.environ["PUSHER_LOCAL_BIN"] = str(self.bin_dir / "pusher-local")
        os.environ["BRIDGE_BIN"] = str(self.bin_dir / "pusher-mqtt-bridge")
        self.broker = BenchMosquitto(self.work).start()
        STARTED.append(self.broker)
        self.pusher = PusherLocal(self.work, extra=["--log-level", "warning"]).start()
        STARTED.append(self.pusher)

    # timeouts: a receiver stops IDLE s after the last message, or after TOTAL s in all
    @property
    def idle(self) -> float:
        # Longer than the MQTT client's 5 s of backpressure (issue 4): a stalled bridge that then
        # delivers is late, not lossy.
        return 2.0 if self.args.quick else 8.0

    @property
    def total(self) -> float:
        return 20.0 if self.args.quick else 60.0

    def count_for(self, impl: str, size: int, rate: float) -> int:
        if rate:
            return int(rate * (1.0 if self.args.quick else self.args.latency_seconds))
        base = {100: 100_000, 1024: 60_000, 8192: 20_000}[size]
        if self.args.quick:
            base //= 20
        if impl == "python":
            base //= 10  # the baseline is slow; fewer messages keep the run time bounded
        return max(base, 1000)

    def receiver(self, side: str, topic_or_channel: str, qos: int, count: int, name: str,
                 pusher_receiver: str | None = None, channels: int = 1) -> subprocess.Popen:
        """c_sub on MQTT; on Pusher pusher-bench-subscriber (`swift`) or ws_sub (`c`), same contract."""
        latencies = self.work / f"{name}.lat"
        if side == "mqtt":
            argv = [str(self.tools / "c_sub"), str(self.broker.port), topic_or_channel, str(qos), str(count),
                    str(self.idle), str(self.total), str(latencies)]
        else:
            kind = pusher_receiver or self.args.pusher_receiver
            program = self.bin_dir / "pusher-bench-subscriber" if kind == "swift" else self.tools / "ws_sub"
            argv = [str(program), str(self.pusher.port), self.pusher.key,
                    topic_or_channel, "bench", str(count), str(self.idle), str(self.total), str(latencies)]
            if channels > 1:
                if kind != "swift":
                    raise BenchError("ws_sub listens to one channel only")
                argv.append(str(channels))
        return start_receiver(argv, name, self.work)

    def stream(self, count: int, size: int, rate: float) -> dict:
        """pusher-local's generated stream; the request returns when the last event was published."""
        url = (f"http://127.0.0.1:{self.pusher.port}/pusher-local/apps/{self.pusher.app_id}/stream"
               f"?channel={P2M_CHANNEL}&event=bench&count={count}&size={size}&rate={rate}")
        try:
            with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=self.total + 30) as resp:
                return json.loads(resp.read())
        except (OSError, ValueError) as error:
            raise BenchError(f"pusher-local stream request failed: {error}")

    def c_pub(self, topic: str, count: int, qos: int, size: int, rate: float, topics: int = 1, fields: int = 0) -> dict:
        """`fields` > 0 adds members f00… to every payload (the payload-rule benchmark, bench_rules.py)."""
        out = subprocess.run([str(self.tools / "c_pub"), str(self.broker.port), topic, str(count), str(qos), str(size),
                              str(rate), "1000", str(topics), str(fields)], capture_output=True, timeout=self.total + 30)
        if out.returncode != 0:
            raise BenchError(f"c_pub exited {out.returncode}: {out.stderr.decode(errors='replace')[-500:]}")
        return json.loads(out.stdout.decode().strip().splitlines()[-1])

    def start_bridge(self, impl: str, direction: str, qos: int, run_dir: Path, rule: str | None = None,
                     probe_payload: str = "probe"):
        """A fresh bridge with the one rule of `direction` (or `rule`, TOML text, for the daemon);
        returns it once a probe (`probe_payload`: one the rule's `where` lets through) went through."""
        run_dir.mkdir(parents=True, exist_ok=True)
        if impl in DAEMON_IMPLS:
            if rule is None and direction == "p2m":
                rule = f'[[bridge.rule]]\nname = "p2m"\nfrom = "pusher"\nchannel = "{P2M_CHANNEL}"\n' \
                       f'topic = "bench/p2m/{{event}}"\nqos = {qos}\npayload = "data"\n'
            elif rule is None:
                rule = f'[[bridge.rule]]\nname = "m2p"\nfrom = "mqtt"\ntopic = "bench/m2p/+"\n' \
                       f'channel = "bench-m2p-{{1}}"\nevent = "bench"\nqos = {qos}\npayload = "data"\n'
            config = bridge_config(self.pusher, self.broker, run_dir, rule, name=f"bench{self.counter}")
            # The operator's default level, not the tests' debug; no metrics endpoint needed.
            config = config.replace('log_level = "debug"', 'log_level = "info"')
            if impl == "bridge-memory":  # the same daemon without the on-disk spool
                config = config.replace("persist = true", "persist = false")
            if impl == "bridge-2conn":  # the same daemon with two redundant Pusher connections
                config = config.replace("[bridge.pusher]\n", "[bridge.pusher]\nconnections = 2\n", 1)
            bridge = Bridge(run_dir, config, name="bridge")
        else:
            argv = [sys.executable, str(REPO / "Benchmarks" / "bridge" / "python_bridge.py"),
                    "--pusher-port", str(self.pusher.port), "--app-id", self.pusher.app_id, "--key", self.pusher.key,
                    "--secret", self.pusher.secret, "--mqtt-port", str(self.broker.port)]
            if direction == "p2m":
                argv += ["--p2m-channel", P2M_CHANNEL, "--p2m-topic", "bench/p2m/{event}", "--p2m-qos", str(qos)]
            else:
                argv += ["--m2p-filter", "bench/m2p/+", "--m2p-channel", "bench-m2p-{1}", "--m2p-qos", str(qos)]
            bridge = Process("python-bridge", argv, run_dir)
        bridge.start()
        STARTED.append(bridge)
        try:
            self.probe(direction, bridge, probe_payload)
        except Exception:
            bridge.stop()
            raise
        return bridge

    def probe(self, direction: str, bridge, payload: str = "probe"):
        """Waits until a message really crosses the bridge (event/topic `probe`, which the
        receivers ignore), so that connection set-up is not part of the measurement."""
        deadline = time.monotonic() + 30
        if direction == "p2m":
            collector = MQTTCollector(self.broker.port, ["bench/p2m/probe"], qos=0, client_id=f"probe-{time.monotonic_ns()}")
            try:
                http = self.pusher.http_client()
                while time.monotonic() < deadline and not collector.payloads():
                    if not bridge.running():
                        raise BenchError(f"bridge exited: {bridge.log()[-2000:]}")
                    try:
                        http.trigger(P2M_CHANNEL, "probe", payload)
                    except Exception:
                        pass
                    time.sleep(0.2)
            finally:
                collector.close()
            if time.monotonic() >= deadline:
                raise BenchError(f"no probe crossed the bridge Pusher->MQTT in 30 s: {bridge.log()[-2000:]}")
        else:
            def published() -> int:
                status, body = self.pusher.control("GET", f"/pusher-local/apps/{self.pusher.app_id}/stats")
                return json.loads(body).get("events_published", 0) if status == 200 else 0

            before = published()
            while time.monotonic() < deadline:
                if not bridge.running():
                    raise BenchError(f"bridge exited: {bridge.log()[-2000:]}")
                publish(self.broker.port, "bench/m2p/probe", payload, qos=1)
                time.sleep(0.2)
                if published() > before:
                    return
            raise BenchError(f"no probe crossed the bridge MQTT->Pusher in 30 s: {bridge.log()[-2000:]}")

    def measure(self, scenario: str, impl: str, direction: str, qos: int | None, size: int, rate: float, run: int) -> dict:
        """One run: receiver ready, (bridge ready), load source, receiver result, bridge costs."""
        self.counter += 1
        name = f"{scenario}-{impl}-{direction}-q{qos}-{size}-r{int(rate)}-{run}"
        count = self.count_for(impl, size, rate)
        run_dir = self.work / f"run{self.counter}"
        run_dir.mkdir()
        row = {"scenario": scenario, "impl": impl, "direction": direction, "qos": qos, "size": size,
               "offered_rate": rate, "count": count, "run": run}
        bridge = sampler = None
        try:
            if impl in ALL_IMPLS + EXTRA_IMPLS:
                bridge = self.start_bridge(impl, direction, qos, run_dir)
                sampler = ProcessSampler(bridge.pid).start()
                cpu_before = sampler.cpu_seconds()
            broker_cpu_before = cpu_seconds(self.broker.pid)
            if direction in ("p2m", "ceiling"):
                topic = P2M_TOPIC if direction == "p2m" else CEILING_TOPIC
                receiver = self.receiver("mqtt", topic, qos or 0, count, name)
            else:  # m2p, and the Pusher load source alone (impl swift-receiver / c-receiver picks the receiver)
                kind = {"swift-receiver": "swift", "c-receiver": "c"}.get(impl)
                receiver = self.receiver("pusher", M2P_CHANNEL if direction == "m2p" else P2M_CHANNEL, 0, count, name, kind,
                                         channels=M2P_CHANNELS if direction == "m2p" else 1)
            if direction in ("p2m", "pusher-source"):
                row["source"] = self.stream(count, size, rate)
            else:
                row["source"] = self.c_pub(M2P_TOPIC if direction == "m2p" else CEILING_TOPIC, count, qos or 0, size, rate,
                                           topics=M2P_CHANNELS if direction == "m2p" else 1)
            row["receiver"] = finish_receiver(receiver, name, self.work, self.total + 30)
            stats, values = latency_stats(self.work / f"{name}.lat")
            row["latency"] = stats
            if rate == 5000:
                self.latency_samples[f"{scenario}/{impl}/{direction}"] = values
            (self.work / f"{name}.lat").unlink(missing_ok=True)
            received = max(1, row["receiver"]["received"])
            broker_cpu = cpu_seconds(self.broker.pid) - broker_cpu_before
            row["broker"] = {"cpu_seconds": round(broker_cpu, 3), "cpu_us_per_msg": round(broker_cpu / received * 1e6, 2)}
            if sampler:
                cpu = sampler.cpu_seconds() - cpu_before
                row["bridge"] = {"cpu_seconds": round(cpu, 3), "cpu_seconds_per_100k": round(cpu / received * 1e5, 3),
                                 "cpu_us_per_msg": round(cpu / received * 1e6, 2),
                                 "cpu_vs_broker": round(cpu / broker_cpu, 2) if broker_cpu > 0 else None,
                                 "rss_peak_mb": round((sampler.status_kb("VmHWM") or 0) / 1024, 1),
                                 "rss_sampled_max_mb": round(max(sampler.samples, default=0) / 1024, 1),
                                 "rss_sampled_median_mb": round(statistics.median(sampler.samples) / 1024, 1)
                                 if sampler.samples else None}
        except BenchError as error:
            row["error"] = str(error)
        except (OSError, ValueError, KeyError, subprocess.SubprocessError) as error:  # e.g. the bridge died
            row["error"] = f"{type(error).__name__}: {error}"
        finally:
            if sampler:
                sampler.stop()
            if bridge:
                bridge.stop()
                if bridge in STARTED:
                    STARTED.remove(bridge)
        rec = row.get("receiver", {})
        lat = row.get("latency", {})
        print(f"  {name:44s} " + (f"ERROR {row['error'][:300]}" if "error" in row else
              f"{rec.get('rate', 0):>10,.0f} msg/s  got {rec.get('unique')}/{count}  dup {rec.get('duplicates')} "
              f"reord {rec.get('reordered')}  p50 {lat.get('p50_ms', 0):.2f} p99 {lat.get('p99_ms', 0):.2f} ms"
              + (f"  cpu/100k {row['bridge']['cpu_seconds_per_100k']:.2f}s rss {row['bridge']['rss_peak_mb']} MB"
                 if "bridge" in row else "")
              + (f"  cpu µs/msg: broker {row['broker']['cpu_us_per_msg']:.2f}" if "broker" in row else "")
              + (f" bridge {row['bridge']['cpu_us_per_msg']:.2f} ({row['bridge']['cpu_vs_broker'] or 0:.2f}×)"
                 if "bridge" in row else "")), flush=True)
        self.results.append(row)
        return row

    # -----------------------------------------------------------------------------------------
    # scenarios

    def run(self):
        a = self.args
        runs = range(1, a.runs + 1)
        # QUICK checks that every path works, not the numbers: the smallest and largest size, one rate.
        sizes = [s for s in ([SIZES[0], SIZES[-1]] if a.quick else SIZES) if s in a.sizes]
        qos_levels = [q for q in QOS_LEVELS if q in a.qos]
        rates = [5000] if a.quick else RATES
        impls = [i for i in ALL_IMPLS + EXTRA_IMPLS if i in a.impls]
        if a.quick and "bridge" in impls and "bridge-memory" in impls:
            impls.remove("bridge-memory")  # the same daemon with another config: not needed to check the harness
        if "ceiling" in a.scenarios:
            print("broker ceiling: c_pub -> mosquitto -> c_sub", flush=True)
            for qos in qos_levels:
                for size in sizes:
                    for run in runs:
                        self.measure("throughput", "c", "ceiling", qos, size, 0, run)
        if "sources" in a.scenarios:
            print("Pusher load source alone: pusher-local stream -> pusher-bench-subscriber (Swift) and ws_sub (C)",
                  flush=True)
            for size in sizes:
                for run in runs:
                    for receiver in ("swift-receiver", "c-receiver"):
                        self.measure("throughput", receiver, "pusher-source", None, size, 0, run)
        for direction in ("p2m", "m2p"):
            if direction not in a.scenarios:
                continue
            print(f"{'Pusher->MQTT' if direction == 'p2m' else 'MQTT->Pusher'} throughput", flush=True)
            for qos in qos_levels:
                for size in sizes:
                    for run in runs:
                        for impl in impls:  # interleaved, so slow drifts of the machine hit both
                            self.measure("throughput", impl, direction, qos, size, 0, run)
        if "latency" in a.scenarios:
            print(f"latency at fixed rates (QoS {a.latency_qos}, 100 B)", flush=True)
            for rate in rates:
                for run in runs:
                    self.measure("latency", "c", "ceiling", a.latency_qos, 100, rate, run)
                    self.measure("latency", f"{a.pusher_receiver}-receiver", "pusher-source", None, 100, rate, run)
                    for impl in [i for i in impls if i != "bridge-memory"]:  # keeps the run short
                        for direction in ("p2m", "m2p"):
                            self.measure("latency", impl, direction, a.latency_qos, 100, rate, run)


# ---------------------------------------------------------------------------------------------
# summary: medians, ratios, goals, tables, plots


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def bridge_us_per_msg(row: dict) -> float | None:
    """The bridge's CPU µs per message (rows of earlier runs have only the seconds per 100k)."""
    bridge = row.get("bridge", {})
    if bridge.get("cpu_us_per_msg") is not None:
        return bridge["cpu_us_per_msg"]
    per_100k = bridge.get("cpu_seconds_per_100k")
    return None if per_100k is None else per_100k * 10


def summarize(results: list[dict]) -> list[dict]:
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        key = (r["scenario"], r["impl"], r["direction"], r["qos"], r["size"], r["offered_rate"])
        groups.setdefault(key, []).append(r)
    out = []
    for (scenario, impl, direction, qos, size, rate), rows in groups.items():
        ok = [r for r in rows if "error" not in r]
        out.append({
            "scenario": scenario, "impl": impl, "direction": direction, "qos": qos, "size": size,
            "offered_rate": rate, "runs": len(rows), "failed_runs": len(rows) - len(ok),
            "rate": med([r["receiver"]["rate"] for r in ok]),
            "delivered_fraction": med([r["receiver"]["unique"] / r["count"] for r in ok]),
            "duplicates": sum(r["receiver"]["duplicates"] for r in ok),
            "reordered": sum(r["receiver"]["reordered"] for r in ok),
            "p50_ms": med([r["latency"].get("p50_ms") for r in ok]),
            "p99_ms": med([r["latency"].get("p99_ms") for r in ok]),
            "p999_ms": med([r["latency"].get("p999_ms") for r in ok]),
            "cpu_per_100k": med([r.get("bridge", {}).get("cpu_seconds_per_100k") for r in ok]),
            "cpu_us_per_msg": med([bridge_us_per_msg(r) for r in ok]),
            "broker_cpu_us_per_msg": med([r.get("broker", {}).get("cpu_us_per_msg") for r in ok]),
            "cpu_vs_broker": med([r.get("bridge", {}).get("cpu_vs_broker") for r in ok]),
            "rss_peak_mb": med([r.get("bridge", {}).get("rss_peak_mb") for r in ok]),
            "rss_peak_max_mb": max([r.get("bridge", {}).get("rss_peak_mb") or 0 for r in ok], default=None),
            "errors": [r["error"] for r in rows if "error" in r],
        })
    return out


def find(summary, **key):
    for s in summary:
        if all(s.get(k) == v for k, v in key.items()):
            return s
    return None


def fmt(value, pattern="{:,.0f}", missing="–"):
    return missing if value is None else pattern.format(value)


def ratio(a, b):
    return None if a is None or not b else a / b


def tables(summary: list[dict], meta: dict) -> tuple[str, list[dict]]:
    lines = [f"Run of {meta['started']} — {meta['runs']} run(s) per cell, medians; machine: {meta['machine']}; "
             f"load average before: {meta['load_before']}, after: {meta['load_after']}"
             + ("; **QUICK mode (smoke check, not a measurement)**" if meta["quick"] else "") + ".", ""]

    # load sources alone
    lines += ["### Load sources alone (received msg/s)", "",
              "| size | pusher-local stream → pusher-bench-subscriber (Swift) | … → ws_sub (C) | "
              "c_pub → mosquitto → c_sub QoS 0 | … QoS 1 |",
              "|---|---|---|---|---|"]
    for size in SIZES:
        src = find(summary, scenario="throughput", impl="swift-receiver", direction="pusher-source", size=size)
        alt = find(summary, scenario="throughput", impl="c-receiver", direction="pusher-source", size=size)
        c0 = find(summary, scenario="throughput", direction="ceiling", qos=0, size=size)
        c1 = find(summary, scenario="throughput", direction="ceiling", qos=1, size=size)
        lines.append(f"| {size} B | {fmt(src and src['rate'])} | {fmt(alt and alt['rate'])} | {fmt(c0 and c0['rate'])} | "
                     f"{fmt(c1 and c1['rate'])} |")
    lines.append("")

    # throughput
    for direction, title in (("p2m", "Pusher → MQTT"), ("m2p", "MQTT → Pusher")):
        lines += [f"### {title} throughput (received msg/s)", "",
                  "| QoS | size | bridge | bridge, no spool | Python | broker ceiling | bridge ÷ ceiling | bridge ÷ Python | "
                  "delivered: bridge / no spool / Python | CPU s per 100k: bridge / no spool / Python | "
                  "RSS peak MB: bridge / no spool / Python | bridge msg per CPU-second |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for qos in QOS_LEVELS:
            for size in SIZES:
                cells = [find(summary, scenario="throughput", impl=i, direction=direction, qos=qos, size=size)
                         for i in ("bridge", "bridge-memory", "python")]
                b, _, p = cells
                c = find(summary, scenario="throughput", direction="ceiling", qos=qos, size=size)
                if not any(cells):
                    continue
                br, pr, cr = b and b["rate"], p and p["rate"], c and c["rate"]

                def each(field, pattern):
                    return " / ".join(fmt(x and x[field], pattern) for x in cells)

                lines.append(
                    f"| {qos} | {size} B | {fmt(br)} | {fmt(cells[1] and cells[1]['rate'])} | {fmt(pr)} | {fmt(cr)} | "
                    f"{fmt(ratio(br, cr), '{:.2f}')} | {fmt(ratio(br, pr), '{:.1f}×')} | "
                    f"{each('delivered_fraction', '{:.0%}')} | {each('cpu_per_100k', '{:.2f}')} | "
                    f"{each('rss_peak_mb', '{:.1f}')} | {fmt(b and b['cpu_per_100k'] and 1e5 / b['cpu_per_100k'])} |")
        lines.append("")

    # CPU per message against the broker's, same run
    lines += ["### CPU per message against the broker's (µs of CPU per message received; same run)", "",
              "| direction | QoS | size | bridge | broker (same run) | bridge ÷ broker | no spool | Python | "
              "Python ÷ bridge | ceiling's broker | bridge ÷ ceiling (throughput) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for direction, title in (("p2m", "Pusher → MQTT"), ("m2p", "MQTT → Pusher")):
        for qos in QOS_LEVELS:
            for size in SIZES:
                b, nm, p = (find(summary, scenario="throughput", impl=i, direction=direction, qos=qos, size=size)
                            for i in ("bridge", "bridge-memory", "python"))
                c = find(summary, scenario="throughput", direction="ceiling", qos=qos, size=size)
                if not (b or p):
                    continue
                bu, pu = b and b["cpu_us_per_msg"], p and p["cpu_us_per_msg"]
                lines.append(
                    f"| {title} | {qos} | {size} B | {fmt(bu, '{:.2f}')} | {fmt(b and b['broker_cpu_us_per_msg'], '{:.2f}')} | "
                    f"{fmt(b and b['cpu_vs_broker'], '{:.2f}×')} | {fmt(nm and nm['cpu_us_per_msg'], '{:.2f}')} | "
                    f"{fmt(pu, '{:.2f}')} | {fmt(ratio(pu, bu), '{:.1f}×')} | "
                    f"{fmt(c and c['broker_cpu_us_per_msg'], '{:.2f}')} | {fmt(ratio(b and b['rate'], c and c['rate']), '{:.2f}')} |")
    lines.append("")

    # latency
    lines += ["### End-to-end latency at fixed rates (100 B; ms; p50 / p99 / p99.9)", "",
              "| rate/s | broker ceiling | pusher-local → subscriber | bridge P→M | Python P→M | bridge M→P | Python M→P |",
              "|---|---|---|---|---|---|---|"]

    def lat(s):
        if not s or s["p50_ms"] is None:
            return "–"
        text = f"{s['p50_ms']:.2f} / {s['p99_ms']:.2f} / {s['p999_ms']:.2f}"
        if s["rate"] and s["offered_rate"] and s["rate"] < 0.9 * s["offered_rate"]:
            text += f" (saturated: {s['rate']:,.0f}/s)"
        return text

    for rate in RATES:
        cells = [find(summary, scenario="latency", direction="ceiling", offered_rate=rate),
                 find(summary, scenario="latency", direction="pusher-source", offered_rate=rate)]
        cells += [find(summary, scenario="latency", impl=i, direction=d, offered_rate=rate)
                  for d in ("p2m",) for i in ("bridge", "python")]
        cells += [find(summary, scenario="latency", impl=i, direction=d, offered_rate=rate)
                  for d in ("m2p",) for i in ("bridge", "python")]
        if any(cells):
            lines.append(f"| {rate:,} | " + " | ".join(lat(c) for c in cells) + " |")
    lines.append("")

    # goals
    goals = []

    def goal(name, value, target, met, note=""):
        goals.append({"goal": name, "measured": value, "target": target, "met": met, "note": note})

    b0 = find(summary, scenario="throughput", impl="bridge", direction="p2m", qos=0, size=100)
    b1 = find(summary, scenario="throughput", impl="bridge", direction="p2m", qos=1, size=100)
    m = [find(summary, scenario="throughput", impl="bridge", direction="m2p", qos=q, size=100) for q in QOS_LEVELS]
    if b0:
        goal("Pusher→MQTT QoS 0, 100 B", fmt(b0["rate"]) + "/s", f"≥ {GOAL_P2M_QOS0:,}/s", (b0["rate"] or 0) >= GOAL_P2M_QOS0)
    if b1:
        goal("Pusher→MQTT QoS 1, 100 B", fmt(b1["rate"]) + "/s", f"≥ {GOAL_P2M_QOS1:,}/s", (b1["rate"] or 0) >= GOAL_P2M_QOS1)
    for q, s in zip(QOS_LEVELS, m):
        if s:
            goal(f"MQTT→Pusher QoS {q}, 100 B", fmt(s["rate"]) + "/s", f"≥ {GOAL_M2P:,}/s", (s["rate"] or 0) >= GOAL_M2P)
    for d, title in (("p2m", "Pusher→MQTT"), ("m2p", "MQTT→Pusher")):
        s = find(summary, scenario="latency", impl="bridge", direction=d, offered_rate=5000)
        base = find(summary, scenario="latency", direction="pusher-source" if d == "p2m" else "ceiling", offered_rate=5000)
        if s and s["p99_ms"] is not None:
            added = s["p99_ms"] - (base["p99_ms"] if base and base["p99_ms"] is not None else 0)
            goal(f"{title} p99 added latency at 5k/s", f"{added:.2f} ms (end to end {s['p99_ms']:.2f} ms)",
                 f"≤ {GOAL_P99_MS_AT_5K} ms", added <= GOAL_P99_MS_AT_5K,
                 "added = bridge path p99 − " + ("pusher-local→subscriber" if d == "p2m" else "broker ceiling") + " p99")
    rss = [s["rss_peak_max_mb"] for s in summary if s["impl"].startswith("bridge") and s["rss_peak_max_mb"]]
    if rss:
        goal("bridge RSS peak under load", f"{max(rss):.1f} MB", f"≤ {GOAL_RSS_MB:.0f} MB", max(rss) <= GOAL_RSS_MB,
             "largest VmHWM of any bridge run")
    ratios = []
    for s in summary:
        if s["impl"] == "bridge" and s["scenario"] == "throughput":
            p = find(summary, scenario="throughput", impl="python", direction=s["direction"], qos=s["qos"], size=s["size"])
            if p and p["rate"] and s["rate"]:
                ratios.append((s["rate"] / p["rate"], f"{s['direction']} QoS {s['qos']} {s['size']} B"))
    if ratios:
        worst = min(ratios)
        goal("bridge ÷ Python throughput (worst cell)", f"{worst[0]:.1f}× ({worst[1]})", f"≥ {GOAL_VS_PYTHON:.0f}×",
             worst[0] >= GOAL_VS_PYTHON)
    for (d, q), target in GOAL_CPU_VS_BROKER.items():
        s = find(summary, scenario="throughput", impl="bridge", direction=d, qos=q, size=100)
        if s and s["cpu_vs_broker"] is not None:
            title = "Pusher→MQTT" if d == "p2m" else "MQTT→Pusher"
            goal(f"{title} QoS {q} CPU ÷ broker's, 100 B (issue 16)",
                 f"{s['cpu_vs_broker']:.2f}× ({s['cpu_us_per_msg']:.2f} / {s['broker_cpu_us_per_msg']:.2f} µs)",
                 f"≤ {target}×", s["cpu_vs_broker"] <= target)
    for (d, q), target in GOAL_VS_CEILING.items():
        s = find(summary, scenario="throughput", impl="bridge", direction=d, qos=q, size=100)
        c = find(summary, scenario="throughput", direction="ceiling", qos=q, size=100)
        r = ratio(s and s["rate"], c and c["rate"])
        if r is not None:
            title = "Pusher→MQTT" if d == "p2m" else "MQTT→Pusher"
            goal(f"{title} QoS {q} throughput ÷ ceiling, 100 B (issue 16)", f"{r:.2f}", f"≥ {target}", r >= target)
    cpu_ratios = []
    for s in summary:
        if s["impl"] == "bridge" and s["scenario"] == "throughput" and s["cpu_us_per_msg"]:
            p = find(summary, scenario="throughput", impl="python", direction=s["direction"], qos=s["qos"], size=s["size"])
            if p and p["cpu_us_per_msg"]:
                cpu_ratios.append((p["cpu_us_per_msg"] / s["cpu_us_per_msg"], f"{s['direction']} QoS {s['qos']} {s['size']} B"))
    if cpu_ratios:
        worst = min(cpu_ratios)
        goal("Python ÷ bridge CPU per message (worst cell, issue 16)", f"{worst[0]:.1f}× ({worst[1]})",
             f"≥ {GOAL_VS_PYTHON:.0f}×", worst[0] >= GOAL_VS_PYTHON)
    lines += ["### Goals (issues 7 and 16)", "", "| goal | measured | target | met? |", "|---|---|---|---|"]
    for g in goals:
        lines.append(f"| {g['goal']} | {g['measured']} | {g['target']} | {'yes' if g['met'] else '**no**'}"
                     + (f" ({g['note']})" if g["note"] else "") + " |")
    failures = [s for s in summary if s["failed_runs"]]
    if failures:
        lines += ["", "### Failed runs", ""]
        for s in failures:
            lines.append(f"- {s['scenario']} {s['impl']} {s['direction']} QoS {s['qos']} {s['size']} B rate "
                         f"{s['offered_rate']}: {s['failed_runs']} of {s['runs']} — {s['errors'][0][:300]}")
    lines.append("")
    return "\n".join(lines), goals


def plots(summary: list[dict], samples: dict, out: Path) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    written = []
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for ax, (direction, title) in zip(axes, (("p2m", "Pusher → MQTT"), ("m2p", "MQTT → Pusher"))):
        for impl, label, style in (("bridge", "bridge", "-o"), ("bridge-memory", "bridge, no spool", "-.d"),
                                   ("python", "Python baseline", "--s"), ("c", "broker ceiling", ":^")):
            for qos in QOS_LEVELS:
                xs, ys = [], []
                for size in SIZES:
                    s = find(summary, scenario="throughput", impl=impl,
                             direction="ceiling" if impl == "c" else direction, qos=qos, size=size)
                    if s and s["rate"]:
                        xs.append(size)
                        ys.append(s["rate"])
                if xs:
                    ax.plot(xs, ys, style, label=f"{label} QoS {qos}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(SIZES, [f"{s} B" for s in SIZES])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_xlabel("payload size")
        ax.set_ylabel("messages/s received")
        ax.set_title(f"{title} throughput")
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)

    def save(fig, name: str) -> None:
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        written.append(name)

    save(fig, "throughput.png")

    if samples:
        fig, ax = plt.subplots(figsize=(8, 5))
        names = {"latency/c/ceiling": "broker ceiling", "latency/swift-receiver/pusher-source": "pusher-local → subscriber",
                 "latency/c-receiver/pusher-source": "pusher-local → ws_sub",
                 "latency/bridge/p2m": "bridge P→M", "latency/python/p2m": "Python P→M",
                 "latency/bridge/m2p": "bridge M→P", "latency/python/m2p": "Python M→P"}
        for key, label in names.items():
            values = samples.get(key)
            if not values:
                continue
            ordered = sorted(v / 1e6 for v in values)
            n = len(ordered)
            ax.plot(ordered, [(i + 1) / n for i in range(n)], label=label)
        ax.set_xscale("log")
        ax.set_xlabel("end-to-end latency (ms, log)")
        ax.set_ylabel("fraction of messages")
        ax.set_title("Latency CDF at 5,000 msg/s, 100 B (last run of each)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        save(fig, "latency-cdf.png")
    return written


def update_benchmarks_md(table: str):
    """Replaces the generated block of BENCHMARKS.md with this run's tables."""
    path = REPO / "BENCHMARKS.md"
    if not path.exists():
        return
    text = path.read_text()
    begin, end = "<!-- bench:results:begin -->", "<!-- bench:results:end -->"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        path.write_text(f"{head}{begin}\n{table}\n{end}{tail}")


def main() -> int:
    parser = argparse.ArgumentParser(description="pusher-mqtt-bridge benchmarks (see BENCHMARKS.md)")
    parser.add_argument("--bin-dir", required=True, help="release bin dir with pusher-local, pusher-mqtt-bridge, pusher-bench-subscriber")
    parser.add_argument("--tools-dir", required=True, help="dir with c_pub and c_sub")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="few messages, 1 run: checks the harness works")
    parser.add_argument("--scenarios", default=",".join(ALL_SCENARIOS))
    parser.add_argument("--impls", default=",".join(ALL_IMPLS))
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="payload sizes of the throughput cells")
    parser.add_argument("--qos", default=",".join(map(str, QOS_LEVELS)), help="QoS levels of the throughput cells")
    parser.add_argument("--latency-qos", type=int, default=1)
    parser.add_argument("--pusher-receiver", choices=["swift", "c"], default="swift",
                        help="Pusher-side receiver of the M->P and latency runs: pusher-bench-subscriber or ws_sub")
    parser.add_argument("--latency-seconds", type=float, default=3.0)
    parser.add_argument("--out", default=str(REPO / "Benchmarks" / "results"))
    parser.add_argument("--render", metavar="JSON", help="only redo the tables of a latest.json (no measurement, no plots of latency)")
    args = parser.parse_args()
    if args.render:
        saved = json.loads(Path(args.render).read_text())
        summary = summarize(saved["runs"])
        table, _ = tables(summary, saved["meta"])
        print(table)
        plots(summary, {}, Path(args.render).parent)
        return 0
    args.scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    args.impls = [s.strip() for s in args.impls.split(",") if s.strip()]
    try:
        args.sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
        args.qos = [int(q) for q in args.qos.split(",") if q.strip()]
    except ValueError:
        parser.error("--sizes and --qos take comma-separated integers")
    if not set(args.sizes) <= set(SIZES) or not set(args.qos) <= set(QOS_LEVELS):
        parser.error(f"--sizes from {SIZES}, --qos from {QOS_LEVELS}")
    unknown = [s for s in args.scenarios if s not in ALL_SCENARIOS] + [i for i in args.impls if i not in ALL_IMPLS + EXTRA_IMPLS]
    if unknown:
        parser.error(f"unknown scenario or impl: {', '.join(unknown)} (scenarios: {ALL_SCENARIOS}, impls: {ALL_IMPLS + EXTRA_IMPLS})")
    if args.quick:
        args.runs = 1
    for tool in (Path(args.bin_dir) / "pusher-local", Path(args.bin_dir) / "pusher-mqtt-bridge",
                 Path(args.bin_dir) / "pusher-bench-subscriber", Path(args.tools_dir) / "c_pub", Path(args.tools_dir) / "c_sub", Path(args.tools_dir) / "ws_sub"):
        if not tool.exists():
            parser.error(f"{tool} is missing (scripts/bench.sh builds it)")

    atexit.register(stop_all)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    meta = {"started": datetime.datetime.now().isoformat(timespec="seconds"), "runs": args.runs, "quick": args.quick,
            "machine": f"{os.cpu_count()} cores, {platform.platform()}",
            "load_before": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
            "scenarios": args.scenarios, "impls": args.impls, "latency_qos": args.latency_qos,
            "pusher_receiver": args.pusher_receiver}
    started = time.monotonic()
    bench = Bench(args)
    try:
        bench.run()
    finally:
        stop_all()
    meta["load_after"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    meta["seconds"] = round(time.monotonic() - started, 1)

    out = Path(args.out) / ("quick" if args.quick else "")
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(bench.results)
    table, goals = tables(summary, meta)
    (out / "latest.json").write_text(json.dumps({"meta": meta, "summary": summary, "goals": goals,
                                                 "runs": bench.results}, indent=1) + "\n")
    (out / "latest.md").write_text(f"# make bench — latest results\n\n{table}")
    written = plots(summary, bench.latency_samples, out)
    everything = set(args.sizes) == set(SIZES) and set(args.qos) == set(QOS_LEVELS)
    if not args.quick and everything and set(args.scenarios) == set(ALL_SCENARIOS) and set(args.impls) == set(ALL_IMPLS):
        update_benchmarks_md(table)
    print("\n" + table)
    print(f"bench: {len(bench.results)} measurements in {meta['seconds']} s; wrote {out}/latest.json, latest.md, "
          + ", ".join(written))
    errors = sum(1 for r in bench.results if "error" in r)
    if errors:
        print(f"bench: {errors} measurement(s) failed (see 'Failed runs')", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
