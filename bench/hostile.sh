#!/usr/bin/env bash
# Issue 15: the inputs that crashed, hung or ran away before, generated here, run through the
# release binary under /usr/bin/time -v: exit code, wall time and peak resident memory each.
# Usage: bench/hostile.sh   (builds target/release/kansoku first)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${KANSOKU:-}" ] || cargo build --release -q -p kansoku-cli
K="${KANSOKU:-${CARGO_TARGET_DIR:-target}/release/kansoku}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

python3 - "$W" <<'EOF'
import json, struct, sys
w = sys.argv[1]

def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7f) | 0x80); v >>= 7
    out.append(v)
    return bytes(out)

def zigzag(d):
    return (d << 1) ^ (d >> 63) if d >= 0 else ((-d) << 1) - 1

def ksk(path, events):
    header = json.dumps({"kind": "exact_trace", "program": "/bin/true", "args": [], "parameters": {}, "created": 0}).encode()
    out = bytearray(b"KANSOKU\0" + struct.pack("<H", 1) + varint(len(header)) + header)
    prev, n = 0, 0
    for e in events:
        if e[0] == "module":
            m = json.dumps({"path": e[1], "build_id": None, "start": e[2], "end": e[2] + 0x1000, "file_offset": 0}).encode()
            out += b"\x01" + varint(len(m)) + m
        else:
            out += b"\x02" + varint(zigzag(e[1] - prev)); prev = e[1]
        n += 1
    out += b"\x09" + varint(n)
    open(f"{w}/{path}", "wb").write(out)

ksk("devzero.ksk", [("module", "/dev/zero", 0x1000), ("insn", 0x1010)])
ksk("modules.ksk", [ev for i in reversed(range(100_000)) for ev in (("module", "[anon]", 0x10000000 + i * 0x2000), ("insn", 0x10000010 + i * 0x2000))])
ksk("modules-50k.ksk", [ev for i in reversed(range(50_000)) for ev in (("module", "[anon]", 0x10000000 + i * 0x2000), ("insn", 0x10000010 + i * 0x2000))])
body = "for (i = 0; i < N; i++)\n  A[i] = "
open(f"{w}/parens.k", "w").write("param N;\ndouble A[N];\n" + body + "(" * 6700 + "1" + ")" * 6700 + ";\n")
open(f"{w}/minus.k", "w").write("param N;\ndouble A[N];\n" + body + "- " * 20000 + "1;\n")
open(f"{w}/loops.k", "w").write("param N;\ndouble A[N];\n" + "".join(f"for (i{d} = 0; i{d} < N; i{d}++)\n" for d in range(20000)) + "A[0] = 0;\n")
open(f"{w}/far.k", "w").write("param N;\ndouble A[N], B[N];\nfor (i = 0; i < N; i++)\n  A[i] = B[i] + A[i + 1000000000000];\n")
open(f"{w}/shift.k", "w").write("param N;\ndouble A[N];\nfor (i = 1099511627776; i < N + 1099511627776; i++)\n  A[i - 1099511627776] = A[i - 1099511627776] + 1;\n")
open(f"{w}/scores.toml", "w").write("[likelihood]\nfunction_match = 1000000000000000000\n")
EOF

row() { # name, then the command
  local name=$1; shift
  local log="$W/time.log"
  set +e
  /usr/bin/time -v -o "$log" timeout 300 "$@" >/dev/null 2>"$W/err"
  local rc=$?
  set -e
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$log")
  rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.1f MiB", $2/1024}' "$log")
  printf '| %s | %s | %s | %s | %s |\n' "$name" "$rc" "$wall" "$rss" "$(head -c 110 "$W/err" | tr '\n' ' ')"
}

echo "| input (issue 15 item) | exit | wall | peak RSS | first words on stderr |"
echo "|---|---|---|---|---|"
row "1: 6,700 nested parentheses" "$K" cache info "$W/parens.k"
row "1: 20,000 unary minus" "$K" cache info "$W/minus.k"
row "1: 20,000 nested for loops" "$K" cache info "$W/loops.k"
row "2: far subscript (A[i + 10^12])" "$K" cache simulate "$W/far.k" --param N=100000
row "2: process-address bases" "$K" cache simulate "$W/far.k" --param N=100000 --base A=93824992231424,B=140737488338944
row "2: --align 2^63-1" "$K" cache simulate "$W/far.k" --param N=1000 --align 9223372036854775807
# A real samples recording for the score table to be used on: /bin/true traced, then sampled.
"$K" trace exact --max-instructions 20000 -o "$W/true.ksk" -- /bin/true 2>/dev/null
"$K" sample "$W/true.ksk" --period 31 -o "$W/true-p31.ksk" >/dev/null
row "4: score 1e18" "$K" reconstruct "$W/true-p31.ksk" --split count:1000 --scores "$W/scores.toml"
row "7: module /dev/zero in a .ksk" "$K" show "$W/devzero.ksk"
row "8: 100,000 Module events" "$K" show "$W/modules.ksk" --limit 5
# Item 8 as a ratio (issue 45: tests/hostile_cli.rs counts the modules read, this times
# them): twice the modules at descending addresses, about twice the time when the module
# map loads in n log n, four times when each insertion moves the map (34 s
# for 100,000 before). Medians of five runs each, the two sizes alternated.
python3 - "$K" "$W" <<'PYEOF'
import statistics, subprocess, sys, time
k, w = sys.argv[1:3]
times = {"modules-50k.ksk": [], "modules.ksk": []}
for _ in range(5):
    for f in times:
        t = time.perf_counter()
        subprocess.run([k, "show", f"{w}/{f}", "--limit", "5", "--counts"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times[f].append(time.perf_counter() - t)
small, large = statistics.median(times["modules-50k.ksk"]), statistics.median(times["modules.ksk"])
print(f"| 8: 100,000 against 50,000 Module events, show --counts (medians of 5, alternated) | 0 | {large:.2f} s / {small:.2f} s = {large / small:.2f} | | n log n: about 2; quadratic: about 4 |")
PYEOF
row "9: loop bound shifted by 2^40, --budget 10" "$K" cache model "$W/shift.k" --method interpolate --budget 10

# Memory on large recordings: Debian's gzip compressing 1.6 MB under Valgrind, its basic-block
# stream recorded (tens of millions of blocks), then read back by show and paths.
head -c 500000 /dev/urandom > "$W/rnd"; seq 1 100000 > "$W/txt"; cat "$W/rnd" "$W/txt" "$W/rnd" > "$W/in"
"$K" paths --scope all --record "$W/gzip-blocks.ksk" -- gzip -c "$W/in" >/dev/null 2>&1
printf '| (recording: %s MB, %s) | | | | |\n' "$(( $(stat -c %s "$W/gzip-blocks.ksk") / 1000000 ))" "$("$K" show "$W/gzip-blocks.ksk" --limit 1 --json 2>/dev/null | python3 -c 'import json,sys; s=json.load(sys.stdin)["summary"]; print(s["events"], "events,", s["blocks"], "blocks")')"
row "memory: show --limit 0 of gzip's block stream (output to /dev/null)" "$K" show "$W/gzip-blocks.ksk" --limit 0
row "memory: paths --source of gzip's block stream" "$K" paths --scope all --source "$W/gzip-blocks.ksk"
row "memory: paths --source of 100,000 Module events" "$K" paths --scope all --source "$W/modules.ksk"

# Item 6: the xlat table bomb (an 8,191-term argument shared as a prefix by 600 entries,
# 20 KB) in a module of its own, decoded with a trace whose header names that module.
python3 - "$W" <<'PYEOF'
import sys
w = sys.argv[1]
def u(v):
    o = bytearray()
    while True:
        b = v & 0x7f; v >>= 7
        if v == 0:
            o.append(b); return bytes(o)
        o.append(b | 0x80)
def tree(d):
    return b"\x00" + u(0) if d == 0 else b"\x02\x00" + tree(d - 1) + tree(d - 1)
t = bytearray(b"KXL1") + (0).to_bytes(8, "little") + u(601)
t += u(0) + u(1) + u(0) + u(1) + u(1) + u(1) + tree(12) + u(0)
for i in range(1, 601):
    t += u(i) + u(1) + u(1) + u(0) + u(0) + u(0)
payload = u(12) + b"kansoku.xlat" + bytes(t)
open(f"{w}/bomb.wasm", "wb").write(b"\0asm\1\0\0\0" + b"\0" + u(len(payload)) + payload)
PYEOF
trace_for() { # a header-only trace naming module hash $1
  python3 -c "import sys; open(sys.argv[1],'wb').write(b'KTRC'+bytes([1,0,0,0])+int(sys.argv[2],16).to_bytes(8,'little'))" "$W/bomb.trace" "$1"
}
trace_for 0
hash=$( ("$K" tp decode --module "$W/bomb.wasm" "$W/bomb.trace" 2>&1 || true) | sed -n 's/.*module given has hash \([0-9a-f]*\).*/\1/p')
trace_for "$hash"
row "6: xlat table bomb (20 KB), tp decode" "$K" tp decode --module "$W/bomb.wasm" "$W/bomb.trace"
