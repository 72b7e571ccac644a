#!/usr/bin/env bash
# scripts/ci/compat/sources.sh DIR: fetch and unpack, under DIR, the Debian source packages of the
# installed libssl3/libssl3t64 (source package openssl) and python3-cryptography (python-cryptography), with
# `apt-get source PKG=VERSION` (Debian's patches applied by dpkg-source). Writes DIR/sources.env
# (OPENSSL_SRC, OPENSSL_SRC_VERSION, PYCA_SRC, PYCA_SRC_VERSION, ...) for scripts/ci/compat/run.sh.
#
# deb-src is not configured on a stock Debian image: if `apt-cache showsrc` knows no version of a
# package, this adds /etc/apt/sources.list.d/accelaes-compat-src.sources (deb-src for the release's
# suites, updates and security; the installed version comes from one of them) and runs
# apt-get update. If the exact installed version is not in the archive any more (the archive
# keeps only the newest version of each suite), the nearest available one is used and that is
# printed. An unpacked source is reused on the next run (DIR/.<pkg>_<version>.done).
set -u -o pipefail
DIR=$1
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${COMPAT_PYTHON:-/usr/bin/python3}
SRC_LIST=/etc/apt/sources.list.d/accelaes-compat-src.sources
say() { echo "compat: $*"; }

add_deb_src() {
  if [ -e "$SRC_LIST" ]; then return 0; fi
  if [ "$(id -u)" != 0 ]; then
    say "no deb-src entry knows $1 and adding one needs root: add deb-src lines for your release and run apt-get update" >&2
    return 1
  fi
  # shellcheck disable=SC1091
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  if [ -z "$codename" ]; then say "cannot tell the Debian release (/etc/os-release has no VERSION_CODENAME)" >&2; return 1; fi
  say "adding $SRC_LIST (deb-src $codename $codename-updates $codename-security) and running apt-get update"
  cat > "$SRC_LIST" <<EOF
# Added by accelaes scripts/ci/compat/sources.sh (make test-compat): source packages for apt-get source.
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $codename $codename-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: $codename-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  timeout 300 apt-get update -qq >"$DIR/apt-update.log" 2>&1 || { say "apt-get update failed (log: $DIR/apt-update.log)" >&2; tail -5 "$DIR/apt-update.log" >&2; return 1; }
}

src_versions() { apt-cache showsrc "$1" 2>/dev/null | awk -v p="$1" '/^Package: /{ok = ($2 == p)} ok && /^Version: /{print $2}' | sort -u; }

# fetch BINARY_PACKAGE VAR_PREFIX: the source of the installed BINARY_PACKAGE
fetch() {
  bin=$1 var=$2
  info=$(dpkg-query -W -f='${source:Package} ${source:Version} ${Version}' "$bin" 2>/dev/null) || { say "$bin is not installed" >&2; return 1; }
  set -- $info
  src=$1 want=$2 binver=$3
  avail=$(src_versions "$src")
  if [ -z "$avail" ] || ! printf '%s\n' "$avail" | grep -qxF "$want"; then
    add_deb_src "$src" || return 1
    avail=$(src_versions "$src")
  fi
  if [ -z "$avail" ]; then say "no source version of $src is available from the configured deb-src entries" >&2; return 1; fi
  # The nearest version whose files the archive really serves: an index can list a version whose files a
  # mirror no longer has (seen with Debian 13's openssl 3.5.9-1~deb13u1: listed, 404 on download).
  while :; do
    # shellcheck disable=SC2086
    ver=$("$PY" "$HERE/compat.py" pick-version "$want" $avail) || return 1
    if [ "$ver" = "$want" ]; then
      say "$src source: $ver (the installed $bin is $binver)"
    else
      say "$src source: the installed version $want cannot be had from the archive; using the NEAREST available, $ver (available: $(echo $avail))"
    fi
    stamp="$DIR/.${src}_${ver}.done"
    up=${ver#*:}; up=${up%-*}
    [ -f "$stamp" ] && [ -d "$DIR/$src-$up" ] && break
    # fetched aside, so that a failed try leaves an earlier good source in place
    rm -rf "$DIR/.get" && mkdir -p "$DIR/.get"
    if (cd "$DIR/.get" && timeout 600 apt-get source -q "$src=$ver") >"$DIR/apt-source-$src.log" 2>&1; then
      rm -rf "$DIR/$src-"*/ "$DIR/${src}_"* "$DIR/.${src}_"*.done 2>/dev/null
      mv "$DIR/.get/"* "$DIR/" && rm -rf "$DIR/.get"
      touch "$stamp"
      break
    fi
    say "apt-get source $src=$ver failed (log: $DIR/apt-source-$src.log)" >&2
    tail -3 "$DIR/apt-source-$src.log" >&2
    avail=$(printf '%s\n' $avail | grep -vxF "$ver")
    [ -n "$avail" ] || { say "no other version of $src to try" >&2; return 1; }
  done
  upstream=${ver#*:}; upstream=${upstream%-*}
  dir="$DIR/$src-$upstream"
  [ -d "$dir" ] || { say "apt-get source $src=$ver did not unpack into $dir" >&2; return 1; }
  {
    echo "${var}_SRC='$dir'"
    echo "${var}_SRC_VERSION='$ver'"
    echo "${var}_INSTALLED_VERSION='$want'"
    echo "${var}_BIN_VERSION='$binver'"
  } >>"$DIR/sources.env.new"
}

rm -f "$DIR/sources.env.new"
# The package that holds the libcrypto in use: libssl3 on Debian 12, libssl3t64 from Debian 13 on (the 64-bit
# time_t transition renamed it).
libcrypto=$(ldconfig -p | awk '/libcrypto\.so\.[0-9]+ .*x86-64|libcrypto\.so\.[0-9]+ \(libc6,x86-64\)/{print $NF; exit}')
libssl_pkg=$(dpkg -S "$(readlink -f "${libcrypto:-/nonexistent}")" 2>/dev/null | sed -n '1s/:.*//p')
[ -n "$libssl_pkg" ] || { say "cannot tell which package holds libcrypto (${libcrypto:-not found by ldconfig})" >&2; exit 1; }
fetch "$libssl_pkg" OPENSSL || exit 1
fetch python3-cryptography PYCA || exit 1
mv "$DIR/sources.env.new" "$DIR/sources.env"
