#!/usr/bin/env bash
# Runs ON the GPU machine, from the repository root, with .gpu/ carried. A fresh GPU machine
# takes 4-5 minutes to build kbrl; a session's later calls can skip that by carrying the
# binaries the first call built (stripped and compressed: a few MiB) back in .gpu/.
#
#   bash bench/gpu_prebuilt.sh ensure TARGETS...   build-gpu/ has TARGETS afterwards: kept from the
#                                                   last call on a warm machine, else unpacked
#                                                   from .gpu/prebuilt.tar.xz (when it holds them),
#                                                   else built (bench/gpu_build_target.sh)
#   bash bench/gpu_prebuilt.sh pack FILE TARGETS... strips TARGETS into FILE (a .tar.xz), to bring
#                                                   back under $OUT and copy to .gpu/prebuilt.tar.xz
#
# The binaries live in build-gpu/ either way, so they find tools/ beside it as built ones do.
# After `ensure`, `source .gpu/env.sh` as after a build.
set -euo pipefail
cmd=${1:?usage: gpu_prebuilt.sh ensure|pack ...}; shift
tarball=.gpu/prebuilt.tar.xz

have_all() { for t in "$@"; do [ -x "build-gpu/$t" ] || return 1; done; }
packed_all() {
  [ -f "$tarball" ] || return 1
  local list; list=$(tar -tJf "$tarball") || return 1
  for t in "$@"; do grep -qx "$t" <<< "$list" || return 1; done
}

case $cmd in
  ensure)
    # .gpu/build.sh up to its configure step: the Debian packages and .gpu/env.sh (the carried
    # .gpu/ replaces the one a warm machine had, env.sh included)
    deps_only=$(mktemp)
    sed '/^gen=""/,$d' .gpu/build.sh > "$deps_only"
    if have_all "$@"; then
      bash "$deps_only"
      echo "prebuilt: build-gpu/ kept from the last call"
    elif packed_all "$@"; then
      bash "$deps_only"
      mkdir -p build-gpu && tar -xJf "$tarball" -C build-gpu
      echo "prebuilt: unpacked $* from $tarball"
    else
      echo "prebuilt: building $*"
      bash bench/gpu_build_target.sh "$@"
    fi
    rm -f "$deps_only"
    ;;
  pack)
    file=${1:?usage: gpu_prebuilt.sh pack FILE TARGETS...}; shift
    dir=$(mktemp -d)
    for t in "$@"; do strip -o "$dir/$t" "build-gpu/$t"; done
    tar -cJf "$file" -C "$dir" "$@"
    rm -rf "$dir"
    echo "prebuilt: $(du -h "$file" | cut -f1) in $file for $*"
    ;;
  *) echo "gpu_prebuilt.sh: unknown command '$cmd' (ensure or pack)" >&2; exit 2 ;;
esac
