#!/usr/bin/env bash
# Seed 000 at scale (issue 13): (1) a synthetic input of 10^5 distinct partial sequences
# through `reconstruct()` (identical ones merged, one iteration's worth chosen, ordered by
# candidate neighbours beyond QUADRATIC_LIMIT), and (2) a real cpu-clock recording of
# N calls of seed000's func_M (`kansoku record --marker func_M`) reconstructed with the
# default options, both under /usr/bin/time -v (wall time and peak resident memory).
# Usage: bench/reconstruct-scale.sh [CALLS] [SEQUENCES] [SAMPLES_PER_SEQUENCE]
#   (defaults 3000000, 100000, 5; recording 3 M calls takes ~2.5 min of uprobe hits)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p kansoku-cli
cargo build --release -q -p kansoku-reconstruct --example speed
K=$PWD/target/release/kansoku
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
calls=${1:-3000000}; n=${2:-100000}; len=${3:-5}
echo "== synthetic: $n partial sequences x $len samples (the lcs against the truth is computed after the timer)"
/usr/bin/time -f "wall %e s, peak RSS %M KB" target/release/examples/speed "$n" "$len" 1 full
echo "== real: kansoku record --marker func_M -- seed000 $calls"
cc -O1 -g -fno-inline -fno-optimize-sibling-calls -fno-omit-frame-pointer -o "$work/seed000" crates/kansoku-examples/c/seed000.c
$K record --marker func_M -o "$work/r.ksk" -- "$work/seed000" "$calls" 2>&1 | tail -1
/usr/bin/time -v $K reconstruct "$work/r.ksk" --json >"$work/r.json" 2>"$work/r.err"
grep -E "^kansoku|Elapsed|Maximum resident" "$work/r.err"
python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
print('samples', d['split']['samples'], 'marker hits', d['split']['markers'], 'distinct sequences', d['distinct_sequences'], 'used', d['sequences_used'], 'trace', d['length'], 'solver', d['solver'], d['choices']['likelihood'], 'seconds', round(d['seconds'], 2))" "$work/r.json"
