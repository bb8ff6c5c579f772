#!/usr/bin/env bash
# Issue 43: `kansoku paths --export callgrind` against `valgrind --tool=callgrind`, function by
# function, on Debian's programs. Per program: total Ir of both, the functions above 0.1 % of
# callgrind's total, how many of them are equal in Ir and in calls, and the worst difference
# (bench/callgrind-compare.py reads both files; `--list N` there shows the N largest).
# Usage: [K=KANSOKU] [KEEP=DIR] [LIST=N] bench/callgrind-equality.sh [PROGRAM...]   (default: bzip2 gzip sqlite3 perl python3.11 zstd)
# Needs sqlite3 and zstd (apt-get install sqlite3 zstd); the rest scripts/setup --tests installs.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${K:-}" ] || cargo build --release -q -p kansoku-cli
K=${K:-${CARGO_TARGET_DIR:-$PWD/target}/release/kansoku}
# KEEP=DIR keeps both profiles of each program there (DIR/PROGRAM.cg, DIR/PROGRAM.k)
if [ -n "${KEEP:-}" ]; then work=$KEEP; mkdir -p "$work"; else work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi
head -c 2000000 /usr/bin/python3.11 > "$work/in.bin"
programs=("$@")
[ ${#programs[@]} -gt 0 ] || programs=(bzip2 gzip sqlite3 perl python3.11 zstd)
# the two runs must run the same instructions: no hash randomisation in perl and python
export PERL_HASH_SEED=0 PERL_PERTURB_KEYS=0 PYTHONHASHSEED=0
# Both runs must also see the same environment, byte for byte in length: under kansoku the
# program sees VALGRIND_LIB (kansoku's tool directory) and an LD_PRELOAD of that directory's
# vgpreload_core, and its environment in kansoku's order. callgrind runs in that environment,
# with VALGRIND_LIB a directory of links to Valgrind's own, padded to the same length
# (getenv, ld.so's tunables and LD_PRELOAD parsing, the stack's layout all depend on it).
# Debian's Valgrind appends /usr/lib/debug to LD_LIBRARY_PATH itself: left out of the copy.
"$K" paths --scope all -o /dev/null -- /usr/bin/env -0 > "$work/env" 2> /dev/null
kansoku_lib=$(tr '\0' '\n' < "$work/env" | sed -n 's/^VALGRIND_LIB=//p')
system_lib=$(dirname "$(readlink -f "$(command -v valgrind)")")/../libexec/valgrind
pad=$work/vglib-
while [ ${#pad} -lt ${#kansoku_lib} ]; do pad=${pad}x; done
[ ${#pad} -eq ${#kansoku_lib} ] || { echo "kansoku's VALGRIND_LIB ($kansoku_lib) is shorter than $pad" >&2; exit 2; }
mkdir -p "$pad"
ln -sf "$(readlink -f "$system_lib")"/* "$pad"/
[ -z "${LD_LIBRARY_PATH:-}" ] || { echo "run without LD_LIBRARY_PATH" >&2; exit 2; }
mapfile -d '' client_env < <(grep -zv '^LD_PRELOAD=\|^LD_LIBRARY_PATH=' "$work/env" | sed -z "s#^VALGRIND_LIB=.*#VALGRIND_LIB=$pad#")
echo "== callgrind export vs valgrind --tool=callgrind ($(valgrind --version)), $(date -u +%F)"
status=0
for w in "${programs[@]}"; do
  case $w in
    bzip2) cmd=(/usr/bin/bzip2 -c "$work/in.bin") ;;
    gzip) cmd=(/usr/bin/gzip -c "$work/in.bin") ;;
    sqlite3) cmd=(/usr/bin/sqlite3 :memory: "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<100000) SELECT sum(x*x), count(*) FROM c;") ;;
    perl) cmd=(/usr/bin/perl -e 'my %h; for my $i (1..100000) { $h{$i % 977} += $i * $i } print scalar(keys %h), "\n"') ;;
    python3.11) cmd=(/usr/bin/python3.11 -c 'd = {}
for i in range(100000): d[i % 977] = d.get(i % 977, 0) + i * i
print(len(d))') ;;
    zstd) cmd=(/usr/bin/zstd -T2 -c "$work/in.bin") ;;
    *) echo "unknown program $w" >&2; exit 2 ;;
  esac
  env -i "${client_env[@]}" valgrind --tool=callgrind --callgrind-out-file="$work/$w.cg" --log-file="$work/$w.cg.log" "${cmd[@]}" > /dev/null
  "$K" paths --scope all --export callgrind="$work/$w.k" -o /dev/null -- "${cmd[@]}" > /dev/null 2> "$work/$w.k.log"
  python3 bench/callgrind-compare.py "$work/$w.cg" "$work/$w.k" --label "$w" --list "${LIST:-0}" || status=1
done
exit $status
