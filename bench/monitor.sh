#!/usr/bin/env bash
# Seed 001 measurements: CPU-bound vs I/O-bound workloads against `vmstat 1` run
# alongside; event-mode overhead per hit (trap and uprobe) and spin timing; 1,000-point
# uprobe run (with its teardown time); waveform periods. Usage: bench/monitor.sh [KANSOKU]
set -euo pipefail
K=${1:-target/release/kansoku}
[ -x "$K" ] || cargo build --release -p kansoku-cli
D=$(mktemp -d); trap 'rm -rf "$D"' EXIT
$K demo --dir "$D/demo" >/dev/null 2>&1 || true
B="$D/demo/bin"; [ -x "$B/workload" ] || { echo "demo did not build the examples"; exit 1; }
for job in "cpu 6 2" "io 6 $D/io.dat"; do
  echo "== workload $job (kansoku monitor every 1000 ms vs vmstat 1)"
  vmstat -n 1 8 > "$D/vmstat.txt" &
  V=$!
  sleep 0.5
  $K monitor --interval 1000 --json -o "$D/m.json" -- "$B/workload" $job >/dev/null 2>&1
  wait $V
  python3 - "$D/m.json" "$D/vmstat.txt" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]; e = s["eight"]
rows = [l.split() for l in open(sys.argv[2]) if l.split() and l.split()[0].isdigit()][1:]  # drop the since-boot line
n = min(len(rows), int(round(s["measured_s"])))
rows = rows[:n]
avg = lambda i: sum(float(r[i]) for r in rows) / len(rows)
us, sy, idl, wa = avg(12), avg(13), avg(14), avg(15)
print("  kansoku: " + "  ".join(f"{k} {v:.1f}" for k, v in e.items()))
print(f"  kansoku us+sy {e['user_state']+e['kernel_state']:.1f}  id+wa+st {e['cpu_wait']:.1f};  vmstat ({len(rows)} s) us {us:.1f} sy {sy:.1f} id {idl:.1f} wa {wa:.1f}")
print(f"  difference CPU active vs vmstat us+sy: {e['cpu_active']-(us+sy):+.1f} points; user {e['user_state']-us:+.1f}; kernel {e['kernel_state']-sy:+.1f}")
PY
done
echo "== event mode: spin(1 ms) x 200, calibrated, both mechanisms"
for m in trap uprobe; do
  $K monitor events --mechanism $m --calibrate --json -o "$D/e.json" --probe spin --probe leaf --probe recurse -- "$B/events" 200 1000000 >"$D/e.out" 2>"$D/e.err"
  python3 - "$D/e.json" "$D/e.out" "$m" <<'PY'
import json, sys, re
v = json.load(open(sys.argv[1])); out = open(sys.argv[2]).read()  # the program's own timing, on its stdout
own = re.search(r"mean_ns=([\d.]+) median_ns=(\d+)", out)
sp = [r for r in v["report"]["routines"] if r["name"] == "spin"][0]
c = v["calibration"]
print(f"  {sys.argv[3]}: overhead/hit median {c['median_ns']:.0f} ns mean {c['mean_ns']:.0f} ns; spin calls {sp['calls']}; "
      f"mean {sp['mean_ns']:.0f} (uncorrected {sp['raw_mean_ns']:.0f}) vs own {float(own.group(1)):.0f} ns ({(sp['mean_ns']/float(own.group(1))-1)*100:+.2f}%); "
      f"p50 {sp['p50_ns']:.0f} vs own median {own.group(2)} ns ({(sp['p50_ns']/float(own.group(2))-1)*100:+.2f}%)")
PY
done
echo "== 1,000 single points + 3 routines by uprobe (wall time includes the kernel's uprobe teardown)"
P=$(for i in $(seq 0 999); do printf -- "--probe p%d:entry " $i; done)
/usr/bin/time -f "  wall %e s" $K monitor events --mechanism uprobe --json -o "$D/e1000.json" $P --probe spin --probe leaf --probe recurse -- "$B/events" 5 1000 2>&1 >/dev/null | grep wall
python3 -c "import json;v=json.load(open('$D/e1000.json'));r=v['report'];print('  points',len(r['points']),'hits',r['hits'],'lost',v['lost'],'min/max hits per p-point',min(p['hits'] for p in r['points'] if p['name'].startswith('p')),max(p['hits'] for p in r['points'] if p['name'].startswith('p')))"
/usr/bin/time -f "  trap, same 1,003 points: wall %e s" $K monitor events --mechanism trap --json $P --probe spin --probe leaf --probe recurse -- "$B/events" 5 1000 2>&1 >/dev/null | grep wall
echo "== waveform"
$K wave --exact --marker kernel_loop --max-instructions 50000 --json -o "$D/w1.json" -- "$B/wave" loop 100000 >/dev/null 2>&1; python3 -c "import json,sys;v=json.load(open('$D/w1.json'));print('  exact 51-instruction loop: code period',v['code_period']['instructions'],'data period',v['data_period']['instructions'])"
$K wave --exact --marker func_M --max-instructions 50000 --json -o "$D/w2.json" -- "$B/seed000" 100000 >/dev/null 2>&1; python3 -c "import json,sys;v=json.load(open('$D/w2.json'));print('  exact seed000: code period',v['code_period']['instructions'])"
$K wave --time-period 20000 --json -o "$D/w3.json" -- "$B/wave" phases 300 >"$D/w.out" 2>"$D/w.err"; python3 -c "
import json,sys,re
v=json.load(open('$D/w3.json')); own=float(re.search(r'round_ns=(\d+)',open('$D/w.out').read()).group(1))
p=v['code_period']
if p is None:
    print('  cpu-clock 20 us on wave phases: points',v['points'],'; code address: no period:',v['code_no_period'],'; program round',own/1e9,'s')
else:
    print('  cpu-clock 20 us on wave phases: points',v['points'],'mean interval',round(v['mean_interval_ns']),'ns; code period',round(p['samples'],2),'samples =',p['seconds'],'CPU s; program round',own/1e9,'s (%+.1f%%)'%((p['seconds']*1e9/own-1)*100), '; instructions:', p['instructions'])
"
