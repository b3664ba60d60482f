// What each fuzz target does with one input, shared by the libFuzzer targets (*_fuzz.cpp) and the
// test suite, which runs every committed regression input through the same code
// (tests/tools/fuzz_regression_test.cpp). A refusal (a tandem::Error) is the expected outcome of
// a bad input; anything else escapes: a crash, a sanitizer report or another exception.
#pragma once

#include <omp.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "datasets/image_decode.h"

namespace tandem::fuzz {

// The readers take paths: each input is written to a file in a folder of this process's own.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const auto d =
        std::filesystem::temp_directory_path() / ("tandem-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  return dir;
}

// Writes `size` bytes to `name` in the scratch folder, gzipped when asked; returns its path.
inline std::string write_input(const std::string& name, const uint8_t* data, size_t size,
                               bool gzip = false) {
  const std::string path = scratch_dir() + "/" + name;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    if (!f) std::abort();
    if (size) gzwrite(f, data, static_cast<unsigned>(size));
    gzclose(f);
    return path;
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

// An image file's bytes through the decoding and resizing that image folders and predict take,
// at a model input chosen by the input's length: gray, gray+alpha, RGB and RGBA outputs, up- and
// down-scaling, and now and then resize off.
inline void image_one(const uint8_t* data, size_t size) {
  static const int kSides[][2] = {{28, 28}, {32, 32}, {224, 224}, {5, 7}};
  const int c = 1 + static_cast<int>(size % 4);
  const auto& s = kSides[(size / 4) % 4];
  std::vector<uint8_t> out(static_cast<size_t>(c) * s[0] * s[1]);
  decode_image_bytes(data, size, c, s[0], s[1], size % 17 != 0, out.data());
}

}  // namespace tandem::fuzz

// The targets below need the engine; the image target links the decoder alone.
#ifndef TANDEM_FUZZ_IMAGE_ONLY
#include "datasets/cifar10.h"
#include "datasets/dataset.h"
#include "datasets/mnist.h"
#include "engine/config.h"
#include "engine/error.h"
#include "engine/graph.h"
#include "tools/app.h"
#include "tools/checkpoint_model.h"

namespace tandem::fuzz {

// Every sample of a data set, as training reads it (from the pixels held or the file).
inline void read_all(const Dataset& d, int64_t numel) {
  std::vector<uint8_t> out(static_cast<size_t>(numel));
  for (int64_t i = 0; i < d.size(); ++i) read_samples(d, &i, 1, out.data());
}

// MNIST's IDX pair through load_mnist. The input holds both files: a byte of flags (bit 0: gzip
// the images file, bit 1: the labels file, bit 2: decode on the fly), the images file's length
// (4 bytes, little-endian), the images file, then the labels file.
inline void idx_one(const uint8_t* data, size_t size) {
  if (size < 5) return;
  const uint8_t flags = data[0];
  uint32_t n = 0;
  std::memcpy(&n, data + 1, 4);
  const size_t images_size = std::min<size_t>(n, size - 5);
  const std::string dir = scratch_dir() + "/idx";
  std::filesystem::remove_all(dir);
  const std::string img = "idx/train-images-idx3-ubyte", lab = "idx/train-labels-idx1-ubyte";
  write_input(img + (flags & 1 ? ".gz" : ""), data + 5, images_size, flags & 1);
  write_input(lab + (flags & 2 ? ".gz" : ""), data + 5 + images_size, size - 5 - images_size,
              flags & 2);
  try {
    read_all(load_mnist(dir, true, Shape{1, 4, 4}, 10, !(flags & 4)), 16);
  } catch (const Error&) {
  }
}

// A CIFAR-10 batch through load_cifar10: its pixels held or decoded on the fly (the first byte's
// bit 0), gzipped or not (bit 1; the reader takes both alike).
inline void cifar_one(const uint8_t* data, size_t size) {
  const uint8_t flags = size ? data[0] : 0;
  write_input("cifar/test_batch.bin", data, size, flags & 2);
  try {
    read_all(load_cifar10(scratch_dir() + "/cifar", false, 10, !(flags & 1)), 3 * 32 * 32);
  } catch (const Error&) {
  }
}

// YAML text through parse_config (strict YAML, every key checked), then the model it describes
// built as a Graph (blocks expanded, shapes inferred), as `trainer` and a checkpoint's stored
// config take it. Nothing is allocated on a device.
inline void config_one(const uint8_t* data, size_t size) {
  try {
    Config config = parse_config(std::string(reinterpret_cast<const char*>(data), size),
                                 "/nonexistent/fuzz.yaml");
    Graph graph(config);
  } catch (const Error&) {
  }
}

// A checkpoint through what predict and eval do with one (load_checkpoint_model): the
// safetensors header and metadata checked, the stored config parsed and built, then every tensor
// read into the model on the CPU, for batches of one.
inline void safetensors_one(const uint8_t* data, size_t size) {
  omp_set_num_threads(1);
  RunRequest r;
  r.checkpoint = write_input("fuzz.safetensors", data, size);
  r.batch_size = 1;
  try {
    read_checkpoint_contents(r.checkpoint);
    load_checkpoint_model(r, "predict");
  } catch (const Error&) {
  }
}

// An ONNX file through `trainer import` (run_import): the protobuf parsed, every node converted
// or refused, the config written and built, the weights checked and written.
inline void onnx_one(const uint8_t* data, size_t size) {
  omp_set_num_threads(1);
  RunRequest r;
  r.inputs = {write_input("model.onnx", data, size)};
  r.out_dir = scratch_dir() + "/imported";
  r.force = true;
  try {
    run_import(r);
  } catch (const Error&) {
  }
}

}  // namespace tandem::fuzz
#endif
