#!/usr/bin/env bash
# Installs tensorjit's Debian 12 build, test and benchmark dependencies:
#   bash scripts/deps.sh [--with-mkl] [--with-mlir]
# --with-mkl adds Intel MKL 2020.4 from Debian's non-free component (enabled
# here for the Debian archive the machine already uses) and --with-mlir the
# MLIR 19 tools (mlir-opt-19, mlir-translate-19). Both only add peers to the
# benchmark suite; the quick start and CI never need them. Idempotent and
# silent when everything is already installed.
set -eu -o pipefail
pkgs="llvm-19-dev libomp-19-dev clang-19 libclang-rt-19-dev check cmake
ninja-build pkg-config zlib1g-dev libopenblas-dev libgraphblas-dev
libedit-dev valgrind python3 python3-matplotlib python3-numpy python3-scipy python3-pytest"
with_mkl=0
for arg in "$@"; do
  case $arg in
    --with-mkl) with_mkl=1; pkgs="$pkgs libmkl-rt libmkl-dev" ;;
    --with-mlir) pkgs="$pkgs mlir-19-tools" ;;
    *) echo "usage: scripts/deps.sh [--with-mkl] [--with-mlir]" >&2; exit 2 ;;
  esac
done

# Prints one line "URI|SUITES|SIGNED-BY|COMPONENTS" per enabled Debian
# archive entry apt reads (deb822 .sources files and one-line .list files);
# the security archive is left out, it has no MKL.
debian_entries() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'function flush() {
           if (types ~ /(^| )deb( |$)/ && enabled != "no")
             for (i = 1; i <= nu; i++)
               if (uris[i] ~ /\/debian\/?$/) print uris[i] "|" suites "|" signed "|" comps
           types = suites = signed = comps = enabled = ""; nu = 0
         }
         /^[ \t]*#/ { next }
         /^[ \t]*$/ { flush(); next }
         { key = tolower($1); sub(/:$/, "", key); val = $0; sub(/^[^:]*:[ \t]*/, "", val) }
         key == "types" { types = val }
         key == "uris" { nu = split(val, uris, /[ \t]+/) }
         key == "suites" { suites = val }
         key == "components" { comps = val }
         key == "signed-by" { signed = val }
         key == "enabled" { enabled = tolower(val) }
         END { flush() }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk '$1 == "deb" {
           n = 2; signed = ""
           if ($2 ~ /^\[/) {
             for (; n <= NF; n++) {
               if ($n ~ /signed-by=/) { signed = $n; sub(/.*signed-by=/, "", signed); sub(/\]$/, "", signed) }
               if ($n ~ /\]$/) { n++; break }
             }
           }
           if ($n !~ /\/debian\/?$/) next
           comps = ""
           for (i = n + 2; i <= NF; i++) comps = comps (comps ? " " : "") $i
           print $n "|" $(n + 1) "|" signed "|" comps
         }' "$f"
  done
}

# Adds Debian's non-free component, as its own .sources file, for the first
# Debian archive entry, unless some entry has it already.
enable_non_free() {
  local entries uri suites signed
  entries=$(debian_entries)
  if [ -z "$entries" ]; then
    echo "tensorjit: no Debian archive in /etc/apt/sources.list{,.d}; cannot enable non-free for MKL" >&2
    exit 1
  fi
  if printf '%s\n' "$entries" | awk -F'|' '{ n = split($4, c, " "); for (i = 1; i <= n; i++) if (c[i] == "non-free") f = 1 } END { exit !f }'; then
    return 0
  fi
  IFS='|' read -r uri suites signed _ <<EOF
$(printf '%s\n' "$entries" | head -1)
EOF
  echo "tensorjit: enabling Debian non-free ($uri $suites) in /etc/apt/sources.list.d/tensorjit-non-free.sources"
  {
    echo "Types: deb"
    echo "URIs: $uri"
    echo "Suites: $suites"
    echo "Components: non-free"
    [ -n "$signed" ] && echo "Signed-By: $signed"
  } | $sudo tee /etc/apt/sources.list.d/tensorjit-non-free.sources >/dev/null
}

missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing="$missing $p"
done
[ -z "$missing" ] && exit 0
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
case " $missing " in *" libmkl-"*) enable_non_free ;; esac
echo "tensorjit: installing$missing"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
# (apt's "debconf: delaying package configuration" notice is noise here.)
$sudo apt-get install -y -qq --no-install-recommends $missing 2>&1 >/dev/null |
  { grep -v '^debconf: delaying package configuration' >&2 || true; }
