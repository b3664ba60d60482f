// Small text helpers shared across the engine and the tools.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

// The parts of `text` between the separators, empty ones included: "a,,b," is {"a", "", "b", ""},
// and "" is {""}.
std::vector<std::string> split(const std::string& text, char separator);

// `s` with its ASCII letters in lower case.
std::string lower(std::string s);

// A byte count for people: "1 byte", "512 bytes", "1.5 KiB", "12.0 MiB", "3.0 GiB" (GiB the
// largest unit: a huge size stays in GiB, "3072.0 GiB").
std::string format_bytes(uint64_t bytes);

// `words` filled into lines of at most `width` columns, the first starting at column `first`
// (after what the caller prints before it), the others indented by `indent` spaces; lines break
// between words only (a word longer than a line stays whole). Ends with a newline.
std::string fill_words(const std::string& words, size_t first, size_t indent, size_t width);

// The width to fit what is printed to stdout: its terminal's columns (else $COLUMNS), or 80 when
// it is not a terminal (a file, a pipe, a test).
size_t output_width();

}  // namespace tandem
