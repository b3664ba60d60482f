// JSON text as tandem writes it (metrics lines, bench --json, checkpoint headers, export notes):
// one string escaper and one number writer for every writer. The readers are apart
// (engine/checkpoint.cpp's strict one refuses what a lenient parser would accept).
#pragma once

#include <string>
#include <string_view>

namespace tandem {

// A JSON string of `s`. JSON text is UTF-8: a byte that is not part of valid UTF-8 (a folder
// name in Latin-1, say) is written as the four characters \xNN, so that the text stays valid for
// every reader and the name stays recognisable.
std::string json_string(const std::string& s);

// A JSON number of v in fmt's `spec` ("{:.6g}", "{:.1f}", ...), or null when v is NaN or infinite
// (JSON has no such numbers: a step window that held only skipped steps has no mean loss).
std::string json_number(double v, std::string_view spec = "{:.6g}");

}  // namespace tandem
