"""Fault-matrix row for the dead-letter store (docs/contract.md §8.3), run by matrix.py on the
common rig.

Row (expectation in `rows()`, written before running):
- `dead-letters-torn`: the bridge is SIGKILLed under traffic, a torn record (a record header cut
  short, as a write interrupted by the kill or a power loss leaves it) is appended to its
  dead-letter store, and it is restarted after 2 s. The store must not keep the daemon from
  starting: traffic recovers as after `bridge-sigkill` (Pusher has no replay: what was sent while
  no bridge was subscribed is lost; MQTT -> Pusher waits in the broker's session), the torn record
  is cut off and counted once (`dead_letters_damaged_total` = 1), and `dead-letters list` reads the
  store without a complaint afterwards.
"""

from __future__ import annotations

import subprocess
import time
import types

from bridge_testkit.faults.checker import Expectation
from bridge_testkit.harness import binary, metric_value, wait_until


def store_log(rig):
    return rig.workdir / "state" / "faults" / "dead-letters" / "letters.log"


def torn_store_restart(down: float = 2.0):
    def inject(rig) -> list[float]:
        rig.bridge.kill()
        log = store_log(rig)
        if not log.exists():
            rig.failures.append(f"no dead-letter store at {log} after the bridge ran")
            log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as f:
            # Magic "SP", kind 1, reserved 0, then the header stops: 6 of its 20 bytes.
            f.write(b"\x53\x50\x01\x00\x40\x00")
        rig.torn_bytes = log.stat().st_size
        time.sleep(down)
        rig.bridge.start()
        return [time.monotonic()]
    return inject


def torn_record_counted(rig, p2m_reports) -> None:
    series = 'pusher_mqtt_bridge_dead_letters_damaged_total{bridge="faults"}'
    try:
        wait_until(lambda: metric_value(rig.metrics_text(), series) is not None, 10, 0.2, "the store metric")
    except Exception:  # noqa: BLE001 - reported as a failure below
        pass
    damaged = metric_value(rig.metrics_text(), series)
    if damaged != 1:
        rig.failures.append(f"{series} = {damaged}, expected 1 (the torn record cut off and counted once)")
    size = store_log(rig).stat().st_size if store_log(rig).exists() else -1
    if size != rig.torn_bytes - 6:
        rig.failures.append(f"the store is {size} bytes after the restart, expected the torn 6 bytes cut off")
    listed = subprocess.run([binary("BRIDGE_BIN", "pusher-mqtt-bridge"), "dead-letters", "list", "--json", "--config",
                             str(rig.bridge.config_path)], capture_output=True, text=True, timeout=30)
    if listed.returncode != 0 or "damaged" in listed.stderr:
        rig.failures.append(f"dead-letters list after the restart: exit {listed.returncode}, {listed.stderr.strip()}")
    rig.observations.append(f"{series} = {damaged}; list: exit {listed.returncode}")


def rows(matrix: types.ModuleType) -> list:
    rate = matrix.RATE
    return [
        matrix.Row("dead-letters-torn", "bridge SIGKILL, a torn record appended to its dead-letter store, restarted after 2 s",
                   Expectation(int(rate * 5), max_recovery_s=6,
                               why="Pusher has no replay: events while no bridge is subscribed are lost (<= rate x (2 s + "
                                   "start + subscribe)); the torn store does not hold the start up"),
                   Expectation(int(rate * 0.1), max_recovery_s=6,
                               why="docs/contract.md §5.6: only what libmosquitto acknowledged but the bridge had not "
                                   "spooled; docs/contract.md §8.3: the torn record is cut off and counted once"),
                   torn_store_restart(), check=torn_record_counted),
    ]
