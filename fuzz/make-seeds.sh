#!/usr/bin/env bash
# Makes the small seed corpora in fuzz/seeds/TARGET from kansoku's own example programs,
# kernels and wasm examples (each file a few KB). Run from anywhere; needs a built kansoku
# (KANSOKU=path, default target/release/kansoku), cc, clang and valgrind.
set -euo pipefail
cd "$(dirname "$0")"
K=${KANSOKU:-../target/release/kansoku}
S=seeds
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p $S/{perf_data,ksk_reader,valgrind_stream,tool_paths,lackey_lines,kernel,formulas_json,scores,xlat,wasm_optimize,trace_decode,report_page}

# .ksk: an exact trace and a sampled one of a tiny static program.
printf 'int f(int x) { return x * 3 + 1; }\nint main(int c, char **v) { int s = 0; for (int i = 0; i < 50; i++) s += f(i); return s & 1; }\n' > "$W/tiny.c"
cc -O1 -static -o "$W/tiny" "$W/tiny.c"
"$K" trace exact --max-instructions 1500 -o $S/ksk_reader/exact -- "$W/tiny" >/dev/null 2>&1 || true
"$K" sample --period 31 $S/ksk_reader/exact -o $S/ksk_reader/sampled >/dev/null 2>&1 || true

# Valgrind tool stream: one frame with a module, a thread and superblock entries.
python3 - "$S/valgrind_stream/frame" <<'EOF'
import struct, sys
def v(n):
    o = bytearray()
    while n >= 0x80:
        o.append((n & 0x7f) | 0x80); n >>= 7
    o.append(n); return bytes(o)
path = b"/usr/bin/true"
p = b"\x01" + v(0x401000) + v(0x1000) + v(len(path)) + path + b"\x03" + v(4242)
prev = 0
for a in [0x401000, 0x401010, 0x401000, 0x401040, 0x401000]:
    d = a - prev; prev = a
    p += v((((d << 1) ^ (d >> 63)) & (2**64 - 1)) << 1)
open(sys.argv[1], "wb").write(b"KSB1" + struct.pack("<I", len(p)) + p)
EOF

# The tool's stream through the path analysis: the frame above, and the paths kansoku's
# Valgrind tool counts itself (--paths=split) for tiny (a static program: a few KB).
cp $S/valgrind_stream/frame $S/tool_paths/frame
TOOL_LIB=$(dirname "$(ls -t ${CARGO_TARGET_DIR:-../target}/release/build/kansoku-probe-*/out/valgrind-lib/kansoku-amd64-linux | head -1)")
VALGRIND_LIB="$TOOL_LIB" valgrind --tool=kansoku --out-fd=3 --paths=split --vex-guest-chase=no --vex-guest-max-insns=50 \
  --vex-iropt-unroll-thresh=0 "$W/tiny" 3> $S/tool_paths/tiny-paths >/dev/null 2>&1 || true

# Lackey: the first lines of a real log.
valgrind --tool=lackey --trace-superblocks=yes --basic-counts=no -v -v --log-file="$W/lackey.log" /bin/true >/dev/null 2>&1 || true
head -c 4000 "$W/lackey.log" > $S/lackey_lines/true.log

# Kernels and a formulas file of each format.
for k in seed gemm seidel2d trisolv; do cp ../crates/kansoku-cache/kernels/$k.k $S/kernel/$k; done
"$K" cache model ../crates/kansoku-cache/kernels/trisolv.k --method interpolate --cache assoc=1,line=32,sets=4 -o $S/formulas_json/interpolated >/dev/null 2>&1 || true
"$K" cache model ../crates/kansoku-cache/kernels/trisolv.k --method sets --extent N=8 --cache assoc=1,line=32,sets=4 -o $S/formulas_json/sets >/dev/null 2>&1 || true

# Score tables, TOML and JSON.
printf '[similarity]\nfunction_match = 5\noffset = { "1" = 3, "-1" = 2 }\noffset_default = -1\n[likelihood]\nblock_match = 4\n' > $S/scores/table.toml
printf '{"likelihood": {"function_match": 2, "offset": {"1": 7}}}' > $S/scores/table.json

# wasm: an example module, optimised (its xlat section), and a trace of it.
clang --target=wasm32 -O2 -nostdlib -Wl,--no-entry -Wl,--export=run -I../crates/kansoku-tracepoints/include \
  -o "$W/loops.wasm" ../crates/kansoku-tracepoints/examples/c/loops.c
cp "$W/loops.wasm" $S/wasm_optimize/loops
"$K" tp optimize "$W/loops.wasm" -o "$W/loops.opt.wasm" >/dev/null 2>&1
"$K" tp run "$W/loops.opt.wasm" -o "$W/loops.ktrace" -- 3 >/dev/null 2>&1
python3 - "$W/loops.opt.wasm" "$S/xlat/loops" <<'EOF'
import sys
b = open(sys.argv[1], "rb").read()
i = 8
while i < len(b):
    sid = b[i]; i += 1
    n = s = 0
    while True:
        c = b[i]; i += 1; n |= (c & 0x7f) << s; s += 7
        if c < 0x80: break
    body = b[i:i + n]; i += n
    if sid == 0:
        l = body[0]
        if body[1:1 + l] == b"kansoku.xlat":
            open(sys.argv[2], "wb").write(body[1 + l:])
EOF
# report_page: files of a results directory (0xff between files, 0x00 after each name),
# the demo's kinds and a hostile name.
printf 'summary.txt\0kansoku demo\n== stage\nok\n\xffpaths.csv\0rank,count,path\n1,5,"walk: BB0 BB1"\n\xffmonitor/summary.json\0{"eight": {"cpu_active": 98.0}, "programs": [{"name": "t", "percent": 45}]}\xffkiviat.svg\0<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><text>Eight items</text></svg>\xff<script>x<.txt\0</pre><script>' > $S/report_page/demo-like
# trace_decode: first byte = trace length / 16, then the trace, then the module.
python3 - "$W/loops.ktrace" "$W/loops.opt.wasm" "$S/trace_decode/loops" <<'EOF'
import sys
t = open(sys.argv[1], "rb").read()[:16 * 255]
t = t[:len(t) // 16 * 16]
open(sys.argv[3], "wb").write(bytes([len(t) // 16]) + t + open(sys.argv[2], "rb").read())
EOF
du -sh $S

# perf.data: Debian's perf recording seed000 (cpu-clock and a uprobe marker), whole and cut.
if command -v perf >/dev/null && cc -O1 -o "$W/seed000" ../crates/kansoku-examples/c/seed000.c && perf probe -q -x "$W/seed000" func_M 2>/dev/null; then
  perf record -q -o $S/perf_data/seed000-cpu-clock-uprobe.data -e cpu-clock:u -c 100000 -e probe_seed000:func_M -- "$W/seed000" 200 >/dev/null 2>&1 || true
  perf probe -q -d probe_seed000:func_M || true
  head -c $(( $(stat -c %s $S/perf_data/seed000-cpu-clock-uprobe.data) / 2 )) $S/perf_data/seed000-cpu-clock-uprobe.data > $S/perf_data/cut-in-half.data
fi

