#!/usr/bin/env bash
# Fails when a file includes a layer it may not see (docs/ARCHITECTURE.md's table):
# runtime/ nothing of ours but the public header; ir/ only ir/ and the
# public header; lower/ ir/ and runtime/abi.h; jit/ (but driver and API
# glue) ir/, runtime/abi.h; tools/ only the public header.
set -u
root=${1:-.}
bad=0
check() {  # folder, allowed-regex
  local dir=$1 allow=$2 f inc
  for f in "$root/$dir"/*.[ch]; do
    [ -e "$f" ] || continue
    case "$(basename "$f")" in driver*) continue ;; esac
    while read -r inc; do
      if ! [[ $inc =~ $allow ]]; then
        echo "$f: includes \"$inc\", which $dir/ may not see"; bad=1
      fi
    done < <(grep -oE '^#include "[^"]+"' "$f" | sed -E 's/#include "(.*)"/\1/')
  done
}
check runtime '^([a-z_]+\.h|\.\./include/tensorjit\.h)$'
check ir '^([a-z_]+\.(h|def)|\.\./include/tensorjit\.h)$'
check lower '^([a-z_]+\.h|\.\./ir/[a-z_]+\.(h|def)|\.\./runtime/abi\.h|\.\./include/tensorjit\.h)$'
check jit '^([a-z_]+\.h|\.\./ir/[a-z_]+\.(h|def)|\.\./runtime/abi\.h|\.\./include/tensorjit\.h)$'
check tools '^(\.\./include/tensorjit\.h|[a-z_]+\.h)$'
[ $bad = 0 ] && echo "layering: ok"
exit $bad
