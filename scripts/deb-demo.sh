#!/bin/bash
# Runs inside the fresh Debian root of scripts/deb-test.sh, in a network namespace of its own:
# mosquitto, pusher-local and the daemon on the shipped /etc/pusher-mqtt-bridge/bridges.conf,
# unchanged. One event Pusher -> MQTT (market-data/new-price -> dash/prices/new-price), one
# message MQTT -> Pusher (sensors/kitchen/temperature -> sensor-kitchen/temperature), /readyz and
# /metrics. Every process it starts is stopped by PID when it exits. Prints "demo: ok" on success.
set -euo pipefail
cd /tmp
conf=/etc/pusher-mqtt-bridge/bridges.conf
pids=()
stop_all() {
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[$i]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop_all EXIT
fail() { echo "demo: FAILED: $*"; for f in bridge.log pusher-local.log mosquitto.log; do echo "--- $f"; tail -20 "$f" 2>/dev/null; done; exit 1; }

# An HTTP GET with bash alone (no curl in minbase): prints the status line, headers and body.
# The server keeps connections open: ask it to close, and give up after 5 s in any case.
http_get() {
  timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1
    printf "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" "$1" >&3
    cat <&3' "$1" "$2"
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_for() { # seconds, description, command...
  local deadline=$((SECONDS + $1)) what=$2; shift 2
  until "$@"; do [ "$SECONDS" -lt "$deadline" ] || fail "timed out waiting for $what"; sleep 0.2; done
}

mosquitto -p 1883 >mosquitto.log 2>&1 &
pids+=($!)
pusher-local --port 6001 >pusher-local.log 2>&1 &
pids+=($!)
wait_for 10 "mosquitto on 1883" port_open 1883
wait_for 10 "pusher-local on 6001" port_open 6001
echo "demo: mosquitto and pusher-local up"

# Outside systemd there is no StateDirectory=: the demo's spool goes to /var/lib/pusher-mqtt-bridge.
mkdir -p /var/lib/pusher-mqtt-bridge
STATE_DIRECTORY=/var/lib/pusher-mqtt-bridge pusher-mqtt-bridge run --config "$conf" >bridge.log 2>&1 &
pids+=($!)
ready() { [[ "$(http_get 9464 /readyz 2>/dev/null)" == "HTTP/1.1 200"* ]]; }
wait_for 20 "/readyz 200" ready
echo "demo: daemon ready ($(http_get 9464 /readyz | tail -1))"

# Pusher -> MQTT
mosquitto_sub -h 127.0.0.1 -p 1883 -t 'dash/prices/#' -v -C 1 -W 15 >sub.out 2>&1 &
sub=$!
pids+=($sub)
sleep 1
pusher-mqtt-bridge trigger --config "$conf" --channel market-data --event new-price --data '{"symbol":"ACME","price":42}' >trigger.out 2>&1 \
  || { cat trigger.out; fail "trigger"; }
wait "$sub" || fail "no MQTT message on dash/prices/# ($(cat sub.out))"
grep -qx 'dash/prices/new-price {"symbol":"ACME","price":42}' sub.out || fail "unexpected MQTT message: $(cat sub.out)"
echo "demo: Pusher -> MQTT: $(cat sub.out)"

# MQTT -> Pusher
pusher-mqtt-bridge tap --config "$conf" --channel sensor-kitchen >tap.out 2>tap.err &
pids+=($!)
# pusher-local's stats list the channels with subscribers: wait until the tap's is there.
tapping() { [[ "$(http_get 6001 /pusher-local/apps/1/stats 2>/dev/null)" == *'"sensor-kitchen"'* ]]; }
wait_for 15 "the tap to subscribe to sensor-kitchen" tapping
mosquitto_pub -h 127.0.0.1 -p 1883 -t sensors/kitchen/temperature -m 21.5 -q 1
arrived() { grep -q '"temperature"' tap.out; }
wait_for 15 "the event at pusher-mqtt-bridge tap" arrived
echo "demo: MQTT -> Pusher: $(grep -m1 '"temperature"' tap.out)"

metrics=$(http_get 9464 /metrics)
for direction in pusher_to_mqtt mqtt_to_pusher; do
  echo "$metrics" | grep -E "^pusher_mqtt_bridge_messages_total\{.*direction=\"$direction\".*outcome=\"delivered\".*\} [1-9]" >/dev/null \
    || echo "$metrics" | grep -E "^pusher_mqtt_bridge_messages_total\{.*outcome=\"delivered\".*direction=\"$direction\".*\} [1-9]" >/dev/null \
    || fail "no delivered $direction in /metrics"
done
echo "demo: /metrics counts a delivery each way"
echo "demo: ok"
