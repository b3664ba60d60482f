// CIFAR-10 reader: the binary batches (3073-byte records: a label byte, then 3x32x32 CHW bytes).
#pragma once

#include <string>

#include "datasets/dataset.h"

namespace tandem {

// Reads data_batch_1.bin .. data_batch_5.bin (train) or test_batch.bin (test) from `folder` (or
// from its cifar-10-batches-bin/ sub-folder, the archive's layout). Checks that each file is a
// whole number of records and that every label is below 10 and below `classes` (when classes > 0).
// Throws DataError naming the missing batches, or the file and record at fault. keep_pixels
// false: the data set reads each image from its file when asked instead.
Dataset load_cifar10(const std::string& folder, bool train, int classes, bool keep_pixels = true,
                     const std::string& from = "");  // from: as in load_mnist

}  // namespace tandem
