#!/usr/bin/env bash
# Builds the llamapi .deb for one architecture from a release build, with dpkg-deb:
#   scripts/build-deb.sh BUILD_DIR DEB_ARCH OUT_DIR [HELP_BUILD_DIR]
# BUILD_DIR holds bin/llamapi-server and bin/llamapi for DEB_ARCH (amd64 or arm64). The man
# pages' flag and command lists are generated from the --help of HELP_BUILD_DIR's binaries
# (default BUILD_DIR; the host's build when cross-packaging), so they cannot drift from the
# option table. Depends is computed from the binaries' DT_NEEDED libraries through dpkg's
# database (the arm64 -dev packages are installed for the cross build). Prints the .deb path.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${1:?build dir}
arch=${2:?deb arch (amd64|arm64)}
out=${3:?output dir}
help_build=${4:-$build}
case $arch in
amd64) triplet=x86_64-linux-gnu; tool_prefix= ;;
arm64) triplet=aarch64-linux-gnu; tool_prefix=aarch64-linux-gnu- ;;
*) echo "build-deb: unknown architecture $arch" >&2; exit 2 ;;
esac
[[ $(dpkg --print-architecture) == "$arch" ]] && tool_prefix=
for b in llamapi-server llamapi; do
    [[ -x $build/bin/$b ]] || { echo "build-deb: $build/bin/$b missing (build it first)" >&2; exit 1; }
done
version=$(sed -n 's/^#define LLAMAPI_VERSION "\(.*\)"/\1/p' src/server/version.h)

mkdir -p "$out"
stage=$(mktemp -d "$out/stage-$arch.XXXXXX")
chmod 0755 "$stage"
trap 'rm -rf "$stage"' EXIT
install -d "$stage/DEBIAN" "$stage/usr/bin" "$stage/etc/llamapi" "$stage/lib/systemd/system" \
    "$stage/usr/share/man/man1" "$stage/usr/share/man/man8" "$stage/usr/share/doc/llamapi"
for b in llamapi-server llamapi; do
    install -m 0755 "$build/bin/$b" "$stage/usr/bin/$b"
    "${tool_prefix}strip" --strip-unneeded "$stage/usr/bin/$b"
done
install -m 0644 packaging/llamapi.conf packaging/models.ini "$stage/etc/llamapi/"
install -m 0644 packaging/llamapi.service "$stage/lib/systemd/system/llamapi.service"
install -m 0644 README.md "$stage/usr/share/doc/llamapi/README.md"
install -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm \
    "$stage/DEBIAN/"
install -m 0644 packaging/debian/conffiles "$stage/DEBIAN/conffiles"

# Man pages: the templates with the --help lists spliced in.
server_help=$("$help_build/bin/llamapi-server" --help)
cli_help=$("$help_build/bin/llamapi" --help 2>&1 || true)
grep -q -- '--config' <<<"$server_help" || { echo "build-deb: --help has no --config" >&2; exit 1; }
options=$(awk -f packaging/man/gen-options.awk <<<"$server_help")
commands=$(sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^[.']/\\\\\\&&/" <<<"$cli_help")
splice() { # $1 template, $2 placeholder, $3 text
    # ENVIRON, not -v: awk would read the roff backslashes as escapes.
    KEY=$2 TEXT=$3 VER=$version awk \
        '{ gsub(/@VERSION@/, ENVIRON["VER"]) } $0 == ENVIRON["KEY"] { print ENVIRON["TEXT"]; next } { print }' "$1"
}
splice packaging/man/llamapi-server.8.in @OPTIONS@ "$options" | gzip -9n \
    >"$stage/usr/share/man/man8/llamapi-server.8.gz"
splice packaging/man/llamapi.1.in @COMMANDS@ "$commands" | gzip -9n \
    >"$stage/usr/share/man/man1/llamapi.1.gz"

# Depends: the package owning each needed library of this architecture.
deps=()
for lib in $("${tool_prefix}objdump" -p "$stage/usr/bin/llamapi-server" "$stage/usr/bin/llamapi" |
    awk '/NEEDED/ { print $2 }' | sort -u); do
    owner=$(dpkg-query -S "/usr/lib/$triplet/$lib" "/lib/$triplet/$lib" 2>/dev/null | head -1 |
        cut -d: -f1) || true
    [[ -n $owner ]] || { echo "build-deb: no $arch package owns $lib (install its :$arch package)" >&2; exit 1; }
    deps+=("$owner")
done
depends=$(printf '%s\n' "${deps[@]}" | sort -u | paste -sd, | sed 's/,/, /g')
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@DEPENDS@/$depends/" \
    -e "s/@SIZE@/$size/" packaging/debian/control.in >"$stage/DEBIAN/control"

deb="$out/llamapi_${version}_$arch.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "$deb"
