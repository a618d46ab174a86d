"""`make bench-rules`: what payload rules (`where`, `{json:…}`; docs/contract.md §7.3) cost per message.

    .venv/bin/python Benchmarks/bridge/bench_rules.py --bin-dir .build/release --tools-dir .build/bench-tools
        [--pairs 7] [--qos 0] [--quick] [--out Benchmarks/results/payload-rules]

(scripts/bench-rules.sh builds everything and calls this; method and results: docs/history/benchmarks.md
"Payload rules".)

1. End to end, with the machinery of bench.py (one mosquitto, one pusher-local, a fresh release
   daemon per run, c_pub as the load, pusher-bench-subscriber / c_sub as the receivers, CPU from
   /proc/PID/stat). Two configurations, measured in the same run, alternating A B A B …:
   A = the plain rule, B = the same rule plus a `where` and a `{json:…}` that every message
   satisfies and that render the same channel as A, so delivery work is equal. MQTT → Pusher
   for three payloads (c_pub's FIELDS option); Pusher → MQTT with a `where` only (pusher-local's
   generated stream has no short constant member a `{json:…}` could render into one topic).
2. Benchmarks/.../rules-bench: `RuleTable.route` in process with 1 … 10,000 rules, plain, with
   `where`, with `where` and `{json:…}` (ns per message, median of 7).

Writes results.json (every run, raw) and summary.md (the tables) to --out.
"""

from __future__ import annotations

import argparse
import atexit
import datetime
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bridge_testkit import bench  # (processes, receivers, load sources)
from bridge_testkit.bench import (M2P_CHANNEL, M2P_CHANNELS, M2P_TOPIC, P2M_CHANNEL, P2M_TOPIC, STARTED, Bench,
                                  BenchError, ProcessSampler, finish_receiver, stop_all)

GOAL_RATIO = 1.15  # issue 14: B within 15 % of A


def field_members(fields: int) -> str:
    """The members c_pub writes with FIELDS (Benchmarks/bridge/c_pub.c): fNN by NN % 4."""
    values = ["2.5", '"m2p"', "true"]
    return "".join(f',"f{i:02d}":{values[i % 4] if i % 4 != 3 else 42 + i}' for i in range(fields))


# (label, size for c_pub, fields, messages per run, B's where, B's pointer rendered in the channel)
M2P_PAYLOADS = [
    ("20 fields, smallest", 0, 20, 100_000, "/f03 > 10 and exists /f17", "/f05"),
    ("5 fields, 100 B", 100, 5, 100_000, "/f03 > 10 and exists /f04", "/f01"),
    ("20 fields, 1 KB", 1024, 20, 50_000, "/f03 > 10 and exists /f17", "/f05"),
]
P2M_PAYLOADS = [("stream, 100 B", 100, 100_000, "/seq >= 0 and exists /pad")]


def m2p_rule(config: str, qos: int, where: str, pointer: str) -> str:
    rule = f'[[bridge.rule]]\nname = "m2p"\nfrom = "mqtt"\ntopic = "bench/m2p/+"\nevent = "bench"\nqos = {qos}\npayload = "data"\n'
    if config == "A":
        return rule + 'channel = "bench-m2p-{1}"\n'
    # {json:pointer} is "m2p" in every message: the same channels bench-m2p-0 … 7 as A.
    return rule + f'channel = "bench-{{json:{pointer}}}-{{1}}"\nwhere = "{where}"\n'


def p2m_rule(config: str, qos: int, where: str) -> str:
    rule = (f'[[bridge.rule]]\nname = "p2m"\nfrom = "pusher"\nchannel = "{P2M_CHANNEL}"\n'
            f'topic = "bench/p2m/{{event}}"\nqos = {qos}\npayload = "data"\n')
    return rule if config == "A" else rule + f'where = "{where}"\n'


def cpu(pid: int) -> float:
    return ProcessSampler(pid).cpu_seconds()


def measure(b: Bench, direction: str, config: str, label: str, pair: int, count: int, rule: str, probe: str,
            load) -> dict:
    """One run: a fresh daemon with `rule`, its receiver, the load, CPU of daemon, mosquitto, pusher-local."""
    b.counter += 1
    name = f"rules-{direction}-{config}-{label.replace(' ', '').replace(',', '-')}-{pair}"
    run_dir = b.work / f"rules{b.counter}"
    row = {"direction": direction, "config": config, "payload": label, "pair": pair, "count": count, "rule": rule}
    bridge = None
    try:
        bridge = b.start_bridge("bridge", direction, 0, run_dir, rule=rule, probe_payload=probe)
        if direction == "m2p":
            receiver = b.receiver("pusher", M2P_CHANNEL, 0, count, name, channels=M2P_CHANNELS)
        else:
            receiver = b.receiver("mqtt", P2M_TOPIC, 0, count, name)
        pids = {"bridge": bridge.pid, "mosquitto": b.broker.pid, "pusher_local": b.pusher.pid}
        before = {k: cpu(pid) for k, pid in pids.items()}
        row["source"] = load(count)
        row["receiver"] = finish_receiver(receiver, name, b.work, b.total + 30)
        after = {k: cpu(pid) for k, pid in pids.items()}
        (b.work / f"{name}.lat").unlink(missing_ok=True)
        received = max(1, row["receiver"]["received"])
        row["cpu_seconds"] = {k: round(after[k] - before[k], 3) for k in pids}
        row["cpu_us_per_message"] = {k: round((after[k] - before[k]) / received * 1e6, 3) for k in pids}
        row["rss_peak_mb"] = round((ProcessSampler(bridge.pid).status_kb("VmHWM") or 0) / 1024, 1)
    except BenchError as error:
        row["error"] = str(error)
    except (OSError, ValueError, KeyError, subprocess.SubprocessError) as error:
        row["error"] = f"{type(error).__name__}: {error}"
    finally:
        if bridge:
            bridge.stop()
            if bridge in STARTED:
                STARTED.remove(bridge)
    rec = row.get("receiver", {})
    print(f"  {direction} {config} {label:22s} pair {pair}: " + (
        f"ERROR {row['error'][:300]}" if "error" in row else
        f"{rec.get('rate', 0):>8,.0f} msg/s  got {rec.get('unique')}/{count}  "
        f"bridge {row['cpu_us_per_message']['bridge']:.2f} µs/msg  mosquitto {row['cpu_us_per_message']['mosquitto']:.2f}  "
        f"pusher-local {row['cpu_us_per_message']['pusher_local']:.2f}"
        + (f"  payload {row['source'].get('bytes')} B" if "bytes" in row.get("source", {}) else "")), flush=True)
    return row


def run_end_to_end(b: Bench, pairs: int, qos: int, quick: bool, directions: list[str]) -> list[dict]:
    rows = []
    scale = 20 if quick else 1
    for pair in range(1, pairs + 1):
        if "m2p" in directions:
            for label, size, fields, count, where, pointer in M2P_PAYLOADS:
                n = max(1000, count // scale)
                probe = '{"seq":-1,"sent_at_ns":0' + field_members(fields) + "}"
                for config in ("A", "B"):
                    rows.append(measure(b, "m2p", config, label, pair, n, m2p_rule(config, qos, where, pointer), probe,
                                        lambda n, size=size, fields=fields: b.c_pub(M2P_TOPIC, n, qos, size, 0, topics=M2P_CHANNELS,
                                                                                   fields=fields)))
        if "p2m" in directions:
            for label, size, count, where in P2M_PAYLOADS:
                n = max(1000, count // scale)
                for config in ("A", "B"):
                    rows.append(measure(b, "p2m", config, label, pair, n, p2m_rule(config, qos, where), '{"seq":0,"pad":""}',
                                        lambda n, size=size: b.stream(n, size, 0)))
    return rows


def run_rules_bench(bin_dir: Path, routes: int) -> list[dict]:
    out = subprocess.run([str(bin_dir / "rules-bench"), "--json", "--routes", str(routes)], capture_output=True, timeout=900)
    if out.returncode != 0:
        raise BenchError(f"rules-bench exited {out.returncode}: {out.stderr.decode(errors='replace')[-1000:]}")
    return [json.loads(line) for line in out.stdout.decode().splitlines() if line.startswith("{")]


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(rows: list[dict]) -> list[dict]:
    out = []
    keys = []
    for r in rows:
        if (r["direction"], r["payload"]) not in keys:
            keys.append((r["direction"], r["payload"]))
    for direction, payload in keys:
        cell = {"direction": direction, "payload": payload}
        for config in ("A", "B"):
            ok = [r for r in rows if (r["direction"], r["payload"], r["config"]) == (direction, payload, config) and "error" not in r]
            cell[config] = {
                "runs": len(ok),
                "failed": sum(1 for r in rows if (r["direction"], r["payload"], r["config"]) == (direction, payload, config)
                              and "error" in r),
                "bridge_us": med([r["cpu_us_per_message"]["bridge"] for r in ok]),
                "mosquitto_us": med([r["cpu_us_per_message"]["mosquitto"] for r in ok]),
                "pusher_local_us": med([r["cpu_us_per_message"]["pusher_local"] for r in ok]),
                "rate": med([r["receiver"]["rate"] for r in ok]),
                "delivered": med([r["receiver"]["unique"] / r["count"] for r in ok]),
                "payload_bytes": med([r["source"].get("bytes") for r in ok]),
                "bridge_us_runs": [r["cpu_us_per_message"]["bridge"] for r in ok],
            }
        a, b = cell["A"], cell["B"]
        cell["ratio"] = b["bridge_us"] / a["bridge_us"] if a["bridge_us"] and b["bridge_us"] else None
        pair_ratios = []
        for pair in sorted({r["pair"] for r in rows}):
            ra = [r for r in rows if (r["direction"], r["payload"], r["config"], r["pair"]) == (direction, payload, "A", pair)
                  and "error" not in r]
            rb = [r for r in rows if (r["direction"], r["payload"], r["config"], r["pair"]) == (direction, payload, "B", pair)
                  and "error" not in r]
            if ra and rb and ra[0]["cpu_us_per_message"]["bridge"]:
                pair_ratios.append(rb[0]["cpu_us_per_message"]["bridge"] / ra[0]["cpu_us_per_message"]["bridge"])
        cell["pair_ratios"] = [round(x, 3) for x in pair_ratios]
        cell["pair_ratio_median"] = med(pair_ratios)
        cell["rate_ratio"] = b["rate"] / a["rate"] if a["rate"] and b["rate"] else None
        out.append(cell)
    return out


def fmt(value, pattern="{:,.2f}"):
    return "–" if value is None else pattern.format(value)


def render(meta: dict, summary: list[dict], micro: list[dict]) -> str:
    lines = [f"Run of {meta['started']} (commit {meta['commit']}); {meta['pairs']} A/B pairs, medians; QoS {meta['qos']}; "
             f"machine: {meta['machine']}; load average before: {meta['load_before']}, after: {meta['load_after']}"
             + ("; **QUICK mode (smoke check, not a measurement)**" if meta["quick"] else "") + ".", "",
             f"Command: `{meta['command']}`", ""]
    lines += ["### End to end: bridge CPU per message, A = plain rule, B = plain + `where` + `{json:…}`", "",
              "| direction | payload | bytes | bridge µs/msg A | B | B ÷ A (medians) | B ÷ A (median of pairs) | "
              "msg/s A | B | mosquitto µs/msg A / B | pusher-local µs/msg A / B | delivered A / B | within 15 %? |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in summary:
        a, b = c["A"], c["B"]
        ok = c["ratio"] is not None and c["ratio"] <= GOAL_RATIO
        lines.append(
            f"| {'M→P' if c['direction'] == 'm2p' else 'P→M'} | {c['payload']} | {fmt(a['payload_bytes'], '{:.0f}')} | "
            f"{fmt(a['bridge_us'])} | {fmt(b['bridge_us'])} | {fmt(c['ratio'], '{:.3f}')} | {fmt(c['pair_ratio_median'], '{:.3f}')} | "
            f"{fmt(a['rate'], '{:,.0f}')} | {fmt(b['rate'], '{:,.0f}')} | {fmt(a['mosquitto_us'])} / {fmt(b['mosquitto_us'])} | "
            f"{fmt(a['pusher_local_us'])} / {fmt(b['pusher_local_us'])} | {fmt(a['delivered'], '{:.0%}')} / {fmt(b['delivered'], '{:.0%}')} | "
            f"{'yes' if ok else '**no**'}"
            + (f" ({a['failed']} + {b['failed']} failed runs)" if a["failed"] or b["failed"] else "") + " |")
    lines += ["", "Bridge µs/msg of every run, in order (A, B):", ""]
    for c in summary:
        lines.append(f"- {c['direction']} {c['payload']}: A {c['A']['bridge_us_runs']}, B {c['B']['bridge_us_runs']}; "
                     f"B ÷ A per pair {c['pair_ratios']}")
    if micro:
        lines += ["", "### In process: `RuleTable.route`, ns per message (rules-bench, median of 7)", "",
                  "| payload | rules | plain | where | where+json | where ÷ plain | where+json ÷ plain |", "|---|---|---|---|---|---|---|"]
        cells = {}
        for m in micro:
            cells[(m["payload_bytes"], m["rules"], m["kind"])] = m["ns_per_message"]
        for size, count in sorted({(m["payload_bytes"], m["rules"]) for m in micro}):
            p, w, j = (cells.get((size, count, k)) for k in ("plain", "where", "where+json"))
            lines.append(f"| {size} B | {count:,} | {fmt(p, '{:,.0f}')} | {fmt(w, '{:,.0f}')} | {fmt(j, '{:,.0f}')} | "
                         f"{fmt(w and p and w / p)} | {fmt(j and p and j / p)} |")
    errors = [r for r in meta.get("errors", [])]
    if errors:
        lines += ["", "### Failed runs", ""] + [f"- {e[:300]}" for e in errors]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description="payload-rule cost (docs/history/benchmarks.md 'Payload rules')")
    parser.add_argument("--bin-dir", required=True, help="release bin dir: pusher-local, pusher-mqtt-bridge, "
                                                         "pusher-bench-subscriber, rules-bench")
    parser.add_argument("--tools-dir", required=True, help="dir with c_pub and c_sub")
    parser.add_argument("--pairs", type=int, default=7, help="A/B pairs per payload (ABAB…)")
    parser.add_argument("--qos", type=int, default=0, choices=[0, 1])
    parser.add_argument("--directions", default="m2p,p2m")
    parser.add_argument("--routes", type=int, default=200_000, help="routes per rules-bench sample")
    parser.add_argument("--skip-micro", action="store_true", help="leave out rules-bench")
    parser.add_argument("--quick", action="store_true", help="1 pair, few messages: checks the harness works")
    parser.add_argument("--out", default=str(bench.REPO / "Benchmarks" / "results" / "payload-rules"))
    args = parser.parse_args()
    if args.quick:
        args.pairs, args.routes = 1, 5_000
    directions = [d.strip() for d in args.directions.split(",") if d.strip()]
    bin_dir = Path(args.bin_dir).resolve()
    for tool in [bin_dir / n for n in ("pusher-local", "pusher-mqtt-bridge", "pusher-bench-subscriber", "rules-bench")] + \
            [Path(args.tools_dir) / n for n in ("c_pub", "c_sub")]:
        if not tool.exists():
            parser.error(f"{tool} is missing (scripts/bench-rules.sh builds it)")

    atexit.register(stop_all)
    signal.signal(signal.SIGTERM, bench.on_signal)
    signal.signal(signal.SIGINT, bench.on_signal)
    commit = os.environ.get("BENCH_COMMIT") or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                                               text=True, cwd=bench.REPO).stdout.strip()
    meta = {"started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "commit": commit or "?",
            "pairs": args.pairs, "qos": args.qos, "quick": args.quick,
            "machine": f"{os.cpu_count()} cores, {platform.platform()}",
            "load_before": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
            "command": "make bench-rules" + (f" PAIRS={args.pairs}" if args.pairs != 7 else "") + (f" QOS={args.qos}" if args.qos else "")
            + (" QUICK=1" if args.quick else ""),
            "argv": " ".join(sys.argv[1:])}
    started = time.monotonic()
    micro: list[dict] = []
    errors: list[str] = []
    if not args.skip_micro:
        print("in process: rules-bench (RuleTable.route, 1 … 10,000 rules)", flush=True)
        try:
            micro = run_rules_bench(bin_dir, args.routes)
        except (BenchError, subprocess.SubprocessError) as error:
            errors.append(f"rules-bench: {error}")
    print(f"end to end: {args.pairs} A/B pairs, QoS {args.qos}", flush=True)
    b = Bench(argparse.Namespace(bin_dir=str(bin_dir), tools_dir=args.tools_dir, quick=args.quick, pusher_receiver="swift",
                                 latency_seconds=3.0))
    try:
        rows = run_end_to_end(b, args.pairs, args.qos, args.quick, directions)
    finally:
        stop_all()
    errors += [f"{r['direction']} {r['config']} {r['payload']} pair {r['pair']}: {r['error']}" for r in rows if "error" in r]
    meta["load_after"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    meta["seconds"] = round(time.monotonic() - started, 1)
    meta["errors"] = errors
    summary = summarize(rows)
    out = Path(args.out) / ("quick" if args.quick else "")
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"meta": meta, "summary": summary, "micro": micro, "runs": rows}, indent=1) + "\n")
    table = render(meta, summary, micro)
    (out / "summary.md").write_text("# make bench-rules — payload rules against plain rules\n\n" + table)
    print("\n" + table)
    print(f"bench-rules: {len(rows)} runs in {meta['seconds']} s; wrote {out}/results.json, summary.md")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
