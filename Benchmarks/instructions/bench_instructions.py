"""`make bench-instructions`: instructions per message, a figure that does not depend on how busy
the machine is (docs/history/benchmarks.md "Instructions per message").

    .venv/bin/python Benchmarks/instructions/bench_instructions.py --bin-dir .build/release \
        --tools-dir .build/bench-tools [--count 20000] [--rate 400] [--repeats 2] [--out DIR]

Per cell (direction x QoS): one mosquitto and one bridge daemon, both under
`valgrind --tool=callgrind --instr-atstart=no`, pusher-local and the load tools (c_pub, c_sub,
pusher-bench-subscriber) native. After the probe went through, instrumentation is switched on in both
(`callgrind_control -i on PID`), COUNT messages of 100 B are sent at RATE msg/s (pusher-local's
generated stream on one channel for Pusher -> MQTT, c_pub over 8 topics/channels for MQTT -> Pusher,
as in `make bench`), and switched off once the receiver
has them all; the processes then stop and callgrind writes its totals. Reported: the bridge's and
the broker's instructions (Ir) per message, and their ratio -- the broker routes each message once
(receive, match, send), the bridge's work is comparable, so the ratio is the bridge's overhead
against a C program doing the same amount of moving.

Counts are exact for a given execution, but an execution depends a little on timing (how many
messages a read or a batch picks up): RATE is fixed and low, below what either process manages
under callgrind (~50x slower than native), and each cell is repeated (--repeats), the median
reported with the spread.
"""

from __future__ import annotations

import argparse
import atexit
import datetime
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bridge_testkit import bench  # (processes, receivers, load sources)
from bridge_testkit.bench import (M2P_CHANNEL, M2P_CHANNELS, M2P_TOPIC, P2M_CHANNEL, P2M_TOPIC, REPO, STARTED,
                                  BenchError, BenchMosquitto, finish_receiver, stop_all)
from bridge_testkit.harness import Bridge, MQTTCollector, PusherLocal, bridge_config, publish


SIZE = 100


def valgrind(out_file: Path) -> list[str]:
    return ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out_file}", "-q"]


def callgrind_control(pid: int, switch: str):
    r = subprocess.run(["callgrind_control", "-i", switch, str(pid)], capture_output=True, text=True, timeout=60)
    if r.returncode != 0 or "Error" in r.stdout:
        raise BenchError(f"callgrind_control -i {switch} {pid}: {r.stdout.strip()} {r.stderr.strip()}")


def callgrind_dump(pid: int, out_file: Path, label: str) -> Path:
    """Writes the counts since the last dump to a new file next to `out_file` and returns it."""
    before = set(out_file.parent.glob(out_file.name + "*"))
    r = subprocess.run(["callgrind_control", f"--dump={label}", str(pid)], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise BenchError(f"callgrind_control --dump {pid}: {r.stdout.strip()} {r.stderr.strip()}")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        new = set(out_file.parent.glob(out_file.name + "*")) - before
        if new:
            time.sleep(0.5)  # written completely
            return new.pop()
        time.sleep(0.2)
    raise BenchError(f"no dump file appeared for {pid}")


def total_instructions(out_file: Path) -> int:
    """The `totals:` line of a callgrind output file: instructions executed (Ir) in that part."""
    text = out_file.read_text(errors="replace")
    m = re.search(r"^totals:\s+(\d+)", text, re.M)
    if not m:
        raise BenchError(f"no totals in {out_file}")
    return int(m.group(1))


class Cell:
    """One direction x QoS run: mosquitto and the daemon under callgrind."""

    def __init__(self, args, work: Path, pusher: PusherLocal, direction: str, qos: int, repeat: int):
        self.args, self.work, self.pusher = args, work, pusher
        self.direction, self.qos, self.repeat = direction, qos, repeat
        self.dir = work / f"{direction}-qos{qos}-{repeat}"
        self.dir.mkdir(parents=True)
        # bench.Bench's helpers read these.
        self.bin_dir = Path(args.bin_dir).resolve()
        self.tools = Path(args.tools_dir).resolve()

    def run(self) -> dict:
        broker_out, bridge_out = self.dir / "mosquitto.callgrind", self.dir / "bridge.callgrind"
        broker = BenchMosquitto(self.dir)
        broker.argv = valgrind(broker_out) + broker.argv
        broker.start()
        STARTED.append(broker)
        bridge = None
        try:
            if self.direction == "p2m":
                rule = (f'[[bridge.rule]]\nname = "p2m"\nfrom = "pusher"\nchannel = "{P2M_CHANNEL}"\n'
                        f'topic = "bench/p2m/{{event}}"\nqos = {self.qos}\npayload = "data"\n')
            else:
                rule = (f'[[bridge.rule]]\nname = "m2p"\nfrom = "mqtt"\ntopic = "bench/m2p/+"\n'
                        f'channel = "bench-m2p-{{1}}"\nevent = "bench"\nqos = {self.qos}\npayload = "data"\n')
            config = bridge_config(self.pusher, broker, self.dir, rule, name=f"instr{self.repeat}")
            config = config.replace('log_level = "debug"', 'log_level = "info"')
            bridge = Bridge(self.dir, config, name="bridge")
            bridge.argv = valgrind(bridge_out) + bridge.argv
            bridge.start()
            STARTED.append(bridge)
            self.probe(broker, bridge)
            receiver = self.receiver(broker)
            # An idle window first: what the processes spend per second with no traffic (timers,
            # housekeeping, keep-alives) is subtracted from the traffic window, pro rata.
            for pid in (broker.pid, bridge.pid):
                callgrind_control(pid, "on")
            time.sleep(self.args.idle_window)
            idle = {name: total_instructions(callgrind_dump(pid, out, "idle"))
                    for name, pid, out in (("bridge", bridge.pid, bridge_out), ("mosquitto", broker.pid, broker_out))}
            started = time.monotonic()
            source = self.load(broker)
            result = finish_receiver(receiver, f"recv-{self.dir.name}", self.work, self.args.timeout)
            seconds = time.monotonic() - started
            busy = {name: total_instructions(callgrind_dump(pid, out, "traffic"))
                    for name, pid, out in (("bridge", bridge.pid, bridge_out), ("mosquitto", broker.pid, broker_out))}
            for pid in (broker.pid, bridge.pid):
                callgrind_control(pid, "off")
        finally:
            if bridge is not None:
                bridge.stop(timeout=60)
                STARTED.remove(bridge)
            broker.stop(timeout=60)
            STARTED.remove(broker)
        received = result.get("unique", result.get("received", 0))
        if received < self.args.count:
            raise BenchError(f"{self.dir.name}: received {received} of {self.args.count}")
        # The traffic window's instructions minus the idle rate over the same time (the receiver's
        # idle tail included): what the messages cost.
        per_idle_second = {k: v / self.args.idle_window for k, v in idle.items()}
        bridge_ir = round(busy["bridge"] - per_idle_second["bridge"] * seconds)
        broker_ir = round(busy["mosquitto"] - per_idle_second["mosquitto"] * seconds)
        row = {"direction": self.direction, "qos": self.qos, "repeat": self.repeat, "count": self.args.count,
               "rate": self.args.rate, "seconds": round(seconds, 1), "source": source,
               "idle_ir_per_second": {k: round(v) for k, v in per_idle_second.items()},
               "traffic_window_ir": busy, "bridge_ir": bridge_ir, "mosquitto_ir": broker_ir,
               "bridge_ir_per_message": round(bridge_ir / self.args.count),
               "mosquitto_ir_per_message": round(broker_ir / self.args.count),
               "ratio": round(bridge_ir / broker_ir, 3)}
        print(f"  {self.direction} QoS {self.qos} #{self.repeat}: bridge {row['bridge_ir_per_message']:,} Ir/msg, "
              f"mosquitto {row['mosquitto_ir_per_message']:,} Ir/msg, ratio {row['ratio']:.2f} ({seconds:.0f} s)", flush=True)
        if not self.args.keep:
            for f in list(self.dir.glob("*.callgrind*")):
                f.unlink(missing_ok=True)
        return row

    def probe(self, broker, bridge):
        """A message across the bridge before measuring (start-up and connection set-up are not counted);
        the receivers ignore event/topic `probe`. Slow under callgrind: up to PROBE_S."""
        deadline = time.monotonic() + self.args.probe_s
        if self.direction == "p2m":
            collector = MQTTCollector(broker.port, ["bench/p2m/probe"], qos=0, client_id=f"probe-{time.monotonic_ns()}")
            try:
                http = self.pusher.http_client()
                while time.monotonic() < deadline and not collector.payloads():
                    if not bridge.running():
                        raise BenchError(f"the bridge exited: {bridge.log()[-1500:]}")
                    http.trigger(P2M_CHANNEL, "probe", "{}")
                    time.sleep(1.0)
                ok = bool(collector.payloads())
            finally:
                collector.close()
        else:
            def published() -> int:
                status, body = self.pusher.control("GET", f"/pusher-local/apps/{self.pusher.app_id}/stats")
                return json.loads(body).get("events_published", 0) if status == 200 else 0

            before = published()
            ok = False
            while time.monotonic() < deadline and not ok:
                if not bridge.running():
                    raise BenchError(f"the bridge exited: {bridge.log()[-1500:]}")
                publish(broker.port, "bench/m2p/probe", b'{"probe":1}', qos=1)
                time.sleep(1.0)
                ok = published() > before
        if not ok:
            raise BenchError(f"{self.dir.name}: no probe crossed the bridge within {self.args.probe_s:.0f} s")

    def receiver(self, broker):
        name = f"recv-{self.dir.name}"
        if self.direction == "p2m":
            argv = [str(self.tools / "c_sub"), str(broker.port), P2M_TOPIC, str(self.qos), str(self.args.count),
                    str(self.args.idle), str(self.args.timeout), str(self.work / f"{name}.lat")]
        else:
            argv = [str(self.bin_dir / "pusher-bench-subscriber"), str(self.pusher.port), self.pusher.key, M2P_CHANNEL, "bench",
                    str(self.args.count), str(self.args.idle), str(self.args.timeout), str(self.work / f"{name}.lat"),
                    str(M2P_CHANNELS)]
        return bench.start_receiver(argv, name, self.work)

    def load(self, broker) -> dict:
        if self.direction == "p2m":
            b = bench.Bench.__new__(bench.Bench)
            b.pusher, b.args = self.pusher, argparse.Namespace(quick=False)
            return b.stream(self.args.count, SIZE, self.args.rate)
        out = subprocess.run([str(self.tools / "c_pub"), str(broker.port), M2P_TOPIC, str(self.args.count), str(self.qos),
                              str(SIZE), str(self.args.rate), "1000", str(M2P_CHANNELS), "0"], capture_output=True,
                             timeout=self.args.timeout + 30)
        if out.returncode != 0:
            raise BenchError(f"c_pub exited {out.returncode}: {out.stderr.decode(errors='replace')[-500:]}")
        return json.loads(out.stdout.decode().strip().splitlines()[-1])


def summarize(rows: list[dict]) -> list[dict]:
    cells = {}
    for r in rows:
        cells.setdefault((r["direction"], r["qos"]), []).append(r)
    out = []
    for (direction, qos), rs in sorted(cells.items()):
        def med(key):
            return statistics.median(r[key] for r in rs)
        out.append({"direction": direction, "qos": qos, "runs": len(rs),
                    "bridge_ir_per_message": round(med("bridge_ir_per_message")),
                    "bridge_spread": [min(r["bridge_ir_per_message"] for r in rs), max(r["bridge_ir_per_message"] for r in rs)],
                    "mosquitto_ir_per_message": round(med("mosquitto_ir_per_message")),
                    "ratio": round(med("ratio"), 3)})
    return out


def render(meta: dict, summary: list[dict]) -> str:
    names = {"p2m": "Pusher → MQTT", "m2p": "MQTT → Pusher"}
    lines = [f"Instructions per message under callgrind (commit {meta['commit']}, {meta['started']}, "
             f"{meta['count']:,} messages of {SIZE} B at {meta['rate']:g} msg/s per run, median of {meta['repeats']}; "
             f"`{meta['command']}`):", "",
             "| direction | QoS | bridge Ir/msg (min–max) | mosquitto Ir/msg | bridge ÷ mosquitto |", "|---|---|---|---|---|"]
    for s in summary:
        lo, hi = s["bridge_spread"]
        lines.append(f"| {names[s['direction']]} | {s['qos']} | {s['bridge_ir_per_message']:,} ({lo:,}–{hi:,}) | "
                     f"{s['mosquitto_ir_per_message']:,} | {s['ratio']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description="instructions per message (BENCHMARKS.md)")
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--tools-dir", required=True)
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=400.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--cells", default="p2m:0,p2m:1,m2p:0,m2p:1")
    parser.add_argument("--probe-s", type=float, default=120.0)
    parser.add_argument("--idle", type=float, default=5.0, help="receiver: stop this long after the last message")
    parser.add_argument("--idle-window", type=float, default=10.0, help="seconds of no traffic measured first, subtracted pro rata")
    parser.add_argument("--timeout", type=float, default=600.0, help="receiver: stop after this long in all")
    parser.add_argument("--keep", action="store_true", help="keep the callgrind files (for callgrind_annotate)")
    parser.add_argument("--out", default=str(REPO / "Benchmarks" / "results" / "instructions"))
    args = parser.parse_args()
    for tool in ("valgrind", "callgrind_control"):
        if not shutil.which(tool):
            parser.error(f"{tool} is missing (scripts/setup.sh --valgrind installs it)")
    atexit.register(stop_all)
    signal.signal(signal.SIGTERM, bench.on_signal)
    signal.signal(signal.SIGINT, bench.on_signal)
    os.environ["PUSHER_LOCAL_BIN"] = str(Path(args.bin_dir).resolve() / "pusher-local")
    os.environ["BRIDGE_BIN"] = str(Path(args.bin_dir).resolve() / "pusher-mqtt-bridge")
    work = Path(tempfile.mkdtemp(prefix="bench-instructions-"))
    pusher = PusherLocal(work, extra=["--log-level", "warning"]).start()
    STARTED.append(pusher)
    commit = os.environ.get("BENCH_COMMIT") or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                                               text=True, cwd=REPO).stdout.strip()
    meta = {"started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "commit": commit or "?",
            "count": args.count, "rate": args.rate, "repeats": args.repeats,
            "machine": f"{os.cpu_count()} cores, {platform.platform()}",
            "valgrind": subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout.strip(),
            "command": "make bench-instructions" + (f" COUNT={args.count}" if args.count != 20_000 else "")}
    rows, errors = [], []
    cells = [(c.split(":")[0], int(c.split(":")[1])) for c in args.cells.split(",") if c]
    print(f"bench-instructions: {len(cells)} cells x {args.repeats}, {args.count:,} messages each at {args.rate:g}/s; work in {work}",
          flush=True)
    for repeat in range(1, args.repeats + 1):
        for direction, qos in cells:
            try:
                rows.append(Cell(args, work, pusher, direction, qos, repeat).run())
            except (BenchError, OSError, subprocess.SubprocessError, ValueError) as error:
                errors.append(f"{direction} QoS {qos} #{repeat}: {error}")
                print(f"  ERROR {errors[-1][:500]}", flush=True)
    summary = summarize(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"meta": meta, "rows": rows, "summary": summary, "errors": errors}, indent=1))
    (out / "summary.md").write_text(render(meta, summary))
    print("\n" + render(meta, summary))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
