"""`make bench-rtt`: the Pusher side at real round-trip times (issue 16; docs/history/benchmarks.md "Real round-trip times").

    sudo .venv/bin/python Benchmarks/rtt/bench_rtt.py --bin-dir .build/release --tools-dir .build/bench-tools
        [--runs 3] [--rtts 20,50,100] [--lanes 8,32] [--channels 1,10,100] [--quick] [--out Benchmarks/results/rtt]

Needs root: it makes two network namespaces of its own with `ip netns` (Tests/testkit/bridge_testkit/faults/netns.py,
prefix `pmrtt`), joined by one veth pair on 10.213.0.1/30 and 10.213.0.2/30 that exists only
inside them; nothing in the root namespace (addresses, routes, firewall, qdiscs) is touched.

    netns pmrtt-br : mosquitto, the bridge, c_pub (M→P load), c_sub (P→M receiver), all on its loopback
    netns pmrtt-srv: pusher-local (on 10.213.0.2), pusher-bench-subscriber (M→P receiver), on its loopback

The added round-trip time D is `tc qdisc … netem delay D/2` on *each* veth end (half each way), so
every packet between the bridge and pusher-local (the HTTP API and the WebSocket) crosses D/2 each
way; mosquitto and the receivers stay on loopback.

MQTT → Pusher: c_pub publishes QoS 1, 100 B, as fast as its window allows, round-robin over
CHANNELS topics `rtt/m2p/N`; the rule maps them to channels `rtt-N`; pusher-bench-subscriber counts
them. Throughput (first to last arrival) is compared with the ideal min(lanes, channels) × 10 / RTT
(10 events per `batch_events`, one request in flight per channel, `api_lanes` requests at once).
Pusher → MQTT: pusher-local's generated stream (100 B, as fast as it goes) over the WebSocket
across the delay, the bridge publishing QoS 1 to mosquitto, c_sub counting: it should not depend on D.

Every process is started here and stopped by PID, the namespaces are deleted (with the veths and
their qdiscs) in `finally`, also on failure or Ctrl-C. Writes latest.json and latest.md to --out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

from bridge_testkit import bench  # (receivers, BenchMosquitto, stop_all)
from bridge_testkit.bench import BenchError, BenchMosquitto, finish_receiver, start_receiver
from bridge_testkit.harness import Bridge, Process, PusherLocal, bridge_config, free_port, wait_until
from bridge_testkit.faults.netns import SERVER_ADDR, Partition

PREFIX = "pmrtt"
BATCH = 10  # events per batch_events (PusherLimits.batchSize)
SECONDS_PER_CELL = 4.0  # messages per M→P cell: about this long at the ideal rate
P2M_COUNT = 50_000


def run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=30)


class RTTBench:
    def __init__(self, args, ns: Partition):
        self.args, self.ns = args, ns
        self.bin_dir, self.tools = Path(args.bin_dir).resolve(), Path(args.tools_dir).resolve()
        self.work = Path(tempfile.mkdtemp(prefix="bench-rtt-"))
        self.br, self.srv = ns.exec_prefix(ns.bridge_ns), ns.exec_prefix(ns.server_ns)
        os.environ["PUSHER_LOCAL_BIN"] = str(self.bin_dir / "pusher-local")
        os.environ["BRIDGE_BIN"] = str(self.bin_dir / "pusher-mqtt-bridge")
        self.rows: list[dict] = []
        self.counter = 0
        self.relay: Process | None = None
        self.delay_mode = "netem"
        self.pusher_host, self.pusher_port = SERVER_ADDR, 0

    # ---- the servers ------------------------------------------------------------------------
    def ns_port_open(self, prefix: list[str], port: int) -> bool:
        return subprocess.run(prefix + ["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port}"],
                              capture_output=True, timeout=5).returncode == 0

    def start_servers(self):
        self.broker = BenchMosquitto(self.work)
        self.broker.argv = self.br + self.broker.argv
        Process.start(self.broker)
        bench.STARTED.append(self.broker)
        wait_until(lambda: self.ns_port_open(self.br, self.broker.port), 10, what="mosquitto in its namespace")
        self.pusher = PusherLocal(self.work, extra=["--log-level", "warning"])
        self.pusher.argv = self.srv + [self.pusher.argv[0], "--host", "0.0.0.0", *self.pusher.argv[3:]]
        self.pusher.start()
        bench.STARTED.append(self.pusher)

    def netem_available(self) -> bool:
        probe = run(self.br + ["tc", "qdisc", "replace", "dev", self.ns.veth_b, "root", "netem", "delay", "0ms"], check=False)
        if probe.returncode == 0:
            run(self.br + ["tc", "qdisc", "del", "dev", self.ns.veth_b, "root"], check=False)
        return probe.returncode == 0

    def set_delay(self, rtt_ms: float):
        """Half of the added round trip each way: netem on each end of the veth pair, or, where the
        kernel has no sch_netem, Benchmarks/rtt/delay_relay.py in the bridge's namespace in front
        of pusher-local (the bridge then connects to the relay on its loopback)."""
        half = f"{rtt_ms / 2:g}ms"
        if self.delay_mode == "netem":
            for prefix, dev in ((self.br, self.ns.veth_b), (self.srv, self.ns.veth_s)):
                run(prefix + ["tc", "qdisc", "replace", "dev", dev, "root", "netem", "delay", half, "limit", "100000"])
            self.pusher_host, self.pusher_port = SERVER_ADDR, self.pusher.port
        else:
            if self.relay is not None:
                self.relay.stop()
                bench.STARTED.remove(self.relay)
            port = free_port()
            self.relay = Process(f"relay-{rtt_ms:g}", self.br + [sys.executable, str(Path(__file__).parent / "delay_relay.py"),
                                                                  str(port), SERVER_ADDR, str(self.pusher.port), f"{rtt_ms / 2:g}"],
                                 self.work)
            self.relay.start(stdout=subprocess.PIPE)
            bench.STARTED.append(self.relay)
            if self.relay.proc.stdout.readline().decode().strip() != "ready":
                raise BenchError(f"delay relay did not start: {self.relay.log()[-1000:]}")
            self.pusher_host, self.pusher_port = "127.0.0.1", port
        print(f"added RTT {rtt_ms:g} ms ({half} each way, {self.delay_mode})", flush=True)

    # ---- the bridge -------------------------------------------------------------------------
    def start_bridge(self, lanes: int) -> Bridge:
        self.counter += 1
        run_dir = self.work / f"bridge{self.counter}"
        run_dir.mkdir()
        rules = ('[[bridge.rule]]\nname = "m2p"\nfrom = "mqtt"\ntopic = "rtt/m2p/+"\nchannel = "rtt-{1}"\n'
                 'event = "bench"\nqos = 1\npayload = "data"\n\n'
                 '[[bridge.rule]]\nname = "p2m"\nfrom = "pusher"\nchannel = "rtt-p2m"\ntopic = "rtt/p2m/{event}"\n'
                 'qos = 1\npayload = "data"\n')
        pusher = types.SimpleNamespace(key=self.pusher.key, app_id=self.pusher.app_id, secret=self.pusher.secret,
                                       port=self.pusher_port)
        config = bridge_config(pusher, self.broker, run_dir, rules, name=f"rtt{self.counter}",
                               extra_pusher=f"api_lanes = {lanes}")
        # The HTTP API and the WebSocket across the delay; mosquitto on the namespace's loopback.
        config = config.replace(f'host = "127.0.0.1"\nport = {self.pusher_port}', f'host = "{self.pusher_host}"\nport = {self.pusher_port}')
        config = config.replace('log_level = "debug"', 'log_level = "info"')
        # Activity and pong timeouts of the e2e tests are too short for 100 ms of added RTT.
        config = config.replace('activity_timeout = "2s"\npong_timeout = "1s"', 'activity_timeout = "30s"\npong_timeout = "10s"')
        bridge = Bridge(run_dir, config, name="bridge")
        bridge.argv = self.br + bridge.argv
        bridge.start()
        bench.STARTED.append(bridge)
        self.probe(bridge)
        return bridge

    def stop_bridge(self, bridge: Bridge):
        bridge.stop()
        if bridge in bench.STARTED:
            bench.STARTED.remove(bridge)

    def published(self) -> int:
        status, body = self.control("GET", f"/pusher-local/apps/{self.pusher.app_id}/stats")
        return json.loads(body).get("events_published", 0) if status == 200 else 0

    def control(self, method: str, path: str, timeout: float = 10) -> tuple[int, str]:
        """pusher-local's control endpoint, from inside its namespace."""
        script = ("import sys, urllib.request as u\n"
                  "try:\n r = u.urlopen(u.Request(sys.argv[1], method=sys.argv[2]), timeout=float(sys.argv[3]))\n"
                  " print(r.status); sys.stdout.write(r.read().decode())\n"
                  "except Exception as e:\n print(0); sys.stdout.write(str(e))\n")
        out = subprocess.run(self.srv + [sys.executable, "-c", script, f"http://127.0.0.1:{self.pusher.port}{path}",
                                         method, str(timeout)], capture_output=True, text=True, timeout=timeout + 15).stdout
        status, _, body = out.partition("\n")
        return int(status or 0), body

    def probe(self, bridge: Bridge):
        """Waits until a message crosses the bridge each way (subscriptions made, connections up)."""
        deadline = time.monotonic() + 30
        before = self.published()
        while self.published() <= before:
            if time.monotonic() > deadline or not bridge.running():
                raise BenchError(f"no probe crossed MQTT->Pusher: {bridge.log()[-2000:]}")
            run(self.br + ["mosquitto_pub", "-p", str(self.broker.port), "-q", "1", "-t", "rtt/m2p/probe", "-m", "probe"],
                check=False)
            time.sleep(0.3)
        sub = subprocess.Popen(self.br + ["mosquitto_sub", "-p", str(self.broker.port), "-t", "rtt/p2m/probe", "-C", "1",
                                          "-W", "30"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.3)
            while sub.poll() is None:
                if time.monotonic() > deadline or not bridge.running():
                    raise BenchError(f"no probe crossed Pusher->MQTT: {bridge.log()[-2000:]}")
                self.control("POST", f"/pusher-local/apps/{self.pusher.app_id}/stream?channel=rtt-p2m&event=probe"
                                     "&count=1&size=50&rate=0")
                time.sleep(0.3)
        finally:
            if sub.poll() is None:
                sub.kill()
            sub.wait(5)

    # ---- measurements -----------------------------------------------------------------------
    def measure_m2p(self, rtt: float, lanes: int, channels: int, run_no: int) -> dict:
        ideal = min(lanes, channels) * BATCH / (rtt / 1000)
        seconds = 1.5 if self.args.quick else SECONDS_PER_CELL
        count = max(200, min(60_000, int(ideal * seconds)))
        count -= count % channels
        name = f"m2p-rtt{rtt:g}-lanes{lanes}-ch{channels}-{run_no}"
        row = {"direction": "m2p", "rtt_ms": rtt, "lanes": lanes, "channels": channels, "run": run_no,
               "count": count, "ideal_rate": ideal}
        try:
            argv = self.srv + [str(self.bin_dir / "pusher-bench-subscriber"), str(self.pusher.port), self.pusher.key,
                               "rtt-%d" if channels > 1 else "rtt-0", "bench", str(count), "5", "120",
                               str(self.work / f"{name}.lat")] + ([str(channels)] if channels > 1 else [])
            receiver = start_receiver(argv, name, self.work)
            topic_args = ["rtt/m2p/%d", str(count), "1", "100", "0", "1000", str(channels)] if channels > 1 else \
                         ["rtt/m2p/0", str(count), "1", "100", "0", "1000", "1"]
            out = subprocess.run(self.br + [str(self.tools / "c_pub"), str(self.broker.port)] + topic_args,
                                 capture_output=True, timeout=180)
            if out.returncode != 0:
                raise BenchError(f"c_pub exited {out.returncode}: {out.stderr.decode(errors='replace')[-500:]}")
            row["receiver"] = finish_receiver(receiver, name, self.work, 180)
            row["rate"] = row["receiver"]["rate"]
            row["of_ideal"] = row["rate"] / ideal
        except (BenchError, OSError, ValueError, subprocess.SubprocessError) as error:
            row["error"] = f"{type(error).__name__}: {error}"
        finally:
            (self.work / f"{name}.lat").unlink(missing_ok=True)
        self.report(name, row)
        return row

    def measure_p2m(self, rtt: float, run_no: int) -> dict:
        count = 2000 if self.args.quick else P2M_COUNT
        name = f"p2m-rtt{rtt:g}-{run_no}"
        row = {"direction": "p2m", "rtt_ms": rtt, "run": run_no, "count": count}
        try:
            argv = self.br + [str(self.tools / "c_sub"), str(self.broker.port), "rtt/p2m/bench", "1", str(count), "5", "120",
                              str(self.work / f"{name}.lat")]
            receiver = start_receiver(argv, name, self.work)
            status, body = self.control("POST", f"/pusher-local/apps/{self.pusher.app_id}/stream?channel=rtt-p2m&event=bench"
                                                f"&count={count}&size=100&rate=0", timeout=150)
            if status != 200:
                raise BenchError(f"stream request failed: {status} {body[:300]}")
            row["receiver"] = finish_receiver(receiver, name, self.work, 180)
            row["rate"] = row["receiver"]["rate"]
        except (BenchError, OSError, ValueError, subprocess.SubprocessError) as error:
            row["error"] = f"{type(error).__name__}: {error}"
        finally:
            (self.work / f"{name}.lat").unlink(missing_ok=True)
        self.report(name, row)
        return row

    def report(self, name: str, row: dict):
        self.rows.append(row)
        if "error" in row:
            print(f"  {name:34s} ERROR {row['error'][:300]}", flush=True)
            return
        rec = row["receiver"]
        ideal = f"  ideal {row['ideal_rate']:>8,.0f}  {row['of_ideal']:.0%}" if "ideal_rate" in row else ""
        print(f"  {name:34s} {row['rate']:>9,.0f} msg/s  got {rec.get('unique')}/{row['count']}  "
              f"dup {rec.get('duplicates')} reord {rec.get('reordered')}{ideal}", flush=True)

    def run(self):
        a = self.args
        self.start_servers()
        if not self.netem_available():
            self.delay_mode = "relay"
            print("bench-rtt: this kernel has no sch_netem (tc: 'Specified qdisc kind is unknown'); the delay is added by "
                  "Benchmarks/rtt/delay_relay.py in the bridge's namespace instead", flush=True)
        for rtt in a.rtts:
            self.set_delay(rtt)
            for lanes in a.lanes:
                bridge = self.start_bridge(lanes)
                try:
                    for run_no in range(1, a.runs + 1):
                        for channels in a.channels:
                            self.measure_m2p(rtt, lanes, channels, run_no)
                        if lanes == a.lanes[0]:
                            self.measure_p2m(rtt, run_no)
                finally:
                    self.stop_bridge(bridge)


# ---------------------------------------------------------------------------------------------
# summary


def summarize(rows: list[dict], args) -> tuple[list[dict], str]:
    def med(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    summary = []
    lines = ["### MQTT → Pusher over the HTTP API (QoS 1, 100 B; msg/s, medians; ideal = min(lanes, channels) × 10 / RTT)", "",
             "| added RTT | api_lanes | channels | msg/s | ideal | of ideal | reordered |", "|---|---|---|---|---|---|---|"]
    for rtt in args.rtts:
        for lanes in args.lanes:
            for channels in args.channels:
                cell = [r for r in rows if r["direction"] == "m2p" and r["rtt_ms"] == rtt and r["lanes"] == lanes
                        and r["channels"] == channels and "error" not in r]
                rate = med([r["rate"] for r in cell])
                ideal = min(lanes, channels) * BATCH / (rtt / 1000)
                reordered = sum(r["receiver"].get("reordered", 0) for r in cell)
                summary.append({"direction": "m2p", "rtt_ms": rtt, "lanes": lanes, "channels": channels, "rate": rate,
                                "ideal_rate": ideal, "of_ideal": rate / ideal if rate else None, "runs": len(cell),
                                "reordered": reordered})
                lines.append(f"| {rtt:g} ms | {lanes} | {channels} | {fmt(rate)} | {ideal:,.0f} | "
                             f"{'–' if not rate else f'{rate / ideal:.0%}'} | {reordered} |")
    lines += ["", "### Pusher → MQTT over the WebSocket (QoS 1, 100 B; msg/s, medians)", "",
              "| added RTT | msg/s |", "|---|---|"]
    for rtt in args.rtts:
        cell = [r for r in rows if r["direction"] == "p2m" and r["rtt_ms"] == rtt and "error" not in r]
        rate = med([r["rate"] for r in cell])
        summary.append({"direction": "p2m", "rtt_ms": rtt, "rate": rate, "runs": len(cell)})
        lines.append(f"| {rtt:g} ms | {fmt(rate)} |")
    return summary, "\n".join(lines) + "\n"


def fmt(value) -> str:
    return "–" if value is None else f"{value:,.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description="pusher-mqtt-bridge at real round-trip times (needs root: network namespaces)")
    parser.add_argument("--bin-dir", required=True, help="release bin dir: pusher-local, pusher-mqtt-bridge, pusher-bench-subscriber")
    parser.add_argument("--tools-dir", required=True, help="dir with c_pub and c_sub (scripts/bench.sh builds them)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rtts", default="20,50,100", help="added round-trip times, ms")
    parser.add_argument("--lanes", default="8,32", help="api_lanes values; the first also runs Pusher→MQTT")
    parser.add_argument("--channels", default="1,10,100")
    parser.add_argument("--quick", action="store_true", help="one RTT (the first), one run, fewer messages")
    parser.add_argument("--out", default=str(REPO / "Benchmarks" / "results" / "rtt"))
    args = parser.parse_args()
    if os.geteuid() != 0:
        parser.error("needs root: it creates network namespaces, a veth pair and netem qdiscs (run it with sudo)")
    for tool in ("ip", "tc", "mosquitto", "mosquitto_pub", "mosquitto_sub"):
        if shutil.which(tool) is None:
            parser.error(f"{tool} is missing")
    args.rtts = [float(v) for v in args.rtts.split(",") if v]
    args.lanes = [int(v) for v in args.lanes.split(",") if v]
    args.channels = [int(v) for v in args.channels.split(",") if v]
    if args.quick:
        args.runs, args.rtts = 1, args.rtts[:1]

    signal.signal(signal.SIGTERM, bench.on_signal)
    signal.signal(signal.SIGINT, bench.on_signal)
    meta = {"started": datetime.datetime.now().isoformat(timespec="seconds"), "runs": args.runs, "quick": args.quick,
            "machine": f"{os.cpu_count()} cores, {platform.platform()}",
            "load_before": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
            "delay": "netem delay RTT/2 on each end of the veth pair", "rtts_ms": args.rtts, "lanes": args.lanes,
            "channels": args.channels}
    started = time.monotonic()
    ns = Partition(prefix=PREFIX)
    rtt_bench = None
    try:
        with ns:
            rtt_bench = RTTBench(args, ns)
            rtt_bench.run()
    finally:
        bench.stop_all()  # every process this run started, by PID; then the namespaces go (Partition.__exit__)
        ns.teardown()
    rows = rtt_bench.rows if rtt_bench else []
    if rtt_bench and rtt_bench.delay_mode == "relay":
        meta["delay"] = ("Benchmarks/rtt/delay_relay.py, RTT/2 each way, in the bridge's namespace in front of pusher-local "
                         "(no sch_netem in this kernel)")
    meta["seconds"] = round(time.monotonic() - started, 1)
    meta["load_after"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    summary, table = summarize(rows, args)
    out = Path(args.out) / ("quick" if args.quick else "")
    out.mkdir(parents=True, exist_ok=True)
    (out / "latest.json").write_text(json.dumps({"meta": meta, "summary": summary, "runs": rows}, indent=1) + "\n")
    header = (f"# make bench-rtt — latest results\n\n{meta['started']}, {meta['machine']}, medians of {args.runs}, "
              f"{meta['seconds']} s; load {meta['load_before']} → {meta['load_after']}. Added RTT: {meta['delay']}.\n\n")
    (out / "latest.md").write_text(header + table)
    print("\n" + table)
    print(f"bench-rtt: {len(rows)} measurements in {meta['seconds']} s; wrote {out}/latest.json, latest.md")
    errors = sum(1 for r in rows if "error" in r)
    if errors:
        print(f"bench-rtt: {errors} measurement(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
