#!/usr/bin/env bash
# Prepares gpu-carry/ for a lent GPU machine that has no package registry ("way 2" of GPU.md):
#   bash tools/gpu_pack.sh
# Downloads the Debian packages tandem builds with (apt-get download: no root, nothing installed),
# unpacks each with dpkg -x into gpu-carry/prefix (never into /), drops what a build does not need
# (docs, man pages), writes gpu-carry/unpack.sh (the same unpacking, to run on the GPU machine when
# only the .deb files travel) and gpu-carry/env.sh (PATH, pkg-config, LD_LIBRARY_PATH for the
# prefix), and reports the sizes against the 64 MiB the device tool carries, working tree included.
set -euo pipefail
cd "$(dirname "$0")/.."
CARRY=gpu-carry
PACKAGES=(libyaml-cpp-dev libyaml-cpp0.7 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
          libstb-dev libstb0 libdnnl-dev libdnnl2 libgtest-dev googletest zlib1g-dev
          pkgconf pkgconf-bin libpkgconf3)

rm -rf "$CARRY/debs" "$CARRY/prefix"
mkdir -p "$CARRY/debs"
(cd "$CARRY/debs" && apt-get download "${PACKAGES[@]}")

# dpkg -x where dpkg exists, else ar + tar (binutils comes with any CUDA toolchain).
cat > "$CARRY/unpack.sh" <<'UNPACK'
#!/usr/bin/env bash
# Unpacks gpu-carry/debs/*.deb into gpu-carry/prefix (never into /).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$here/prefix"
for deb in "$here"/debs/*.deb; do
  if command -v dpkg >/dev/null 2>&1; then
    dpkg -x "$deb" "$here/prefix"
  else
    tmp=$(mktemp -d)
    (cd "$tmp" && ar x "$deb" && tar -xf data.tar.* -C "$here/prefix")
    rm -rf "$tmp"
  fi
done
# What neither the build nor the run needs.
rm -rf "$here/prefix/usr/share/doc" "$here/prefix/usr/share/man" "$here/prefix/usr/share/lintian" \
       "$here/prefix/usr/src"
UNPACK
bash "$CARRY/unpack.sh"

cat > "$CARRY/env.sh" <<'ENV'
# Source from the repository root on the GPU machine: points the build and the run at gpu-carry/.
_carry="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/prefix"
if ! command -v pkg-config >/dev/null 2>&1; then
  export PATH="$_carry/usr/bin:$PATH"
fi
# The .pc files say prefix=/usr: a sysroot maps their -I and -L paths into the prefix.
export PKG_CONFIG_PATH="$_carry/usr/lib/x86_64-linux-gnu/pkgconfig:$_carry/usr/share/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$_carry"
export LD_LIBRARY_PATH="$_carry/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
export TANDEM_CARRY_PREFIX="$_carry/usr"
unset _carry
ENV

tree_kib=$(git ls-files -co --exclude-standard -z | du -c -k --files0-from=- 2>/dev/null | tail -1 | cut -f1)
prefix_kib=$(du -sk "$CARRY/prefix" | cut -f1)
debs_kib=$(du -sk "$CARRY/debs" | cut -f1)
echo "gpu-carry: debs ${debs_kib} KiB packed, prefix ${prefix_kib} KiB unpacked"
echo "working tree ${tree_kib} KiB + debs = $(( (tree_kib + debs_kib) / 1024 )) MiB;" \
     "+ prefix instead = $(( (tree_kib + prefix_kib) / 1024 )) MiB (limit 64 MiB)"
echo "carry (recommended): gpu-carry/debs gpu-carry/unpack.sh gpu-carry/env.sh; there run"
echo "  bash gpu-carry/unpack.sh && . gpu-carry/env.sh"
