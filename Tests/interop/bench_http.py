"""HTTP API ingest rate of pusher-local (not a test): signed POST /apps/ID/batch_events with 10
events each, pipelined over a few keep-alive connections, one WebSocket subscriber counting.

    PUSHER_LOCAL_BIN=.build/release/pusher-local .venv/bin/python Tests/interop/bench_http.py [requests] [connections]
"""
import hashlib
import hmac
import json
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path


from bridge_testkit.clients import raw_subscriber
from bridge_testkit.harness import PusherLocal


def signed_target(server, path, body):
    params = {"auth_key": server.key, "auth_timestamp": str(int(time.time())), "auth_version": "1.0",
              "body_md5": hashlib.md5(body).hexdigest()}
    query = "&".join(f"{k}={params[k]}" for k in sorted(params))
    signature = hmac.new(server.secret.encode(), f"POST\n{path}\n{query}".encode(), hashlib.sha256).hexdigest()
    return f"{path}?{query}&auth_signature={signature}"


def main():
    requests = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    connections = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    server = PusherLocal(Path(tempfile.mkdtemp(prefix="pusher-local-bench-")), extra=["--log-level", "warning"]).start()
    try:
        ws = raw_subscriber(server, "bench")
        path = f"/apps/{server.app_id}/batch_events"
        body = json.dumps({"batch": [{"name": "tick", "channel": "bench", "data": json.dumps({"n": i, "pad": "x" * 60})}
                                     for i in range(10)]}).encode()
        request = (f"POST {signed_target(server, path, body)} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
        per_connection = requests // connections
        expected_events = per_connection * connections * 10
        counts = {}

        def load(index):
            sock = socket.create_connection((server.host, server.port))
            sender = threading.Thread(target=lambda: [sock.sendall(request * 100) for _ in range(per_connection // 100)])
            sender.start()
            seen, carry = 0, b""
            while seen < (per_connection // 100) * 100:
                chunk = sock.recv(1 << 20)
                if not chunk:
                    break
                data = carry + chunk
                seen += data.count(b"HTTP/1.1 200")
                carry = data[-11:]
            sender.join()
            counts[index] = seen
            sock.close()

        received = [0]

        def read_ws():
            marker, carry = b'"event":"tick"', b""
            while received[0] < expected_events:
                chunk = ws.sock.recv(1 << 20)
                if not chunk:
                    break
                data = carry + chunk
                received[0] += data.count(marker)
                carry = data[-(len(marker) - 1):]

        reader = threading.Thread(target=read_ws, daemon=True)
        reader.start()
        start = time.monotonic()
        threads = [threading.Thread(target=load, args=(i,)) for i in range(connections)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        http_elapsed = time.monotonic() - start
        reader.join(60)
        elapsed = time.monotonic() - start
        ok = sum(counts.values())
        print(json.dumps({"requests_ok": ok, "connections": connections,
                          "requests_per_second": int(ok / http_elapsed),
                          "events_per_second_ingested": int(ok * 10 / http_elapsed),
                          "events_received": received[0],
                          "events_per_second_delivered": int(received[0] / elapsed)}))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
