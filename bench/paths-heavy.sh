#!/usr/bin/env bash
# Issue 43: a path-heavy program, bzip2 -9 on INPUT_MB of binaries, in one run: wall time of
# `valgrind --tool=none`, of kansoku's Valgrind tool alone counting paths (--paths=split, its
# stream to /dev/null through fd 3), and of `kansoku paths --scope all -o p.json` (the default report: top
# paths and the top per function, the rest counted), with kansoku's peak RSS, the JSON's size
# and the distinct paths kept and left out. Each time is given with its CPU time (user +
# system, of the process and its children) and the load average when it ended: on a shared
# machine the CPU time is the steadier figure, the wall time is what the issue's ratio asks.
# `--tool=none` is also run with the VEX options the tool needs (no chasing, 50 instructions,
# no unrolling), to show what they cost the baseline (the issue's baseline is plain none).
# ROUNDS=N repeats the four runs N times, alternating (default 1). KANSOKU=FILE runs that
# kansoku binary (a copy kept aside, e.g. HEAD's, to compare with a later build) instead of
# building the work tree's; the tool is the work tree's build either way.
# Usage: bench/paths-heavy.sh [INPUT_MB]   (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
mb=${1:-10}
rounds=${ROUNDS:-1}
target=${CARGO_TARGET_DIR:-$PWD/target}
if [ -n "${KANSOKU:-}" ]; then
  K=$(realpath "$KANSOKU")
else
  cargo build --release -q -p kansoku-cli
  K=$target/release/kansoku
fi
TOOL_LIB=$(dirname "$(ls -t "$target"/release/build/kansoku-probe-*/out/valgrind-lib/kansoku-amd64-linux | head -1)")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cat /usr/bin/python3.11 /usr/bin/perl /usr/bin/gdb 2>/dev/null || true) | head -c $((mb * 1000000)) > "$work/in.bin"
vex=(--vex-guest-chase=no --vex-guest-max-insns=50 --vex-iropt-unroll-thresh=0)
# run NAME COMMAND...: "NAME wall cpu load" into $work/times, the command's output dropped
run() {
  local name=$1 s e
  shift
  s=$EPOCHREALTIME
  /usr/bin/time -f '%U %S %M' -o "$work/t" "$@" > /dev/null 2>&1 3>/dev/null
  e=$EPOCHREALTIME
  read -r u sy m < "$work/t"
  python3 -c "print('$name', f'{$e - $s:.2f}', f'{$u + $sy:.2f}', '$m', '$(cut -d' ' -f1 /proc/loadavg)')" >> "$work/times"
}
tool=(env VALGRIND_LIB="$TOOL_LIB" valgrind --tool=kansoku --out-fd=3 --paths=split "${vex[@]}" --vgdb=no)
for _ in $(seq "$rounds"); do
  run none valgrind --tool=none bzip2 -9 -c "$work/in.bin"
  run none-vex valgrind --tool=none "${vex[@]}" bzip2 -9 -c "$work/in.bin"
  run alone "${tool[@]}" bzip2 -9 -c "$work/in.bin"
  run paths "$K" paths --scope all -o "$work/p.json" -- bzip2 -9 -c "$work/in.bin"
done
python3 - "$mb" "$work/times" "$work/p.json" <<'PY'
import json, os, sys
mb, times, path = sys.argv[1:]
rows = [l.split() for l in open(times)]
r = json.load(open(path))["summary"]
for i in range(0, len(rows), 4):
    t = {n: (float(w), float(c), int(m), l) for n, w, c, m, l in rows[i:i + 4]}
    none = t["none"]
    def ratio(n):
        w, c, m, l = t[n]
        return f"{n} {w:.2f} s ({w / none[0]:.2f}×; CPU {c:.2f} s, {c / none[1]:.2f}×; load {l})"
    print(f"bzip2 -9 on {mb} MB, round {i // 4 + 1}: none {none[0]:.2f} s (CPU {none[1]:.2f} s; load {none[3]}); "
          + "; ".join(ratio(n) for n in ("none-vex", "alone", "paths")))
print(f"kansoku paths: peak RSS {t['paths'][2] / 1024:.0f} MB; JSON {os.path.getsize(path) / 1e6:.2f} MB; "
      f"{r['distinct_paths']} distinct paths, {r['paths_listed']} listed, {r['paths_left_out']} left out")
PY
