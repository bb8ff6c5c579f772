#!/usr/bin/env bash
# Issue 43: a path-heavy program, bzip2 -9 on INPUT_MB of binaries, in one run: wall time of
# `valgrind --tool=none`, of kansoku's Valgrind tool alone counting paths (--paths=split, its
# stream to /dev/null through fd 3), and of `kansoku paths --scope all -o p.json` (the default report: top
# paths and the top per function, the rest counted), with kansoku's peak RSS, the JSON's size
# and the distinct paths kept and left out.
# Usage: bench/paths-heavy.sh [INPUT_MB]   (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
mb=${1:-10}
cargo build --release -q -p kansoku-cli
target=${CARGO_TARGET_DIR:-$PWD/target}
K=$target/release/kansoku
TOOL_LIB=$(dirname "$(ls -t "$target"/release/build/kansoku-probe-*/out/valgrind-lib/kansoku-amd64-linux | head -1)")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cat /usr/bin/python3.11 /usr/bin/perl /usr/bin/gdb 2>/dev/null || true) | head -c $((mb * 1000000)) > "$work/in.bin"
secs() { local s e; s=$EPOCHREALTIME; "$@" > /dev/null 2>&1 3>/dev/null; e=$EPOCHREALTIME; python3 -c "print(f'{$e - $s:.2f}')"; }
tool=(env VALGRIND_LIB="$TOOL_LIB" valgrind --tool=kansoku --out-fd=3 --paths=split --vex-guest-chase=no
      --vex-guest-max-insns=50 --vex-iropt-unroll-thresh=0 --vgdb=no)
none=$(secs valgrind --tool=none bzip2 -9 -c "$work/in.bin")
alone=$(secs "${tool[@]}" bzip2 -9 -c "$work/in.bin")
s=$EPOCHREALTIME
/usr/bin/time -f '%M' -o "$work/rss" "$K" paths --scope all -o "$work/p.json" -- bzip2 -9 -c "$work/in.bin" > /dev/null 2>&1
e=$EPOCHREALTIME
python3 - "$mb" "$none" "$alone" "$s" "$e" "$(cat "$work/rss")" "$work/p.json" <<'PY'
import json, os, sys
mb, none, alone, s, e, rss, path = sys.argv[1:]
paths = float(e) - float(s)
r = json.load(open(path))["summary"]
print(f"bzip2 -9 on {mb} MB: none {float(none):.2f} s; tool alone {float(alone):.2f} s ({float(alone) / float(none):.2f}×); "
      f"kansoku paths {paths:.2f} s ({paths / float(none):.2f}×); peak RSS {int(rss) / 1024:.0f} MB; JSON {os.path.getsize(path) / 1e6:.2f} MB; "
      f"{r['distinct_paths']} distinct paths, {r['paths_listed']} listed, {r['paths_left_out']} left out")
PY
