#!/usr/bin/env bash
# Tests of scripts/check-layout.sh (run by `make lint`): a temporary tree that breaks each rule once
# must fail that rule and name the offender; the same tree just inside every limit must pass with
# every rule enforced; a pending rule only reports. No network, no build; about a second.
set -euo pipefail
check="$(cd "$(dirname "$0")" && pwd)/check-layout.sh"
all="file-size sleep-polling lock-count sys-path-insert generated-files execute-default"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

fail() {
    echo "test-check-layout: FAIL: $*"
    failures=$((failures + 1))
}

# A tree inside every limit: 400 lines, 9 lock lines, a sleep until a deadline, `default:` outside
# `execute`, sys.path.insert only in an untracked file, a hand-written config next to the code.
clean_tree() {
    local tree=$1
    mkdir -p "$tree/Sources/BridgeDaemon" "$tree/Sources/Tool" "$tree/Tests"
    for _ in $(seq 400); do echo "// line"; done >"$tree/Sources/Tool/Long.swift"
    for i in $(seq 9); do echo "let lock$i = Locked(0)"; done >"$tree/Sources/BridgeDaemon/Locks.swift"
    cat >"$tree/Sources/BridgeDaemon/Runtime.swift" <<'EOF'
struct Runtime {
    func execute(_ action: Action) {
        switch action {
        case .a: break
        case .b: break
        }
    }

    func executeBatched(_ actions: [Action]) {
        switch actions.first {
        case .some: break
        default: break
        }
    }

    func wait(until deadline: ContinuousClock.Instant) async {
        try? await Task.sleep(until: deadline)
    }
}
EOF
    echo "link-as-needed" >"$tree/Sources/Tool/link-as-needed.cfg"
    echo "import sys" >"$tree/Tests/tool.py"
    git -C "$tree" init -q
    git -C "$tree" add -A
    echo "import sys; sys.path.insert(0, '.')" >"$tree/Tests/untracked.py"
}

# Runs the check on a tree with the rules given enforced; sets `output` and `status`.
run() {
    local tree=$1 rules=$2
    status=0
    output=$(LAYOUT_ENFORCED="$rules" "$check" --root "$tree" 2>&1) || status=$?
}

tree="$work/clean"
clean_tree "$tree"
run "$tree" "$all"
[[ $status == 0 ]] || fail "a tree inside every limit failed: $output"

# Each violation on its own copy of the clean tree: only its rule fails, naming the offender.
violate() {
    local rule=$1 expected=$2
    local tree="$work/$rule"
    rm -rf "$tree"
    clean_tree "$tree"
    case "$rule" in
    file-size) echo "// one more" >>"$tree/Sources/Tool/Long.swift" ;;
    sleep-polling) echo "func poll() async { try? await Task.sleep(for: .milliseconds(10)) }" >"$tree/Sources/BridgeDaemon/Poll.swift" ;;
    lock-count) echo "let lock10 = Locked<Int>(0)" >>"$tree/Sources/BridgeDaemon/Locks.swift" ;;
    sys-path-insert)
        echo "import sys; sys.path.insert(0, '.')" >>"$tree/Tests/tool.py"
        git -C "$tree" add Tests/tool.py
        ;;
    generated-files) echo "\$s1f" >"$tree/Sources/Tool/startup.order" ;;
    execute-default)
        sed -i 's/        case .b: break/        default: break/' "$tree/Sources/BridgeDaemon/Runtime.swift"
        ;;
    esac
    run "$tree" "$all"
    [[ $status == 1 ]] || fail "$rule: exit status $status, expected 1: $output"
    grep -q "FAIL $rule " <<<"$output" || fail "$rule: not reported as failing: $output"
    grep -qF "$expected" <<<"$output" || fail "$rule: offender '$expected' not named: $output"
    local others
    others=$(grep "FAIL " <<<"$output" | grep -v "FAIL $rule " || true)
    [[ -z "$others" ]] || fail "$rule: other rules failed too: $others"
    # Pending, the same violation is reported with its count and does not fail the check.
    run "$tree" ""
    [[ $status == 0 ]] || fail "$rule: failed while pending: $output"
    grep -q "pending (issue 27) $rule: [1-9]" <<<"$output" || fail "$rule: pending count not printed: $output"
}

violate file-size "Sources/Tool/Long.swift: 401 lines"
violate sleep-polling "Sources/BridgeDaemon/Poll.swift:1:"
violate lock-count "let lock10 = Locked<Int>(0)"
violate sys-path-insert "Tests/tool.py:2:"
violate generated-files "Sources/Tool/startup.order"
violate execute-default "Sources/BridgeDaemon/Runtime.swift:5:"

# An unknown rule is an error, not a pass.
run "$tree" "no-such-rule"
[[ $status == 2 ]] || fail "an unknown rule gave status $status: $output"

if ((failures > 0)); then
    echo "test-check-layout: $failures failure(s)"
    exit 1
fi
echo "test-check-layout: ok (6 rules, each violated once, plus a clean tree)"
