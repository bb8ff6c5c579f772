#!/usr/bin/env bash
# Seed 000 reconstruction speed: 10,000 partial sequences of 20 samples, patent solver.
# Usage: bench/reconstruct-speed.sh [N] [L]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p kansoku-reconstruct --example speed
/usr/bin/time -f "wall %e s, user %U s, sys %S s" target/release/examples/speed "${1:-10000}" "${2:-20}"
