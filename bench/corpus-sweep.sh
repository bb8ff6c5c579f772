#!/usr/bin/env bash
# Issue 43's corpus sweep: every function of every x86-64 ELF file in the distribution's
# program and library directories through what `kansoku inspect PROGRAM --function F`
# computes (functions, decode, CFG, jump tables, dominators, loops), in one process
# (crates/kansoku-binary/examples/corpus_sweep.rs), counting panics (each named; the
# script fails if there is one), files kansoku does not read as x86-64 programs,
# functions, jump tables followed, indirect jumps left unresolved, and time and peak
# memory. Each file is counted once (links and hard links are one file).
# Each file is swept in a child process killed after SWEEP_TIMEOUT seconds (default 600):
# such a file is named (TIMEOUT), with the function it was in when one ran past a minute,
# and the script fails; the ten slowest files are listed at the end of each run.
# Usage: [SWEEP_TIMEOUT=S] bench/corpus-sweep.sh [DIR_OR_FILE...]   (default: /usr/bin /usr/sbin /usr/lib)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p kansoku-binary --example corpus_sweep
S=target/release/examples/corpus_sweep
T=${SWEEP_TIMEOUT:-600}
[ $# -gt 0 ] || set -- /usr/bin /usr/sbin /usr/lib
for d in "$@"; do
  echo "== $d"
  /usr/bin/time -f "  wall %e s, peak RSS %M KB (the largest one file's child)" "$S" --timeout "$T" "$d"
done
