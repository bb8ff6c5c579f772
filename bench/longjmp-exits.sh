#!/usr/bin/env bash
# Issue 44: a routine left by longjmp N times (its exit never runs, so N activations stay
# open on the thread): the whole `kansoku monitor events` command against the program
# alone, and the calls and abandoned/unfinished activations the report counts.
# Usage: bench/longjmp-exits.sh [N...]   (default 20000 80000; uses target/release)
set -euo pipefail
cd "$(dirname "$0")/.."
K="${KANSOKU:-${CARGO_TARGET_DIR:-target}/release/kansoku}"
export KANSOKU_AGENT="${KANSOKU_AGENT:-${CARGO_TARGET_DIR:-target}/release/libkansoku_agent.so}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cat > "$W/jumps.c" <<'C'
#include <setjmp.h>
#include <stdlib.h>
static jmp_buf back;
volatile long sink;
__attribute__((noinline)) void leave(int i) { sink += i; if (i >= 0) longjmp(back, 1); }
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    for (volatile int i = 0; i < n; i++)
        if (!setjmp(back)) leave(i);
    return 0;
}
C
cc -O2 -g -o "$W/jumps" "$W/jumps.c"
for n in "${@:-20000 80000}"; do
  for n1 in $n; do
    /usr/bin/time -f "%e" -o "$W/alone" "$W/jumps" "$n1"
    /usr/bin/time -f "%e %M" -o "$W/k" "$K" monitor events --mechanism agent --json --probe leave -o "$W/r.json" -- "$W/jumps" "$n1" 2>/dev/null
    python3 - "$W/r.json" "$n1" "$(cat "$W/alone")" "$(cat "$W/k")" <<'P'
import json, sys
r = json.load(open(sys.argv[1]))["report"]["routines"][0]
k_wall, k_rss = sys.argv[4].split()
print(f"N={sys.argv[2]}: program alone {sys.argv[3]} s, kansoku {k_wall} s, peak RSS {int(k_rss)/1024:.0f} MiB; "
      f"calls {r['calls']}, unfinished {r['unfinished']}, abandoned {r['abandoned']} (entries {r['calls'] + r['unfinished'] + r['abandoned']})")
P
  done
done
