#!/usr/bin/env bash
# Issue 43: the Perfetto export of a long exact trace in bounded memory. Traces Debian's
# sqlite3 counting to ROWS in a recursive query (70,000 rows: about 200 M instructions) with
# `kansoku trace exact`, then times `kansoku paths --source t.ksk --export perfetto=t.pftrace`
# with its peak RSS, beside the trace's instructions and size and the Perfetto file's size
# and calls. With OLD=/path/to/an/older/kansoku, the same export by that binary too, and
# whether the two files hold the same packets (the `kansoku` metadata instant left out:
# it moved from the first packet to the last).
# Usage: bench/perfetto-export.sh [ROWS]   (default 70000; needs sqlite3)
set -euo pipefail
cd "$(dirname "$0")/.."
rows=${1:-70000}
cargo build --release -q -p kansoku-cli
K=${CARGO_TARGET_DIR:-$PWD/target}/release/kansoku
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
query="WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<$rows) SELECT sum(x*x), count(*) FROM c;"
"$K" trace exact -o "$work/t.ksk" -- /usr/bin/sqlite3 :memory: "$query" > /dev/null 2> "$work/trace.log"
export_with() { # BINARY OUT: prints "seconds peak_kb"
  local s e
  s=$EPOCHREALTIME
  /usr/bin/time -f '%M' -o "$work/rss" "$1" paths --source "$work/t.ksk" --export perfetto="$2" > /dev/null 2> "$work/paths.log"
  e=$EPOCHREALTIME
  echo "$(python3 -c "print(f'{$e - $s:.1f}')") $(cat "$work/rss")"
}
new=$(export_with "$K" "$work/new.pftrace")
old=""
if [ -n "${OLD:-}" ]; then old=$(export_with "$OLD" "$work/old.pftrace"); fi
python3 - "$work" "$rows" "$new" "$old" <<'PY'
import os, re, sys
work, rows, new, old = sys.argv[1:]
log = open(os.path.join(work, "trace.log")).read()
instructions = int(re.search(r"(\d+) instructions", log).group(1))
size = os.path.getsize(os.path.join(work, "t.ksk"))

def packets(path):
    data, i = open(path, "rb").read(), 0
    while i < len(data):
        i += 1  # Trace.packet's key
        n = s = 0
        while True:
            b = data[i]; i += 1
            n |= (b & 0x7F) << s; s += 7
            if b < 0x80:
                break
        yield data[i:i + n]
        i += n

def figures(line, path):
    secs, kb = line.split()
    return f"{float(secs):.1f} s, {int(kb) / 1024:.0f} MB peak RSS, {os.path.getsize(path) / 1e6:.0f} MB file"

print(f"sqlite3 to {rows} rows: {instructions / 1e6:.1f} M instructions, exact trace {size / 1e6:.0f} MB ({size / instructions:.2f} bytes/instruction)")
print(f"perfetto export: {figures(new, os.path.join(work, 'new.pftrace'))}")
if old:
    print(f"perfetto export by $OLD: {figures(old, os.path.join(work, 'old.pftrace'))}")
    keep = lambda p: b"time_axis" not in p
    a = [p for p in packets(os.path.join(work, "new.pftrace")) if keep(p)]
    b = [p for p in packets(os.path.join(work, "old.pftrace")) if keep(p)]
    print(f"{len(a)} packets besides the metadata instant; " + ("the same, in the same order" if a == b else "they DIFFER"))
    sys.exit(0 if a == b else 1)
PY
