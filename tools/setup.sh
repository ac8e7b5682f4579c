#!/usr/bin/env bash
# Installs what kbrl needs to build and test on Debian 12, and nothing when all of it is there.
# Idempotent: a second run prints nothing and changes nothing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git openssl
  libcaf-dev                      # actors, middleman, OpenSSL module (0.17.6)
  libsimdjson-dev libtomlplusplus-dev libspdlog-dev libfmt-dev libhnswlib-dev
  libboost-test-dev libcurl4-openssl-dev libssl-dev libpcre2-dev libedit-dev libcli11-dev
  libbenchmark-dev
  libtorch-dev python3-torch      # libtorch 1.13 (CPU) and the matching Python for the worker
  libgloo-dev                     # Gloo's headers: c10d's CPU all-reduce (data-parallel learner)
  libopenblas0-pthread            # without it libtorch matmuls are ~20x slower on CPU
  libtcmalloc-minimal4            # CPU tensors: glibc malloc hands each freed one back (10x slower learner)
  python3-numpy pybind11-dev      # load_inline builds need pybind11 headers (Debian torch lacks them)
  python3-jinja2                  # models' own chat templates (tools/kbrl_chat_template.py)
  libyaml-cpp-dev                 # kbrl-config from-yaml (the seed projects' YAML configs)
  bubblewrap                      # evaluation workers: network-less, read-only sandbox
  libseccomp-dev                  # evaluation workers: no unix sockets (seccomp filter)
  libutf8proc-dev                 # Unicode normalization (NFC) for tokenizers
  chromium-headless-shell         # tests render kbrl-eval's report.html in a headless browser
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Tokenizer tests compare against the reference encoders from npm. A machine may already have
# Node.js from elsewhere (NodeSource bundles npm); only a machine without the commands gets
# Debian's, so the two never conflict.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
[ ${#missing[@]} -eq 0 ] && exit 0

echo "kbrl setup: installing ${missing[*]}"
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo_cmd apt-get update -qq
$sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "kbrl setup: done"
