// A YAML document checked as a strict parser reads it, where yaml-cpp is lenient: the text is
// UTF-8 of printable characters, no mapping repeats a key, and the work stays linear in the size.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

namespace tandem {

// Throws ConfigError at FILE:LINE:COL for the first byte that is not valid UTF-8, or a character
// YAML does not allow in a document (a control character such as NUL; tab, line feed and carriage
// return are allowed).
void check_yaml_text(const std::string& text, const std::string& file);

// Throws ConfigError at FILE:LINE:COL for a key that appears twice in one mapping (yaml-cpp keeps
// both, and lookups would take the first), a key that is not plain text, or a value that holds a
// control character through an escape ("\0"). Each node is visited once per place it appears, so
// aliases that would expand the document far beyond `text_size` bytes are refused too.
void check_yaml_tree(const YAML::Node& root, const std::string& file, size_t text_size);

}  // namespace tandem
