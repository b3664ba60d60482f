// UTF-8 as RFC 3629 defines it, for the readers and writers of text formats (YAML, JSON headers).
#pragma once

#include <cstddef>
#include <string_view>

namespace tandem {

// The length of the valid UTF-8 sequence at s[i] (1 to 4), its code point in *code; 0 when the
// bytes there are not one (overlong forms, surrogates and code points beyond U+10FFFF are not).
inline size_t utf8_at(std::string_view s, size_t i, char32_t* code) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  if (c < 0x80) {
    *code = c;
    return 1;
  }
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2, *code = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3, *code = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;  // else overlong
    if (c == 0xED) hi = 0x9F;  // else a surrogate
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4, *code = c & 0x07;
    if (c == 0xF0) lo = 0x90;  // else overlong
    if (c == 0xF4) hi = 0x8F;  // else beyond U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size() || b(1) < lo || b(1) > hi) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
    *code = (*code << 6) | (b(k) & 0x3F);
  }
  return n;
}

// The offset of the first byte of `s` that is not part of valid UTF-8; npos when there is none.
inline size_t invalid_utf8_at(std::string_view s) {
  char32_t code = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_at(s, i, &code);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

}  // namespace tandem
