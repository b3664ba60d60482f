// Image decoding to the model's input: the bytes of one file, checked, decoded (JPEG through
// libjpeg-turbo, PNG through libpng, BMP, GIF, TGA and binary PGM/PPM through stb_image),
// converted to the model's channels and resized to its height and width. The one path that image
// folders (training) and predict take, and that the fuzz target tests/fuzz/image_fuzz.cpp drives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tandem {

// What a decoded image may be: at most this many pixels (width x height) ...
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 27;
// ... and its longer side at most this many times its shorter one (a strip of 1x5000 pixels is
// no photo, and stretching it to a model's input is what breaks resizers).
inline constexpr int64_t kMaxImageAspect = 1000;

// The kinds read, in words, for messages.
extern const char* const kImageKinds;

struct DecodedImage {
  enum Status { kOk, kBad, kWrongSize };
  Status status = kOk;
  // kBad: why the bytes are not an image tandem reads, as the end of a sentence that starts with
  // the file's name ("does not decode as an image (...)"). kWrongSize: the size, with resize off.
  std::string why;
};

// Decodes `size` bytes of an image file into `out`: c*h*w bytes, planes (CHW), c in 1..4 (gray
// <-> RGB, alpha added opaque or dropped). The image is resized to h x w when its size differs,
// unless `resize` is false (then kWrongSize). Width, height and channels are checked against the
// limits above before any pixel is decoded; PSD, HDR and PIC files are refused by their content
// whatever their name. Never throws for what the bytes hold.
DecodedImage decode_image_bytes(const uint8_t* bytes, size_t size, int c, int h, int w, bool resize,
                                uint8_t* out);

}  // namespace tandem
