#!/usr/bin/env bash
# The main job on its embedded default: set-up, build, then a single-node cluster on loopback
# (`kbrl-node --role all`) that starts every role, reports its actors and stops cleanly.
# Until the RL loop lands this is what "running kbrl" means; arguments are passed to kbrl-node,
# e.g. tools/run.sh node.stop_after_s=0 to keep it running until Ctrl-C.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KBRL_BUILD:-$root/build}
bash "$root/tools/build.sh"
exec "$build/kbrl-node" --role all node.stop_after_s=3 "$@"
