// User-facing output: aligned tables on stdout, and the check of an output file's path.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/trainer.h"

namespace tandem {

using Row = std::vector<std::string>;

// Columns padded to their widest cell; numeric-looking cells right-aligned; a rule under the
// header.
std::string format_table(const Row& header, const std::vector<Row>& rows);
// Two columns, "key  value", for the start-up table.
std::string format_pairs(const std::string& title, const InfoRows& rows);

// Makes sure a file can be written at `path` before a long run needs it: creates its folders,
// and throws UsageError naming `flag` ("--metrics") when the path is a folder (the hint offers
// `example` inside it) or the folder takes no new file. Leaves no file behind.
void prepare_output_file(const std::string& path, const std::string& flag,
                         const std::string& example);

}  // namespace tandem
