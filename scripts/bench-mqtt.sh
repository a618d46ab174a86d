#!/usr/bin/env bash
# Publish throughput through the Swift MQTTClient wrapper vs. plain C libmosquitto, same run,
# same broker. Not a test: numbers depend on the machine. Usage:
#
#     scripts/bench-mqtt.sh [RUNS=3] [QOS0_COUNT=200000] [QOS1_COUNT=100000]
#
# - Builds mqtt-bench in release and Benchmarks/mqtt/c_publisher.c with gcc -O2.
# - Starts its own mosquitto on a free 127.0.0.1 port (max_queued_messages 0,
#   set_tcp_nodelay true, max_inflight_messages 1000), kills it by PID on exit.
# - For QoS 0 and 1, alternates C and Swift RUNS times each; 100-byte payloads, in-flight
#   window 1000, MQTT 5. Counted at the publisher via completions: QoS 1 = PUBACK received,
#   QoS 0 = written to the socket (libmosquitto's on_publish in both programs).
# - Prints every run, the medians and the ratio Swift/C.
set -euo pipefail

RUNS=${1:-3}
QOS0_COUNT=${2:-200000}
QOS1_COUNT=${3:-100000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/bench-mqtt.XXXXXX)
BROKER_PID=""

cleanup() {
    if [[ -n "$BROKER_PID" ]]; then kill "$BROKER_PID" 2>/dev/null || true; wait "$BROKER_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

cd "$ROOT"
echo "building mqtt-bench (release) ..." >&2
swift build -c release --product mqtt-bench -j 2 >&2
SWIFT_BENCH="$(swift build -c release --show-bin-path)/mqtt-bench"
gcc -O2 -Wall -Wextra -o "$WORK/c_publisher" Benchmarks/mqtt/c_publisher.c -lmosquitto -lpthread

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
cat > "$WORK/mosquitto.conf" <<EOF
per_listener_settings false
allow_anonymous true
max_queued_messages 0
max_inflight_messages 1000
set_tcp_nodelay true
persistence false
user root
log_dest none
listener $PORT 127.0.0.1
EOF
/usr/sbin/mosquitto -c "$WORK/mosquitto.conf" &
BROKER_PID=$!
for _ in $(seq 1 100); do
    if python3 -c "import socket; socket.create_connection(('127.0.0.1',$PORT),0.1)" 2>/dev/null; then break; fi
    sleep 0.05
done

median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print int((a[NR/2]+a[NR/2+1])/2)}'; }

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for QOS in 0 1; do
    COUNT=$QOS0_COUNT; [[ $QOS == 1 ]] && COUNT=$QOS1_COUNT
    : > "$WORK/c.$QOS"; : > "$WORK/swift.$QOS"
    for RUN in $(seq 1 "$RUNS"); do
        C_LINE=$("$WORK/c_publisher" "$PORT" "$COUNT" "$QOS" 100 1000 5)
        S_LINE=$("$SWIFT_BENCH" "$PORT" "$COUNT" "$QOS" 100 1000 5)
        echo "run $RUN: $C_LINE | $S_LINE"
        echo "$C_LINE" | sed 's/.*rate=//' >> "$WORK/c.$QOS"
        echo "$S_LINE" | sed 's/.*rate=//' >> "$WORK/swift.$QOS"
    done
    C_MED=$(median < "$WORK/c.$QOS")
    S_MED=$(median < "$WORK/swift.$QOS")
    RATIO=$(awk -v s="$S_MED" -v c="$C_MED" 'BEGIN {printf "%.2f", s / c}')
    echo "QoS $QOS: median C $C_MED msg/s, median Swift $S_MED msg/s, Swift/C = $RATIO (count $COUNT x $RUNS runs)"
done
