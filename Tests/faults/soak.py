"""Soak (`make soak`): SOAK_MINUTES (default 30) of tagged traffic both ways (SOAK_RATE msg/s per
direction, default 200) through one bridge daemon, with a fault every SOAK_FAULT_EVERY seconds
(default 180) rotating through: broker SIGTERM + restart, pusher-local 4200 close, a 10 s MQTT-side
blackhole, SIGHUP with a rule-only change, 10 s of HTTP 403 (over quota), a full disk (the
state_dir is a 16 MiB tmpfs of the soak's own, filled to 128 KiB free during a 15 s MQTT
blackhole, then freed) and an MQTT -> Pusher overload (30 s of 403 at SOAK_RATE: more than the
4,000-message buffer, so backpressure holds the broker back). The daemon's RSS (VmRSS) and open
fds (/proc/PID/fd) are sampled every SOAK_SAMPLE seconds (default 5) into soak.csv and plotted in
soak.png, with RssAnon beside VmRSS (what the daemon allocated; the rest is mostly code pages, some
of which each fault kind maps the first time it runs). At the end the counters must balance (docs/contract.md §7.6).

Growth after warm-up: the median of the samples in the minute after warm-up (the first
SOAK_WARMUP_MINUTES, default min(4, a sixth of the run)) against the median of the last minute;
must be < 10 % for RSS and fds. The same growth is also reported from the start of the second fault
rotation (after_one_rotation in soak.json), when every fault kind has run once. The checker summarises every message of the run.
Output: SOAK_OUT (default .build/soak/): soak.csv, soak.png, soak.json.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bridge_testkit.faults import rig as rig_module
from bridge_testkit.faults.checker import Expectation
from bridge_testkit.faults.rig import EXTRA_RULE, Rig, judge_direction
from matrix import blackhole, broker_restarts, mqtt_to_pusher_overload, pusher_closes, pusher_quota  # beside this script

MINUTES = float(os.environ.get("SOAK_MINUTES", "30"))
RATE = float(os.environ.get("SOAK_RATE", "200"))
FAULT_EVERY = float(os.environ.get("SOAK_FAULT_EVERY", "180"))
SAMPLE = float(os.environ.get("SOAK_SAMPLE", "5"))
WARMUP = float(os.environ.get("SOAK_WARMUP_MINUTES", str(min(4.0, MINUTES / 6)))) * 60
# SOAK_CONNECTIONS=2 (or 3): `[bridge.pusher] connections` (issue 28); the Pusher fault then closes
# ONE connection, so no fault leaves the bridge without one: Pusher -> MQTT must lose nothing.
CONNECTIONS = int(os.environ.get("SOAK_CONNECTIONS", "1"))


def sighup_once(rig: Rig, n=[0]):
    n[0] += 1
    rig.bridge.write_config(rig.config + (EXTRA_RULE.format(n=n[0]) if n[0] % 2 else ""))
    rig.bridge.send_signal(signal.SIGHUP)
    return [time.monotonic()]


def metric(rig: Rig, family_and_labels: str) -> float | None:
    for line in rig.metrics_text().splitlines():
        if line.startswith(family_and_labels + " "):
            return float(line.split()[-1])
    return None


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def disk_full(rig: Rig, seconds: float = 15.0, free_kib: int = 128):
    """The state_dir's tmpfs filled to `free_kib` while the MQTT side is blackholed: the P->M spool
    runs out of space and degrades (messages wait in memory), then space returns and it resumes."""
    state = rig.workdir / "state"
    filler = state / "filler"
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, free_bytes(state) - free_kib * 1024))
    rig.mqtt_proxy.set_mode("blackhole")
    degraded = False
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        degraded = degraded or metric(rig, 'pusher_mqtt_bridge_spool_degraded{bridge="faults",direction="pusher_to_mqtt"}') == 1
        time.sleep(0.5)
    rig.mqtt_proxy.set_mode("pass")
    ended = time.monotonic()
    time.sleep(5.0)
    filler.unlink()
    resumed = False
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not resumed:
        resumed = all(metric(rig, f'pusher_mqtt_bridge_spool_degraded{{bridge="faults",direction="{d}"}}') == 0
                      for d in ("pusher_to_mqtt", "mqtt_to_pusher"))
        time.sleep(0.5)
    rig.observations.append(f"disk full: spool_degraded 1 during: {degraded}, 0 again after space returned: {resumed}")
    if not degraded:
        rig.failures.append("disk full: the P->M spool never reported degraded")
    if not resumed:
        rig.failures.append("disk full: a spool stayed degraded after space returned")
    return [ended]


FAULTS = [
    ("broker SIGTERM + restart", broker_restarts(signal.SIGTERM, 1)),
    ("pusher-local 4200 close", pusher_closes(4200, 1)),
    ("10 s MQTT blackhole", blackhole("mqtt")),
    ("SIGHUP rule change", sighup_once),
    ("10 s over quota (HTTP 403)", pusher_quota(10.0)),
    ("disk full during a 15 s MQTT blackhole", disk_full),
    ("30 s MQTT -> Pusher overload (403, backpressure)", mqtt_to_pusher_overload(30.0)),
]


if CONNECTIONS > 1:
    from redundancy_rows import close_one_alternating  # beside this script

    FAULTS[1] = ("one Pusher connection closed with 4200", close_one_alternating(minutes=1 / 60))


def soak_buffer(config: str) -> str:
    """No `overflow` key (P->M drop-oldest, M->P backpressure: docs/contract.md §7.6) and a buffer of
    4,000 messages / 4 MiB: a 15 s P->M outage fits, a 30 s M->P overload does not."""
    old = 'max_messages = 100000\nmax_bytes = "64MiB"\noverflow = "drop-oldest"\n'
    assert old in config
    return config.replace(old, 'max_messages = 4000\nmax_bytes = "4MiB"\n')


def sample(pid: int) -> tuple[int, int, int]:
    """VmRSS, open fds and RssAnon: the part of RSS the daemon allocated (the rest is file pages,
    mostly code, mapped the first time a path runs: a fault kind's first run adds some)."""
    rss_kb = anon_kb = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
            elif line.startswith("RssAnon:"):
                anon_kb = int(line.split()[1])
    return rss_kb, len(os.listdir(f"/proc/{pid}/fd")), anon_kb


def growth(rows: list[tuple[float, int, int, int]], column: int, start: float, duration: float) -> dict:
    """Median in [start, start+60 s] against the median of the last minute."""
    base = [r[column] for r in rows if start <= r[0] <= start + 60]
    end = [r[column] for r in rows if r[0] >= duration - 60]
    if not base or not end:
        return {"baseline": None, "final": None, "growth_pct": None}
    b, e = statistics.median(base), statistics.median(end)
    return {"baseline": b, "final": e, "max": max(r[column] for r in rows if r[0] >= start),
            "growth_pct": round(100.0 * (e - b) / b, 2) if b else None}


def plot(rows, path: Path, warmup: float, faults: list[tuple[float, str]]):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t = [r[0] / 60 for r in rows]
    fig, (a, b) = plt.subplots(2, 1, sharex=True, figsize=(9, 6))
    a.plot(t, [r[1] / 1024 for r in rows], color="tab:blue", label="VmRSS")
    a.plot(t, [r[3] / 1024 for r in rows], color="tab:green", label="RssAnon")
    a.legend(loc="upper left")
    a.set_ylabel("RSS (MiB)")
    b.plot(t, [r[2] for r in rows], color="tab:orange")
    b.set_ylabel("open fds")
    b.set_xlabel("minutes")
    for ax in (a, b):
        ax.axvline(warmup / 60, color="grey", linestyle="--", linewidth=0.8)
        for at, _ in faults:
            ax.axvline(at / 60, color="red", alpha=0.25, linewidth=0.8)
        ax.grid(alpha=0.3)
    a.set_title("pusher-mqtt-bridge soak: RSS and fds (red: faults, dashed: end of warm-up)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> int:
    out = Path(os.environ.get("SOAK_OUT", Path(__file__).resolve().parents[2] / ".build" / "soak"))
    out.mkdir(parents=True, exist_ok=True)
    duration = MINUTES * 60
    rig = Rig(Path(tempfile.mkdtemp(prefix="soak-")), "soak", rate=RATE)
    rig.observations, rig.failures = [], []
    state = rig.workdir / "state"
    state.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(state)], capture_output=True, text=True)
    if mounted.returncode != 0:
        print(f"soak: cannot mount a tmpfs for the state_dir ({mounted.stderr.strip()}); needs root", file=sys.stderr)
        return 1
    rig.closers.append(lambda: subprocess.run(["umount", "-l", str(state)], capture_output=True))
    original_config = rig_module.bridge_config
    def soak_config(*a, **k) -> str:
        config = soak_buffer(original_config(*a, **k))
        if CONNECTIONS > 1:
            config = config.replace("[bridge.pusher]\n", f"[bridge.pusher]\nconnections = {CONNECTIONS}\n", 1)
        return config

    rig_module.bridge_config = soak_config
    samples: list[tuple[float, int, int]] = []
    faults: list[tuple[float, str]] = []
    ends: list[float] = []
    identity: dict = {}
    print(f"soak: {MINUTES:g} min at {RATE:g} msg/s each way, a fault every {FAULT_EVERY:g} s, logs in {rig.workdir}", flush=True)
    try:
        rig.start()
        rig.start_traffic()
        t0 = time.monotonic()
        next_fault, k = FAULT_EVERY, 0
        with open(out / "soak.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["seconds", "rss_kb", "fds", "rss_anon_kb"])
            while (now := time.monotonic() - t0) < duration:
                if not rig.bridge.running():
                    rig.failures.append(f"the daemon exited at {now:.0f}s")
                    break
                row = (round(now, 1), *sample(rig.bridge.pid))
                samples.append(row)
                w.writerow(row)
                f.flush()
                if now >= next_fault and now < duration - min(90.0, duration / 6):  # a fault-free tail
                    name, inject = FAULTS[k % len(FAULTS)]
                    print(f"[{now / 60:5.1f} min] fault: {name}; rss {row[1] / 1024:.1f} MiB, {row[2]} fds", flush=True)
                    faults.append((now, name))
                    ends += inject(rig)
                    k += 1
                    next_fault = now + FAULT_EVERY
                time.sleep(SAMPLE)
        rig.stop_traffic()
        identity = rig.counter_identity()
        for direction, i in identity.items():
            if not i.holds:
                rig.failures.append(f"counters do not balance for {direction}: received {i}")
        p2m_t, _, _, _ = judge_direction(rig.p2m.sent.snapshot(), rig.receiver.received.snapshot(), Expectation(), ends)
        m2p_t, _, _, _ = judge_direction(rig.m2p.sent.snapshot(), rig.m2p_received(), Expectation(), ends)
        if CONNECTIONS > 1 and p2m_t.lost:
            rig.failures.append(f"Pusher -> MQTT lost {p2m_t.lost} with {CONNECTIONS} connections (no fault left it without one)")
    finally:
        rig_module.bridge_config = original_config
        rig.close()
    rss = growth(samples, 1, WARMUP, samples[-1][0] if samples else 0)
    fds = growth(samples, 2, WARMUP, samples[-1][0] if samples else 0)
    anon = growth(samples, 3, WARMUP, samples[-1][0] if samples else 0)
    # The same figures from the start of the second fault rotation, when every fault kind has run once.
    rotation = faults[len(FAULTS)][0] if len(faults) > len(FAULTS) else None
    after_rotation = {name: growth(samples, column, rotation, samples[-1][0]) if rotation is not None else None
                      for name, column in (("rss_kb", 1), ("fds", 2), ("rss_anon_kb", 3))}
    plot(samples, out / "soak.png", WARMUP, faults)
    summary = {"minutes": MINUTES, "rate": RATE, "connections": CONNECTIONS, "faults": faults, "rss_kb": rss, "fds": fds, "rss_anon_kb": anon,
               "after_one_rotation": {"from_seconds": rotation, **after_rotation},
               "p2m": p2m_t.__dict__, "m2p": m2p_t.__dict__, "identity": {d: str(i) for d, i in identity.items()},
               "observations": rig.observations, "failures": rig.failures}
    (out / "soak.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    ok = not rig.failures and rss["growth_pct"] is not None and rss["growth_pct"] < 10 and fds["growth_pct"] is not None and fds["growth_pct"] < 10
    print(f"soak: RSS {rss['baseline']} -> {rss['final']} kB ({rss['growth_pct']} %; of it anonymous "
          f"{anon['baseline']} -> {anon['final']} kB, {anon['growth_pct']} %), fds {fds['baseline']} -> {fds['final']} "
          f"({fds['growth_pct']} %); after one fault rotation: RSS "
          f"{after_rotation['rss_kb']['growth_pct'] if rotation is not None else 'n/a'} %, anonymous "
          f"{after_rotation['rss_anon_kb']['growth_pct'] if rotation is not None else 'n/a'} %; P->M lost {p2m_t.lost} dup {p2m_t.duplicates} reord {p2m_t.reordered}; "
          f"M->P lost {m2p_t.lost} dup {m2p_t.duplicates} reord {m2p_t.reordered}: {'PASS' if ok else 'MISS'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
