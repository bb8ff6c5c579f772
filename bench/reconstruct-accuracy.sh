#!/usr/bin/env bash
# Seed 000 accuracy: exact traces of four programs sampled at periods 7, 31, 101, 997 with
# `kansoku sample`, reconstructed by every solver, lcs_ratio against the exact trace.
# Usage: bench/reconstruct-accuracy.sh   (matrix at 997 single-steps ~4 M instructions: minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p kansoku-cli
K=$PWD/target/release/kansoku
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
$K demo --dir "$work/demo" >/dev/null 2>&1 || true
cc -O1 -g -fno-inline -fno-optimize-sibling-calls -fno-omit-frame-pointer -o "$work/branchy" crates/kansoku-reconstruct/c/branchy.c
periods="7 31 101 997"
iters=1000
printf "%-10s %6s %6s %-7s %-8s %8s %8s\n" program period T solver used lcs_ratio seconds
run() { # name marker prog args...
  local name=$1 marker=$2; shift 2
  $K trace exact --marker "$marker" --iterations $iters -o "$work/$name.ksk" -- "$@" >/dev/null
  for p in $periods; do
    $K sample --period "$p" "$work/$name.ksk" -o "$work/$name-$p.ksk" >/dev/null
    for s in patent exact phase; do
      $K reconstruct "$work/$name-$p.ksk" --solver $s --by block --exact "$work/$name.ksk" --json 2>/dev/null \
        | python3 -c "import json,sys; d=json.load(sys.stdin); print('%-10s %6s %6s %-7s %-8s %8.4f %8.2f' % ('$name', $p, d['split']['iteration_length'], '$s', d['solver'], d['comparison']['lcs_ratio'], d['seconds']))" \
        || printf "%-10s %6s %6s %-7s failed\n" "$name" "$p" - "$s"
    done
  done
}
run seed000 func_M "$work/demo/bin/seed000" $((iters + 10))
run recursion work "$work/demo/bin/recursion" 6 $((iters + 10))
run branchy region "$work/branchy" $((iters + 10))
run matrix multiply "$work/demo/bin/matrix" $((iters + 10))
