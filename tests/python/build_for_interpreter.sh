#!/usr/bin/env bash
# Builds the extension module of an existing build tree again for another CPython (its headers and extension
# suffix), next to the first one: the GPU machine's python3 (3.12, with torch) is not Debian 12's (3.11), and
# its tests (tests/python/test_cuda.py) need a module it can import. The objects are compiled with the build
# tree's own flags and linked with its link line; only the Python headers and the file name change.
#   tests/python/build_for_interpreter.sh BUILD_DIR PYTHON_INCLUDE_DIR EXT_SUFFIX
#   (EXT_SUFFIX as sysconfig.get_config_var("EXT_SUFFIX") gives it, e.g. .cpython-312-x86_64-linux-gnu.so)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd)
include=$2
suffix=$3
target=$build/python/CMakeFiles/flashdeberta_python.dir
flags=$(sed -n 's/^CXX_FLAGS = //p' "$target/flags.make")
defines=$(sed -n 's/^CXX_DEFINES = //p' "$target/flags.make")
# Its parent folder too: Debian-style layouts keep pyconfig.h in <parent>/<multiarch>/python3.X/.
includes=$(sed -n 's/^CXX_INCLUDES = //p' "$target/flags.make" |
  sed "s#-isystem /usr/include/python3[.0-9]*#-isystem $include -isystem $(dirname "$include")#")
work=$(mktemp -d)
objects=()
for source in "$root"/python/src/*.cpp; do
  object=$work/$(basename "$source" .cpp).o
  # shellcheck disable=SC2086 # the flags are word lists
  c++ $defines $includes $flags -c "$source" -o "$object"
  objects+=("$object")
done
# The build's link line with these objects in the place of its own, writing the new file name.
link=$(sed -e 's#CMakeFiles/flashdeberta_python.dir/src/module\.cpp\.o#@OBJECTS@#' \
  -e 's#CMakeFiles/flashdeberta_python.dir/src/[a-z_]*\.cpp\.o##g' \
  -e "s#_native\.cpython-[0-9]*-x86_64-linux-gnu\.so#_native$suffix#" "$target/link.txt")
cd "$build/python"
# shellcheck disable=SC2086 # the link line is a word list
${link/@OBJECTS@/${objects[*]}}
rm -rf "$work"
ls -la "$build/python/flashdeberta/_native$suffix"
