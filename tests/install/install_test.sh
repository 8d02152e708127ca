#!/bin/bash
# The installed library as a user sees it: `cmake --install` into a private
# prefix, then examples/embed.c built against that copy only, through
# pkg-config (shared and --static) and through find_package(ejob); the
# programs run against a real ZooKeeper and their jobs must fire. The
# shared library's SONAME is libejob.so.1, it exports every EJ_EXTERN
# declaration of the installed headers and nothing else (no ej__ symbol).
set -u
B=${EJ_BUILD_DIR:?EJ_BUILD_DIR must name the build directory}
SRC=${EJ_SOURCE_DIR:?EJ_SOURCE_DIR must name the source tree}
CMAKE=${CMAKE:-cmake}
CC=${CC:-cc}
. "$SRC/tests/support/zkfixture.sh"
T=$(mktemp -d "${TMPDIR:-/tmp}/ejob-install-XXXXXX")
# zkfixture's EXIT trap stops the server; this one also removes $T.
trap 'zkf_cleanup; [ -n "${KEEP_T:-}" ] || rm -rf "$T"' EXIT

FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
pass() { echo "ok: $*"; }
check() { # DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}

P=$T/prefix
if ! "$CMAKE" --install "$B" --prefix "$P" >"$T/install.log" 2>&1; then
  cat "$T/install.log" >&2
  fail "cmake --install"; exit 1
fi
pass "cmake --install --prefix $P"
PC=$(find "$P" -name ejob.pc -path '*/pkgconfig/*' | head -n1)
[ -n "$PC" ] || { fail "no ejob.pc under $P"; exit 1; }
LIBDIR=$(dirname "$(dirname "$PC")")
echo "libdir: $LIBDIR"
check "bin/ejob installed" test -x "$P/bin/ejob"
check "libejob.so.1 installed" test -f "$LIBDIR/libejob.so.1"
check "libejob.so dev link points to libejob.so.1" \
  test "$(readlink "$LIBDIR/libejob.so")" = libejob.so.1
check "libejob.a installed" test -f "$LIBDIR/libejob.a"
check "public headers installed" test -f "$P/include/ejob/ejob.h"
check "ejobConfig.cmake installed" test -f "$LIBDIR/cmake/ejob/ejobConfig.cmake"
check "ejobConfigVersion.cmake installed" test -f "$LIBDIR/cmake/ejob/ejobConfigVersion.cmake"

# Man pages, systemd units and the sample configuration are installed once
# they exist in the tree, where the build's install directories say.
cache() { sed -n "s/^$1:[A-Z]*=//p" "$B/CMakeCache.txt"; }
installed_as() { # SOURCE DIR (relative to the prefix, or absolute: not checked) NAME
  [ -f "$SRC/$1" ] || return 0
  case $2 in /*) echo "skip: $1 goes to $2, outside the prefix"; return 0 ;; esac
  check "$1 installed as $2/$3" cmp -s "$SRC/$1" "$P/$2/$3"
}
MANDIR=$(cache CMAKE_INSTALL_MANDIR)
UNITDIR=$(cache EJ_SYSTEMD_UNIT_DIR)
SYSCONFDIR=$(cache CMAKE_INSTALL_SYSCONFDIR)
installed_as man/ejob.1 "${MANDIR:-share/man}/man1" ejob.1
installed_as man/ejob-run.1 "${MANDIR:-share/man}/man1" ejob-run.1
installed_as man/ejob-console.1 "${MANDIR:-share/man}/man1" ejob-console.1
installed_as man/ejob.yaml.5 "${MANDIR:-share/man}/man5" ejob.yaml.5
DOCDIR=$(cache CMAKE_INSTALL_DOCDIR | grep . || echo share/doc/ejob)
installed_as README.md "$DOCDIR" README.md
installed_as LICENSE "$DOCDIR" LICENSE
installed_as docs/console.md "$DOCDIR/docs" console.md
installed_as docs/packaging.md "$DOCDIR/docs" packaging.md
installed_as dist/systemd/ejob.service "${UNITDIR:-lib/systemd/system}" ejob.service
installed_as dist/systemd/ejob@.service "${UNITDIR:-lib/systemd/system}" ejob@.service
installed_as dist/ejob.yaml "${SYSCONFDIR:-etc}/ejob" ejob.yaml
installed_as dist/prometheus/ejob-alerts.yml "$(cache CMAKE_INSTALL_DATADIR | grep . || echo share)/ejob/prometheus" ejob-alerts.yml

# ------------------------------------------------------------ the library
soname() { readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p'; }
check "SONAME is libejob.so.1" test "$(soname "$LIBDIR/libejob.so.1")" = libejob.so.1
nm -D --defined-only "$LIBDIR/libejob.so.1" | awk '{print $NF}' | sort -u >"$T/exported"
"${PYTHON:-python3}" "$SRC/tests/install/extern_symbols.py" "$P"/include/ejob/*.h >"$T/declared" ||
  fail "reading the EJ_EXTERN declarations"
echo "exported symbols: $(wc -l <"$T/exported"), EJ_EXTERN declarations: $(wc -l <"$T/declared")"
check "no ej__ symbol exported" bash -c "! grep -q '^ej__' '$T/exported'"
check "ej_job_create exported" grep -qx ej_job_create "$T/exported"
comm -23 "$T/declared" "$T/exported" >"$T/unexported"
comm -13 "$T/declared" "$T/exported" >"$T/undeclared"
check "every EJ_EXTERN declaration is exported" test ! -s "$T/unexported"
sed 's/^/  declared, not exported: /' "$T/unexported"
check "nothing else is exported" test ! -s "$T/undeclared"
sed 's/^/  exported, not declared: /' "$T/undeclared"
nm -g --defined-only "$LIBDIR/libejob.a" 2>/dev/null | awk 'NF == 3 {print $3}' | sort -u |
  grep -v '^ej_' >"$T/static_foreign"
check "libejob.a defines no global name outside ej_" test ! -s "$T/static_foreign"
sed 's/^/  libejob.a defines: /' "$T/static_foreign"

# ------------------------------------------------------------ pkg-config
PKG_CONFIG_PATH=$(dirname "$PC")
export PKG_CONFIG_PATH
if ! { CFLAGS_PC=$(pkg-config --cflags ejob) && LIBS_PC=$(pkg-config --libs ejob) &&
       LIBS_STATIC=$(pkg-config --static --libs ejob); }; then
  fail "pkg-config ejob"; exit 1
fi
echo "pkg-config --cflags --libs: $CFLAGS_PC $LIBS_PC"
echo "pkg-config --static --libs: $LIBS_STATIC"
check "pkg-config --modversion is 1.0.0" test "$(pkg-config --modversion ejob)" = 1.0.0
# shellcheck disable=SC2086
check "embed.c builds with pkg-config (shared)" \
  "$CC" -o "$T/embed_shared" "$SRC/examples/embed.c" $CFLAGS_PC $LIBS_PC
# -l:libejob.a: the archive, not the .so next to it; everything else it
# needs must come from Libs.private and Requires.private.
# shellcheck disable=SC2086
check "embed.c builds with pkg-config --static (libejob.a)" \
  "$CC" -o "$T/embed_static" "$SRC/examples/embed.c" $CFLAGS_PC ${LIBS_STATIC//-lejob/-l:libejob.a}

check "embed_shared needs libejob.so.1" bash -c "readelf -d '$T/embed_shared' | grep -q 'NEEDED.*\[libejob.so.1\]'"
check "embed_static does not need libejob" bash -c "test -x '$T/embed_static' && ! readelf -d '$T/embed_static' | grep -q 'NEEDED.*libejob'"
RESOLVED=$(LD_LIBRARY_PATH=$LIBDIR ldd "$T/embed_shared" | awk '$1 == "libejob.so.1" {print $3}')
echo "ldd: libejob.so.1 => $RESOLVED"
check "embed_shared loads libejob.so.1 from the prefix" test "$RESOLVED" = "$LIBDIR/libejob.so.1"

# ------------------------------------------------------------ running it
# embed HOST:PORT NAMESPACE SECONDS: the simple job fires every 2 s on 3
# items, the dataflow job every 5 s; at the end it prints its status.
zkf_start || { fail "ZooKeeper did not start"; exit 1; }
run_embed() { # NAME PROGRAM NAMESPACE
  local out=$T/$1.out
  LD_LIBRARY_PATH=$LIBDIR timeout 60 "$2" "$ZKF_CONNECT" "$3" 6 >"$out" 2>"$T/$1.err" &
  local pid=$!
  zkf_track "$pid"
  wait "$pid"
  local rc=$?
  echo "--- $1 (exit $rc):"; grep -v '^$' "$out" | tail -n 8
  check "$1 exits 0" test "$rc" -eq 0
  for i in 0 1 2; do
    check "$1: the simple job ran item $i" grep -q "^simple job embedSimple: item $i of 3" "$out"
  done
  check "$1: the dataflow job processed records" grep -q "^dataflow job embedFlow: item [01] processed" "$out"
  check "$1: it was the leader and fired" grep -Eq "^embedSimple as .*: leader yes, 3 item\(s\), [1-9][0-9]* fire" "$out"
}
run_embed embed_shared "$T/embed_shared" inst-shared
run_embed embed_static "$T/embed_static" inst-static

# ------------------------------------------------------------ find_package
mkdir -p "$T/consumer"
cat >"$T/consumer/CMakeLists.txt" <<CML
cmake_minimum_required(VERSION 3.20)
project(consumer LANGUAGES C)
find_package(ejob 1.0 REQUIRED)
add_executable(embed_cmake "$SRC/examples/embed.c")
target_link_libraries(embed_cmake PRIVATE ejob::ejob)
add_executable(embed_cmake_static "$SRC/examples/embed.c")
target_link_libraries(embed_cmake_static PRIVATE ejob::ejob_static)
CML
if "$CMAKE" -S "$T/consumer" -B "$T/consumer/build" -DCMAKE_PREFIX_PATH="$P" \
     >"$T/consumer.log" 2>&1 &&
   "$CMAKE" --build "$T/consumer/build" >>"$T/consumer.log" 2>&1; then
  pass "find_package(ejob 1.0) and ejob::ejob, ejob::ejob_static build embed.c"
  check "embed_cmake needs libejob.so.1" bash -c "readelf -d '$T/consumer/build/embed_cmake' | grep -q 'NEEDED.*\[libejob.so.1\]'"
  check "embed_cmake_static does not need libejob" bash -c "test -x '$T/consumer/build/embed_cmake_static' && ! readelf -d '$T/consumer/build/embed_cmake_static' | grep -q 'NEEDED.*libejob'"
  run_embed embed_cmake "$T/consumer/build/embed_cmake" inst-cmake
else
  cat "$T/consumer.log" >&2
  fail "find_package(ejob 1.0) consumer project"
fi
# SameMajorVersion: a request for 2.0 is refused.
sed -i 's/find_package(ejob 1.0 REQUIRED)/find_package(ejob 2.0 REQUIRED)/' "$T/consumer/CMakeLists.txt"
check "find_package(ejob 2.0) is refused" bash -c "! '$CMAKE' -S '$T/consumer' -B '$T/consumer/build1' -DCMAKE_PREFIX_PATH='$P' >'$T/consumer1.log' 2>&1"

echo "install tree:"
(cd "$P" && find . -type f -o -type l | sort | sed 's/^/  /')
if [ "$FAILS" -ne 0 ]; then
  echo "$FAILS check(s) failed (KEEP_T=1 keeps $T)" >&2
  exit 1
fi
echo "all install checks passed"
