#!/usr/bin/env bash
# Seed 000 on real loops whose iterations differ (issue 42): exact traces of five loops of
# kansoku's own (crates/kansoku-reconstruct/c), sampled with `kansoku sample` at periods
# 7, 31, 101, 997 and rebuilt by `kansoku reconstruct` with its defaults (-o, so every
# class with at least one sample per instruction is rebuilt into a file of its own). One
# row per rebuilt class: its length (instructions between marker hits), share of the
# iterations, samples, the solver used, lcs_ratio against the first exact iteration of its
# class, and the kinds of the warnings that say why the trace may not be exact
# (`iterations_differ` only says other classes exist and is left out). A row with lcs below
# 0.99 and no such warning is marked UNWARNED. "set aside" counts the classes with fewer
# samples than instructions (not rebuilt) and their share of the iterations.
# Then real cpu-clock recordings (`kansoku record --time-period` 10/20/50 µs) of the same
# loops: one row each, the trace's lcs against the exact iteration of the class it matches
# best (a time recording's iterations carry no instruction counts, so no class is known),
# with its warnings; NO_REAL=1 leaves them out.
# Usage: bench/reconstruct-classes.sh   (5 min here under load, 36 s with NO_REAL=1; needs zlib1g-dev; the summary table in
# docs/BENCHMARKS.md groups these rows per loop and period)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${NO_BUILD:-}" ] || cargo build --release -q -p kansoku-cli
K=$PWD/target/release/kansoku
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
flags="-O1 -g -fno-inline -fno-optimize-sibling-calls -fno-omit-frame-pointer"
c=crates/kansoku-reconstruct/c
cc $flags -o "$work/zblocks" $c/zblocks.c -lz
cc $flags -o "$work/tokenize" $c/tokenize.c
cc $flags -o "$work/hashlook" $c/hashlook.c
cc $flags -o "$work/interp" $c/interp.c
text=/usr/share/common-licenses/BSD
printf "| loop | marker | period | class (instructions) | share | samples | solver | lcs | warnings |\n|---|---|---|---|---|---|---|---|---|\n"
run() { # name marker iterations program args...
  local name=$1 marker=$2 iters=$3; shift 3
  $K trace exact --marker "$marker" --iterations "$iters" -o "$work/$name.ksk" -- "$@" >/dev/null 2>&1
  for p in 7 31 101 997; do
    $K sample --period "$p" "$work/$name.ksk" -o "$work/$name-$p.ksk" >/dev/null 2>&1
    $K reconstruct "$work/$name-$p.ksk" --exact "$work/$name.ksk" -o "$work/$name-$p.trace" --json 2>/dev/null | tee "$work/$name-$p.json" \
      | python3 -c "
import json, sys
d = json.load(sys.stdin)
name, marker, p = sys.argv[1:4]
def kinds(ws): return sorted({w['kind'] for w in ws if w['kind'] != 'iterations_differ'})
def row(length, share, samples, solver, lcs, ws):
    k = kinds(ws)
    mark = ' UNWARNED' if lcs is not None and lcs < 0.99 and not k else ''
    print('| %s | %s | %s | %s | %.1f %% | %d | %s | %s%s | %s |' % (name, marker, p, length, 100 * share, samples, solver,
          '-' if lcs is None else '%.4f' % lcs, mark, ', '.join(k) or '-'))
classes = d['classes'] or []
main = next((c for c in classes if c['length'] == d['class']), None)
share = main['share'] if main else 1.0
samples = main['samples'] if main else d['samples_used']
row(d['class'] or d['split']['iteration_length'], share, samples, d['solver'], d['comparison']['lcs_ratio'], d['warnings'])
for t in d['class_traces']:
    row(t['length'], t['share'], t['samples'], t['solver'], t['comparison']['lcs_ratio'] if t['comparison'] else None, t['warnings'])
rebuilt = {d['class']} | {t['length'] for t in d['class_traces']}
aside = [c for c in classes if c['length'] not in rebuilt]
if aside:
    print('| %s | %s | %s | set aside: %d classes | %.1f %% | %d | - | - | - |' % (name, marker, p, len(aside), 100 * sum(c['share'] for c in aside), sum(c['samples'] for c in aside)))
" "$name" "$marker" "$p"
  done
}
real() { # name marker program args... (the loop's exact trace and classes from run above)
  local name=$1 marker=$2; shift 2
  for us in 10 20 50; do
    nice -n 10 $K record --time-period $((us * 1000)) --marker "$marker" -o "$work/$name-$us-us.ksk" -- "$@" >/dev/null 2>&1
    $K reconstruct "$work/$name-$us-us.ksk" -o "$work/$name-$us-us.trace" --json 2>/dev/null >"$work/$name-$us-us.json"
    # the exact iteration it matches best among the classes' first iterations (the 8 largest)
    best=$(python3 -c "
import json, sys
for c in sorted(json.load(open(sys.argv[1]))['classes'] or [], key=lambda c: -c['share'])[:8]:
    print(c['first_iteration'], c['length'], c['share'])" "$work/$name-7.json" | while read -r it len share; do
      $K compare "$work/$name-$us-us.trace" "$work/$name.ksk" --iteration "$it" --json 2>/dev/null \
        | python3 -c "import json, sys; print(json.load(sys.stdin)['lcs_ratio'], sys.argv[1], sys.argv[2], sys.argv[3])" "$len" "$share" "$it"
    done | sort -g | tail -1)
    python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
name, marker, us = sys.argv[2:5]
lcs, length, share, it = sys.argv[5].split()
k = sorted({w['kind'] for w in d['warnings'] if w['kind'] != 'iterations_differ'})
mark = ' UNWARNED' if float(lcs) < 0.99 and not k else ''
print('| %s | %s | cpu-clock %s µs | best match: %s (iteration %s) | %.1f %% | %d | %s | %.4f%s | %s |' % (name, marker, us, length, it, 100 * float(share),
      d['samples_used'], d['solver'], float(lcs), mark, ', '.join(k) or '-'))
" "$work/$name-$us-us.json" "$name" "$marker" "$us" "$best"
  done
}
run zlib-first-odd adler32@plt 1010 "$work/zblocks" 1100
run zlib-blocks adler32@libz 3030 "$work/zblocks" 3100 vary
run tokenizer tokenize 26000 "$work/tokenize" "$text" 1001
run hash-lookup lookup 12000 "$work/hashlook" 12100
run interpreter step 120000 "$work/interp" 1100
# Real cpu-clock recordings of the same loops, longer runs (agent marker), each trace
# compared with the exact iteration of every class and the best kept: a time recording
# has no instruction counts, so its trace is of no class (see docs/BENCHMARKS.md).
[ -n "${NO_REAL:-}" ] || {
  real zlib-first-odd adler32@plt "$work/zblocks" 3000000
  real zlib-blocks adler32@libz "$work/zblocks" 3000000 vary
  real tokenizer tokenize "$work/tokenize" "$text" 5001
  real hash-lookup lookup "$work/hashlook" 3000000
  real interpreter step "$work/interp" 30000
}
