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
# Usage: bench/reconstruct-classes.sh   (36 s here; needs zlib1g-dev; the summary table in
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
    $K reconstruct "$work/$name-$p.ksk" --exact "$work/$name.ksk" -o "$work/$name-$p.trace" --json 2>/dev/null \
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
run zlib-first-odd adler32@plt 1010 "$work/zblocks" 1100
run zlib-blocks adler32@libz 3030 "$work/zblocks" 3100 vary
run tokenizer tokenize 26000 "$work/tokenize" "$text" 1001
run hash-lookup lookup 12000 "$work/hashlook" 12100
run interpreter step 120000 "$work/interp" 1100
