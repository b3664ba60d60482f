// JSON text: string escapes and numbers (json_text.h).
#include "engine/json_text.h"

#include <fmt/format.h>

#include <cmath>

#include "engine/utf8.h"

namespace tandem {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      char32_t code = 0;
      const size_t n = utf8_at(s, i, &code);
      if (n == 0) {
        out += fmt::format("\\\\x{:02x}", c);
      } else {
        out.append(s, i, n);
        i += n - 1;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20)
          out += fmt::format("\\u{:04x}", c);
        else
          out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string json_number(double v, std::string_view spec) {
  if (!std::isfinite(v)) return "null";
  return fmt::format(fmt::runtime(spec), v);
}

}  // namespace tandem
