#!/usr/bin/env bash
# ThreadSanitizer over Opal's concurrency tests (not run by CI: it needs nightly,
# rust-src, and a build of std and every crate with TSan instrumentation, about
# 40 minutes on two cores). Usage: bash .ci/tsan.sh [extra cargo test args]
#
# What it runs: opal-cpu's thread-pool tests (parallel::), the runtime's
# stress, dispatch and autograd tests (autograd on several threads), emu's
# device-runtime tests (its stream queues, events and synchronous calls), and
# opal-tests' torture test (geometry changes, writes and kernels racing).
# Reports fail the run (halt_on_error); .ci/tsan.supp lists suppressions, each
# with its reason.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/tsan}"
export CARGO_INCREMENTAL=0
export RUSTFLAGS="-Zsanitizer=thread"
export RUSTDOCFLAGS="-Zsanitizer=thread"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/.ci/tsan.supp"
# Several tests spawn child processes or time themselves; one test thread keeps
# the instrumented runs within their timeouts.
tsan_test() {
    cargo +nightly test -Zbuild-std --target x86_64-unknown-linux-gnu --locked "$@"
}

tsan_test -p opal-cpu --lib parallel:: -- --test-threads=1
tsan_test -p opal-runtime --test integration -- stress:: dispatch:: autograd::
# One test thread here too: the memory-accounting tests compare an emu device's
# allocated bytes before and after, and on several test threads under TSan one
# of them once counted other tests' blocks (no TSan report; see contributing.md).
tsan_test -p opal-emu --test integration -- device_runtime:: --test-threads=1
tsan_test -p opal-tests --test integration -- torture::
echo "tsan: no reports"
