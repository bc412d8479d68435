#!/usr/bin/env bash
# Runs every fuzz target (or those named) for a fixed time, one libFuzzer job
# each, and prints a Markdown table: executions (libFuzzer's final
# stat::number_of_executed_units), the corpus it ended with, and findings (the
# files it left in artifacts/<target>/). Not run by CI (nightly, libFuzzer).
#
#   bash fuzz/run_all.sh                    # all targets, 300 s each, AddressSanitizer
#   SECS=60 SAN=none bash fuzz/run_all.sh pt2 safetensors
#   PROFILE=dev SAN=none bash fuzz/run_all.sh   # unoptimized: builds fast, runs slowly
#   bash fuzz/run_all.sh --table            # only print the table of the last runs
#
# New inputs go to a scratch corpus (target/runs/corpus/<target>), the committed
# seeds (corpus/<target>) are read only; logs stay in target/runs/<target>.log.
# A finding stops its target: commit the input under regressions/<target>/ with
# its fix (tests/tests/fuzz_replay.rs replays it on stable), then run again.
set -uo pipefail
cd "$(dirname "$0")"

SECS="${SECS:-300}"
SAN="${SAN:-address}"
RSS_MB="${RSS_MB:-2048}"
PROFILE="${PROFILE:-release}"
TRIPLE=x86_64-unknown-linux-gnu
RUNS=target/runs
ALL=(backend_yaml boxed_call native_yaml plugin_manifest pt2 safetensors schema)

table() {
    echo "| target | sanitizer | seconds | executions | exec/s | corpus (seeds) | findings |"
    echo "|---|---|---:|---:|---:|---:|---|"
    for t in "${ALL[@]}"; do
        local log="$RUNS/$t.log"
        [[ -f $log ]] || continue
        local execs secs san seeds corp found
        execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1)
        [[ -n $execs ]] || execs=$(grep -o '^#[0-9]*' "$log" | tail -n 1 | tr -d '#')
        secs=$(sed -n 's/^# seconds: //p' "$log")
        san=$(sed -n 's/^# sanitizer: //p' "$log")
        seeds=$(ls "corpus/$t" | wc -l)
        corp=$(grep -o 'corp: [0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*$')
        found=$(grep -o 'Test unit written to [^ ]*' "$log" | sed 's/.*artifacts\///' | paste -sd ' ' -)
        local rate
        rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1)
        echo "| $t | $san | ${secs:--} | ${execs:--} | ${rate:--} | ${corp:--} ($seeds) | ${found:-none} |"
    done
}

if [[ ${1:-} == --table ]]; then
    table
    exit 0
fi

targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${ALL[@]}")

if [[ $PROFILE == dev ]]; then
    cargo +nightly fuzz build -D -s "$SAN" || exit 1
    BIN=target/$TRIPLE/debug
else
    cargo +nightly fuzz build -s "$SAN" || exit 1
    BIN=target/$TRIPLE/release
fi
mkdir -p "$RUNS"
for t in "${targets[@]}"; do
    mkdir -p "$RUNS/corpus/$t" "artifacts/$t"
    {
        echo "# sanitizer: $SAN ($PROFILE)"
        echo "# seconds: $SECS"
        echo "# date: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
    } > "$RUNS/$t.log"
    "$BIN/$t" "$RUNS/corpus/$t" "corpus/$t" \
        -max_total_time="$SECS" -rss_limit_mb="$RSS_MB" -print_final_stats=1 \
        -artifact_prefix="artifacts/$t/" >> "$RUNS/$t.log" 2>&1
    echo "$t: exit $?" >&2
done
table
