#!/usr/bin/env bash
# test_abi.sh - libcleave's ABI: only cl_* exported, SONAME libcleave.so.0, and cleave.h compiling
# on its own as C11 and as C++.
# Usage: test_abi.sh <path to libcleave.so> <include dir holding cleave/cleave.h>
set -euo pipefail
lib=$1
inc=$2
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

[ $fail -eq 0 ] && echo "ok: $count cl_* functions, SONAME $soname, header standalone in C and C++"
exit $fail
