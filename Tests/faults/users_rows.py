"""Fault-matrix row for the bridge's sign-in (docs/contract.md §8.2), run by matrix.py on the
common rig with `connections = 2` and `sign_in = true` through a user authentication endpoint of
the row's own (a small HTTP server here, signing with the app secret as a backend would).

Row (expectation in `rows()`, written before running):
- `users-auth-endpoint-down`: the endpoint answers 503 for 12 s; meanwhile pusher-local closes
  each of the bridge's two connections once with 4200, one at a time (the other holds the
  channels), so both reconnect while no sign-in can succeed. Channel traffic is not affected (a
  refused sign-in leaves the connection and its channels up): 0 lost each way, no gap record. The
  refusals are counted (`errors_total{kind="pusher_sign_in"}` > 0), and once the endpoint answers
  again both connections are signed in again without any other event, within the retry's 30 s cap
  (its backoff: 1 s doubling), as pusher-local's own records (`signed_in_as`) show.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
import time
import types
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from bridge_testkit.faults.checker import Expectation

from redundancy_rows import bridge_sockets, no_gap, two_connections, watch_gaps

USER_ID = "faults-bridge"
OUTAGE_S = 12.0


class AuthEndpoint:
    """`POST /user-auth` with `socket_id=…`: `{"auth","user_data"}` signed with the app secret,
    or 503 while `down`."""

    def __init__(self, key: str, secret: str):
        self.key, self.secret = key, secret
        self.down = False
        self.answered = {"200": 0, "503": 0}
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
                socket_id = urllib.parse.parse_qs(body).get("socket_id", [""])[0]
                if endpoint.down or not socket_id:
                    endpoint.answered["503"] += 1
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                user_data = json.dumps({"id": USER_ID}, separators=(",", ":"))
                signature = hmac.new(endpoint.secret.encode(), f"{socket_id}::user::{user_data}".encode(),
                                     hashlib.sha256).hexdigest()
                reply = json.dumps({"auth": f"{endpoint.key}:{signature}", "user_data": user_data}).encode()
                endpoint.answered["200"] += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, name="user-auth-endpoint", daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# The endpoint of the running row: made when the row's config is written (before the rig starts).
_endpoint: list[AuthEndpoint] = []


def signing_in_through_an_endpoint(config: str) -> str:
    """`connections = 2`, and `sign_in` through this row's endpoint, which signs with the rig's secret."""
    key = re.search(r'^key = "([^"]*)"', config, re.M).group(1)
    secret = re.search(r'^secret = "([^"]*)"', config, re.M).group(1)
    for old in _endpoint:
        old.close()
    _endpoint[:] = [AuthEndpoint(key, secret)]
    config = two_connections(config)
    return config.replace("[bridge.pusher]\n", "[bridge.pusher]\nsign_in = true\n"
                          f'user_auth_endpoint = "http://127.0.0.1:{_endpoint[0].port}/user-auth"\n', 1)


def signed_in(rig) -> list[str]:
    """The socket ids of the bridge's connections signed in as USER_ID (pusher-local's records)."""
    status, body = rig.pusher_control("GET", f"/pusher-local/apps/{rig.pusher.app_id}/connections")
    if status != 200:
        return []
    listing = json.loads(body)
    connections = listing["connections"] if isinstance(listing, dict) else listing
    return sorted(c["socket_id"] for c in connections if c.get("signed_in_as") == USER_ID)


def endpoint_outage(rig) -> list[float]:
    watch_gaps(rig)
    endpoint = _endpoint[0]
    rig.closers.append(endpoint.close)
    deadline = time.monotonic() + 15
    while len(signed_in(rig)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    if len(signed_in(rig)) < 2:
        rig.failures.append(f"the bridge's two connections were not signed in before the fault: {signed_in(rig)}")
        return [time.monotonic()]
    endpoint.down = True
    outage_started = time.monotonic()
    for turn in range(2):
        sockets = bridge_sockets(rig)
        waited = time.monotonic()
        while len(sockets) < 2 and time.monotonic() - waited < 15:
            time.sleep(0.05)
            sockets = bridge_sockets(rig)
        if len(sockets) < 2:
            rig.failures.append(f"a closed connection was not back and subscribed within 15 s (close {turn})")
            break
        # The connection still signed in (the one closed before is back, but signed out).
        victims = [s for s in sockets if s in signed_in(rig)]
        if not victims:
            rig.failures.append(f"close {turn}: no connection left signed in to close")
            break
        status, body = rig.pusher_control(
            "POST", f"/pusher-local/apps/{rig.pusher.app_id}/disconnect?socket_id={victims[0]}&code=4200")
        if status != 200:
            rig.failures.append(f"close {turn}: HTTP {status} {body[:80]!r}")
        time.sleep(2.0)
    time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - outage_started)))
    signed_during = signed_in(rig)
    endpoint.down = False
    back = time.monotonic()
    deadline = back + 31
    while len(signed_in(rig)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    took = time.monotonic() - back
    rig.observations.append(
        f"endpoint answers: {endpoint.answered}; signed in at the end of the outage: {len(signed_during)} of 2; "
        f"both signed in again {took:.2f} s after the endpoint came back")
    if len(signed_in(rig)) < 2:
        rig.failures.append(f"only {len(signed_in(rig))} of 2 connections signed in 31 s after the endpoint came back")
    if len(signed_during) == 2:
        rig.failures.append("both connections were still signed in at the end of the outage: the closes did not test a refused sign-in")
    return [back]


def sign_in_refusals_counted(rig, p2m_reports) -> None:
    no_gap(rig, p2m_reports)
    text = rig.metrics_text()
    refusals = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("pusher_mqtt_bridge_errors_total{") and 'kind="pusher_sign_in"' in line
                   and 'bridge="faults"' in line)
    rig.observations.append(f'errors_total{{kind="pusher_sign_in"}} = {refusals:g}')
    if refusals <= 0:
        rig.failures.append("no refused sign-in was counted in errors_total{kind=\"pusher_sign_in\"}")


def rows(matrix: types.ModuleType) -> list:
    zero = "0 lost, 0 duplicates, order kept, no gap record"
    return [
        matrix.Row("users-auth-endpoint-down",
                   f"connections = 2, sign_in through a user_auth_endpoint: the endpoint answers 503 for {OUTAGE_S:g} s, "
                   "meanwhile each connection is closed once with 4200 (one at a time)",
                   Expectation(0, max_duplicates=0,
                               why=f"docs/contract.md §8.2: a refused sign-in leaves the connection and its channels up, "
                                   f"and the other connection holds every channel during each close: {zero}; "
                                   "refusals counted; both connections signed in again within 30 s of the endpoint's return"),
                   Expectation(0, max_recovery_s=2, why="the HTTP API is not affected: 0 lost, order kept"),
                   endpoint_outage, config=signing_in_through_an_endpoint, check=sign_in_refusals_counted),
    ]
