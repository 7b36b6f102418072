#!/bin/bash
# Installs this build into a scratch folder, then configures, builds and runs
# a tiny CMake project that finds braid with find_package(braid).
set -euo pipefail
build_dir=$1
consumer_src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

meson install -C "$build_dir" --no-rebuild --quiet --destdir "$work/stage" >"$work/install.log" 2>&1 ||
    { cat "$work/install.log"; echo "meson install failed"; exit 1; }
config=$(find "$work/stage" -name braidConfig.cmake | head -n 1)
[ -n "$config" ] || { echo "no braidConfig.cmake in the installed tree"; exit 1; }
pc=$(find "$work/stage" -name braid.pc | head -n 1)
[ -n "$pc" ] || { echo "no braid.pc in the installed tree"; exit 1; }

cmake -S "$consumer_src" -B "$work/build" -Dbraid_DIR="$(dirname "$config")" >"$work/cmake.log" 2>&1 ||
    { cat "$work/cmake.log"; echo "cmake configure failed"; exit 1; }
cmake --build "$work/build" >"$work/build.log" 2>&1 ||
    { cat "$work/build.log"; echo "cmake build failed"; exit 1; }
"$work/build/consumer"
