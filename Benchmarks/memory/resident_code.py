"""`make bench-memory STATIC=1` (after its other readings): which code of the daemon's binary is resident when it is idle, by
module — so that "idle RSS is code" comes with the weight of each dependency (issue 16: idle RSS
≤ 20 MB; docs/history/benchmarks.md "Memory").

    .venv/bin/python Benchmarks/memory/resident_code.py --bin-dir .build-deb/release [--runs 3]
        [--out Benchmarks/results/memory/static]

The daemon runs as in `make bench-memory`'s idle reading (Benchmarks/memory/bench_memory.py: a
fresh mosquitto, pusher-local, one bridge with four rules and a presence mirror, metrics on) and
is read 10 s after `/readyz` answered 200. Then, as root:

- `/proc/PID/maps` gives where the binary is mapped, and `/proc/PID/pagemap` which of its pages
  are present (bit 63): exactly the pages `VmRSS` counts for the binary;
- `readelf -SW` gives each section's address range, and `nm -nS --defined-only` each symbol's;
- a present page is split between the symbols it holds (by bytes), and each symbol goes to what
  defines it: the module whose build folder holds the object (`<bin-dir>/<Module>.build/*.o`),
  else the toolchain's static archive (`libFoundation.a`, `libswiftCore.a`, …); modules are then
  grouped (swift-nio, swift-nio-ssl with its BoringSSL, Foundation with CoreFoundation and ICU, …).
  A page or part of one without symbols goes to its section. Pages are resident because code ran
  on them or because the kernel mapped them around a fault (fault-around, 64 KiB): a symbol's
  share says what lies on resident pages, not that it ran.

Only the binary's own mappings are read: the shared libraries it loads (libc, libstdc++, libcrypto
for libmosquitto, …) are listed by `make bench-memory` already. Writes resident-code.json and
resident-code.md to --out; prints the markdown.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

from bench_memory import bench_commit, daemon_config, start_and_settle, status_kb, write_results
from bridge_testkit.harness import Bridge, Mosquitto, PusherLocal, free_port

PAGE = os.sysconf("SC_PAGE_SIZE")
TOP_SYMBOLS = 25  # the largest resident symbols kept per module in resident-code.json

# Where a symbol comes from decides its owner: the build folder of the object that defines it
# (`<bin-dir>/<Module>.build/*.o`), else the toolchain's static archive (`swift_static/linux/*.a`).
# Modules are then grouped into what a reader would remove or keep together.
GROUPS = [
    (re.compile(r"^(NIO|_NIO|CNIO)(?!SSL|BoringSSL)"), "swift-nio (+extras, +http2, +websocket)"),
    (re.compile(r"^(NIOSSL|NIOTLS|CNIOBoringSSL)"), "swift-nio-ssl (+ its BoringSSL)"),
    (re.compile(r"^(Crypto|_Crypto|CCryptoBoringSSL|CryptoBoringWrapper)"), "swift-crypto (+ its BoringSSL)"),
    (re.compile(r"^(Hummingbird|HTTPTypes)"), "Hummingbird + swift-http-types"),
    (re.compile(r"^(TOMLKit|CTOML)$"), "TOMLKit (+ toml++)"),
    (re.compile(r"^(PusherChannels|PusherProtocol|MosquittoClient|MQTTVocabulary|BridgeCore|BridgeDaemon|"
                r"Durability|Backoff|Locking|pusher_mqtt_bridge|CMosquitto|CSodium)$"), "our modules"),
    (re.compile(r"^lib(swiftCore|swift_Concurrency|swift_StringProcessing|swift_RegexParser|swiftSynchronization|"
                r"swiftGlibc|swiftRuntime)\.a$"), "Swift standard library, runtime, concurrency"),
    (re.compile(r"^lib(dispatch|swiftDispatch|BlocksRuntime)\.a$"), "libdispatch"),
    (re.compile(r"^lib(FoundationEssentials|_FoundationCShims|_FoundationCollections)\.a$"), "FoundationEssentials"),
    (re.compile(r"^lib(Foundation|CoreFoundation|FoundationInternationalization|_FoundationICU)\.a$"),
     "Foundation, CoreFoundation, ICU"),
]


def owners(bin_dir: Path) -> dict[str, str]:
    """Symbol name → the module (`X.build`) or toolchain archive (`libX.a`) that defines it."""
    table: dict[str, str] = {}
    objects = sorted(bin_dir.glob("*.build/**/*.o"))
    for chunk in range(0, len(objects), 500):
        batch = objects[chunk:chunk + 500]
        out = subprocess.run(["nm", "-A", "--defined-only", *map(str, batch)], capture_output=True, text=True).stdout
        for line in out.splitlines():
            path, _, rest = line.partition(":")
            parts = rest.split()
            if len(parts) == 3 and path.startswith(str(bin_dir)):
                module = Path(path).relative_to(bin_dir).parts[0].removesuffix(".build")
                table.setdefault(parts[2], module)
    info = json.loads(subprocess.run(["swiftc", "-print-target-info"], capture_output=True, text=True,
                                     check=True).stdout)
    toolchain = Path(info["paths"]["runtimeResourcePath"] + "_static") / "linux"
    # A generic specialization can be defined (weak) in several archives; the full Foundation's are
    # read last so that such a symbol is counted where it is usually taken from.
    full_foundation = re.compile(r"^lib(Foundation|CoreFoundation|FoundationInternationalization|_FoundationICU|"
                                 r"FoundationNetworking|FoundationXML)\.a$")
    for archive in sorted(toolchain.glob("*.a"), key=lambda a: (bool(full_foundation.match(a.name)), a.name)):
        out = subprocess.run(["nm", "--defined-only", str(archive)], capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3:
                table.setdefault(parts[2], archive.name)
    return table


def group(owner: str) -> str:
    for pattern, label in GROUPS:
        if pattern.match(owner):
            return label
    return owner


def sections(binary: Path) -> list[tuple[int, int, str]]:
    """(start, end, name) of every allocated section, by link-time address."""
    out = subprocess.run(["readelf", "-SW", str(binary)], check=True, capture_output=True, text=True).stdout
    result = []
    for line in out.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\S+\s+(\S*)", line)
        if m and "A" in m.group(4):
            start, size = int(m.group(2), 16), int(m.group(3), 16)
            if start and size:
                result.append((start, start + size, m.group(1)))
    return sorted(result)


def symbols(binary: Path) -> list[tuple[int, int, str]]:
    """(start, end, name) of every defined symbol with a size, by address."""
    out = subprocess.run(["nm", "-nS", "--defined-only", str(binary)], check=True, capture_output=True,
                         text=True).stdout
    result = []
    for line in out.splitlines():
        parts = line.split(maxsplit=3)
        if len(parts) == 4:
            start, size = int(parts[0], 16), int(parts[1], 16)
            if size:
                result.append((start, start + size, parts[3]))
    return result


def present_pages(pid: int, binary: Path) -> tuple[list[int], int]:
    """The link-time addresses of the binary's pages present in `pid`, and the load bias."""
    maps = []
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[5] == str(binary):
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            maps.append((lo, hi, int(fields[2], 16)))
    if not maps:
        raise RuntimeError(f"{binary} is not mapped in {pid}")
    # PIE: the first mapping (file offset 0) sits at the load bias (the ELF's first segment is at 0).
    bias = min(lo - off for lo, _, off in maps)
    pages = []
    with open(f"/proc/{pid}/pagemap", "rb") as pagemap:
        for lo, hi, _ in maps:
            pagemap.seek(lo // PAGE * 8)
            entries = pagemap.read((hi - lo) // PAGE * 8)
            for i, (entry,) in enumerate(struct.iter_unpack("<Q", entries)):
                if entry >> 63:
                    pages.append(lo + i * PAGE - bias)
    return pages, bias


def attribute(pages: list[int], syms: list[tuple[int, int, str]], secs: list[tuple[int, int, str]],
              table: dict[str, str]):
    """KiB per owner and per section over the present pages, and the resident bytes of each symbol."""
    by_owner: dict[str, float] = {}
    by_symbol: dict[str, int] = {}
    by_section: dict[str, float] = {}
    starts = [s[0] for s in syms]
    sec_starts = [s[0] for s in secs]
    for page in pages:
        end = page + PAGE
        claimed = 0
        # Symbols can start before the page: step back over the ones that may reach into it.
        i = max(0, bisect.bisect_left(starts, page) - 64)
        while i < len(syms) and syms[i][0] < end:
            lo, hi, name = syms[i]
            overlap = min(hi, end) - max(lo, page)
            if overlap > 0:
                owner = group(table.get(name, "(not found in the build)"))
                by_owner[owner] = by_owner.get(owner, 0) + overlap / 1024
                by_symbol[name] = by_symbol.get(name, 0) + overlap
                claimed += overlap
            i += 1
        j = bisect.bisect_right(sec_starts, page) - 1
        section = secs[j][2] if j >= 0 and secs[j][0] <= page < secs[j][1] else "(between sections)"
        by_section[section] = by_section.get(section, 0) + PAGE / 1024
        rest = max(0, PAGE - claimed)
        if rest:
            key = f"no symbol ({section})"
            by_owner[key] = by_owner.get(key, 0) + rest / 1024
    return by_owner, by_section, by_symbol


def one_run(pusher: PusherLocal, bin_dir: Path, workdir: Path, index: int, syms, secs, table) -> dict:
    wd = workdir / f"idle-{index}"
    wd.mkdir()
    broker = Mosquitto(wd).start()
    metrics_port = free_port()
    bridge = Bridge(wd, daemon_config(pusher, broker, wd, metrics_port, True, 64), name=f"bridge-idle-{index}")
    binary = (bin_dir / "pusher-mqtt-bridge").resolve()
    try:
        start_and_settle(bridge, metrics_port)
        pages, _ = present_pages(bridge.pid, binary)
        vmrss = status_kb(bridge.pid)["VmRSS"]
    finally:
        bridge.stop()
        broker.stop()
    by_owner, by_section, by_symbol = attribute(pages, syms, secs, table)
    top: dict[str, list] = {}
    for name, size in sorted(by_symbol.items(), key=lambda kv: -kv[1]):
        owner = top.setdefault(group(table.get(name, "(not found in the build)")), [])
        if len(owner) < TOP_SYMBOLS:
            owner.append([name, size])
    return {"vmrss_kib": vmrss, "binary_resident_kib": len(pages) * PAGE // 1024,
            "by_owner": by_owner, "by_section": by_section, "top_symbols": top}


def median_table(runs: list[dict], key: str) -> list[tuple[str, float]]:
    names = set().union(*(r[key] for r in runs))
    rows = [(n, statistics.median(r[key].get(n, 0) for r in runs)) for n in names]
    return sorted(rows, key=lambda kv: -kv[1])


def markdown(doc: dict) -> str:
    runs = doc["runs"]
    lines = [f"# Resident code of the idle daemon — commit {doc['commit']}", "",
             f"`Benchmarks/memory/resident_code.py --bin-dir {doc['bin_dir']}`: {len(runs)} runs, medians; "
             f"the binary is {doc['binary_bytes'] / 2**20:.1f} MiB on disk.", "",
             f"VmRSS {statistics.median(r['vmrss_kib'] for r in runs) / 1024:.1f} MiB, of it the binary's own pages "
             f"{statistics.median(r['binary_resident_kib'] for r in runs) / 1024:.1f} MiB.", "",
             "## The binary's resident pages by module", "", "| module | resident KiB | share |", "|---|---|---|"]
    total = statistics.median(r["binary_resident_kib"] for r in runs)
    for name, kib in median_table(runs, "by_owner"):
        if kib >= 4:
            lines.append(f"| {name} | {kib:,.0f} | {100 * kib / total:.1f} % |")
    lines += ["", "## … and by section", "", "| section | resident KiB |", "|---|---|"]
    for name, kib in median_table(runs, "by_section"):
        if kib >= 4:
            lines.append(f"| {name} | {kib:,.0f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", default=str(REPO / ".build-deb" / "release"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "Benchmarks" / "results" / "memory" / "static"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        ap.error("reading another process's /proc/PID/pagemap frame bits needs root")
    bin_dir = Path(args.bin_dir).resolve()
    binary = bin_dir / "pusher-mqtt-bridge"
    os.environ["PUSHER_LOCAL_BIN"] = str(bin_dir / "pusher-local")
    os.environ["BRIDGE_BIN"] = str(binary)
    syms, secs, table = symbols(binary), sections(binary), owners(bin_dir)
    workdir = Path(tempfile.mkdtemp(prefix="resident-code-"))
    pusher = PusherLocal(workdir, extra=["--activity-timeout", "30", "--log-level", "warning"]).start()
    try:
        runs = [one_run(pusher, bin_dir, workdir, i, syms, secs, table) for i in range(args.runs)]
    finally:
        pusher.stop()
    doc = {"commit": bench_commit(), "bin_dir": os.path.relpath(bin_dir, REPO),
           "binary_bytes": binary.stat().st_size, "runs": runs}
    write_results(Path(args.out), "resident-code", doc, markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
