#!/usr/bin/env bash
# Seed 003 benchmarks (kansoku paths), all measured in one run:
#  1. end to end on a program running >= 1 s natively: native, nulgrind, Lackey alone
#     (to /dev/null), kansoku's Valgrind tool alone (to /dev/null), kansoku --source valgrind
#     (our tool, the default), kansoku --source lackey, and the seed's design (Lackey to a
#     log file, then analyse it) side by side, with ratios;
#  2. analysis throughput on a recorded basic-block stream of >= 50 M blocks, on one core.
# Usage: bench/paths.sh            (N=iterations of the workload, BLOCKS_REPEAT to scale part 2)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p kansoku-cli
K=$PWD/target/release/kansoku
W=$PWD/target/bench-paths
mkdir -p "$W"
cc -O1 -g -fno-inline -fno-omit-frame-pointer -o "$W/workload" bench/paths-workload.c
N=${N:-25000000}
# The exact Valgrind arguments kansoku uses (kansoku-probe/src/trace/valgrind.rs).
# kansoku's own Valgrind tool, as built by kansoku-probe's build.rs (kansoku-probe/src/trace/valgrind.rs).
TOOL_LIB=$(dirname "$(ls -t target/release/build/kansoku-probe-*/out/valgrind-lib/kansoku-amd64-linux | head -1)")
KT=(env VALGRIND_LIB="$TOOL_LIB" valgrind --tool=kansoku --out-fd=9 --vex-guest-chase=no
    --vex-guest-max-insns=50 --vex-iropt-unroll-thresh=0 --vgdb=no)
VG=(valgrind --tool=lackey --trace-superblocks=yes --basic-counts=no --vex-guest-chase=no
    --vex-guest-max-insns=50 --vex-iropt-unroll-thresh=0 --vgdb=no -v -v --log-fd=9)

secs() { # run a command, print its wall time in seconds
  local s=$EPOCHREALTIME; "$@" >/dev/null 2>&1; local e=$EPOCHREALTIME
  python3 -c "print(f'{$e - $s:.2f}')"
}

echo "== end to end: $W/workload $N ($(nproc) cores, $(date -u +%F))"
native=$(secs "$W/workload" "$N")
nulgrind=$(secs valgrind --tool=none "$W/workload" "$N")
lackey_issue=$(secs bash -c "valgrind --tool=lackey --trace-superblocks=yes --log-file=/dev/null '$W/workload' $N")
lackey=$(secs bash -c "${VG[*]} '$W/workload' $N 9>/dev/null")
tool=$(secs bash -c "${KT[*]} '$W/workload' $N 9>/dev/null")
kansoku=$(secs "$K" paths --source valgrind --top 5 -- "$W/workload" "$N")
kansoku_lackey=$(secs "$K" paths --source lackey --top 5 -- "$W/workload" "$N")
log_write=$(secs bash -c "${VG[*]} '$W/workload' $N 9>'$W/lackey.log'")
log_bytes=$(stat -c %s "$W/lackey.log")
log_analyse=$(secs "$K" paths --source "$W/lackey.log" --top 5)
rm -f "$W/lackey.log"
seed=$(python3 -c "print(f'{$log_write + $log_analyse:.2f}')")
python3 - <<PY
rows = [("native", $native), ("nulgrind (valgrind --tool=none)", $nulgrind),
        ("lackey as in the issue (--trace-superblocks=yes, defaults, log /dev/null)", $lackey_issue),
        ("lackey alone, kansoku's flags, log /dev/null  [baseline]", $lackey),
        ("kansoku's Valgrind tool alone, stream to /dev/null", $tool),
        ("kansoku paths --source valgrind (our tool, pipe, analysed live)", $kansoku),
        ("kansoku paths --source lackey (Lackey text, pipe, analysed live)", $kansoku_lackey),
        ("seed's design: lackey -> log file ($log_bytes bytes) + analyse", $seed),
        ("   of which writing the log", $log_write), ("   of which analysing it", $log_analyse)]
for name, t in rows:
    print(f"{name:<78} {t:8.2f} s")
print(f"kansoku / lackey alone            = {$kansoku / $lackey:.3f}   (must be <= 1.2)")
print(f"kansoku / its tool alone          = {$kansoku / $tool:.3f}")
print(f"kansoku(lackey) / lackey alone    = {$kansoku_lackey / $lackey:.3f}")
print(f"kansoku / seed's design           = {$kansoku / $seed:.3f}   (must be < 1)")
print(f"kansoku / native                  = {$kansoku / $native:.1f}")
PY

echo "== analysis throughput on a recorded block stream"
cc -O1 -g -fno-inline -fno-optimize-sibling-calls -fno-omit-frame-pointer -o "$W/paths" crates/kansoku-examples/c/paths.c
REPEAT=${BLOCKS_REPEAT:-17000}
"$K" paths --source valgrind --record "$W/blocks.ksk" --top 1 -- "$W/paths" 1000 "$REPEAT" >/dev/null
for calls in split frames; do
  "$K" paths --source "$W/blocks.ksk" --calls "$calls" --json --top 0 > "$W/offline.json"
  python3 - "$calls" <<PY
import json, os, sys
j = json.load(open("$W/offline.json"))
b = j["summary"]["blocks_seen"]; s = j["seconds"]
print(f"--calls {sys.argv[1]:<6}: {b/1e6:.1f} M blocks ({os.path.getsize('$W/blocks.ksk')/1e6:.0f} MB .ksk) analysed in {s:.2f} s on one thread = {b/s/1e6:.1f} M blocks/s (must be >= 20; >= 50 M blocks: {b >= 50e6})")
PY
done
