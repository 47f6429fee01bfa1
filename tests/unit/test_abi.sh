#!/usr/bin/env bash
# test_abi.sh - libcleave's ABI: only cl_* exported, SONAME libcleave.so.0, and cleave.h compiling
# on its own as C11 and as C++.
# With a build dir, also installs into a scratch root and builds an app with pkg-config's flags.
# Usage: test_abi.sh <path to libcleave.so> <include dir holding cleave/cleave.h> [build dir]
set -euo pipefail
lib=$1
inc=$2
build=${3:-}
fail=0

# The version node (CLEAVE_0, type A) is not a symbol anyone calls; everything else must be cl_*.
bad=$(nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' | sed 's/@.*//' | grep -v '^cl_' || true)
if [ -n "$bad" ]; then
  echo "FAIL: symbols exported beyond the cl_* API:"; echo "$bad"; fail=1
fi
count=$(nm -D --defined-only "$lib" | awk '$2 == "T"' | grep -c ' cl_' || true)
if [ "$count" -lt 20 ]; then
  echo "FAIL: only $count cl_* functions exported"; fail=1
fi
if nm -D --defined-only "$lib" | grep -q ' cl_.*@@CLEAVE_0'; then :; else
  echo "FAIL: cl_* symbols are not versioned CLEAVE_0"; fail=1
fi

soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
if [ "$soname" != "libcleave.so.0" ]; then
  echo "FAIL: SONAME is '$soname', want libcleave.so.0"; fail=1
fi
if readelf -d "$lib" | grep -q 'NEEDED.*librte_'; then
  echo "FAIL: libcleave links DPDK"; fail=1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include <cleave/cleave.h>\n' > "$tmp/c.c"
printf '#include <cleave/cleave.h>\n' > "$tmp/cxx.cc"
gcc -std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$inc" "$tmp/c.c" \
  || { echo "FAIL: cleave.h does not compile as C11"; fail=1; }
g++ -std=c++17 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$inc" "$tmp/cxx.cc" \
  || { echo "FAIL: cleave.h does not compile as C++"; fail=1; }

if [ -n "$build" ]; then
  meson install -C "$build" --no-rebuild --quiet --destdir "$tmp/root" >/dev/null
  pc=$(find "$tmp/root" -name cleave.pc | head -1)
  if [ -z "$pc" ]; then
    echo "FAIL: no cleave.pc installed"; fail=1
  else
    prefix=$(sed -n 's/^prefix=//p' "$pc")
    flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --define-variable=prefix="$tmp/root$prefix" \
      --cflags --libs cleave)
    printf '#include <cleave/cleave.h>\n#include <stdio.h>\nint main(void) {\n  cl_ctx *c;\n  int r = cl_open(NULL, &c);\n  printf("%%s\\n", cl_strerror(r));\n  return r == 0;\n}\n' > "$tmp/app.c"
    # A sanitizer build's library needs its runtime in the app too.
    san=""
    readelf -d "$lib" | grep -q 'NEEDED.*libasan' && san="-fsanitize=address,undefined"
    # shellcheck disable=SC2086
    if gcc -std=c11 -Wall -Werror $san "$tmp/app.c" -o "$tmp/app" $flags; then
      out=$(CLEAVE_APP_SOCKET="$tmp/none.sock" LD_LIBRARY_PATH=$(dirname "$(find "$tmp/root" -name 'libcleave.so.0' | head -1)") "$tmp/app" || true)
      [ -n "$out" ] && echo "ok: an app built with pkg-config flags runs against the installed library: $out" \
        || { echo "FAIL: the installed library did not run"; fail=1; }
    else
      echo "FAIL: an app does not build with pkg-config --cflags --libs cleave"; fail=1
    fi
  fi
fi

[ $fail -eq 0 ] && echo "ok: $count cl_* functions, SONAME $soname, header standalone in C and C++"
exit $fail
