"""`make bench-memory`: the daemon's resident memory idle and under a full backlog (issue 16's targets:
idle RSS ≤ 20 MB; RSS ≤ idle + 1.3 × the buffered bytes).

    .venv/bin/python Benchmarks/memory/bench_memory.py --bin-dir .build/release
        [--runs 3] [--megabytes 64] [--size 8192] [--cells p2m-spool,p2m-memory,m2p-spool,m2p-memory]
        [--env MALLOC_ARENA_MAX=2] [--trim-probe] [--quick] [--out Benchmarks/results/memory]

(scripts/bench-memory.sh builds the release binaries and calls this; method and results:
docs/history/benchmarks.md "Memory".)

One release pusher-local for the whole run; per run a fresh mosquitto and a fresh release daemon
with one bridge and a few rules (both directions, a presence mirror), metrics on.

- **Idle**: 10 s after `/readyz` answered 200: `VmRSS`, `VmHWM`, `/proc/PID/smaps_rollup`, and
  `/proc/PID/smaps` summed by mapping (the binary, each shared object, the heap, anonymous
  mappings, stacks), so it shows which code is resident.
- **Backlog** (a cell = direction × spool): `--megabytes` MiB of `--size`-byte messages pile up in
  one direction, with `[bridge.buffer]` limits that hold them all:
  - `p2m`: mosquitto is stopped, then the events are triggered through pusher-local's HTTP API
    (`batch_events`, 10 a request); the daemon buffers Pusher → MQTT until the broker is back.
  - `m2p`: pusher-local's `quota` switch makes the HTTP API answer 403 (docs/contract.md §7.3:
    delivery pauses, messages keep being buffered), then paho publishes the messages at QoS 1 with
    `overflow = "drop-oldest"` (so the bridge reads them all rather than applying backpressure).
  - `spool` = `persist = true`, `memory` = `persist = false`.
  Once `pusher_mqtt_bridge_buffered_messages` for the direction holds every message and 3 s
  passed: RSS. **Overhead ratio** = (RSS − the same run's idle RSS) ÷ the buffered payload bytes
  (messages × size). Then the broker comes back / the quota is lifted, and RSS is read again
  5 s after the backlog drained (memory given back or kept); with `--trim-probe`, once more after
  `malloc_trim(0)` is called in the daemon through gdb (what glibc keeps freed but not returned).

Medians over the runs. Writes latest.json (every run, raw) and latest.md to --out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

import paho.mqtt.client as mqtt

from bridge_testkit.harness import Bridge, Mosquitto, PusherLocal, bridge_config, free_port, wait_until

CELLS = ["p2m-spool", "p2m-memory", "m2p-spool", "m2p-memory"]
P2M_CHANNEL = "memory-p2m"
RULES = f"""
[[bridge.rule]]
name = "p2m"
from = "pusher"
channel = "{P2M_CHANNEL}"
topic = "memory/p2m/{{event}}"
qos = 1
payload = "data"

[[bridge.rule]]
name = "p2m-json"
from = "pusher"
channel = "memory-json"
topic = "memory/json/{{json:/room}}"
qos = 0
payload = "data"

[[bridge.rule]]
name = "m2p"
from = "mqtt"
topic = "memory/m2p/+"
qos = 1
channel = "memory-m2p-{{1}}"
event = "reading"

[[bridge.rule]]
name = "m2p-where"
from = "mqtt"
topic = "memory/where/+"
qos = 0
channel = "memory-where-{{1}}"
event = "hot"
where = "/temperature > 30"

[[bridge.presence]]
channel = "presence-memory"
topic = "memory/presence"
"""


# --------------------------------------------------------------------------------------------
# /proc readings


def status_kb(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem", "Threads"):
            out[key] = int(value.split()[0])
    return out


def smaps_rollup_kb(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, _, value = line.partition(":")
        parts = value.split()
        if len(parts) == 2 and parts[1] == "kB":
            out[key] = int(parts[0])
    return out


MAPPING = re.compile(r"^[0-9a-f]+-[0-9a-f]+ (\S{4}) \S+ \S+ \d+\s*(.*)$")


def smaps_by_mapping(pid: int, binary: str) -> dict[str, int]:
    """Rss (KiB) summed by what is mapped: `binary` (the daemon's own file), each shared object by
    name, `[heap]`, `[anon rw]` (malloc arenas, thread stacks, Swift's allocations), `[stack]`,
    and the rest by their name."""
    totals: dict[str, int] = {}
    name = None
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        m = MAPPING.match(line)
        if m:
            perms, path = m.group(1), m.group(2).strip()
            if not path:
                name = "[anon rw]" if "w" in perms else "[anon other]"
            elif path == binary:
                name = "binary: " + Path(path).name
            elif path.startswith("/"):
                name = Path(path).name
            else:
                name = path
        elif line.startswith("Rss:") and name is not None:
            totals[name] = totals.get(name, 0) + int(line.split()[1])
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


# --------------------------------------------------------------------------------------------
# the daemon


def metrics_text(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            return r.read().decode()
    except OSError:
        return ""


def buffered(port: int, direction: str) -> int:
    for line in metrics_text(port).splitlines():
        if line.startswith("pusher_mqtt_bridge_buffered_messages{") and f'direction="{direction}"' in line:
            return int(float(line.rsplit(" ", 1)[1]))
    return -1


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def daemon_config(pusher, broker, workdir: Path, metrics_port: int, persist: bool, megabytes: int) -> str:
    buffer_bytes = f"{megabytes * 2}MiB"  # room for every message and the per-message framing
    config = bridge_config(pusher, broker, workdir, RULES, name="memory")
    config = (config.replace('metrics = ""', f'metrics = "127.0.0.1:{metrics_port}"')
              .replace('log_level = "debug"', 'log_level = "info"')
              .replace('activity_timeout = "2s"', 'activity_timeout = "30s"')
              .replace('pong_timeout = "1s"', 'pong_timeout = "10s"')
              .replace('keepalive = "5s"', 'keepalive = "30s"')
              .replace('max_bytes = "64MiB"', f'max_bytes = "{buffer_bytes}"'))
    # bridge_config writes `overflow = "drop-oldest"`: MQTT -> Pusher buffers what it reads instead of
    # holding the broker back (backpressure), so the whole backlog is in the daemon.
    if not persist:
        config = config.replace("persist = true", "persist = false")
    return config


def payload(i: int, size: int) -> str:
    head = f"{i:08d}:"
    return head + "x" * (size - len(head))


def fill_p2m(pusher: PusherLocal, count: int, size: int):
    http = pusher.http_client()
    for i in range(0, count, 10):
        http.trigger_batch([{"channel": P2M_CHANNEL, "name": "reading", "data": payload(j, size)}
                            for j in range(i, min(count, i + 10))])


def fill_m2p(broker_port: int, count: int, size: int):
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"memory-publisher-{time.monotonic_ns()}")
    client.max_inflight_messages_set(200)
    client.max_queued_messages_set(0)
    client.connect("127.0.0.1", broker_port)
    client.loop_start()
    infos = [client.publish(f"memory/m2p/{i % 8}", payload(i, size), qos=1) for i in range(count)]
    for info in infos:
        info.wait_for_publish(60)
    client.loop_stop()
    client.disconnect()


def start_and_settle(bridge: Bridge, metrics_port: int) -> None:
    """Starts the daemon and returns 10 s after its `/readyz` answered 200: the idle reading."""
    bridge.start()
    wait_until(lambda: not bridge.running() or ready(metrics_port), 60, 0.1, "/readyz 200")
    if not bridge.running():
        raise RuntimeError(f"daemon exited:\n{bridge.log()[-2000:]}")
    time.sleep(10)


def run(pusher: PusherLocal, bin_dir: Path, workdir: Path, cell: str, index: int, megabytes: int, size: int,
        env: dict[str, str], trim_probe: bool = False) -> dict:
    direction, storage = cell.split("-")
    wd = workdir / f"{cell}-{index}"
    wd.mkdir()
    broker = Mosquitto(wd).start()
    metrics_port = free_port()
    bridge = Bridge(wd, daemon_config(pusher, broker, wd, metrics_port, storage == "spool", megabytes),
                    name=f"bridge-{cell}-{index}", env=env)
    binary = str((bin_dir / "pusher-mqtt-bridge").resolve())
    count = megabytes * 1024 * 1024 // size
    metric_direction = "pusher_to_mqtt" if direction == "p2m" else "mqtt_to_pusher"
    result: dict = {"cell": cell, "index": index, "messages": count, "size": size, "env": env}
    quota_on = False
    try:
        start_and_settle(bridge, metrics_port)
        result["idle"] = status_kb(bridge.pid)
        result["idle_rollup"] = smaps_rollup_kb(bridge.pid)
        result["idle_mappings"] = smaps_by_mapping(bridge.pid, binary)

        started = time.monotonic()
        if direction == "p2m":
            broker.stop()
            wait_until(lambda: not ready(metrics_port), 20, 0.1, "the daemon to see the broker gone")
            fill_p2m(pusher, count, size)
        else:
            status, body = pusher.control("POST", f"/pusher-local/apps/{pusher.app_id}/quota?exceeded=true")
            assert status == 200, body
            quota_on = True
            fill_m2p(broker.port, count, size)
        wait_until(lambda: buffered(metrics_port, metric_direction) >= count, 180, 0.2,
                   f"{count} messages buffered {metric_direction}")
        result["fill_s"] = round(time.monotonic() - started, 2)
        time.sleep(3)
        result["buffered_messages"] = buffered(metrics_port, metric_direction)
        result["buffered_bytes"] = result["buffered_messages"] * size
        result["backlog"] = status_kb(bridge.pid)
        result["backlog_rollup"] = smaps_rollup_kb(bridge.pid)
        result["backlog_mappings"] = smaps_by_mapping(bridge.pid, binary)
        grown = (result["backlog"]["VmRSS"] - result["idle"]["VmRSS"]) * 1024
        result["overhead_ratio"] = round(grown / result["buffered_bytes"], 3)

        started = time.monotonic()
        if direction == "p2m":
            broker = Mosquitto(wd, port=broker.port).start()
        else:
            pusher.control("POST", f"/pusher-local/apps/{pusher.app_id}/quota?exceeded=false")
            quota_on = False
        wait_until(lambda: buffered(metrics_port, metric_direction) == 0, 300, 0.2, "the backlog to drain")
        result["drain_s"] = round(time.monotonic() - started, 2)
        time.sleep(5)
        result["drained"] = status_kb(bridge.pid)
        result["drained_rollup"] = smaps_rollup_kb(bridge.pid)
        if trim_probe:
            # What glibc holds freed but not returned: RSS after malloc_trim(0), called through gdb.
            subprocess.run(["gdb", "-p", str(bridge.pid), "-batch", "-ex", "call (int) malloc_trim(0)"],
                           capture_output=True, timeout=60)
            time.sleep(1)
            result["trimmed"] = status_kb(bridge.pid)
        print(json.dumps({k: v for k, v in result.items() if not k.endswith(("mappings", "rollup"))}), flush=True)
        return result
    finally:
        if quota_on:
            pusher.control("POST", f"/pusher-local/apps/{pusher.app_id}/quota?exceeded=false")
        bridge.stop()
        broker.stop()


# --------------------------------------------------------------------------------------------
# summary


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def mib(kb) -> str:
    return "–" if kb is None else f"{kb / 1024:.1f}"


def summarize(doc: dict) -> dict:
    results = doc["results"]
    idle_rss = [r["idle"]["VmRSS"] for r in results]
    idle = {"VmRSS_kb": median(idle_rss), "VmHWM_kb": median([r["idle"]["VmHWM"] for r in results]),
            "RssAnon_kb": median([r["idle"]["RssAnon"] for r in results]),
            "RssFile_kb": median([r["idle"]["RssFile"] for r in results])}
    names: set[str] = set()
    for r in results:
        names.update(r["idle_mappings"])
    mappings = {n: median([r["idle_mappings"].get(n, 0) for r in results]) for n in names}
    idle["mappings_kb"] = dict(sorted(mappings.items(), key=lambda kv: -kv[1]))
    cells = {}
    for cell in doc["cells"]:
        rs = [r for r in results if r["cell"] == cell]
        if not rs:
            continue
        cells[cell] = {
            "idle_kb": median([r["idle"]["VmRSS"] for r in rs]),
            "backlog_kb": median([r["backlog"]["VmRSS"] for r in rs]),
            "backlog_anon_kb": median([r["backlog"]["RssAnon"] for r in rs]),
            "growth_kb": median([r["backlog"]["VmRSS"] - r["idle"]["VmRSS"] for r in rs]),
            "buffered_bytes": median([r["buffered_bytes"] for r in rs]),
            "overhead_ratio": median([r["overhead_ratio"] for r in rs]),
            "ratios": [r["overhead_ratio"] for r in rs],
            "drained_kb": median([r["drained"]["VmRSS"] for r in rs]),
            "trimmed_kb": median([r["trimmed"]["VmRSS"] for r in rs if "trimmed" in r]),
            "hwm_kb": median([r["drained"]["VmHWM"] for r in rs]),
            "fill_s": median([r["fill_s"] for r in rs]),
            "drain_s": median([r["drain_s"] for r in rs]),
        }
    return {"idle": idle, "cells": cells}


def markdown(doc: dict) -> str:
    s = doc["summary"]
    idle = s["idle"]
    lines = [
        f"# Memory — {doc['started_utc']}, commit {doc['commit']}",
        "",
        f"`make bench-memory` (Benchmarks/memory/bench_memory.py): release daemon, one bridge, {doc['rules']} rules and a "
        f"presence mirror; medians of {doc['runs']} runs per cell. Machine: {doc['machine']}; load "
        f"{doc['load_start']} → {doc['load_end']}." + (f" Daemon environment: {doc['env']}." if doc["env"] else ""),
        "",
        "## Idle (10 s after /readyz)",
        "",
        f"VmRSS **{mib(idle['VmRSS_kb'])} MiB** (VmHWM {mib(idle['VmHWM_kb'])}; anonymous {mib(idle['RssAnon_kb'])}, "
        f"file-backed {mib(idle['RssFile_kb'])}); median over all {len(doc['results'])} runs.",
        "",
        "| mapping | RSS KiB |",
        "|---|---|",
    ]
    shown = list(idle["mappings_kb"].items())
    for name, kb in shown[:14]:
        lines.append(f"| {name} | {kb:,.0f} |")
    rest = sum(kb for _, kb in shown[14:])
    lines.append(f"| {len(shown) - 14} others | {rest:,.0f} |" if len(shown) > 14 else "")
    lines += [
        "",
        f"## Backlog ({doc['megabytes']} MiB of {doc['size']} B messages)",
        "",
        "| cell | idle MiB | with backlog MiB | growth MiB | buffered MiB | growth ÷ buffered (target ≤ 1.3) | runs | "
        "after drain MiB | after malloc_trim MiB | VmHWM MiB | fill s | drain s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for cell, c in s["cells"].items():
        lines.append(
            f"| {cell} | {mib(c['idle_kb'])} | {mib(c['backlog_kb'])} | {mib(c['growth_kb'])} | "
            f"{c['buffered_bytes'] / 1048576:.1f} | **{c['overhead_ratio']:.2f}** | "
            f"{', '.join(f'{x:.2f}' for x in c['ratios'])} | {mib(c['drained_kb'])} | {mib(c['trimmed_kb'])} | {mib(c['hwm_kb'])} | "
            f"{c['fill_s']} | {c['drain_s']} |")
    lines += [
        "",
        "p2m: the broker stopped, events triggered through pusher-local; m2p: pusher-local answering 403 "
        "(quota), paho publishing QoS 1. spool = `persist = true`, memory = `persist = false`.",
    ]
    return "\n".join(line for line in lines) + "\n"


def bench_commit() -> str:
    """The commit measured: BENCH_COMMIT (set by scripts/bench-memory.sh), else git's HEAD."""
    return os.environ.get("BENCH_COMMIT") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip() or "?"


def write_results(out: Path, stem: str, doc: dict, text: str) -> None:
    """`<stem>.json` (every run, raw) and `<stem>.md` into `out`; the markdown also to stdout."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out / f"{stem}.md").write_text(text)
    print(text)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", default=str(REPO / ".build" / "release"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--megabytes", type=int, default=64)
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--cells", default=",".join(CELLS))
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for the daemon (e.g. MALLOC_ARENA_MAX=2)")
    ap.add_argument("--quick", action="store_true", help="1 run of 8 MiB per cell: checks the harness")
    ap.add_argument("--trim-probe", action="store_true",
                    help="after the drain, call malloc_trim(0) in the daemon through gdb and read RSS again")
    ap.add_argument("--out", default=str(REPO / "Benchmarks" / "results" / "memory"))
    args = ap.parse_args()
    cells = [c for c in args.cells.split(",") if c]
    unknown = set(cells) - set(CELLS)
    if unknown:
        ap.error(f"unknown cells {sorted(unknown)}; known: {CELLS}")
    env = dict(e.split("=", 1) for e in args.env)
    if args.quick:
        args.runs, args.megabytes = 1, 8
        args.out = str(Path(args.out) / "quick")
    bin_dir = Path(args.bin_dir).resolve()
    os.environ["PUSHER_LOCAL_BIN"] = str(bin_dir / "pusher-local")
    os.environ["BRIDGE_BIN"] = str(bin_dir / "pusher-mqtt-bridge")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    started_utc = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load_start = os.getloadavg()[0]
    pusher = PusherLocal(workdir, extra=["--activity-timeout", "30", "--log-level", "warning"]).start()
    results: list[dict] = []
    try:
        for index in range(args.runs):
            for cell in cells:
                results.append(run(pusher, bin_dir, workdir, cell, index, args.megabytes, args.size, env, args.trim_probe))
    finally:
        pusher.stop()
    commit = bench_commit()
    doc = {"started_utc": started_utc, "commit": commit, "runs": args.runs, "megabytes": args.megabytes,
           "size": args.size, "cells": cells, "env": env, "rules": RULES.count("[[bridge.rule]]"),
           "binary_bytes": (bin_dir / "pusher-mqtt-bridge").stat().st_size,
           "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.release()}",
           "load_start": round(load_start, 2), "load_end": round(os.getloadavg()[0], 2), "results": results}
    doc["summary"] = summarize(doc)
    write_results(out, "latest", doc, markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
