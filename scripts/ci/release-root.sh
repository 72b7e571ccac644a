#!/bin/sh
# scripts/ci/release-root.sh RELEASE [COMMAND...]: runs COMMAND (default: a shell) in this checkout's copy inside a
# Debian root of RELEASE kept in build/releases/RELEASE, made with debootstrap on first use:
#   bookworm  Debian 12, OpenSSL 3.0      trixie  Debian 13, OpenSSL 3.5 LTS
#   forky     Debian testing, OpenSSL 3.6 sid-exp sid with experimental's OpenSSL 4.0
# The root inherits the host's resolver, certificate store, apt and pip configuration (so it reaches the same
# registries); the indexes of testing/sid/experimental can be older than their Valid-Until, so its apt accepts
# them. Mounts live in a private mount namespace (gone when COMMAND ends); /dev/shm is a private tmpfs, so the
# root's shared segments never meet the host's. The checkout is copied (tracked and untracked-not-ignored files,
# as a fresh clone has them) to /src/accelaes in the root; its build/ there is kept between runs.
set -eu
release=${1:?usage: scripts/ci/release-root.sh bookworm|trixie|forky|sid-exp [COMMAND...]}
shift
here=$(cd "$(dirname "$0")/../.." && pwd)
roots=${ACCELAES_RELEASE_ROOTS:-$here/build/releases}
root=$roots/$release
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
case $release in
  bookworm | trixie | forky) suite=$release ;;
  sid-exp) suite=sid ;;
  *) echo "release-root: unknown release '$release' (bookworm, trixie, forky, sid-exp)" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "release-root: needs root (debootstrap, chroot, mounts)" >&2; exit 2; }

inherit_host() {
  cp -L /etc/resolv.conf "$root/etc/resolv.conf"
  cp -L /etc/hosts "$root/etc/hosts" 2>/dev/null || true
  # the certificate store: the bundle and any local CAs the registries' proxies are signed with
  mkdir -p "$root/usr/local/share/ca-certificates" "$root/etc/ssl/certs"
  cp -a /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/" 2>/dev/null || true
  cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  # apt: the host's configuration (proxies, registries), minus what names host-only files
  for f in /etc/apt/apt.conf.d/*; do
    [ -f "$f" ] && cp -L "$f" "$root/etc/apt/apt.conf.d/" || true
  done
  cp -a /etc/apt/auth.conf.d/. "$root/etc/apt/auth.conf.d/" 2>/dev/null || true
  printf 'Acquire::Check-Valid-Until "false";\nAcquire::Check-Date "false";\n' \
    >"$root/etc/apt/apt.conf.d/99accelaes-release-root"
  [ -f /etc/pip.conf ] && cp -L /etc/pip.conf "$root/etc/pip.conf" || true
  # Debian 13+ marks its Python externally managed; the project's own set-up decides how to install into it
  true
}

sources() {
  case $release in
    sid-exp)
      printf 'deb %s sid main\ndeb %s experimental main\n' "$mirror" "$mirror" ;;
    *) printf 'deb %s %s main\n' "$mirror" "$suite" ;;
  esac >"$root/etc/apt/sources.list"
}

make_root() {
  command -v debootstrap >/dev/null || { apt-get update -qq >/dev/null; apt-get install -y -qq debootstrap >/dev/null; }
  script=""
  # an older host's debootstrap has no script for a newer suite: sid's fits testing and sid
  [ -e "/usr/share/debootstrap/scripts/$suite" ] || script=/usr/share/debootstrap/scripts/sid
  if [ ! -e "$root/.debootstrapped" ]; then
    rm -rf "$root"
    mkdir -p "$roots"
    echo "release-root: debootstrap $suite into $root" >&2
    debootstrap --variant=buildd --include=ca-certificates,git "$suite" "$root" "$mirror" $script \
      >"$roots/$release.log" 2>&1 || { tail -20 "$roots/$release.log" >&2; exit 1; }
    touch "$root/.debootstrapped"
  fi
  inherit_host
  sources
  in_root sh -c 'apt-get update -qq >/dev/null'
  if [ "$release" = sid-exp ]; then
    in_root sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t experimental libssl-dev openssl >/dev/null'
  fi
  touch "$root/.accelaes-root"
}

# in_root COMMAND...: COMMAND in the root, in a private mount namespace (fresh /proc, /dev, private /dev/shm)
in_root() {
  unshare --mount --propagation private sh -c '
    r=$1; shift
    mount --rbind /dev "$r/dev"
    mount -t tmpfs -o mode=1777 tmpfs "$r/dev/shm"
    mount -t proc proc "$r/proc"
    mount --rbind /sys "$r/sys"
    mount -t tmpfs -o mode=1777 tmpfs "$r/tmp"
    exec chroot "$r" /usr/bin/env -i HOME=/root TERM=${TERM:-dumb} LANG=C.UTF-8 \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      PIP_DEFAULT_TIMEOUT=${PIP_DEFAULT_TIMEOUT:-180} PIP_DISABLE_PIP_VERSION_CHECK=1 \
      PIP_CERT=/etc/ssl/certs/ca-certificates.crt ${ACCELAES_ROOT_ENV:-} "$@"' sh "$root" "$@"
}

[ -e "$root/.accelaes-root" ] || make_root
inherit_host
sources
# a fresh clone's files: tracked and untracked-but-not-ignored; the root's own build/ is kept
dst=$root/src/accelaes
mkdir -p "$dst"
find "$dst" -mindepth 1 -maxdepth 1 ! -name build -exec rm -rf {} +
(cd "$here" && git ls-files -z -co --exclude-standard | xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
  tar --null --no-recursion -T - -cf -) | tar -C "$dst" -xf -
# ACCELAES_RELEASE_CARRY: paths under build/ made here that go in too (make test-release-cross: a module built on
# this host's OpenSSL, loaded by the root's)
for c in ${ACCELAES_RELEASE_CARRY:-}; do
  case $c in build/?*) ;; *) echo "release-root: ACCELAES_RELEASE_CARRY takes paths under build/ ($c)" >&2; exit 2 ;; esac
  rm -rf "${dst:?}/$c" && mkdir -p "$dst/$c" && cp -a "$here/$c/." "$dst/$c/"
done
[ $# -gt 0 ] || set -- bash -l
in_root sh -c 'cd /src/accelaes && exec "$@"' sh "$@"
