#!/usr/bin/env bash
# Circles between source files (issue 45's "no circle between files of different concerns",
# without farm-studio). For every crate, an edge file -> file for each `use crate::…`,
# `use super::…`, `use self::…`, a `use` of a child module, and each `crate::a::b::item` /
# `super::item` path in code; paths are resolved through the crate's module files and through
# its re-exports (`pub use room::module;`), to the file that defines the module named last.
# A re-export itself (`pub use` in lib.rs or a mod.rs) is a facade, not a dependency: it is
# followed, not counted as an edge. Comments, strings and `$crate::` are ignored; `mod tests`
# and other inline modules are resolved as modules inside their file.
# Prints the strongly connected components of two or more files, with every edge inside them
# (file:line of the reference) and the room (folder under src/, or "root") of each file.
#   bench/house-circles.sh [DIR]        (default: this repository)
#   DOT=CRATE bench/house-circles.sh    the crate's file graph as Graphviz DOT instead, a cluster
#                                       per room, circles in red: `| dot -Tsvg > rooms.svg`
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
python3 - <<'PY'
import glob, os, re, sys

def strip(text):
    """Text with comments, string and char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i)); i = j
        elif text.startswith('/*', i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith('/*', j): depth += 1; j += 2
                elif text.startswith('*/', j): depth -= 1; j += 2
                else: j += 1
            out.append(re.sub(r'[^\n]', ' ', text[i:j])); i = j
        elif c == 'r' and re.match(r'r#*"', text[i:i + 40]) and (i == 0 or not (text[i-1].isalnum() or text[i-1] == '_')):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            end = n if end < 0 else end + 1 + len(hashes)
            out.append(re.sub(r'[^\n]', ' ', text[i:end])); i = end
        elif c == '"' or (c == 'b' and text.startswith('b"', i)):
            j = i + (2 if c == 'b' else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == '\\' else 1
            out.append(re.sub(r'[^\n]', ' ', text[i:j + 1])); i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'|'\\u\{[0-9a-fA-F]+\}'|'\\x[0-9a-fA-F]{2}'", text[i:i + 12]):
            m = re.match(r"'(\\.|[^\\'])'|'\\u\{[0-9a-fA-F]+\}'|'\\x[0-9a-fA-F]{2}'", text[i:i + 12])
            out.append(' ' * len(m.group(0))); i += len(m.group(0))
        else:
            out.append(c); i += 1
    return ''.join(out)

def expand(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e'] (aliases `as x` dropped)."""
    tree = re.sub(r'\s+', '', tree)
    def parts(s):
        depth, cur, out = 0, '', []
        for ch in s:
            if ch == ',' and depth == 0:
                out.append(cur); cur = ''
                continue
            depth += ch == '{'
            depth -= ch == '}'
            cur += ch
        if cur: out.append(cur)
        return out
    def go(s):
        s = re.sub(r'as[A-Za-z_]\w*$', '', s) if re.search(r'[A-Za-z_\}]as[A-Za-z_]\w*$', s) else s
        i = s.find('{')
        if i < 0:
            return [s]
        prefix, inner = s[:i], s[i + 1:s.rfind('}')]
        return [prefix + x for p in parts(inner) for x in go(p)]
    return [x.rstrip(':') for x in go(tree)]

def crate_modules(src):
    """module path (tuple) -> file, for lib.rs/main.rs, foo.rs, foo/mod.rs."""
    mods = {}
    for f in glob.glob(os.path.join(src, '**/*.rs'), recursive=True):
        rel = os.path.relpath(f, src)[:-3].split(os.sep)
        if rel in (['lib'], ['main']):
            mods[()] = f
        elif rel[-1] == 'mod':
            mods[tuple(rel[:-1])] = f
        elif rel[0] != 'bin':
            mods[tuple(rel)] = f
    return mods

def analyse(crate):
    src = os.path.join(crate, 'src')
    mods = crate_modules(src)
    if () not in mods:
        return [], {}
    texts = {f: strip(open(f, encoding='utf-8', errors='replace').read()) for f in mods.values()}
    file_mod = {f: m for m, f in mods.items()}
    # Per module (file module or inline module): its `use` paths, with line and visibility.
    uses = {}      # module -> [(path, line, is_pub, file)]
    refs = []      # (file, line, module, path) for paths in code
    inline = set()
    for f, text in texts.items():
        base = file_mod[f]
        # Track inline modules by brace depth.
        stack = []  # (name, depth at which it closes)
        depth = 0
        line = 1
        i = 0
        n = len(text)
        tokens = re.finditer(r'\n|\{|\}|\bmod\s+([A-Za-z_]\w*)\s*\{|(\bpub(?:\([^)]*\))?\s+)?\buse\s+([^;]+);|(?<![\w$:])((?:crate|super|self)(?:::[A-Za-z_]\w*)+)', text)
        for m in tokens:
            tok = m.group(0)
            cur = base + tuple(s for s, _ in stack)
            if tok == '\n':
                line += 1
            elif tok == '{':
                depth += 1
            elif tok == '}':
                depth -= 1
                while stack and stack[-1][1] > depth:
                    stack.pop()
            elif m.group(1):
                depth += 1
                stack.append((m.group(1), depth))
                inline.add(base + tuple(s for s, _ in stack))
            elif m.group(3) is not None:
                is_pub = bool(m.group(2)) and 'in ' not in (m.group(2) or '')
                for p in expand(m.group(3)):
                    uses.setdefault(cur, []).append((p, line, is_pub, f))
                line += tok.count('\n')
            elif m.group(4):
                refs.append((f, line, cur, m.group(4)))
    modset = set(mods) | inline

    def absolute(module, path):
        segs = path.split('::')
        if segs[0] == 'crate':
            return list(segs[1:])
        cur = list(module)
        while segs and segs[0] in ('self', 'super'):
            if segs.pop(0) == 'super':
                cur = cur[:-1]
        return cur + segs

    def aliases(module):
        out = {}
        for p, _, _, _ in uses.get(module, []):
            segs = p.split('::')
            name = segs[-1]
            if name in ('*', 'self'):
                continue
            out[name] = p
        return out

    def resolve(module, path, seen=0):
        """The module (tuple) that holds the item `path` names, seen from `module`."""
        segs = absolute(module, path)
        at = ()
        i = 0
        while i < len(segs):
            s = segs[i]
            if at + (s,) in modset:
                at = at + (s,); i += 1
                continue
            al = aliases(at).get(s)
            if al and seen < 8 and s != 'self':
                target = al.split('::')
                if target[0] not in ('crate', 'super', 'self') and tuple(at) + (target[0],) not in modset:
                    break  # an external crate's item
                new = absolute(at, al) if target[0] in ('crate', 'super', 'self') else list(at) + target
                segs = new + segs[i + 1:]
                at, i, seen = (), 0, seen + 1
                continue
            break
        return at

    def file_of(module):
        while module not in mods:
            module = module[:-1]
        return mods[module]

    edges = {}
    for module, us in uses.items():
        for p, line, is_pub, f in us:
            first = p.split('::')[0]
            if first not in ('crate', 'super', 'self') and module + (first,) not in modset:
                continue  # an external crate or the prelude
            if is_pub and os.path.basename(f) in ('lib.rs', 'mod.rs', 'main.rs'):
                continue  # a facade's re-export
            g = file_of(resolve(module, p))
            if g != f:
                edges.setdefault((f, g), []).append(line)
    for f, line, module, p in refs:
        g = file_of(resolve(module, p))
        if g != f:
            edges.setdefault((f, g), []).append(line)
    return edges, mods

def sccs(nodes, adj):
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    sys.setrecursionlimit(10000)
    def visit(v):
        index[v] = low[v] = counter[0]; counter[0] += 1
        stack.append(v); on.add(v)
        for w in adj.get(v, ()):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            out.append(sorted(comp))
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out

def room(f):
    rel = f.split('/src/', 1)[1]
    return rel.split('/')[0] if '/' in rel else 'root'

def dot(crate):
    """The crate's file graph as Graphviz DOT: a cluster per room, a circle's edges red."""
    edges, mods = analyse(crate)
    adj = {}
    for (a, b) in edges:
        adj.setdefault(a, set()).add(b)
    circle_of = {f: i for i, c in enumerate(sccs(set(mods.values()), adj)) if len(c) > 1 for f in c}
    short = lambda f: f.split('/src/', 1)[1]
    name = os.path.basename(crate)
    print(f'digraph "{name}" {{')
    print(f'  label="{name}: files by room (folder under src/); an arrow: a file uses another; red: a circle";')
    print('  labelloc=t; rankdir=LR; fontname="sans-serif"; node [shape=box, fontname="monospace", fontsize=10]; edge [color=gray40];')
    by_room = {}
    for f in sorted(set(mods.values())):
        by_room.setdefault(room(f), []).append(f)
    for r, files in sorted(by_room.items()):
        print(f'  subgraph "cluster_{r}" {{ label="{r}"; style=rounded; color=steelblue;')
        for f in files:
            print(f'    "{short(f)}";')
        print('  }')
    for (a, b) in sorted(edges):
        red = a in circle_of and circle_of.get(b) == circle_of[a]
        print(f'  "{short(a)}" -> "{short(b)}"' + (' [color=red, penwidth=2];' if red else ';'))
    print('}')

if os.environ.get('DOT'):
    dot(os.path.join('crates', os.environ['DOT']))
    sys.exit(0)

total = 0
crates_with = 0
for crate in sorted(glob.glob('crates/*')):
    if not os.path.isdir(os.path.join(crate, 'src')):
        continue
    edges, mods = analyse(crate)
    adj = {}
    for (a, b) in edges:
        adj.setdefault(a, set()).add(b)
    circles = [c for c in sccs(set(mods.values()), adj) if len(c) > 1]
    if not circles:
        continue
    crates_with += 1
    for c in circles:
        total += 1
        rooms = sorted({room(f) for f in c})
        kind = 'one room' if len(rooms) == 1 else 'ACROSS ROOMS'
        print(f"{crate}: a circle of {len(c)} files ({kind}: {', '.join(rooms)})")
        for (a, b), lines in sorted(edges.items()):
            if a in c and b in c:
                short = lambda f: f.split('/src/', 1)[1]
                lines = sorted(set(lines))
                print(f"    {short(a)}:{','.join(map(str, lines[:6]))}{'…' if len(lines) > 6 else ''} -> {short(b)}")
print(f"circles: {total} in {crates_with} crates")
PY
