#!/usr/bin/env bash
# Installs ONNX Runtime for node (npm's onnxruntime-node) into DIR/node_modules, for the tests that
# run exported models: bash tools/install_onnxruntime_node.sh DIR
# Never fails the build: without node, npm or the registry it writes the reason to
# DIR/unavailable.txt, which those tests print as they skip, and tries again at the next build.
# ONNXRUNTIME_NODE_INSTALL=skip: the package's install script would otherwise download CUDA
# provider libraries; its CPU runtime comes in the package itself.
set -uo pipefail

dir=$1
version=1.31.1
mkdir -p "$dir"
rm -f "$dir/unavailable.txt" "$dir/installed.txt"
unavailable() {
  echo "$1" > "$dir/unavailable.txt"
  echo "tandem: ONNX Runtime for node not installed ($1): the ONNX export tests will skip"
  exit 0
}
command -v node > /dev/null || unavailable "node is not installed (apt-get install nodejs npm)"
command -v npm > /dev/null || unavailable "npm is not installed (apt-get install npm)"
if [ ! -f "$dir/node_modules/onnxruntime-node/package.json" ] ||
   ! grep -q "\"version\": \"$version\"" "$dir/node_modules/onnxruntime-node/package.json"; then
  echo "tandem: installing onnxruntime-node@$version into $dir (npm)"
  if ! ONNXRUNTIME_NODE_INSTALL=skip npm install --prefix "$dir" --no-save --no-audit --no-fund \
       --fetch-retries=1 --fetch-timeout=60000 "onnxruntime-node@$version" > "$dir/npm.log" 2>&1; then
    unavailable "npm install onnxruntime-node@$version failed: $(tail -n 3 "$dir/npm.log" | tr '\n' ' ')"
  fi
fi
node -e "require('$dir/node_modules/onnxruntime-node')" > "$dir/load.log" 2>&1 ||
  unavailable "onnxruntime-node does not load: $(head -n 3 "$dir/load.log" | tr '\n' ' ')"
echo "onnxruntime-node $version" > "$dir/installed.txt"
