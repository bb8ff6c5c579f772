#!/usr/bin/env bash
# Counts of issue 45 over a source tree (default: this repository): public items, unsafe
# blocks without a SAFETY argument in the five lines before them, CLI test files with a
# harness of their own, skips printed as a pass, direct C compiler calls in tests,
# wall-clock assertions, CLI lines. Text counts, not a compiler's: a reading aid.
#   bench/house-counts.sh [DIR]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
echo "pub items: $(grep -rE '^\s*pub (fn|struct|enum|trait|type|const|static|mod|use) ' crates/*/src --include=*.rs | wc -l)"
echo "pub mod: $(grep -rE '^\s*pub mod ' crates/*/src --include=*.rs | wc -l)"
python3 - <<'PY'
import glob, re
blocks = undocumented = 0
for f in glob.glob('crates/*/src/**/*.rs', recursive=True):
    lines = open(f).read().split('\n')
    for i, line in enumerate(lines):
        if line.strip().startswith('//'):
            continue
        for _ in re.finditer(r'unsafe\s*\{', line):
            blocks += 1
            if 'SAFETY' not in '\n'.join(lines[max(0, i - 4):i + 1]):
                undocumented += 1
print(f"unsafe blocks: {blocks}, without a SAFETY comment: {undocumented}")
PY
echo "CLI test files with their own fn kansoku: $(grep -l '^fn kansoku' crates/kansoku-cli/tests/*.rs | wc -l) of $(ls crates/kansoku-cli/tests/*.rs | wc -l)"
echo "skips printed as a pass: $(grep -rniE '(e?println!\("skipped|println!\("the Valgrind engine is skipped|not installed.*not checked)' crates/*/tests | wc -l)"
echo "kansoku_examples::skip calls: $(grep -rnE '\bskip\((kansoku_examples::)?Missing' crates/*/tests | wc -l)"
# A compiler named by a literal, a variable or $CC (g++ and clang too).
echo "direct C compiler calls in tests: $(grep -rnE 'Command::new\(("cc"|"gcc"|"clang"|"g\+\+"|compiler|std::env::var\("CC"\))' crates/*/tests | wc -l)"
# An elapsed time asserted directly, or kept (`let took = t.elapsed()`) and compared with a
# Duration in an assert.
echo "wall-clock assertions: $(grep -rnE 'assert!\(.*(elapsed\(\)|[<>]=? *(std::time::)?Duration::from_)' crates/*/tests crates/*/src | wc -l)"
echo "CLI lines: $(cat crates/kansoku-cli/src/*.rs crates/kansoku-cli/src/*/*.rs | wc -l)"
