"""Throughput of pusher-local's own load source to one WebSocket subscriber (not a test).

    PUSHER_LOCAL_BIN=.build/release/pusher-local .venv/bin/python Tests/interop/bench_stream.py [count] [size]

Starts pusher-local, subscribes one raw websocket-client connection to `bench`, asks the
server to publish `count` events of `size` bytes as fast as it can
(POST /pusher-local/apps/1/stream), and reports the server's send rate and the rate and
latency the subscriber saw. The Python reader may be the bottleneck; the server-side rate is
what the server alone can generate.
"""
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

from bridge_testkit.clients import raw_subscriber
from bridge_testkit.harness import PusherLocal


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    server = PusherLocal(Path(tempfile.mkdtemp(prefix="pusher-local-bench-")), extra=["--log-level", "warning"]).start()
    try:
        ws = raw_subscriber(server, "bench")
        result = {}

        def trigger():
            status, body = server.app_control("POST", f"stream?channel=bench&event=tick&count={count}&size={size}")
            result["server"] = json.loads(body)

        thread = threading.Thread(target=trigger)
        thread.start()
        # Count frames in the raw byte stream (server frames are unmasked text): far cheaper
        # than decoding each frame in Python, so the reader keeps up with the server.
        marker = b'"event":"tick"'
        sock = ws.sock
        received = 0
        carry = b""
        start = None
        tail = b""
        while received < count:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError(f"connection closed after {received} events")
            if start is None:
                start = time.monotonic()
            data = carry + chunk
            received += data.count(marker)
            carry = data[-(len(marker) - 1):]
            tail = (tail + chunk)[-(2 * size + 400):]
        elapsed = time.monotonic() - start
        now_ns = time.time_ns()
        thread.join()
        last = tail[tail.rfind(b'{"event":"tick"'):]
        seq_at = last.find(b'seq\\":')
        last_seq = int(last[seq_at + 6:last.index(b",", seq_at)]) if seq_at >= 0 else None
        sent_at = last.find(b'sent_at_ns\\":')
        sent_ns = int(last[sent_at + 13:last.index(b",", sent_at)]) if sent_at >= 0 else now_ns
        last_data = {"seq": last_seq, "sent_at_ns": sent_ns}
        print(json.dumps({
            "events": count,
            "size": size,
            "server": result.get("server"),
            "client_events_per_second": int(count / elapsed) if elapsed > 0 else None,
            "last_event_latency_ms": round((now_ns - last_data["sent_at_ns"]) / 1e6, 1),
            "last_seq": last_data["seq"],
        }))
        ws.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
