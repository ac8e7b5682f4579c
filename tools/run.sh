#!/usr/bin/env bash
# The main job on its embedded default, the quickstart: set-up, build, then RL training of the
# shipped tiny policy (config/quickstart/policy) on the bundled problems, every role in one
# process on loopback, on the CPU (config/quickstart/run.toml: 30 steps of 4 problems x 8
# samples, a few minutes). Each run gets its own directory runs/quickstart-<date-time>.
# Arguments are passed to kbrl-node, e.g. tools/run.sh rl.steps=60.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KBRL_BUILD:-$root/build}
bash "$root/tools/build.sh"
cd "$root" # the quickstart config names its policy and problems relative to the repository
exec "$build/kbrl-node" --role all --config config/quickstart/run.toml \
  "run.name=quickstart-$(date +%Y%m%d-%H%M%S)" "$@"
