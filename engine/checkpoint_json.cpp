// The strict JSON reader of checkpoint headers (checkpoint_json.h).
#include "engine/checkpoint_json.h"

#include <fmt/format.h>

#include <charconv>
#include <set>
#include <string_view>

#include "engine/error.h"
#include "engine/utf8.h"

namespace tandem::checkpoint_json {

Json::Json() = default;
Json::Json(const Json&) = default;
Json::Json(Json&&) noexcept = default;
Json& Json::operator=(const Json&) = default;
Json& Json::operator=(Json&&) noexcept = default;
Json::~Json() = default;

const Json* Json::find(const std::string& key) const {
  for (const auto& [k, v] : members)
    if (k == key) return &v;
  return nullptr;
}

namespace {

// A recursive-descent reader of the JSON subset above; `what` names the file in errors.
class JsonReader {
 public:
  JsonReader(const std::string& s, const std::string& what) : s_(s), what_(what) {}
  Json document() {
    if (const size_t bad = invalid_utf8_at(s_); bad != std::string_view::npos) {
      i_ = bad;
      fail("a byte that is not UTF-8 (JSON text is UTF-8)");
    }
    Json j = value(0);
    skip();
    if (i_ != s_.size()) fail("unexpected text after the header object");
    return j;
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    throw CheckpointError(
        fmt::format("{}: the header is not valid JSON at byte {}: {}", what_, i_, why),
        "the file is corrupt or not a tandem checkpoint; use another checkpoint");
  }
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r'))
      ++i_;
  }
  char peek() {
    skip();
    if (i_ >= s_.size()) fail("it ends early");
    return s_[i_];
  }
  void expect(char c) {
    if (peek() != c) fail(fmt::format("expected '{}'", c));
    ++i_;
  }
  Json value(int depth) {
    if (depth > 8) fail("nested too deeply");
    Json j;
    char c = peek();
    if (c == '{') {
      ++i_;
      if (peek() == '}') {
        ++i_;
        return j;
      }
      std::set<std::string> keys;
      for (;;) {
        const size_t at = i_;
        std::string key = string();
        if (!keys.insert(key).second) {
          i_ = at;
          fail("the key \"" + key + "\" appears twice in one object");
        }
        expect(':');
        j.members.emplace_back(std::move(key), value(depth + 1));
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect('}');
        return j;
      }
    }
    if (c == '[') {
      ++i_;
      j.kind = Json::kArray;
      if (peek() == ']') {
        ++i_;
        return j;
      }
      for (;;) {
        j.items.push_back(value(depth + 1));
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect(']');
        return j;
      }
    }
    if (c == '"') {
      j.kind = Json::kString;
      j.text = string();
      return j;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      // JSON's integers: -?(0|[1-9][0-9]*). Fractions and exponents are numbers JSON allows but
      // no field of the format takes.
      j.kind = Json::kNumber;
      const size_t start = i_;
      if (s_[i_] == '-') ++i_;
      const size_t digits = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      if (i_ == digits) fail("a '-' without digits");
      if (s_[digits] == '0' && i_ - digits > 1) fail("a number with a leading zero");
      if (i_ < s_.size() && (s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E'))
        fail("a number that is not an integer");
      j.text = s_.substr(start, i_ - start);
      return j;
    }
    fail("expected an object, array, string or integer");
  }
  // Four hex digits of a \u escape.
  unsigned hex4() {
    unsigned code = 0;
    if (i_ + 4 > s_.size() ||
        std::from_chars(s_.data() + i_, s_.data() + i_ + 4, code, 16).ptr != s_.data() + i_ + 4)
      fail("bad \\u escape");
    i_ += 4;
    return code;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (static_cast<unsigned char>(c) < 0x20) {
        --i_;
        fail("a control character inside a string (JSON needs it escaped)");
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) break;
      char e = s_[i_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u': {
          // UTF-16 in the escape: a character beyond U+FFFF is a surrogate pair; a lone
          // surrogate is no character at all.
          unsigned code = hex4();
          if (code >= 0xDC00 && code <= 0xDFFF) fail("a lone surrogate in a \\u escape");
          if (code >= 0xD800 && code <= 0xDBFF) {
            if (i_ + 2 > s_.size() || s_[i_] != '\\' || s_[i_ + 1] != 'u')
              fail("a lone surrogate in a \\u escape");
            i_ += 2;
            const unsigned low = hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("a lone surrogate in a \\u escape");
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, code);
          break;
        }
        default:
          fail("bad escape");
      }
    }
    if (i_ >= s_.size()) fail("a string does not end");
    ++i_;
    return out;
  }

  static void append_utf8(std::string& out, unsigned code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  const std::string& s_;
  std::string what_;
  size_t i_ = 0;
};

}  // namespace

Json read(const std::string& text, const std::string& what) {
  return JsonReader(text, what).document();
}

}  // namespace tandem::checkpoint_json
