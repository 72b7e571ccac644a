#!/bin/sh
# scripts/pkg/mkdeb.sh BUILD: `make deb`. Stages what `make install` installs, in Debian's places, and
# packs it with dpkg-deb into BUILD/accelaes_VERSION_ARCH.deb (no debhelper: one binary package).
#   the module (and the CUDA plugin where it was built) in OpenSSL's MODULESDIR (`openssl version -m`),
#   accelaes-stat, accelaes-files, accelaes-conf in /usr/bin, conf/accelaes.cnf in /usr/share/accelaes
#   (for OPENSSL_CONF; nothing is enabled system-wide: `accelaes-conf enable` does that, on purpose),
#   man pages from docs/man/, Depends from dpkg-shlibdeps over the ELF files.
# prerm runs `accelaes-conf disable` on removal if the system openssl.cnf includes accelaes, so that
# no program is left loading a configuration that names a module which is gone.
# DEB_VERSION overrides the version (default: the provider's version + the commit's date and hash).
set -eu
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
OPENSSL=${OPENSSL:-openssl}
for f in accelaes.so accelaes-stat accelaes-files accelaes-conf; do
  [ -f "$BUILD/$f" ] || { echo "mkdeb: $BUILD/$f is missing (make BUILD=$BUILD build-only)" >&2; exit 1; }
done
arch=$(dpkg --print-architecture)
modulesdir=$("$OPENSSL" version -m | sed 's/.*"\(.*\)"/\1/')
base=$(sed -n 's/^#define ACC_PROV_VERSION "\(.*\)"/\1/p' provider/route/prov.h)
if [ -z "${DEB_VERSION:-}" ]; then
  DEB_VERSION=$base
  if git rev-parse --git-dir >/dev/null 2>&1; then
    DEB_VERSION="$base+git$(git log -1 --format=%cd --date=format:%Y%m%d%H%M%S).$(git log -1 --format=%h)"
  fi
fi
out="$BUILD/accelaes_${DEB_VERSION}_${arch}.deb"
stage="$BUILD/deb/root"
rm -rf "$BUILD/deb" && mkdir -p "$stage/DEBIAN"

# Files, with the modes dpkg expects; binaries stripped of debug information as Debian's are.
install -D -m 0644 "$BUILD/accelaes.so" "$stage$modulesdir/accelaes.so"
[ -f "$BUILD/accelaes-cuda.so" ] && install -D -m 0644 "$BUILD/accelaes-cuda.so" "$stage$modulesdir/accelaes-cuda.so"
for t in accelaes-stat accelaes-files accelaes-conf; do
  install -D -m 0755 "$BUILD/$t" "$stage/usr/bin/$t"
done
find "$stage" -type f \( -name '*.so' -o -path '*/usr/bin/*' \) -exec strip --strip-unneeded {} +
install -D -m 0644 conf/accelaes.cnf "$stage/usr/share/accelaes/accelaes.cnf"
for m in docs/man/*.[1-9]; do
  sec=${m##*.}
  install -D -m 0644 "$m" "$stage/usr/share/man/man$sec/$(basename "$m")"
  gzip -9n "$stage/usr/share/man/man$sec/$(basename "$m")"
done
doc="$stage/usr/share/doc/accelaes"
install -d "$doc"
{
  echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
  echo "Upstream-Name: accelaes"
  echo "Comment: built from the accelaes source tree by make deb; see its README.md."
} >"$doc/copyright"
gzip -9nc README.md >"$doc/README.md.gz"
chmod 0644 "$doc"/*

# Depends: what the ELF files link (libssl3 for libcrypto, libipsec-mb1, libnuma1, libc6, ...).
# dpkg-shlibdeps wants a debian/control: a minimal one in a scratch directory.
sd="$BUILD/deb/shlibdeps"
mkdir -p "$sd/debian"
printf 'Source: accelaes\n\nPackage: accelaes\nArchitecture: any\n' >"$sd/debian/control"
elfs=$(cd "$stage" && find . -type f \( -name '*.so' -o -path './usr/bin/*' \) | sed 's|^\./||')
depends=$(cd "$sd" && for e in $elfs; do echo "../root/$e"; done | xargs dpkg-shlibdeps -O 2>/dev/null \
          | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "mkdeb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
# Recommends openssl: the command line the man pages use; the module itself needs only libcrypto.
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat >"$stage/DEBIAN/control" <<EOF
Package: accelaes
Version: $DEB_VERSION
Architecture: $arch
Maintainer: accelaes maintainers <maintainers@users.noreply.a-seed-362aa986.example>
Installed-Size: $size
Depends: $depends
Recommends: openssl
Section: libs
Priority: optional
Description: OpenSSL 3 provider for AES-ECB/CBC/CTR (VAES, multi-core, multi-buffer, CUDA)
 accelaes is an OpenSSL 3 provider module that registers AES-128/192/256 in ECB,
 CBC and CTR mode, and the stitched AES-CBC-HMAC-SHA1/SHA256 ciphers of TLS, and
 runs each request where it is fastest: inline with AES-NI or VAES, split over
 idle cores, batched into intel-ipsec-mb multi-buffer lanes for concurrent
 CBC-encrypt streams, or on an NVIDIA GPU through a plugin. Outputs are byte
 for byte those of OpenSSL's default provider.
 .
 Installing the package enables nothing: load it with -provider accelaes,
 with OPENSSL_CONF=/usr/share/accelaes/accelaes.cnf for one program, or with
 accelaes-conf enable for the whole system (see accelaes(7)).
 Tools: accelaes-stat (unit table and byte counts), accelaes-files (parallel
 directory encryption), accelaes-conf (edits the system openssl.cnf).
EOF
cat >"$stage/DEBIAN/prerm" <<'EOF'
#!/bin/sh
# accelaes prerm: on removal, take accelaes out of the system openssl.cnf if accelaes-conf put it
# there, so that no program loads a configuration naming a module that is about to be gone.
set -e
if [ "$1" = remove ] && [ -x /usr/bin/accelaes-conf ]; then
  # status: 0 enabled, 3 not enabled, 1 broken or stale (a leftover line or snippet: disable too)
  rc=0; env -u OPENSSL_CONF /usr/bin/accelaes-conf status >/dev/null 2>&1 || rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 1 ]; then
    echo "accelaes: taking it out of the system openssl.cnf (accelaes-conf disable)"
    env -u OPENSSL_CONF /usr/bin/accelaes-conf disable || true
  fi
fi
exit 0
EOF
chmod 0755 "$stage/DEBIAN/prerm"
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | sort | xargs md5sum) \
  >"$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/control" "$stage/DEBIAN/md5sums"
rm -f "$BUILD"/accelaes_*.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$out" >/dev/null
echo "mkdeb: $out"
dpkg-deb -f "$out" Package Version Architecture Depends
