// Runs an ONNX model in ONNX Runtime (npm's onnxruntime-node) on one float input, for the export
// tests: node run_onnx.js ORT_DIR MODEL.onnx INPUT.bin D0,D1,... OUTPUT.bin
// INPUT.bin holds the input's float32 values (little-endian, row-major); OUTPUT.bin receives the
// model's first output the same way, and stdout one JSON line: the output's name and dims.
'use strict';
const fs = require('fs');
const path = require('path');

async function main() {
  const [ortDir, model, inputFile, dimsText, outputFile] = process.argv.slice(2);
  const ort = require(path.join(ortDir, 'node_modules', 'onnxruntime-node'));
  const session = await ort.InferenceSession.create(model);
  const bytes = fs.readFileSync(inputFile);
  const values = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
  const dims = dimsText.split(',').map(Number);
  const feeds = {[session.inputNames[0]]: new ort.Tensor('float32', values, dims)};
  const results = await session.run(feeds);
  const name = session.outputNames[0];
  const out = results[name];
  fs.writeFileSync(outputFile, Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength));
  console.log(JSON.stringify({input: session.inputNames[0], output: name, dims: out.dims}));
}

main().catch((e) => {
  console.error('onnxruntime: ' + (e && e.message ? e.message : e));
  process.exit(1);
});
