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
# The archive carries a digest of the C/C++/CUDA sources and CMake files it was built from; one
# made from other sources is not unpacked (the targets are built instead), and a build-gpu/ kept
# on a warm machine is used as it is only when it was made from these sources.
# After `ensure`, `source .gpu/env.sh` as after a build.
set -euo pipefail
cmd=${1:?usage: gpu_prebuilt.sh ensure|pack ...}; shift
tarball=.gpu/prebuilt.tar.xz

have_all() { for t in "$@"; do [ -x "build-gpu/$t" ] || return 1; done; }
sources_digest() {
  find . -path ./build-gpu -prune -o -path ./.gpu -prune -o -path ./build -prune -o -type f \
      \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \
         -o -name CMakeLists.txt -o -name '*.cmake' \) -print \
    | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1
}
packed_all() {
  [ -f "$tarball" ] || return 1
  local list; list=$(tar -tJf "$tarball") || return 1
  for t in "$@"; do grep -qx "$t" <<< "$list" || return 1; done
  if [ "$(tar -xJOf "$tarball" SOURCES_DIGEST)" != "$(sources_digest)" ]; then
    echo "prebuilt: $tarball was built from other sources"; return 1
  fi
}

case $cmd in
  ensure)
    # .gpu/build.sh up to its configure step: the Debian packages and .gpu/env.sh (the carried
    # .gpu/ replaces the one a warm machine had, env.sh included)
    deps_only=$(mktemp)
    sed '/^gen=""/,$d' .gpu/build.sh > "$deps_only"
    digest=$(sources_digest)
    if have_all "$@" && [ "$(cat build-gpu/SOURCES_DIGEST 2>/dev/null)" = "$digest" ]; then
      bash "$deps_only"
      echo "prebuilt: build-gpu/ kept from the last call"
    elif packed_all "$@"; then
      bash "$deps_only"
      mkdir -p build-gpu && tar -xJf "$tarball" -C build-gpu --exclude=SOURCES_DIGEST
      echo "prebuilt: unpacked $* from $tarball"
    else
      echo "prebuilt: building $*"
      bash bench/gpu_build_target.sh "$@"
    fi
    echo "$digest" > build-gpu/SOURCES_DIGEST
    rm -f "$deps_only"
    ;;
  pack)
    file=${1:?usage: gpu_prebuilt.sh pack FILE TARGETS...}; shift
    dir=$(mktemp -d)
    for t in "$@"; do strip -o "$dir/$t" "build-gpu/$t"; done
    sources_digest > "$dir/SOURCES_DIGEST"
    tar -cJf "$file" -C "$dir" SOURCES_DIGEST "$@"
    rm -rf "$dir"
    echo "prebuilt: $(du -h "$file" | cut -f1) in $file for $*"
    ;;
  *) echo "gpu_prebuilt.sh: unknown command '$cmd' (ensure or pack)" >&2; exit 2 ;;
esac
