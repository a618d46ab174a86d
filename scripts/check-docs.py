#!/usr/bin/env python3
"""Docs that cannot drift: every code symbol, file and path the project's own documents name in
backticks exists in the repository; the tables of locks, threads and runtime tasks in
docs/architecture.md list exactly what the code declares; and every shell block of the readers'
documents says which test runs its commands, or why none does; and every relative link leads to a
file and heading that exist.

Run by `make lint` (so by `make test`). Standard library only. Exit 1 with one line per offender.

What counts as a name, in a backticked span:
- a path under one of the repository's top folders (`Sources/...`, `scripts/...`): must exist
  (a `{a,b}` brace list is expanded; spans with `*`, `…` or `<` are patterns, not names);
- a Swift file name (`Outbox.swift`, `+Cluster.swift`): some file in the repository ends so;
- a call (`stop(grace:)`, `Daemon.reload()`): a `func` (or `init`/`case`) of that name is declared;
- a type-like identifier (`BridgeRuntime`, `Outbox.append`): the first part is declared as a type,
  a module, or is in EXTERNAL below (names from our dependencies and the platform, with the reason).
"""
from __future__ import annotations

import itertools
import re
import sys
from pathlib import Path

# `--root DIR` checks another tree (scripts/test-check-docs.sh); the repository by default.
ROOT = (Path(sys.argv[sys.argv.index("--root") + 1]).resolve() if "--root" in sys.argv[:-1]
        else Path(__file__).resolve().parent.parent)
# docs/history/ is a record of past runs (the commands as they were run then), not checked.
DOCS = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if "history" not in p.relative_to(ROOT / "docs").parts),
        *sorted(ROOT.glob("Sources/*/README.md")), *sorted(ROOT.glob("Sources/*/*.docc/*.md"))]
# The documents whose shell blocks must be marked (check_command_blocks). The parts' READMEs in
# Sources/ are not among them yet.
COMMAND_DOCS = [ROOT / "README.md", ROOT / "BENCHMARKS.md", ROOT / "RELIABILITY.md",
                *sorted(p for p in (ROOT / "docs").rglob("*.md") if "history" not in p.relative_to(ROOT / "docs").parts)]
# Reference notes about other projects' code (swift-websocket, libmosquitto, …): they name those
# projects' symbols, which are not ours to check.
REFERENCE_NOTES = {"mqtt-notes.md", "pusher-protocol.md", "swift-stack.md", "style.md"}
CODE_DIRS = ["Sources", "Tests", "Fuzz", "Benchmarks"]
TOP_FOLDERS = ("Sources/", "Tests/", "Fuzz/", "Benchmarks/", "scripts/", "docs/", "contrib/", "debian/", "packaging/", ".ci/")

# Names from dependencies and the platform that our documents may name. Keep each with its home.
EXTERNAL = {
    # Swift standard library, Foundation, Synchronization, Dispatch
    "AsyncStream", "AsyncThrowingStream", "CheckedContinuation", "ContinuousClock", "SuspendingClock", "Duration",
    "Task", "TaskGroup", "Sendable", "Mutex", "Atomic", "Foundation", "FoundationEssentials", "Data", "Date",
    "JSONSerialization", "JSONDecoder", "JSONEncoder", "Codable", "Thread", "DispatchQueue", "ProcessInfo", "String",
    "UInt8", "Int", "Double", "Array", "Dictionary", "Set", "Result", "Error", "Never", "Void", "URL", "InstantProtocol",
    "Hashable", "Hasher", "Synchronization", "Equatable", "Comparable", "CustomStringConvertible", "Substring", "Character", "Unicode",
    # swift-nio, swift-nio-ssl, swift-nio-extras, swift-collections
    "NIO", "NIOCore", "NIOPosix", "NIOSSL", "NIOHTTP1", "NIOWebSocket", "NIOTLS", "EventLoop", "EventLoopGroup",
    "MultiThreadedEventLoopGroup", "Channel", "ChannelHandler", "ChannelPipeline", "ByteBuffer", "NIOThreadPool",
    "NIOSSLClientHandler", "NIOSSLContext", "TLSConfiguration", "NIOLockedValueBox", "NIOAsyncChannel", "Deque",
    "DequeModule", "OrderedCollections", "OrderedDictionary", "OrderedSet", "NIOFileSystem", "HTTPTypes",
    # swift-log, swift-metrics, swift-prometheus, swift-service-lifecycle, swift-argument-parser, swift-crypto
    "Logger", "Logging", "LogHandler", "Metrics", "CoreMetrics", "Counter", "Gauge", "Timer", "Prometheus",
    "PrometheusCollectorRegistry", "PrometheusMetricsFactory", "ServiceLifecycle", "ServiceGroup", "Service",
    "ServiceGroupConfiguration", "UnixSignals", "UnixSignalsSequence", "ArgumentParser", "ParsableCommand",
    "AsyncParsableCommand", "Crypto", "HMAC", "SHA256", "Insecure", "MD5", "gracefulShutdown",
    # hummingbird, hummingbird-websocket, swift-websocket, async-http-client, TOMLKit
    "Hummingbird", "HummingbirdCore", "HummingbirdTLS", "HummingbirdWebSocket", "Router", "Application",
    "WSCore", "WSClient", "WebSocketClient", "WSInternal", "AsyncHTTPClient", "HTTPClient", "TOMLKit", "TOMLTable",
    "WebSocketHandler", "WebSocketClientChannel",  # swift-websocket's WSInternal SPI (PusherWebSocket.swift)
    "FullFoundation",  # hummingbird's package trait
    "range",  # Foundation's String.range(of:)
    "FoundationInternationalization",  # swift-foundation's module
    "MemberImportVisibility",  # a Swift upcoming feature (Package.swift)
    "PusherDelegate",  # PusherSwift's delegate protocol, named as what we do not have
    # systemd unit directives (contrib/ and debian/ units)
    "ExecStartPre", "StateDirectory", "DynamicUser", "ConfigurationDirectory", "LoadCredential",
    # the system libraries and tools
    "libmosquitto", "CMosquitto", "CSodium", "XCTest", "Testing",
}

DECL = re.compile(
    r"\b(?:struct|class|enum|protocol|actor|typealias|extension|associatedtype)\s+([A-Za-z_][A-Za-z0-9_]*)")
FUNC = re.compile(r"\bfunc\s+([A-Za-z_][A-Za-z0-9_]*)|\bcase\s+([a-z][A-Za-z0-9_]*)\s*\(|\b(init)\s*[(<]")
VAR = re.compile(r"\b(?:var|let)\s+([A-Za-z_][A-Za-z0-9_]*)")
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
CALL = re.compile(r"^(?:([A-Z][A-Za-z0-9_]*)\.)?([a-z_][A-Za-z0-9_]*|init)\((?:[a-zA-Z_]+:)*\)$")
TYPE_LIKE = re.compile(r"^([A-Z][a-z0-9]+[A-Za-z0-9]*)(?:<[^>]*>)?(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")


def code_files() -> list[Path]:
    return [p for d in CODE_DIRS for p in (ROOT / d).rglob("*.swift") if ".build" not in p.parts]


def declarations() -> tuple[set[str], set[str], set[str]]:
    types, funcs, names = set(), set(), set()
    for path in code_files():
        text = path.read_text(errors="replace")
        types.update(DECL.findall(text))
        for groups in FUNC.findall(text):
            funcs.update(g for g in groups if g)
        names.update(VAR.findall(text))
    modules = {p.name for p in (ROOT / "Sources").iterdir() if p.is_dir()}
    modules |= {p.name for p in (ROOT / "Tests").iterdir() if p.is_dir()}
    # A Swift file's base name names the file (`OutgoingMessages`), a Python class the tests' tools,
    # an alert the shipped Prometheus rules.
    modules |= {p.stem for p in code_files()}
    for path in [*ROOT.glob("Tests/**/*.py"), *ROOT.glob("Benchmarks/**/*.py"), *ROOT.glob("scripts/*.py")]:
        if ".venv" not in path.parts:
            modules |= set(re.findall(r"^class\s+([A-Za-z_][A-Za-z0-9_]*)", path.read_text(errors="replace"), re.M))
    for path in ROOT.glob("contrib/**/*.yml"):
        modules |= set(re.findall(r"alert:\s*([A-Za-z0-9_]+)", path.read_text()))
    return types | modules, funcs, names


def expand_braces(span: str) -> list[str]:
    parts = re.split(r"(\{[^}]*\})", span)
    choices = [p[1:-1].split(",") if p.startswith("{") else [p] for p in parts]
    return ["".join(c) for c in itertools.product(*choices)]


def all_files() -> list[str]:
    skip = {".build", ".git", ".venv", "node_modules"}
    return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if not skip & set(p.relative_to(ROOT).parts)]


def check_span(span: str, types: set[str], funcs: set[str], names: set[str], files: list[str], corpus: str) -> str | None:
    if any(c in span for c in "*…<> ") and not TYPE_LIKE.match(span):
        return None
    if span.startswith(TOP_FOLDERS):
        for candidate in expand_braces(span.split(":")[0].split("#")[0]):
            if not (ROOT / candidate.rstrip("/")).exists():
                return f"path {candidate!r} does not exist"
        return None
    if span.endswith(".swift") and "/" not in span:
        for candidate in expand_braces(span):
            if not any(f == candidate or f.endswith("/" + candidate) or f.endswith(candidate) and candidate.startswith("+")
                       for f in files):
                return f"no file named {candidate!r}"
        return None
    m = CALL.match(span)
    if m:
        owner, name = m.groups()
        if owner and owner not in types and owner not in EXTERNAL:
            return f"type {owner!r} is not declared"
        if owner in EXTERNAL:
            # A dependency's API named in our docs is one our code calls.
            return None if re.search(rf"\b{name}\b", corpus) else f"our code does not call {name!r}"
        if name not in funcs and name not in EXTERNAL:
            return f"no func {name!r} is declared"
        return None
    m = TYPE_LIKE.match(span)
    if not m:
        return None
    head, *members = re.sub(r"<[^>]*>", "", span).split(".")
    if head not in types and head not in EXTERNAL:
        return f"{head!r} is not declared"
    for member in members:
        if head in EXTERNAL:
            if not re.search(rf"\b{member}\b", corpus):
                return f"our code does not use {head}.{member}"
        elif member not in funcs | names and member not in types:
            return f"{head} has no member {member!r}"
    return None


LOCK_DECL = re.compile(
    r"^(\s*)(?:(?:public|private|fileprivate|internal|package|static|nonisolated)\s+)*(?:let|var)\s+(\w+)\s*"
    r"(?::\s*(?:Locked|Mutex|NIOLockedValueBox)<|=\s*(?:Locked|Mutex|NIOLockedValueBox)(?:<[^=]*>)?\()")
TYPE_DECL = re.compile(
    r"^(\s*)(?:(?:public|private|fileprivate|internal|package|final)\s+)*(?:struct|class|enum|actor|extension)\s+(\w+)")


def code_locks() -> set[tuple[str, str]]:
    """(owner, name) of every lock our sources declare; the owner is the enclosing type (or the file
    for a file-level lock). Benchmark tools are left out."""
    locks = set()
    for path in (ROOT / "Sources").rglob("*.swift"):
        if path.parts[-2] in {"mqtt-bench", "pusher-bench-subscriber", "rules-bench", "spool-bench"}:
            continue
        owners: list[tuple[int, str]] = []
        for line in path.read_text().splitlines():
            if (t := TYPE_DECL.match(line)):
                depth = len(t.group(1))
                owners = [o for o in owners if o[0] < depth] + [(depth, t.group(2))]
            if (m := LOCK_DECL.match(line)):
                depth = len(m.group(1))
                enclosing = [o for o in owners if o[0] < depth]
                locks.add((enclosing[-1][1] if enclosing else path.stem, m.group(2)))
    return locks


def code_threads() -> set[str]:
    """The names of the threads we start (`detachThread(name:)`), up to the first interpolation."""
    names = set()
    for path in (ROOT / "Sources").rglob("*.swift"):
        code = re.sub(r"//.*", "", path.read_text())
        for m in re.finditer(r'detachThread\(name:\s*"([^"\\]*)', code):
            names.add(m.group(1))
        # A name that is not a string literal cannot be checked: it needs a row `?` (and a literal).
        if re.search(r'(?<!func )\bdetachThread\(name:\s*[^"\s]', code):
            names.add("?")
    return names


def code_runtime_tasks() -> set[str]:
    """The child tasks of `BridgeRuntime.run()`, each named by the first call it awaits without
    `self.` (`group.addTask { await self.pusher.runUntilCancelled(…) }` is `pusher.runUntilCancelled`,
    the graceful-shutdown watcher is `gracefulShutdown`). A task that awaits no call is reported as
    `?`, so that it still needs a row."""
    for path in (ROOT / "Sources/BridgeDaemon").rglob("*.swift"):
        body = path.read_text()
        if "final class BridgeRuntime" not in body or "func run() async" not in body:
            continue
        run = body.split("func run() async", 1)[1].split("\n    }\n", 1)[0]
        names = set()
        for start in (m.end() for m in re.finditer(r"\baddTask\s*\{", run)):
            depth, end = 1, start
            while depth and end < len(run):
                depth += {"{": 1, "}": -1}.get(run[end], 0)
                end += 1
            task = re.sub(r"//.*", "", run[start:end])
            call = re.search(r"\bawait\s+(?:self\.)?([A-Za-z_][\w.]*)\s*\(", task)
            names.add(call.group(1) if call else "?")
        return names
    return set()


def table_rows(doc: Path, heading: str) -> list[list[str]] | None:
    """The rows of the first table under `heading` (cells with their backticks removed)."""
    lines = doc.read_text().splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.lstrip("#").strip() == heading)
    except StopIteration:
        return None
    rows, seen_table = [], False
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        if line.startswith("|"):
            seen_table = True
            cells = [c.strip().strip("`") for c in line.strip("|").split("|")]
            if not set(cells[0]) <= set("-: "):
                rows.append(cells)
        elif seen_table:
            break
    return rows[1:]  # without the header


def check_tables() -> list[str]:
    doc = ROOT / "docs/architecture.md"
    problems = []
    checks = [
        ("Locks", lambda rows: {(r[1], r[0]) for r in rows}, code_locks(), "lock (owner, name)"),
        ("Threads", lambda rows: {r[0] for r in rows}, code_threads(), "thread"),
        ("The tasks of a bridge", lambda rows: {r[0] for r in rows}, code_runtime_tasks(), "runtime task"),
    ]
    for heading, from_rows, in_code, what in checks:
        rows = table_rows(doc, heading)
        if rows is None:
            problems.append(f"docs/architecture.md: no section {heading!r} with its table")
            continue
        in_doc = from_rows(rows)
        for item in sorted(in_code - in_doc):
            problems.append(f"docs/architecture.md, {heading}: the code has {what} {item} and the table does not")
        for item in sorted(in_doc - in_code):
            problems.append(f"docs/architecture.md, {heading}: the table lists {what} {item} and the code does not")
    return problems


COMPILED = re.compile(r"<!-- compiled: (\S+) -->")


def check_compiled_examples() -> list[str]:
    """A ```swift block right after `<!-- compiled: PATH -->` must appear in PATH (a file the tests
    compile) line for line: same lines in the same order, leading spaces, blank lines and imports
    aside. So an example that no longer compiles fails the build, and the README cannot drift."""
    problems = []
    for doc in DOCS:
        lines = doc.read_text().splitlines()
        for number, line in enumerate(lines, 1):
            match = COMPILED.search(line)
            if not match:
                continue
            where = f"{doc.relative_to(ROOT)}:{number}"
            target = ROOT / match.group(1)
            if number >= len(lines) or not lines[number].lstrip().startswith("```swift"):
                problems.append(f"{where}: `compiled` must be followed by a ```swift block")
                continue
            if not target.is_file():
                problems.append(f"{where}: {match.group(1)} does not exist")
                continue
            block = []
            for body in lines[number + 1:]:
                if body.lstrip().startswith("```"):
                    break
                block.append(body)

            def significant(text_lines):
                return [x.strip() for x in text_lines if x.strip() and not x.strip().startswith("import ")]

            wanted = significant(block)
            have = significant(target.read_text().splitlines())
            found = any(have[i:i + len(wanted)] == wanted for i in range(len(have) - len(wanted) + 1))
            if not found:
                problems.append(f"{where}: this example is not in {match.group(1)} line for line (regenerate or edit it there)")
    return problems


MARKER = re.compile(r"<!-- commands: (?:run by (\S+)|not run: (.+?)) -->")
SHELL_FENCE = re.compile(r"^\s*```(?:sh|bash|shell|console)\s*$")


def check_command_blocks() -> list[str]:
    """Every ```sh block (also bash, shell, console) in COMMAND_DOCS comes right after a marker:
    `<!-- commands: run by PATH -->`, where PATH is a test that exists and names this document (it
    reads the block and runs it), or `<!-- commands: not run: REASON -->`. So a command that no test
    runs says so where a reader sees it, and a new block without a marker fails the build."""
    problems = []
    for doc in COMMAND_DOCS:
        if not doc.is_file():
            continue
        name = str(doc.relative_to(ROOT))
        lines = doc.read_text().splitlines()
        in_fence = False
        for number, line in enumerate(lines, 1):
            if line.lstrip().startswith("```"):
                opening = not in_fence
                in_fence = not in_fence
                if not opening or not SHELL_FENCE.match(line):
                    continue
                previous = lines[number - 2] if number >= 2 else ""
                match = MARKER.search(previous)
                if not match:
                    problems.append(f"{name}:{number}: a shell block without `<!-- commands: run by TEST -->` "
                                    "or `<!-- commands: not run: REASON -->` on the line before")
                    continue
                test = match.group(1)
                if test is None:
                    continue
                if not (ROOT / test).is_file():
                    problems.append(f"{name}:{number}: the test {test} does not exist")
                elif name not in (ROOT / test).read_text(errors="replace"):
                    problems.append(f"{name}:{number}: {test} does not name {name}, so it cannot read this block")
    return problems


LINK = re.compile(r"\]\(([^)\s]+)\)")


def heading_anchors(doc: Path) -> set[str]:
    """The anchors GitHub gives the headings of `doc`: lower case, punctuation dropped, spaces to
    hyphens, `-1`, `-2`, … for repeats."""
    anchors, seen, in_fence = set(), {}, False
    for line in doc.read_text().splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        elif not in_fence and (m := re.match(r"^#{1,6} (.*)", line)):
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
            seen[slug] = seen.get(slug, 0) + 1
    return anchors


def check_links() -> list[str]:
    """Every relative Markdown link in the documents (docs/history/ included) leads to a file or
    folder that exists, and a `#anchor` into a Markdown file to one of its headings: a section that
    moves cannot leave a link behind."""
    problems = []
    history = sorted((ROOT / "docs/history").glob("*.md")) if (ROOT / "docs/history").is_dir() else []
    for doc in sorted({*DOCS, *COMMAND_DOCS, *history}):
        if not doc.is_file():
            continue
        in_fence = False
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            if line.lstrip().startswith("```"):
                in_fence = not in_fence
                continue
            if in_fence:
                continue
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue
                path, _, anchor = target.partition("#")
                linked = (doc.parent / path).resolve() if path else doc
                where = f"{doc.relative_to(ROOT)}:{number}"
                if not linked.exists():
                    problems.append(f"{where}: the link {target} leads nowhere")
                elif anchor and linked.suffix == ".md" and anchor not in heading_anchors(linked):
                    problems.append(f"{where}: the link {target}: {linked.name} has no heading #{anchor}")
    return problems


def main() -> int:
    types, funcs, names = declarations()
    files = all_files()
    # The code without its comments: a comment naming an API is not a use of it.
    corpus = "\n".join(re.sub(r"//.*", "", p.read_text(errors="replace")) for p in code_files())
    problems = []
    for doc in DOCS:
        if doc.name in REFERENCE_NOTES and doc.parent.name == "docs":
            continue
        in_fence = False
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            if line.lstrip().startswith("```"):
                in_fence = not in_fence
                continue
            if in_fence:
                continue
            for span in SPAN.findall(line):
                problem = check_span(span.strip(), types, funcs, names, files, corpus)
                if problem:
                    problems.append(f"{doc.relative_to(ROOT)}:{number}: `{span}`: {problem}")
    problems += check_tables()
    problems += check_compiled_examples()
    problems += check_command_blocks()
    problems += check_links()
    for p in problems:
        print(p)
    if problems:
        print(f"check-docs: {len(problems)} problem(s) in the docs (fix the doc; for a dependency's name, "
              "add it to EXTERNAL in scripts/check-docs.py)")
        return 1
    print(f"check-docs: every name in {len(DOCS)} documents exists; every shell block in {len(COMMAND_DOCS)} is marked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
