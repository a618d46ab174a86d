#!/usr/bin/env bash
# Tests of scripts/check-docs.py (run by `make lint`): a small tree whose docs match its code must
# pass; a doc naming a type the code lacks, a lock, thread or runtime task added to the code
# without a table row, a row the code does not have, and a shell block without its marker (or
# naming a test that is missing or does not name the document), and a link to a missing file or
# heading must each fail and name the offender.
# No network, no build; well under a second.
set -euo pipefail
check="$(cd "$(dirname "$0")" && pwd)/check-docs.py"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

fail() {
    echo "test-check-docs: FAIL: $*"
    failures=$((failures + 1))
}

# A tree whose architecture.md lists exactly its one lock, one thread and two runtime tasks.
clean_tree() {
    local tree=$1
    mkdir -p "$tree/Sources/BridgeDaemon" "$tree/Sources/Locking" "$tree/Tests" "$tree/docs"
    cat >"$tree/Sources/BridgeDaemon/BridgeRuntime.swift" <<'SWIFT'
final class BridgeRuntime {
    let decisions = Locked(0)

    func run() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.consume() }
            group.addTask { await self.mqtt.run() }
        }
    }

    func consume() async {}
}
SWIFT
    cat >"$tree/Sources/Locking/Worker.swift" <<'SWIFT'
struct Worker {
    func start() { _ = detachThread(name: "worker-\(id)") {} }
}
SWIFT
    cat >"$tree/README.md" <<'MD'
The runtime is `BridgeRuntime`; it calls `consume()`.
MD
    cat >"$tree/docs/architecture.md" <<'MD'
# Architecture

## Locks

| lock | owner | guards |
|---|---|---|
| `decisions` | `BridgeRuntime` | everything |

## Threads

| thread | started by |
|---|---|
| `worker-` | `Worker` |

### The tasks of a bridge

| task | what |
|---|---|
| `consume` | consumes |
| `mqtt.run` | the client |
MD
}

# Runs the check on `tree`; sets `output` and `status`.
run() {
    status=0
    output=$(python3 "$check" --root "$1" 2>&1) || status=$?
}

# expect_failure NAME TREE TEXT: the check fails on TREE and its output contains TEXT.
expect_failure() {
    run "$2"
    if [ "$status" -eq 0 ]; then
        fail "$1: passed"
    elif ! grep -qF -- "$3" <<<"$output"; then
        fail "$1: output does not name '$3': $output"
    fi
}

fresh() {
    rm -rf "$work/tree"
    clean_tree "$work/tree"
}

fresh
run "$work/tree"
[ "$status" -eq 0 ] || fail "a tree whose docs match its code: $output"

# A README example marked `compiled` must appear, line for line, in the file the tests compile.
fresh
mkdir -p "$work/tree/Tests/Examples"
printf 'enum E {\n    static func f() {\n        let x = 1\n        print(x)\n    }\n}\n' >"$work/tree/Tests/Examples/E.swift"
printf '\n<!-- compiled: Tests/Examples/E.swift -->\n```swift\nimport Foundation\nlet x = 1\nprint(x)\n```\n' >>"$work/tree/README.md"
run "$work/tree"
[ "$status" -eq 0 ] || fail "a compiled example that is in its file: $output"
sed -i 's/^print(x)$/print(x + 1)/' "$work/tree/README.md"
expect_failure "a compiled example that drifted" "$work/tree" "this example is not in Tests/Examples/E.swift line for line"

fresh
echo 'The runtime hands work to `MissingType`.' >>"$work/tree/README.md"
expect_failure "a missing name" "$work/tree" "'MissingType' is not declared"

fresh
echo 'It calls `vanished()`.' >>"$work/tree/docs/architecture.md"
expect_failure "a missing func" "$work/tree" "no func 'vanished' is declared"

fresh
sed -i 's/    let decisions = Locked(0)/    let decisions = Locked(0)\n    private let extra: Locked<Int>/' "$work/tree/Sources/BridgeDaemon/BridgeRuntime.swift"
expect_failure "an extra lock" "$work/tree" "the code has lock (owner, name) ('BridgeRuntime', 'extra')"

fresh
sed -i '/^| `decisions` /d' "$work/tree/docs/architecture.md"
expect_failure "a missing lock row" "$work/tree" "the code has lock (owner, name) ('BridgeRuntime', 'decisions') and the table does not"

fresh
sed -i 's/^| `worker-` .*/| `worker-` | `Worker` |\n| `ghost` | nobody |/' "$work/tree/docs/architecture.md"
expect_failure "a thread row without code" "$work/tree" "the table lists thread ghost and the code does not"

fresh
sed -i 's/{} }/{}; _ = detachThread(name: "sync") {} }/' "$work/tree/Sources/Locking/Worker.swift"
expect_failure "a thread without a row" "$work/tree" "the code has thread sync"

fresh
sed -i '/^| `mqtt.run` /d' "$work/tree/docs/architecture.md"
expect_failure "a missing task row" "$work/tree" "the code has runtime task mqtt.run"

fresh
sed -i 's/            group.addTask { await self.mqtt.run() }/&\n            group.addTask {\n                guard (try? await gracefulShutdown()) != nil else { return }\n            }/' \
    "$work/tree/Sources/BridgeDaemon/BridgeRuntime.swift"
expect_failure "a runtime task without a row" "$work/tree" "the code has runtime task gracefulShutdown"

fresh
sed -i 's/^### The tasks of a bridge/### Tasks/' "$work/tree/docs/architecture.md"
expect_failure "a missing section" "$work/tree" "no section 'The tasks of a bridge'"

# Shell blocks in the readers' documents say which test runs them, or why none does.
fresh
mkdir -p "$work/tree/Tests/e2e" "$work/tree/docs/guide" "$work/tree/docs/history"
printf '"""Runs the blocks of docs/guide/tour.md."""\n' >"$work/tree/Tests/e2e/test_tour.py"
printf '# Tour\n\n<!-- commands: run by Tests/e2e/test_tour.py -->\n```sh\nmake run\n```\n\n<!-- commands: not run: needs root -->\n```sh\nsudo make install\n```\n' \
    >"$work/tree/docs/guide/tour.md"
printf '# Old runs\n\n```sh\nmake bench\n```\n' >"$work/tree/docs/history/runs.md"
run "$work/tree"
[ "$status" -eq 0 ] || fail "marked shell blocks, and an unmarked one in docs/history/: $output"
printf '\n```bash\nmake test\n```\n' >>"$work/tree/docs/guide/tour.md"
expect_failure "an unmarked shell block in a subfolder of docs/" "$work/tree" "docs/guide/tour.md:13: a shell block without"

fresh
mkdir -p "$work/tree/Tests/e2e"
printf '"""Runs nothing of the README."""\n' >"$work/tree/Tests/e2e/test_other.py"
printf '\n<!-- commands: run by Tests/e2e/test_other.py -->\n```sh\nmake run\n```\n' >>"$work/tree/README.md"
expect_failure "a test that does not name the document" "$work/tree" "Tests/e2e/test_other.py does not name README.md"
sed -i 's|test_other.py -->|test_gone.py -->|' "$work/tree/README.md"
expect_failure "a test that does not exist" "$work/tree" "the test Tests/e2e/test_gone.py does not exist"

fresh
printf '\n```sh\nmake run\n```\n' >>"$work/tree/BENCHMARKS.md"
expect_failure "an unmarked shell block in BENCHMARKS.md" "$work/tree" "BENCHMARKS.md:2: a shell block without"

# Relative links lead to files and headings that exist.
fresh
printf '\nSee [the tasks](docs/architecture.md#the-tasks-of-a-bridge) and [locks](docs/architecture.md#locks).\n' >>"$work/tree/README.md"
run "$work/tree"
[ "$status" -eq 0 ] || fail "links to headings that exist: $output"
printf 'See [the guide](docs/guide.md).\n' >>"$work/tree/README.md"
expect_failure "a link to a file that does not exist" "$work/tree" "the link docs/guide.md leads nowhere"

fresh
printf '\nSee [moved](docs/architecture.md#threads-and-tasks).\n' >>"$work/tree/README.md"
expect_failure "a link to a heading that does not exist" "$work/tree" "architecture.md has no heading #threads-and-tasks"

if [ "$failures" -gt 0 ]; then
    echo "test-check-docs: $failures failure(s)"
    exit 1
fi
echo "test-check-docs: every case behaves"
