#!/usr/bin/env bash
# Seed 000 accuracy grid: exact traces of six programs with branches and loops, sampled
# with `kansoku sample` at periods 7, 31, 101, 997, reconstructed by every solver with the
# seed's scores (--likelihood seed) and with control-flow scores (--likelihood cfg), the
# patent solver also with the seed's own linkage (--linkage head); lcs_ratio against the
# exact trace's first iteration, the likelihood of the order found, and "!" where the
# tool warns that another order scores at least as well (a witness: the samples do not
# fix the order). The first column, "default", runs `kansoku reconstruct` without flags
# (issue 13: phase when the recording has counts, control-flow scores when the program can
# be read) and names the choice.
# Usage: bench/reconstruct-accuracy.sh [ITERATIONS]   (default 1010: every period, 997
# included, sees each position of every iteration; tracing runs at ~15 k instructions/s,
# about a minute for the four programs)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p kansoku-cli
K=$PWD/target/release/kansoku
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
iters=${1:-1010}
flags="-O1 -g -fno-inline -fno-optimize-sibling-calls -fno-omit-frame-pointer"
cc $flags -o "$work/seed000" crates/kansoku-examples/c/seed000.c
cc $flags -o "$work/recursion" crates/kansoku-examples/c/recursion.c
cc $flags -o "$work/branchy" crates/kansoku-reconstruct/c/branchy.c
cc $flags -o "$work/sortfixed" crates/kansoku-reconstruct/c/sortfixed.c
cc $flags -o "$work/crcmix" crates/kansoku-reconstruct/c/crcmix.c
cc $flags -o "$work/bsearch" crates/kansoku-reconstruct/c/bsearch.c
periods="7 31 101 997"
columns="default patent:seed patent:cfg patent:cfg:head exact:seed exact:cfg phase:seed"
printf "| program | T | period | %s |\n" "$(echo $columns | sed 's/ / | /g')"
printf "|---|---|---|%s\n" "$(for c in $columns; do printf -- '---|'; done)"
# A cell: lcs_ratio, then for patent/exact the total likelihood of the order found (L),
# which tells a search that fell short (L below another solver's) from orders the scores
# cannot tell apart (same L as the truth's, different trace).
lcs() { # recording exact solver likelihood linkage -> "cell T" (or "failed -"); solver "default": no flags
  local flags=(--solver "$3" --likelihood "$4" --linkage "$5")
  [ "$3" = default ] && flags=()
  $K reconstruct "$1" "${flags[@]}" --exact "$2" --json 2>/dev/null \
    | python3 -c "
import json,sys; d=json.load(sys.stdin)
cell = '%.4f' % d['comparison']['lcs_ratio']
if d['likelihood'] is not None: cell += '_L%d' % d['likelihood']
if d['alternative'] is not None: cell += '_!'
if sys.argv[1] == 'default': cell += '_(' + d['solver'] + ',' + d['choices']['likelihood'] + ')'
elif d['solver'] != sys.argv[1]: cell += '_(' + d['solver'] + ')'
print(cell, d['split']['iteration_length'])" "$3" \
    || echo "failed -"
}
run() { # name marker program args...
  local name=$1 marker=$2; shift 2
  $K trace exact --marker "$marker" --iterations "$iters" -o "$work/$name.ksk" -- "$@" >/dev/null
  for p in $periods; do
    $K sample --period "$p" "$work/$name.ksk" -o "$work/$name-$p.ksk" >/dev/null
    local row="" t="-"
    for c in $columns; do
      IFS=: read -r solver likelihood linkage <<<"$c"
      read -r ratio t < <(lcs "$work/$name-$p.ksk" "$work/$name.ksk" "$solver" "$likelihood" "${linkage:-member}")
      row="$row | ${ratio//_/ }"
    done
    printf "| %s | %s | %s%s |\n" "$name" "$t" "$p" "$row"
  done
}
run seed000 func_M "$work/seed000" $((iters + 10))
run recursion work "$work/recursion" 4 $((iters + 10))
run branchy region "$work/branchy" $((iters + 10))
run sortfixed region "$work/sortfixed" $((iters + 10))
run crcmix region "$work/crcmix" $((iters + 10))
run bsearch region "$work/bsearch" $((iters + 10))
