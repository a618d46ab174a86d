"""Which functions the daemon runs when it starts, idles and moves a little traffic: the profile behind
build-support/startup.order (docs/architecture.md "Memory").

    .venv/bin/python Benchmarks/memory/order_profile.py --binary PATH [--out build-support/startup.order]

The daemon (a release build, ideally the static one that is shipped: scripts/order-file.sh) runs
under `valgrind --tool=callgrind --demangle=no` against a mosquitto and a pusher-local of its own,
with the rules of `make bench-memory` (both directions, a `{json:…}` topic, a `where`, a presence
mirror) and metrics on. Once ready it is asked for /metrics and /readyz, moves a few hundred messages
each way, idles 15 s and stops on SIGTERM; callgrind then names every function that ran, in the
order in which it first ran. That list, given to lld as `--symbol-ordering-file`, lays the code a
running daemon needs side by side at the start of .text, so the pages the kernel maps for it (it
maps whole 64–128 KiB runs of a file around each page touched) hold little code that never runs.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

import bench_memory
from bridge_testkit.harness import Bridge, Mosquitto, PusherLocal, free_port, wait_until

# `fn=(12) name`, `cfn=(12) name`: callgrind's compressed names (the name is given once per id).
NAMED = re.compile(r"^c?fn=\((\d+)\) (.+)$")


def executed_functions(callgrind_file: Path) -> list[str]:
    """Every function name in a callgrind output file, in first-appearance order."""
    seen: dict[str, None] = {}
    for line in callgrind_file.read_text(errors="replace").splitlines():
        match = NAMED.match(line)
        if match:
            seen.setdefault(match.group(2), None)
    return list(seen)


def defined_functions(binary: Path) -> set[str]:
    """The function symbols `binary` defines (its symbol table): what lld can place."""
    listing = subprocess.run(["nm", "--defined-only", str(binary)], capture_output=True, text=True, check=True).stdout
    return {fields[2] for fields in (line.split(maxsplit=2) for line in listing.splitlines())
            if len(fields) == 3 and fields[1] in "tTwW"}



def get(url: str):
    try:
        with urllib.request.urlopen(url, timeout=30) as reply:
            reply.read()
    except OSError:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True, type=Path)
    parser.add_argument("--pusher-local", type=Path, default=None, help="pusher-local (default: beside --binary)")
    parser.add_argument("--out", type=Path, default=REPO / "build-support" / "startup.order")
    args = parser.parse_args()
    local = args.pusher_local or args.binary.parent / "pusher-local"
    work = Path(tempfile.mkdtemp(prefix="order-profile-"))
    os.environ["PUSHER_LOCAL_BIN"] = str(local.resolve())
    os.environ["BRIDGE_BIN"] = str(args.binary.resolve())
    pusher = PusherLocal(work).start()
    broker = Mosquitto(work).start()
    metrics_port = free_port()
    out_file = work / "bridge.callgrind"
    bridge = Bridge(work, bench_memory.daemon_config(pusher, broker, work, metrics_port, True, 8), name="order")
    bridge.argv = ["valgrind", "--tool=callgrind", "--demangle=no", "-q", f"--callgrind-out-file={out_file}",
                   *bridge.argv]
    try:
        bridge.start()
        wait_until(lambda: not bridge.running() or bench_memory.ready(metrics_port), 600, 0.5, "/readyz 200 under callgrind")
        if not bridge.running():
            raise RuntimeError(f"daemon exited:\n{bridge.log()[-2000:]}")
        get(f"http://127.0.0.1:{metrics_port}/metrics")
        bench_memory.fill_p2m(pusher, 300, 100)
        bench_memory.fill_m2p(broker.port, 300, 100)
        time.sleep(15)
        get(f"http://127.0.0.1:{metrics_port}/metrics")
        get(f"http://127.0.0.1:{metrics_port}/readyz")
        bridge.stop(signal.SIGTERM, timeout=300)
    finally:
        for process in (bridge, broker, pusher):
            process.stop()
    names = defined_functions(args.binary) & set(executed_functions(out_file))
    # Sorted, not in the order they first ran (which varies with thread timing): two profiles of one
    # commit give one file, and what counts for memory is that these functions sit together.
    args.out.write_text("\n".join(sorted(names)) + "\n")
    print(f"order-profile: {len(names)} functions -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
