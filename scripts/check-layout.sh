#!/usr/bin/env bash
# `make lint` (and so `make test`): the layout rules of issue 27 ("Show it"), checked on the tree.
# Each rule names its offenders; an enforced rule with offenders fails the check, a pending one only
# prints its count (the lead switches a rule on once the work that fixes it is merged).
#
#   scripts/check-layout.sh [--root DIR]    check DIR (default: this repository)
#   LAYOUT_ENFORCED="rule …" scripts/check-layout.sh   enforce these rules instead (tests)
#
# Tests: scripts/test-check-layout.sh (a temporary tree that breaks every rule), run by `make lint`.
set -euo pipefail

# ── The one place that says which rules are enforced ─────────────────────────────────────────────
# Every rule is listed once, in ENFORCED or in PENDING (a rule being introduced: its offenders are
# printed, the check passes). Since the renovation (issue 27) every rule is enforced.
ENFORCED="generated-files execute-default sys-path-insert sleep-polling file-size lock-count"
PENDING=""
# ──────────────────────────────────────────────────────────────────────────────────────────────────

MAX_LINES=400
MAX_LOCK_LINES=9

root="$(cd "$(dirname "$0")/.." && pwd)"
if [[ "${1:-}" == "--root" ]]; then
    root="$(cd "$2" && pwd)"
fi
if [[ -n "${LAYOUT_ENFORCED+set}" ]]; then
    ENFORCED="$LAYOUT_ENFORCED"
    PENDING=""
    for rule in file-size sleep-polling lock-count sys-path-insert generated-files execute-default; do
        [[ " $ENFORCED " == *" $rule "* ]] || PENDING="$PENDING $rule"
    done
fi
cd "$root"

# Why each rule exists (printed with its offenders).
why() {
    case "$1" in
    file-size) echo "no file in Sources/ over $MAX_LINES lines: a file holds one concern, found by its name (docs/architecture.md, \"Modules and dependencies\": folder = part; issue 27)" ;;
    sleep-polling) echo "no Task.sleep(for: .milliseconds(…)/.seconds(…)) in Sources/BridgeDaemon: waits end on an event or on a deadline a machine gave, never by polling (docs/architecture.md, \"How decisions and I/O are split\"; issue 27)" ;;
    lock-count) echo "at most $MAX_LOCK_LINES locks created (Locked(…) or Locked<…>(…)) in Sources/BridgeDaemon: one lock around each machine, not one per field; a stored reference to a lock made elsewhere (let x: Locked<T>) is not another lock (docs/architecture.md, \"Locks\"; issue 27)" ;;
    sys-path-insert) echo "no sys.path.insert in tracked .py files: the Python harness is one package (issue 27, \"The runtime tested in process\")" ;;
    generated-files) echo "no generated files (*.order, *.profdata, *.generated.*) in Sources/: they live in build-support/ (build-support/README.md)" ;;
    execute-default) echo "no default: in a func execute of Sources/BridgeDaemon: the executor switches over every action, so a new action is a compile error, not a silent no-op (docs/architecture.md, \"How decisions and I/O are split\")" ;;
    *)
        echo "check-layout: unknown rule '$1'" >&2
        exit 2
        ;;
    esac
}

swift_files() { [[ -d "$1" ]] && find "$1" -name '*.swift' -type f | LC_ALL=C sort || true; }

# Each rule prints its offenders, one a line.
rule_file-size() {
    swift_files Sources | while IFS= read -r file; do
        lines=$(wc -l <"$file")
        if ((lines > MAX_LINES)); then echo "$file: $lines lines"; fi
    done
}

rule_sleep-polling() {
    [[ -d Sources/BridgeDaemon ]] || return 0
    grep -rnE --include='*.swift' 'Task\.sleep\(for: \.(milliseconds|seconds)\(' Sources/BridgeDaemon || true
}

rule_lock-count() {
    [[ -d Sources/BridgeDaemon ]] || return 0
    local count
    local created='Locked(<[^=]*>)?\('
    count=$(grep -rE --include='*.swift' "$created" Sources/BridgeDaemon | grep -cvE '^[^:]*:[[:space:]]*//' || true)
    if ((count > MAX_LOCK_LINES)); then
        grep -rnE --include='*.swift' "$created" Sources/BridgeDaemon | grep -vE '^[^:]*:[0-9]+:[[:space:]]*//'
    fi
}

rule_sys-path-insert() {
    local files
    if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        files=$(git ls-files -- '*.py')
    else
        files=$(find . -name '*.py' -type f -not -path './.build*' | sed 's|^\./||')
    fi
    [[ -n "$files" ]] || return 0
    # shellcheck disable=SC2086  # one file name a word (no spaces in this repository's names)
    grep -nF 'sys.path.insert' $files /dev/null || true
}

rule_generated-files() {
    [[ -d Sources ]] || return 0
    find Sources -type f \( -name '*.order' -o -name '*.profdata' -o -name '*.generated.*' \) | LC_ALL=C sort
}

rule_execute-default() {
    swift_files Sources/BridgeDaemon | while IFS= read -r file; do
        # The body of each `func execute(`/`func execute<`: from its line to the brace that closes it.
        awk -v file="$file" '
            !inside && /func execute[(<]/ { inside = 1; depth = 0; opened = 0 }
            inside {
                if ($0 ~ /^[ \t]*default[ \t]*:/) print file ":" FNR ": " $0
                line = $0
                opens = gsub(/\{/, "", line); closes = gsub(/\}/, "", line)
                depth += opens - closes
                if (opens > 0) opened = 1
                if (opened && depth <= 0) inside = 0
            }' "$file"
    done
}

failed=0
report() {
    local status=$1 rule=$2 offenders=$3
    local count
    count=$(printf '%s\n' "$offenders" | grep -c . || true)
    if [[ $status == enforced ]]; then
        if ((count > 0)); then
            echo "check-layout: FAIL $rule ($count): $(why "$rule")"
            printf '%s\n' "$offenders" | sed 's/^/    /'
            failed=1
        fi
    else
        echo "check-layout: pending (issue 27) $rule: $count offending line(s) — $(why "$rule")"
    fi
}

for rule in $ENFORCED; do
    why "$rule" >/dev/null
    report enforced "$rule" "$("rule_$rule")"
done
for rule in $PENDING; do
    why "$rule" >/dev/null
    report pending "$rule" "$("rule_$rule")"
done
if ((failed)); then
    echo "check-layout: failed (rules and their reasons above; the list of enforced rules is at the top of scripts/check-layout.sh)"
    exit 1
fi
echo "check-layout: ok (enforced: $ENFORCED)"
