#!/usr/bin/env bash
# consumers.sh BUILD_DIR: build and run tests/consumer three ways, as a
# project that uses obx.h/ibx.h would:
#   1. add_subdirectory of this checkout (what FetchContent does)
#   2. find_package(obx) of a copy installed by `make install PREFIX=...`
#   3. pkg-config --cflags --libs obx ibx of that installed copy
#   4. find_package and pkg-config of a copy installed by `cmake --install`
#   5. add_subdirectory and find_package from a C++ project (LANGUAGES CXX)
#   6. find_package and pkg-config of a `cmake --install` whose headers go
#      to a directory of their own (CMAKE_INSTALL_INCLUDEDIR=include/obx)
# Each one must compile, link against unixODBC and run on SQLite.
# Prints "PASS CONSUMER-<way> ..." lines and exits non-zero on a failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
out=$(cd "${1:-build}" && pwd)/consumers
rm -rf "$out" && mkdir -p "$out"
failed=0

step() { # ID what command...
    local id=$1 what=$2; shift 2
    if "$@" >"$out/$id.log" 2>&1; then
        echo "PASS $id $what"
    else
        tail -n 15 "$out/$id.log" | sed 's/^/    /'
        echo "FAIL $id $what (log: $out/$id.log)"
        failed=1
    fi
}

run_consumer() { # binary
    rm -f "$out/c.db" && "$1" "$out/c.db" | tee /dev/stderr | grep -q 'ready 1 + 1$'
}

subdir() {
    cmake -S "$here/consumer" -B "$out/subdir" -DOBX_SOURCE_DIR="$root" &&
        cmake --build "$out/subdir" && run_consumer "$out/subdir/consumer"
}

installed() {
    make -C "$root" --no-print-directory install PREFIX="$out/prefix" &&
        cmake -S "$here/consumer" -B "$out/found" -DCMAKE_PREFIX_PATH="$out/prefix" &&
        grep -q "obx_DIR:PATH=$out/prefix/share/cmake/obx" "$out/found/CMakeCache.txt" &&
        cmake --build "$out/found" && run_consumer "$out/found/consumer"
}

pkgconfig() {
    local flags
    flags=$(PKG_CONFIG_PATH="$out/prefix/share/pkgconfig" pkg-config --cflags --libs obx ibx) &&
        echo "pkg-config: $flags" && case $flags in *"-I$out/prefix/include"*) ;; *) return 1 ;; esac &&
        # shellcheck disable=SC2086
        ${CC:-cc} -std=c99 -Wall -Wextra -Werror -pedantic "$here/consumer/main.c" -o "$out/pc-consumer" $flags &&
        run_consumer "$out/pc-consumer"
}

cmake_installed() {
    local flags
    cmake -S "$root" -B "$out/top" && cmake --build "$out/top" && cmake --install "$out/top" --prefix "$out/cprefix" &&
        "$out/cprefix/bin/obxctl" --version && [ -f "$out/cprefix/share/cmake/ibx/ibxConfigVersion.cmake" ] &&
        cmake -S "$here/consumer" -B "$out/cfound" -DCMAKE_PREFIX_PATH="$out/cprefix" &&
        cmake --build "$out/cfound" && run_consumer "$out/cfound/consumer" &&
        flags=$(PKG_CONFIG_PATH="$out/cprefix/share/pkgconfig" pkg-config --cflags obx) &&
        case "$flags " in *"-I$out/cprefix/include "*) ;; *) return 1 ;; esac
}

# A C++ project: nothing of the C targets' may need a C compiler's features.
cxx() {
    cmake -S "$here/consumer" -B "$out/cxx-subdir" -DCONSUMER_LANGUAGE=CXX -DOBX_SOURCE_DIR="$root" &&
        cmake --build "$out/cxx-subdir" && run_consumer "$out/cxx-subdir/consumer" &&
        cmake -S "$here/consumer" -B "$out/cxx-found" -DCONSUMER_LANGUAGE=CXX -DCMAKE_PREFIX_PATH="$out/prefix" &&
        cmake --build "$out/cxx-found" && run_consumer "$out/cxx-found/consumer"
}

# A packager's include directory: the package and the .pc files name it.
includedir() {
    local flags
    cmake -S "$root" -B "$out/incdir" -DCMAKE_INSTALL_INCLUDEDIR=include/obx && cmake --build "$out/incdir" &&
        cmake --install "$out/incdir" --prefix "$out/iprefix" && [ -f "$out/iprefix/include/obx/obx.h" ] &&
        cmake -S "$here/consumer" -B "$out/ifound" -DCMAKE_PREFIX_PATH="$out/iprefix" &&
        cmake --build "$out/ifound" && run_consumer "$out/ifound/consumer" &&
        flags=$(PKG_CONFIG_PATH="$out/iprefix/share/pkgconfig" pkg-config --cflags obx ibx) &&
        echo "pkg-config: $flags" && case "$flags " in *"-I$out/iprefix/include/obx "*) ;; *) return 1 ;; esac
}

version=$(sed -n 's/^#define OBX_VERSION_STRING "\([0-9]*\.[0-9]*\).*"$/\1/p' "$root/obx.h")

# find_package(ibx) of the make-installed copy; a 0.x package refuses another
# minor version (0.x minors may break the API) and accepts its own.
ibx_found() {
    cmake -S "$here/consumer" -B "$out/ibx-found" -DCONSUMER_PACKAGE=ibx -DCONSUMER_VERSION="$version" \
        -DCMAKE_PREFIX_PATH="$out/prefix" && cmake --build "$out/ibx-found" && run_consumer "$out/ibx-found/consumer"
}
version_pin() {
    local other=${version%.*}.$((${version#*.} - 1))
    [ "${version#*.}" -gt 0 ] || other=${version%.*}.$((${version#*.} + 1))
    if cmake -S "$here/consumer" -B "$out/pin" -DCONSUMER_VERSION="$other" -DCMAKE_PREFIX_PATH="$out/prefix"; then
        echo "find_package(obx $other) accepted $version"; return 1
    fi
    cmake -S "$here/consumer" -B "$out/pin-ok" -DCONSUMER_VERSION="$version" -DCMAKE_PREFIX_PATH="$out/prefix"
}
# make uninstall removes every file make install wrote.
uninstall() {
    make -C "$root" --no-print-directory install PREFIX="$out/uprefix" &&
        [ -n "$(find "$out/uprefix" -type f)" ] &&
        make -C "$root" --no-print-directory uninstall PREFIX="$out/uprefix" &&
        left=$(find "$out/uprefix" -type f) && { [ -z "$left" ] || { echo "left behind: $left"; return 1; }; }
}

step CONSUMER-SUBDIRECTORY "cmake add_subdirectory of the checkout: obx::obx and ibx::ibx build and run" subdir
step CONSUMER-FIND-PACKAGE "make install PREFIX=...; cmake find_package(obx $version) finds it, builds and runs" installed
step CONSUMER-FIND-IBX "find_package(ibx $version) of the installed copy builds and runs" ibx_found
step CONSUMER-VERSION-PIN "find_package refuses another 0.x minor version and accepts $version" version_pin
step CONSUMER-PKG-CONFIG "pkg-config --cflags --libs obx ibx of the installed copy builds and runs" pkgconfig
step CONSUMER-CXX "a C++ project (LANGUAGES CXX): add_subdirectory and find_package build and run" cxx
step CONSUMER-INCLUDEDIR "cmake --install with CMAKE_INSTALL_INCLUDEDIR=include/obx: find_package and pkg-config name it" includedir
step CONSUMER-CMAKE-INSTALL "cmake --install --prefix P: obxctl, find_package(obx) and obx.pc naming P" cmake_installed
[ -x "$out/prefix/bin/obxctl" ] && "$out/prefix/bin/obxctl" --version >/dev/null &&
    echo "PASS CONSUMER-OBXCTL make install puts a working obxctl in PREFIX/bin" ||
    { echo "FAIL CONSUMER-OBXCTL make install did not install a working obxctl"; failed=1; }
step CONSUMER-UNINSTALL "make uninstall PREFIX=... removes every file make install wrote" uninstall
exit $failed
