#!/usr/bin/env bash
# Seed 003 on real programs (issue 11): `kansoku paths` wall time against
# `valgrind --tool=none`, in one run, on Debian's gzip and zsqueeze (bench/c/zsqueeze.c, ours,
# -O2 -g, linked against Debian's zlib), both compressing the same INPUT_MB of text.
# Per workload and round, alternating: --tool=none; kansoku's Valgrind tool alone counting
# paths (--paths=split, its output to /dev/null); `kansoku paths` as a user runs it (paths
# counted in the tool, the default); `kansoku paths --count-in stream` (every superblock
# entry streamed to kansoku, the way before). Then the path tables of the two ways are
# compared whole (--scope all, every path and count): they must be equal.
# Usage: bench/paths-real.sh [INPUT_MB] [ROUNDS]      (defaults 2 and 3)
set -euo pipefail
cd "$(dirname "$0")/.."
mb=${1:-2}
rounds=${2:-3}
cargo build --release -q -p kansoku-cli
target=${CARGO_TARGET_DIR:-$PWD/target}
K=$target/release/kansoku
TOOL_LIB=$(dirname "$(ls -t "$target"/release/build/kansoku-probe-*/out/valgrind-lib/kansoku-amd64-linux | head -1)")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cat /usr/share/common-licenses/* /usr/include/*.h /usr/include/*/*.h 2>/dev/null || true) | head -c $((mb * 1000000)) > "$work/input"
cc -O2 -g -o "$work/zsqueeze" bench/c/zsqueeze.c -lz
# the Valgrind arguments kansoku uses (kansoku-probe/src/trace/valgrind.rs)
tool=(env VALGRIND_LIB="$TOOL_LIB" valgrind --tool=kansoku --out-fd=1 --paths=split --vex-guest-chase=no
      --vex-guest-max-insns=50 --vex-iropt-unroll-thresh=0 --vgdb=no)
secs() { local s e; s=$EPOCHREALTIME; "$@" < "$work/input" > /dev/null 2>&1; e=$EPOCHREALTIME; python3 -c "print(f'{$e - $s:.3f}')"; }

echo "== kansoku paths vs valgrind --tool=none: $mb MB input, $rounds rounds, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg), $(date -u +%F)"
printf '%-9s %6s %8s %12s %8s %14s %8s\n' workload none "tool" "paths" ratio "paths(stream)" ratio
for r in $(seq "$rounds"); do
  for w in gzip zsqueeze; do
    case $w in
      gzip) cmd=(gzip -c) ;;
      zsqueeze) cmd=("$work/zsqueeze") ;;
    esac
    none=$(secs valgrind --tool=none "${cmd[@]}")
    alone=$(secs "${tool[@]}" "${cmd[@]}")
    paths=$(secs "$K" paths -- "${cmd[@]}")
    stream=$(secs "$K" paths --count-in stream -- "${cmd[@]}")
    python3 -c "print(f'{\"$w\":<9} {$none:6.2f} {$alone:8.2f} {$paths:12.2f} {$paths / $none:7.2f}× {$stream:14.2f} {$stream / $none:7.2f}×')"
  done
done

echo "== the same path tables, both ways (--scope all)"
for w in gzip zsqueeze; do
  case $w in
    gzip) cmd=(gzip -c) ;;
    zsqueeze) cmd=("$work/zsqueeze") ;;
  esac
  "$K" paths --scope all -o "$work/tool.json" -- "${cmd[@]}" < "$work/input" > /dev/null 2>&1
  "$K" paths --scope all --count-in stream -o "$work/stream.json" -- "${cmd[@]}" < "$work/input" > /dev/null 2>&1
  python3 - "$w" "$work/tool.json" "$work/stream.json" <<'PY'
import json, sys
w, a, b = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
table = lambda r: sorted((p["text"], p["count"]) for p in r["paths"])
same = table(a) == table(b) and a["summary"]["blocks_seen"] == b["summary"]["blocks_seen"]
print(f"{w:<9} {len(a['paths'])} paths, {a['summary']['blocks_seen']} blocks; tool trie {a['input']['stream_bytes']} bytes vs stream {b['input']['stream_bytes']} bytes; equal: {same}")
sys.exit(0 if same else 1)
PY
done
