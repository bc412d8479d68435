#!/usr/bin/env bash
# Runs opal-distributed's MPI tests: builds them with the `mpi` feature, then runs
# each as every rank of `mpirun -n 2`. Needs Open MPI (README: "Distributed").
#   distributed/run-mpi-tests.sh            # every MPI test
#   distributed/run-mpi-tests.sh mpi_faults # one
# Each rank prints `rank R <test>: N passed, M failed`; the last line sums them.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v mpirun >/dev/null 2>&1; then
    echo "run-mpi-tests.sh: mpirun not found (Debian: apt-get install openmpi-bin libopenmpi-dev libclang-dev clang)" >&2
    exit 1
fi
mpirun=(mpirun -n 2 --oversubscribe)
if [ "$(id -u)" = 0 ]; then
    mpirun+=(--allow-run-as-root)
fi
tests=("$@")
if [ ${#tests[@]} = 0 ]; then
    tests=(mpi_collectives mpi_training mpi_plugin_comm mpi_faults:exit mpi_faults:panic)
fi

passed=0
failed=0
for spec in "${tests[@]}"; do
    # `test:mode` runs `test` with OPAL_FAULT=mode.
    t=${spec%%:*}
    mode=${spec#*:}
    if [ "$mode" = "$spec" ]; then
        mode=exit
    fi
    # --workspace: the same feature set as README's `cargo test --workspace`, so
    # only opal-distributed is built again (with `mpi`), not the runtime.
    exe=$(cargo test --workspace --features opal-distributed/mpi --locked --test "$t" --no-run 2>&1 |
        sed -n "s|.*Executable tests/$t.rs (\(.*\))|\1|p")
    if [ -z "$exe" ]; then
        echo "run-mpi-tests.sh: could not build $t" >&2
        exit 1
    fi
    extra=()
    # The fault cases kill a rank on purpose: without --enable-recovery, mpirun
    # would end the job at once instead of letting the survivor report its Err.
    if [ "$t" = mpi_faults ]; then
        extra=(--enable-recovery -x OPAL_FAULT="$mode")
    fi
    log=$(mktemp)
    status=0
    timeout 900 "${mpirun[@]}" "${extra[@]}" "$exe" >"$log" 2>&1 || status=$?
    grep -E "^rank [0-9]+ " "$log" || true
    p=$(awk '/^rank [0-9]+ [a-z_]+: [0-9]+ passed, [0-9]+ failed$/ {s += $4} END {print s + 0}' "$log")
    f=$(awk '/^rank [0-9]+ [a-z_]+: [0-9]+ passed, [0-9]+ failed$/ {s += $6} END {print s + 0}' "$log")
    ranks=$(grep -cE "^rank [0-9]+ [a-z_]+: [0-9]+ passed" "$log" || true)
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-0}))
    # mpi_faults: one rank dies on purpose, so only the survivor reports, and
    # mpirun's status reflects the death; every other test needs both ranks and a
    # clean exit.
    want=2
    if [ "$t" = mpi_faults ]; then
        want=1
        status=0
    fi
    if [ "$status" != 0 ] || [ "$ranks" -lt "$want" ]; then
        echo "run-mpi-tests.sh: $t: mpirun exited with $status, $ranks rank(s) reported; its output:" >&2
        cat "$log" >&2
        failed=$((failed + 1))
    fi
    rm -f "$log"
done
echo "mpi: $passed passed, $failed failed"
[ "$failed" = 0 ]
