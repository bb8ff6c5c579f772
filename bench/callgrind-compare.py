#!/usr/bin/env python3
"""Compares two callgrind-format profiles function by function (issue 43).

Usage: bench/callgrind-compare.py CALLGRIND_OUT KANSOKU_OUT [--label NAME] [--threshold 0.001] [--list N]

Reads both files directly (Ir is the last number of a cost line; the line after `calls=`
is inclusive cost and is not added to the function). A function is keyed by its object's
file name and its name; a callgrind function without a symbol (`0x…`) and kansoku's
`module+0x…` name are both written `module+0xOFFSET`. Prints one line per program: total Ir
of both, the functions above the threshold (share of callgrind's total), how many of them are
equal in Ir and in calls (summed over callers), and the worst difference; then, with --list,
the N largest differences. Exit status 0 when every function above the threshold is equal in
Ir and calls and the totals are within 0.01 %.
"""
import os
import re
import sys
from collections import defaultdict

NAME = re.compile(r"^\((\d+)\)(?: (.*))?$")


def parse(path):
    names = {"ob": {}, "fn": {}}
    self_ir = defaultdict(int)
    calls = defaultdict(int)  # (caller, callee) -> calls
    total = 0
    summary = None
    ob = cob = "???"
    fn = cfn = None
    skip_next = False

    def name(space, value):
        m = NAME.match(value)
        if not m:
            return value
        i, text = m.group(1), m.group(2)
        if text is not None:
            names[space][i] = text
            return text
        return names[space].get(i, value)

    def key(obj, f):
        base = os.path.basename(obj)
        # Callgrind's --separate-recursions=2 (its default) writes a function's deeper
        # recursion levels as `name'2`: one function for the comparison
        f = re.sub(r"'\d+$", "", f)
        if f.startswith("0x"):
            return f"{base}+{int(f.split()[0], 16):#x}"
        m = re.match(r"^(.*)\+(0x[0-9a-f]+)$", f)
        if m:
            return f"{base}+{int(m.group(2), 16):#x}"
        return f"{base}:{f}"

    with open(path, errors="replace") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if not line or line[0] == "#":
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                if skip_next:
                    skip_next = False
                    continue
                parts = line.split()
                if len(parts) >= 2 and fn is not None:
                    ir = int(parts[-1]) if parts[-1].isdigit() else 0
                    self_ir[key(ob, fn)] += ir
                    total += ir
                continue
            if line.startswith("ob="):
                ob = name("ob", line[3:])
            elif line.startswith("cob="):
                cob = name("ob", line[4:])
            elif line.startswith("fn="):
                fn = name("fn", line[3:])
                cob = ob
            elif line.startswith("cfn="):
                cfn = name("fn", line[4:])
            elif line.startswith("calls="):
                n = int(line[6:].split()[0])
                calls[(key(ob, fn), key(cob, cfn))] += n
                skip_next = True
                cob = ob
            elif line.startswith("summary:") or line.startswith("totals:"):
                summary = int(line.split()[1])
    return self_ir, calls, total, summary


def main():
    args = sys.argv[1:]
    label, threshold, listed = None, 0.001, 0
    positional = []
    i = 0
    while i < len(args):
        if args[i] == "--label":
            label, i = args[i + 1], i + 2
        elif args[i] == "--threshold":
            threshold, i = float(args[i + 1]), i + 2
        elif args[i] == "--list":
            listed, i = int(args[i + 1]), i + 2
        else:
            positional.append(args[i])
            i += 1
    cg_path, k_path = positional
    cg, cg_calls, cg_total, _ = parse(cg_path)
    k, k_calls, k_total, _ = parse(k_path)
    incoming = lambda cs: {f: sum(n for (a, b), n in cs.items() if b == f and a != f) for f in {b for _, b in cs}}
    cg_in, k_in = incoming(cg_calls), incoming(k_calls)
    big = [f for f, ir in cg.items() if ir > threshold * cg_total]
    equal_ir = [f for f in big if k.get(f, 0) == cg[f]]
    equal_calls = [f for f in big if k_in.get(f, 0) == cg_in.get(f, 0)]
    diffs = sorted(((k.get(f, 0) - cg.get(f, 0), f) for f in set(cg) | set(k)), key=lambda d: -abs(d[0]))
    worst = diffs[0] if diffs else (0, "-")
    worst_big = max(((abs(k.get(f, 0) - cg[f]), f) for f in big), default=(0, "-"))
    rel = (k_total - cg_total) / cg_total * 100 if cg_total else 0.0
    print(
        f"{label or os.path.basename(k_path)}: total Ir callgrind {cg_total:,} kansoku {k_total:,} ({rel:+.4f} %); "
        f"{len(big)} functions above {threshold * 100:g} %: {len(equal_ir)} equal in Ir, {len(equal_calls)} in calls; "
        f"worst above the threshold {worst_big[1]} ({worst_big[0]:,} Ir); worst of all {worst[1]} ({worst[0]:+,} Ir)"
    )
    for d, f in diffs[:listed]:
        if d:
            print(f"   {f}: callgrind {cg.get(f, 0):,} kansoku {k.get(f, 0):,} ({d:+,}); calls {cg_in.get(f, 0):,} vs {k_in.get(f, 0):,}")
    for f in big:
        if f in equal_ir and k_in.get(f, 0) != cg_in.get(f, 0) and listed:
            print(f"   calls differ: {f}: callgrind {cg_in.get(f, 0):,} kansoku {k_in.get(f, 0):,}")
    ok = len(equal_ir) == len(big) and len(equal_calls) == len(big) and abs(rel) <= 0.01
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
