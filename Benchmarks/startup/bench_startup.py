"""How long a daemon with many static rules takes from its start to holding every subscription
(issue 31: "a daemon with 10,000 static rules subscribed within 5 s of start").

    PYTHONPATH=Tests/testkit PUSHER_LOCAL_BIN=... BRIDGE_BIN=... .venv/bin/python Benchmarks/startup/bench_startup.py [RULES] [RUNS]

One bridge with RULES Pusher -> MQTT rules (channel `c-<i>`, each its own subscription) and RULES
MQTT -> Pusher rules (filter `s/<i>/+`, each its own MQTT subscription), against a real pusher-local
and mosquitto. Measured from the process start: Pusher side, pusher-local's stats show every
channel subscribed; MQTT side, a QoS 1 message to the last rule's filter (`s/<RULES-1>/probe`,
subscribed last) reaches the HTTP API (pusher-local's `events_published`). Each run is a fresh
daemon and fresh servers; the median of RUNS is printed with every run.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bridge_testkit.harness import Bridge, Mosquitto, PusherLocal, bridge_config, publish, rule


def stats(pusher: PusherLocal) -> dict:
    status, body = pusher.control("GET", f"/pusher-local/apps/{pusher.app_id}/stats")
    return json.loads(body) if status == 200 else {}


def one_run(rules: int, workdir: Path) -> tuple[float, float, float]:
    broker = Mosquitto(workdir).start()
    pusher = PusherLocal(workdir).start()
    try:
        text = "".join(rule(f"p{i}", "pusher", channel=f"c-{i}", topic="out/{channel}", qos=1) for i in range(rules))
        text += "".join(rule(f"m{i}", "mqtt", topic=f"s/{i}/+", channel=f"m-{i}", event="e", qos=1) for i in range(rules))
        config = bridge_config(pusher, broker, workdir, text).replace('log_level = "debug"', 'log_level = "info"')
        bridge = Bridge(workdir, config)
        started = time.monotonic()
        bridge.start()
        pusher_done = mqtt_done = None
        before = None
        while time.monotonic() - started < 300 and (pusher_done is None or mqtt_done is None):
            if not bridge.running():
                raise RuntimeError("bridge exited:\n" + bridge.log()[-3000:])
            current = stats(pusher)
            if pusher_done is None and sum(1 for c, n in current.get("subscriptions", {}).items() if c.startswith("c-") and n) >= rules:
                pusher_done = time.monotonic() - started
            if mqtt_done is None:
                if before is None:
                    before = current.get("events_published", 0)
                publish(broker.port, f"s/{rules - 1}/probe", "probe", qos=1)
                if stats(pusher).get("events_published", 0) > before:
                    mqtt_done = time.monotonic() - started
            time.sleep(0.05)
        bridge.stop()
        if pusher_done is None or mqtt_done is None:
            raise RuntimeError(f"not subscribed within 300 s (Pusher {pusher_done}, MQTT {mqtt_done})")
        return pusher_done, mqtt_done, max(pusher_done, mqtt_done)
    finally:
        pusher.stop()
        broker.stop()


def main() -> None:
    rules = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    results = []
    for run in range(runs):
        with tempfile.TemporaryDirectory(prefix="bench-startup-") as directory:
            results.append(one_run(rules, Path(directory)))
        print(f"run {run + 1}: Pusher side {results[-1][0]:.2f} s, MQTT side {results[-1][1]:.2f} s", flush=True)
    print(f"{rules} + {rules} rules, median of {runs}: Pusher side {statistics.median(r[0] for r in results):.2f} s, "
          f"MQTT side {statistics.median(r[1] for r in results):.2f} s, both {statistics.median(r[2] for r in results):.2f} s")


if __name__ == "__main__":
    main()
