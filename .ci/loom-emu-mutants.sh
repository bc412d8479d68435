#!/usr/bin/env bash
# Shows that emu's loom models (backends/emu/src/queue/loom_models.rs) catch
# bugs in the queue protocol: runs them on the real protocol (they must pass),
# then on each seeded bug below (each must fail), restoring the file after.
# Not run by CI (a `--cfg loom` build of the workspace's dependencies).
#
#   bash .ci/loom-emu-mutants.sh
set -uo pipefail
cd "$(dirname "$0")/.."

export RUSTFLAGS="--cfg loom"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/loom}"
export CARGO_INCREMENTAL=0
F=backends/emu/src/queue/protocol.rs
backup=$(mktemp)
cp "$F" "$backup"
trap 'cp "$backup" "$F"; rm -f "$backup"' EXIT

models() {
    cargo test -p opal-emu --lib loom -- --test-threads=1 > "$1" 2>&1
}

log=$(mktemp)
if ! models "$log"; then
    tail -n 40 "$log"
    echo "the models fail on the unmodified protocol"
    exit 1
fi
echo "unmodified protocol: $(grep -c '\.\.\. ok$' "$log") models pass"

# name | perl substitution over the protocol's source
mutants=(
    'the worker retires a job without notifying waiters|s/(get_or_insert\(e\.to_string\(\)\);\n\s*\}\n)\s*self\.cv\.notify_all\(\);/$1/'
    'a stream counts as idle while its job still runs|s/self\.items\.is_empty\(\) && !self\.busy/self.items.is_empty()/'
    'a wait on an event lets its stream pass before the record|s/if !st\.event_done\(event, gen\) \{\n\s*break;\n\s*\}//'
    'recording an event completes it at once|s/(e\.recorded \+= 1;)/$1\n            e.done = e.recorded;/'
    'a synchronous call takes its ticket as retired one job early|s/jobs_retired < ticket/jobs_retired + 1 < ticket/'
)

survived=0
for m in "${mutants[@]}"; do
    name=${m%%|*}
    expr=${m#*|}
    cp "$backup" "$F"
    perl -0pi -e "$expr" "$F"
    if cmp -s "$backup" "$F"; then
        echo "seeded bug did not apply: $name"
        exit 1
    fi
    if models "$log"; then
        echo "NOT CAUGHT: $name"
        survived=1
    else
        why=$(grep -m 1 -E "deadlock|Causality" "$log" || grep -m 1 -A 1 "panicked at" "$log")
        why=$(echo "$why" | paste -sd ' ' - | cut -c1-200)
        failed=$(grep -E '^test .* FAILED$' "$log" | sed 's/^test queue::loom_models:://; s/ \.\.\. FAILED//' | paste -sd ' ' -)
        echo "caught: $name -- failing: $failed -- $why"
    fi
done
rm -f "$log"
exit $survived
