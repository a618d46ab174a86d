"""SIGHUP checks the new file in a child process (`pusher-mqtt-bridge check`) before parsing it in
the daemon: a file that makes the TOML parser (toml++) abort costs the reload, not the daemon."""

from __future__ import annotations

import re
import signal
import subprocess
import urllib.request

from bridge_testkit.clients import wait_bridge_subscribed
from bridge_testkit.harness import MQTTCollector, binary, bridge_config, free_port, http_get, rule, wait_until
from test_flow import PUSHER_TO_MQTT

# toml++ asserts `!is_value_terminator(*cp)` in parse_value on `[}`, and aborts. The loader guards
# `[}` before toml++ sees the text, but a multi-line string ending in four quotes (TOML allows up to
# two quotes before the closing three) hides the rest of its line from that guard.
ABORTING = '\ncrash = { s = """x"""", b = [}] }\n'

EXTRA_RULE = rule("alerts", "pusher", channel="alerts", topic="dash/alerts/{event}", qos=1)


def reload_errors(port: int) -> float:
    """The daemon's `pusher_mqtt_bridge_errors_total{bridge="",kind="reload"}`, 0 before the first (each
    bridge has its own `kind="reload"` series too, for a Pusher side it could not replace)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("pusher_mqtt_bridge_errors_total{") and 'kind="reload"' in line and 'bridge=""' in line:
                return float(line.split()[-1])
    return 0.0


def test_a_reload_that_crashes_the_parser_is_refused_and_the_daemon_keeps_bridging(pusher, broker, workdir, bridges):
    metrics_port = free_port()
    # `${E2E_PUSHER_KEY}`: the child check must see the daemon's environment, or the good reload
    # at the end would be refused.
    config = (bridge_config(pusher, broker, workdir, PUSHER_TO_MQTT)
              .replace('metrics = ""', f'metrics = "127.0.0.1:{metrics_port}"')
              .replace(f'key = "{pusher.key}"', 'key = "${E2E_PUSHER_KEY}"'))
    bridge = bridges(config, env={"E2E_PUSHER_KEY": pusher.key})
    collector = MQTTCollector(broker.port, ["dash/#"])
    wait_bridge_subscribed(pusher, "market-data")
    http = pusher.http_client()
    http.trigger("market-data", "new-price", "before")
    wait_until(lambda: collector.payloads("dash/prices/new-price") == [b"before"], 10, 0.1, "the first message")
    wait_until(lambda: http_get(f"http://127.0.0.1:{metrics_port}/metrics")[0] == 200, 10, 0.1, "/metrics")
    assert reload_errors(metrics_port) == 0

    # The file really kills a parser: `check` on its own dies of SIGABRT.
    bridge.write_config(config + ABORTING)
    # Without the Swift runtime's backtracer, as the daemon runs its child check: under
    # ThreadSanitizer the backtracer itself crashes (SIGSEGV) while handling the abort.
    direct = bridge.cli("check", "--config", str(bridge.config_path), env={"SWIFT_BACKTRACE": "enable=no"})
    assert direct.returncode == -signal.SIGABRT, (
        f"the test input no longer aborts toml++ (exit {direct.returncode}): pick another one\n{direct.stderr[-2000:]}")

    bridge.send_signal(signal.SIGHUP)
    crashed = wait_until(lambda: re.search(r".*config check crashed.*", bridge.log()), 10, 0.1, "the reload to be refused")
    assert "SIGABRT" in crashed.group(0)
    assert "the old config keeps running" in crashed.group(0)
    # The child's own last words, logged after the refusal's line.
    wait_until(lambda: "Assertion" in bridge.log(), 5, 0.05, "the check's own output logged")
    assert bridge.running()
    wait_until(lambda: reload_errors(metrics_port) == 1, 5, 0.1, 'errors_total{kind="reload"} to count the refusal')

    # Still bridging, on the same connection.
    http.trigger("market-data", "new-price", "after")
    wait_until(lambda: collector.payloads("dash/prices/new-price") == [b"before", b"after"], 10, 0.1,
               "messages to flow after the refused reload")
    assert bridge.log().count("pusher connected") == 1

    # A good file afterwards is checked (with the same `${VAR}`s), then applied as usual.
    bridge.write_config(config + EXTRA_RULE)
    bridge.send_signal(signal.SIGHUP)
    wait_until(lambda: "reloaded" in bridge.log(), 10, 0.1, "the good reload")
    wait_bridge_subscribed(pusher, "alerts")
    http.trigger("alerts", "fire", "hot")
    wait_until(lambda: collector.payloads("dash/alerts/fire") == [b"hot"], 10, 0.1, "the new rule to work")
    assert reload_errors(metrics_port) == 1
    assert bridge.log().count("reload refused") == 1

    assert bridge.stop(signal.SIGTERM) == 0
    collector.close()


def test_a_file_that_crashes_the_parser_at_start_is_refused_with_78(pusher, broker, workdir):
    """At start too the file is checked in a child first: a parser abort becomes exit 78 with a
    clear line (the unit does not restart on 78), not a SIGABRT that systemd restarts forever."""
    bad = workdir / "crash.conf"
    bad.write_text(bridge_config(pusher, broker, workdir, PUSHER_TO_MQTT) + ABORTING)
    bridge_bin = binary("BRIDGE_BIN", "pusher-mqtt-bridge")
    result = subprocess.run([bridge_bin, "run", "--config", str(bad)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 78, result.stderr[-2000:]
    assert f"{bad}: error: the config parser crashed on this file (signal 6 (SIGABRT))" in result.stderr
    assert "is_value_terminator" in result.stderr, "the parser's own line is shown"


def test_a_keepalive_the_mqtt_client_refuses_is_refused_by_check_and_run_alike(pusher, broker, workdir):
    """Issue 26, defect 2: libmosquitto takes a keep-alive of 5…65535 s. `check` used to accept
    `keepalive = "3s"`, and `run` then exited 1 ("cannot start"). Both now refuse the file with
    exit 78 and the same line naming the key's position (docs/contract.md §3)."""
    config = bridge_config(pusher, broker, workdir, PUSHER_TO_MQTT).replace('keepalive = "5s"', 'keepalive = "3s"')
    bad = workdir / "keepalive.conf"
    bad.write_text(config)
    line = config.splitlines().index('keepalive = "3s"') + 1
    expected = (f"{bad}:{line}: error: bridge.e2e.mqtt.keepalive: "
                "must be between 5s and 65535s (the MQTT client's limits)")
    bridge_bin = binary("BRIDGE_BIN", "pusher-mqtt-bridge")

    check = subprocess.run([bridge_bin, "check", "--config", str(bad)], capture_output=True, text=True, timeout=30)
    assert check.returncode == 78, check.stdout[-2000:] + check.stderr[-2000:]
    assert check.stderr.splitlines() == [expected]

    run = subprocess.run([bridge_bin, "run", "--config", str(bad)], capture_output=True, text=True, timeout=30)
    assert run.returncode == 78, run.stderr[-2000:]
    assert run.stderr.splitlines() == [expected]

    # The limit itself is accepted by both.
    good = workdir / "keepalive-5s.conf"
    good.write_text(config.replace('keepalive = "3s"', 'keepalive = "5s"'))
    assert subprocess.run([bridge_bin, "check", "--config", str(good)], capture_output=True, timeout=30).returncode == 0
