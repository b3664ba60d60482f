// Image decoding to the model's input (image_decode.h): each kind through the library that reads
// it best, and what a header announces checked before any buffer is sized by it.
#include "datasets/image_decode.h"

#include <png.h>
#include <stb/stb_image.h>
#include <stb/stb_image_resize.h>
#include <turbojpeg.h>

#include <algorithm>
#include <climits>
#include <csetjmp>
#include <cstring>
#include <memory>
#include <vector>

namespace tandem {

const char* const kImageKinds = "PNG, JPEG, BMP, GIF, TGA, PGM or PPM";

namespace {

enum class Kind { kJpeg, kPng, kBmp, kGif, kPnm, kPsd, kHdr, kPic, kOther };

bool starts_with(const uint8_t* b, size_t n, const char* magic, size_t m) {
  return n >= m && std::memcmp(b, magic, m) == 0;
}

// The kind by the file's first bytes (its name may lie). stb_image tries the same magic numbers
// in the same way, so a file refused here as PSD, HDR or PIC could never reach its decoders for
// those kinds; TGA has no magic number and is what stb_image tries last.
Kind sniff(const uint8_t* b, size_t n) {
  if (starts_with(b, n, "\xFF\xD8", 2)) return Kind::kJpeg;
  if (starts_with(b, n, "\x89PNG\r\n\x1A\n", 8)) return Kind::kPng;
  if (starts_with(b, n, "BM", 2)) return Kind::kBmp;
  if (starts_with(b, n, "GIF8", 4)) return Kind::kGif;
  if (starts_with(b, n, "P5", 2) || starts_with(b, n, "P6", 2)) return Kind::kPnm;
  if (starts_with(b, n, "8BPS", 4)) return Kind::kPsd;
  if (starts_with(b, n, "#?RADIANCE\n", 11) || starts_with(b, n, "#?RGBE\n", 7)) return Kind::kHdr;
  if (starts_with(b, n, "\x53\x80\xF6\x34", 4)) return Kind::kPic;
  return Kind::kOther;
}

std::string dims(int64_t w, int64_t h) { return std::to_string(w) + "x" + std::to_string(h); }

// Why a width and height announced (or decoded) cannot be taken, or "".
std::string dims_problem(int64_t w, int64_t h) {
  if (w < 1 || h < 1) return "has no pixels (its header says " + dims(w, h) + ")";
  if (w * h > kMaxImagePixels)
    return "announces " + dims(w, h) + " pixels, more than an image of a training set has (" +
           std::to_string(kMaxImagePixels) + " pixels at most)";
  if (std::max(w, h) > kMaxImageAspect * std::min(w, h))
    return "is " + dims(w, h) + " pixels, an aspect ratio beyond " +
           std::to_string(kMaxImageAspect) + ":1 that cannot be resized to the model's input";
  return "";
}

uint32_t le16(const uint8_t* p) { return p[0] | (p[1] << 8); }
uint32_t le32(const uint8_t* p) { return le16(p) | (le16(p + 2) << 16); }

// The fewest bytes a file of the kinds stb_image decodes without (or with run-length only)
// compression can hold a w x h image in; stb_image fills what a file lacks with zeros, so a
// few bytes could otherwise make it allocate and fill 2^27 pixels. 0: no bound known (GIF's LZW).
int64_t least_bytes(Kind kind, const uint8_t* b, size_t n, int64_t w, int64_t h) {
  const int64_t pixels = w * h;
  switch (kind) {
    case Kind::kPnm:  // one byte per sample at least: P5 gray, P6 RGB
      return pixels * (b[1] == '6' ? 3 : 1);
    case Kind::kBmp: {       // uncompressed rows (stb_image reads no RLE): bits per pixel from the
      if (n < 30) return 0;  // info header, at 24 in the old 12-byte form, else at 28
      const uint32_t bpp = le16(b + (le32(b + 14) == 12 ? 24 : 28));
      return pixels * std::max<uint32_t>(bpp, 1) / 8;
    }
    case Kind::kOther: {     // TGA: image type at 2, bits per pixel at 16; types 9-11 run-length
      if (n < 18) return 0;  // encoded, at most 128 pixels per packet of a byte and a pixel
      const int64_t bytes_pp = std::max<int64_t>(b[16] / 8, 1);
      return b[2] >= 9 ? pixels / 128 * (1 + bytes_pp) : pixels * bytes_pp;
    }
    default:
      return 0;
  }
}

// Interleaved pixels, as the decoders give them.
struct Pixels {
  int w = 0, h = 0, c = 0;
  std::vector<uint8_t> data;
};

// stb_image's conversions between channel counts (its luma weights), so that an image gives the
// same pixels whichever library decoded it: gray <-> RGB, alpha added opaque or dropped.
void convert_channels(Pixels& p, int c) {
  if (p.c == c) return;
  const size_t n = static_cast<size_t>(p.w) * p.h;
  std::vector<uint8_t> out(n * c);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* s = p.data.data() + i * p.c;
    const bool color = p.c >= 3;
    const uint8_t y =
        color ? static_cast<uint8_t>((s[0] * 77 + s[1] * 150 + s[2] * 29) >> 8) : s[0];
    const uint8_t alpha = p.c == 2 ? s[1] : p.c == 4 ? s[3] : 255;
    uint8_t* d = out.data() + i * c;
    if (c <= 2) {
      d[0] = y;
    } else {
      d[0] = s[0], d[1] = color ? s[1] : s[0], d[2] = color ? s[2] : s[0];
    }
    if (c == 2 || c == 4) d[c - 1] = alpha;
  }
  p.data = std::move(out);
  p.c = c;
}

// --- JPEG: libjpeg-turbo's TurboJPEG API, one decompressor per thread ---------------------------

tjhandle jpeg_handle() {
  thread_local std::unique_ptr<void, int (*)(tjhandle)> handle(tjInitDecompress(), tjDestroy);
  return handle.get();
}

std::string jpeg_error(tjhandle t) {
  return std::string("does not decode as a JPEG image (") + tjGetErrorStr2(t) + ")";
}

// The largest DCT reduction (1/2, 1/4, 1/8) that keeps both sides at or above the target's: the
// decoder then computes a fraction of the pixels, and the resize does the rest.
tjscalingfactor jpeg_scale(int iw, int ih, int w, int h) {
  tjscalingfactor best{1, 1};
  for (int denom : {2, 4, 8}) {
    const tjscalingfactor f{1, denom};
    if (TJSCALED(iw, f) >= w && TJSCALED(ih, f) >= h) best = f;
  }
  return best;
}

// Decodes at `f` to `c` channels (two: gray, with alpha added after). A warning (damaged data
// the decoder went past, such as a file cut short) still gives a whole image.
std::string decode_jpeg(const uint8_t* b, size_t n, int iw, int ih, tjscalingfactor f, int c,
                        Pixels* p) {
  tjhandle t = jpeg_handle();
  if (!t) return "cannot be decoded (the JPEG decoder did not start)";
  p->w = TJSCALED(iw, f), p->h = TJSCALED(ih, f), p->c = c == 2 ? 1 : c;
  p->data.resize(static_cast<size_t>(p->w) * p->h * p->c);
  const int format = p->c == 1 ? TJPF_GRAY : p->c == 3 ? TJPF_RGB : TJPF_RGBA;
  if (tjDecompress2(t, b, n, p->data.data(), p->w, 0, p->h, format, 0) != 0 &&
      tjGetErrorCode(t) != TJERR_WARNING)
    return jpeg_error(t);
  convert_channels(*p, c);
  return "";
}

// --- PNG: libpng, reading from memory; its errors return through setjmp ------------------------

struct PngInput {
  const uint8_t* at;
  size_t left;
  std::string why;  // libpng's message when it fails
};

void png_read_bytes(png_structp png, png_bytep out, size_t n) {
  auto* in = static_cast<PngInput*>(png_get_io_ptr(png));
  if (n > in->left) png_error(png, "the file ends early");
  std::memcpy(out, in->at, n);
  in->at += n, in->left -= n;
}

void png_fail(png_structp png, png_const_charp message) {
  static_cast<PngInput*>(png_get_error_ptr(png))->why = message;
  png_longjmp(png, 1);
}

void png_ignore_warning(png_structp, png_const_charp) {}

// Reads the header, asks `check` about the width and height (its "" lets decoding go on), then
// decodes to 8-bit gray, gray+alpha, RGB or RGBA as the file holds (palettes expanded,
// transparency as alpha, 16 bits cut to their high byte as stb_image does) and converts to c.
template <class Check>
std::string decode_png(const uint8_t* b, size_t n, int c, const Check& check, Pixels* p) {
  PngInput in{b, n, ""};
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, &in, png_fail, png_ignore_warning);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return "cannot be decoded (out of memory)";
  }
  std::vector<png_bytep> rows;
  std::string problem;
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return "does not decode as a PNG image (" + in.why + ")";
  }
  png_set_read_fn(png, &in, png_read_bytes);
  png_read_info(png, info);
  problem = check(static_cast<int64_t>(png_get_image_width(png, info)),
                  static_cast<int64_t>(png_get_image_height(png, info)));
  if (problem.empty()) {
    png_set_expand(png);
    png_set_strip_16(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    p->w = static_cast<int>(png_get_image_width(png, info));
    p->h = static_cast<int>(png_get_image_height(png, info));
    p->c = png_get_channels(png, info);
    const size_t stride = static_cast<size_t>(p->w) * p->c;
    if (p->c < 1 || p->c > 4 || png_get_rowbytes(png, info) != stride) png_error(png, "bad layout");
    p->data.resize(stride * p->h);
    rows.resize(static_cast<size_t>(p->h));
    for (int y = 0; y < p->h; ++y) rows[y] = p->data.data() + y * stride;
    png_read_image(png, rows.data());
  }
  png_destroy_read_struct(&png, &info, nullptr);
  if (problem.empty()) convert_channels(*p, c);
  return problem;
}

// --- BMP, GIF, TGA, PGM/PPM: stb_image --------------------------------------------------------

std::string stb_error() {
  const char* why = stbi_failure_reason();
  return std::string("does not decode as an image (") + (why ? why : "unknown") + ")";
}

// The header's width and height through stb_image, checked, then the pixels at c channels.
template <class Check>
std::string decode_stb(const uint8_t* b, size_t n, Kind kind, int c, const Check& check,
                       Pixels* p) {
  const int len = static_cast<int>(n);  // callers keep files far below 2 GiB
  int iw = 0, ih = 0, file_channels = 0;
  if (!stbi_info_from_memory(b, len, &iw, &ih, &file_channels)) return stb_error();
  if (std::string problem = check(iw, ih); !problem.empty()) return problem;
  if (static_cast<int64_t>(n) < least_bytes(kind, b, n, iw, ih))
    return "is cut short: its header announces " + dims(iw, ih) + " pixels, more than its " +
           std::to_string(n) + " bytes hold";
  stbi_uc* px = stbi_load_from_memory(b, len, &p->w, &p->h, &file_channels, c);
  if (!px) return stb_error();
  p->c = c;
  p->data.assign(px, px + static_cast<size_t>(p->w) * p->h * c);
  stbi_image_free(px);
  if (p->w != iw || p->h != ih)
    return "decodes to " + dims(p->w, p->h) + " pixels where its header announces " + dims(iw, ih);
  return "";
}

const char* refused_kind(Kind kind) {
  switch (kind) {
    case Kind::kPsd:
      return "a Photoshop (PSD) file";
    case Kind::kHdr:
      return "a Radiance HDR image";
    case Kind::kPic:
      return "a Softimage PIC image";
    default:
      return nullptr;
  }
}

// Resizes (stb_image_resize) when the size differs, then rewrites rows of interleaved channels
// (HWC) as the planes the engine takes (CHW).
bool to_planes(const Pixels& p, int h, int w, uint8_t* out) {
  const int c = p.c;
  std::vector<uint8_t> resized;
  const uint8_t* src = p.data.data();
  if (p.w != w || p.h != h) {
    resized.resize(static_cast<size_t>(h) * w * c);
    if (!stbir_resize_uint8(src, p.w, p.h, 0, resized.data(), w, h, 0, c)) return false;
    src = resized.data();
  }
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k)
        out[(static_cast<size_t>(k) * h + y) * w + x] =
            src[(static_cast<size_t>(y) * w + x) * c + k];
  return true;
}

}  // namespace

DecodedImage decode_image_bytes(const uint8_t* bytes, size_t size, int c, int h, int w, bool resize,
                                uint8_t* out) {
  const auto bad = [](std::string why) { return DecodedImage{DecodedImage::kBad, std::move(why)}; };
  if (size == 0) return bad("is empty");
  if (size > static_cast<size_t>(INT_MAX)) return bad("is larger than 2 GiB");
  const Kind kind = sniff(bytes, size);
  if (const char* what = refused_kind(kind))
    return bad(std::string("is ") + what + ", not one of the kinds tandem reads (" + kImageKinds +
               "): convert it to PNG");
  // A size other than the model's is an error of its own with resize off; else the header's
  // width and height must be an image worth decoding.
  bool wrong_size = false;
  const auto check = [&](int64_t iw, int64_t ih) {
    if (std::string problem = dims_problem(iw, ih); !problem.empty()) return problem;
    wrong_size = !resize && (iw != w || ih != h);
    return wrong_size
               ? "is " + dims(iw, ih) + " (width x height) but the model's input is " + dims(w, h)
               : std::string();
  };
  Pixels p;
  std::string why;
  if (kind == Kind::kJpeg) {
    int iw = 0, ih = 0, sub = 0, space = 0;
    if (tjhandle t = jpeg_handle(); !t)
      why = "cannot be decoded (the JPEG decoder did not start)";
    else if (tjDecompressHeader3(t, bytes, size, &iw, &ih, &sub, &space) != 0)
      why = jpeg_error(t);
    else if (why = check(iw, ih); why.empty())
      why = decode_jpeg(bytes, size, iw, ih,
                        resize ? jpeg_scale(iw, ih, w, h) : tjscalingfactor{1, 1}, c, &p);
  } else if (kind == Kind::kPng) {
    why = decode_png(bytes, size, c, check, &p);
  } else {
    why = decode_stb(bytes, size, kind, c, check, &p);
  }
  if (wrong_size) return {DecodedImage::kWrongSize, why};
  if (!why.empty()) return bad(why);
  if (std::string problem = dims_problem(p.w, p.h); !problem.empty()) return bad(problem);
  if (!to_planes(p, h, w, out)) return bad("cannot be resized from " + dims(p.w, p.h));
  return {};
}

}  // namespace tandem
