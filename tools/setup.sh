#!/usr/bin/env bash
# Installs the Debian packages tandem builds with (as root), or prints the command to run.
# ocl-icd-opencl-dev: only recommended by libdnnl-dev, yet its CMake config requires OpenCL.
# libonnx-dev: trainer export; libonnx-testdata: ONNX's operator test cases for the test suite
# (ONNX Runtime for the export tests comes from npm: tools/install_onnxruntime_node.sh, at build).
set -euo pipefail

packages=(cmake ninja-build g++ pkg-config libyaml-cpp-dev libspdlog-dev libfmt-dev libstb-dev
          libdnnl-dev ocl-icd-opencl-dev zlib1g-dev libgtest-dev ccache
          libplplot-dev plplot-driver-cairo libopenmpi-dev openmpi-bin
          libonnx-dev libprotobuf-dev libonnx-testdata)
# --tensorboard: protobuf and ISA-L's CRC32C; its test reads the files back with Python's own.
packages+=(protobuf-compiler libisal-dev python3-protobuf python3-crc32c)
# trainer import's tests: torchvision's networks exported by PyTorch itself (CPU build).
packages+=(python3-torch python3-torchvision)
# tools/check_format.sh (CI): the sources a change touches stay as clang-format writes them.
packages+=(clang-format)
# Images: JPEG through libjpeg-turbo's TurboJPEG API, PNG through libpng (stb_image the rest).
packages+=(libturbojpeg0-dev libpng-dev)
# tools/fuzz.sh (CI): clang's libFuzzer with its sanitizer runtimes, and its OpenMP.
packages+=(clang libclang-rt-14-dev libomp-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "tandem setup: missing Debian packages: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "tandem setup: run this as root, then build again:"
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}"
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
