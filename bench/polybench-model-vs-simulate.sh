#!/usr/bin/env bash
# Issue 46: `cache model FILE --size S` (default method, auto) beside `cache simulate FILE
# --size S`, 32 KiB 8-way 64 B, for every kernel of the original PolyBench/C 4.2.1: wall
# seconds of each (one run each, in turn, under nice), their ratio, the method `model` took
# (its note), and whether both give the same misses.
#
# Usage: bench/polybench-model-vs-simulate.sh PATH_TO_POLYBENCH [SIZE]   (default MEDIUM)
#   KANSOKU=path: a fixed kansoku binary; KERNELS="gemm atax": some only.
set -uo pipefail
pb=${1:?usage: bench/polybench-model-vs-simulate.sh PATH_TO_POLYBENCH [SIZE]}
size=${2:-MEDIUM}
pb=$(cd "$pb" && pwd)
cd "$(dirname "$0")/.."
if [ -z "${KANSOKU:-}" ]; then
  cargo build --release -q -p kansoku-cli
fi
K=${KANSOKU:-${CARGO_TARGET_DIR:-$PWD/target}/release/kansoku}
. bench/polybench-kernels.sh
files=$(polybench_kernels "$pb")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'kernel\tsize\tmodel s\tsimulate s\tmodel/simulate\tmethod\tsame misses\n'
for f in $files; do
  name=$(basename "$f" .c)
  /usr/bin/time -f "%e" -o "$tmp/tm" nice -n 10 "$K" cache model "$pb/$f" --size "$size" --cache 32KiB,8-way,64B --json >"$tmp/m" 2>"$tmp/me"
  /usr/bin/time -f "%e" -o "$tmp/ts" nice -n 10 "$K" cache simulate "$pb/$f" --size "$size" --cache 32KiB,8-way,64B --json >"$tmp/s" 2>/dev/null
  python3 - "$name" "$size" "$tmp" <<'PY'
import json, re, sys
name, size, tmp = sys.argv[1:]
tm = float(open(tmp + "/tm").read().split()[-1]); ts = float(open(tmp + "/ts").read().split()[-1])
note = open(tmp + "/me").read()
m = re.search(r"method: ([^(]*)", note)
method = m.group(1).strip() if m else "-"
def misses(path):
    try:
        d = json.load(open(path))
    except Exception:
        return None
    if "total_misses" in d:
        return d["total_misses"]
    ev = d.get("evaluation") or []
    return sum(r["compulsory"] + r["conflict"] for r in ev)
same = "yes" if misses(tmp + "/m") == misses(tmp + "/s") and misses(tmp + "/s") is not None else "no"
print("\t".join([name, size, "%.2f" % tm, "%.2f" % ts, "%.2f" % (tm / ts if ts else 0), method, same]))
PY
done
