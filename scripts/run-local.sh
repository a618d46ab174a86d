#!/usr/bin/env bash
# `make run`: runs the daemon on CONFIG, first starting a local mosquitto and a local pusher-local
# for every bridge whose config points at this machine (127.0.0.1/localhost/::1) on a port where
# nothing listens yet. What it starts it stops again when the daemon exits (Ctrl-C).
# Usage: scripts/run-local.sh BIN_DIR CONFIG
set -euo pipefail
cd "$(dirname "$0")/.."
bin_dir=$(realpath "${1:?usage: $0 BIN_DIR CONFIG}")
config=${2:?usage: $0 BIN_DIR CONFIG}
run_dir=$PWD/run
mkdir -p "$run_dir"

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

listening() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
wait_for() {
  for _ in $(seq 1 100); do listening "$1" "$2" && return 0; sleep 0.1; done
  echo "run: $3 did not start listening on $1:$2 (log: $4)" >&2; exit 1
}

# One line per local endpoint the config points at: "mqtt HOST PORT" or "pusher HOST PORT ID KEY SECRET".
endpoints=$(python3 - "$config" <<'PY'
import os, re, sys, tomllib
with open(sys.argv[1], "rb") as f:
    doc = tomllib.load(f)
def expand(v):
    return re.sub(r"\$\{(\w+)\}", lambda m: os.environ.get(m.group(1), ""), v) if isinstance(v, str) else v
local = {"127.0.0.1", "localhost", "::1"}
seen = set()
for b in doc.get("bridge", []):
    m, p = b.get("mqtt", {}), b.get("pusher", {})
    host, port = expand(m.get("host", "localhost")), int(m.get("port", 1883))
    if host in local and ("mqtt", port) not in seen:
        seen.add(("mqtt", port)); print("mqtt", "127.0.0.1" if host == "localhost" else host, port)
    host = expand(p.get("host", ""))
    if host in local and p.get("tls", True) is False and ("pusher", p.get("port", 6001)) not in seen:
        port = int(p.get("port", 6001)); seen.add(("pusher", port))
        secret = expand(p.get("secret", "app-secret"))
        print("pusher", "127.0.0.1" if host == "localhost" else host, port, expand(p.get("app_id", "1")), expand(p["key"]), secret)
PY
)

while read -r kind host port app_id key secret; do
  [ -n "$kind" ] || continue
  if listening "$host" "$port"; then
    echo "run: $kind at $host:$port is already running; using it"
    continue
  fi
  case "$kind" in
    mqtt)
      conf=$run_dir/mosquitto-$port.conf
      printf 'listener %s %s\nallow_anonymous true\nset_tcp_nodelay true\nmax_queued_messages 0\npersistence true\npersistence_location %s/\n' \
        "$port" "$host" "$run_dir" > "$conf"
      # As root, mosquitto would switch to its own user and could not write run/ (no persistence).
      [ "$(id -u)" -eq 0 ] && echo "user root" >> "$conf"
      mosquitto -c "$conf" > "$run_dir/mosquitto-$port.log" 2>&1 & pids+=($!)
      wait_for "$host" "$port" mosquitto "$run_dir/mosquitto-$port.log"
      echo "run: started mosquitto on $host:$port (log: run/mosquitto-$port.log)" ;;
    pusher)
      "$bin_dir/pusher-local" --host "$host" --port "$port" --app-id "$app_id" --key "$key" --secret "$secret" \
        > "$run_dir/pusher-local-$port.log" 2>&1 & pids+=($!)
      wait_for "$host" "$port" pusher-local "$run_dir/pusher-local-$port.log"
      echo "run: started pusher-local on $host:$port (log: run/pusher-local-$port.log)" ;;
  esac
done <<< "$endpoints"

cat <<HINT

  Watch what the bridge publishes to MQTT:    mosquitto_sub -h 127.0.0.1 -v -t '#'
  Send a Pusher event (Pusher -> MQTT):       $bin_dir/pusher-mqtt-bridge trigger --config $config --channel market-data --event new-price --data '{"price":42}'
  Watch a Pusher channel (MQTT -> Pusher):    $bin_dir/pusher-mqtt-bridge tap --config $config --channel sensor-kitchen
  Publish a sensor reading (MQTT -> Pusher):  mosquitto_pub -h 127.0.0.1 -t sensors/kitchen/temperature -m '21.5'
  Explain a routing decision:                 $bin_dir/pusher-mqtt-bridge route --config $config --topic sensors/kitchen/temperature --payload 21.5

HINT
"$bin_dir/pusher-mqtt-bridge" run --config "$config" &
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null || true' INT TERM
wait "$daemon" || status=$?
trap - INT TERM
exit "${status:-0}"
