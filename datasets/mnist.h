// MNIST / Fashion-MNIST reader: the IDX image and label files of one split, gzipped or not.
#pragma once

#include <string>

#include "datasets/dataset.h"

namespace tandem {

// Reads one split from `folder`: train-{images-idx3,labels-idx1}-ubyte[.gz] when `train`, else the
// t10k-* (or test-*) pair. Images are (1,rows,cols). Checks the magic numbers (2051, 2049), that
// the file lengths match their headers, that both files count the same records, that the images
// match `input_shape` (1,H,W) (or a flat (H*W) input) and that every label is below `classes`
// (unchecked when classes <= 0). Throws DataError naming the file, and the record where one is at
// fault. keep_pixels false: the data set reads each image from the file when asked instead.
// `from` says where the folder was given, for the message when it is missing.
Dataset load_mnist(const std::string& folder, bool train, const Shape& input_shape, int classes,
                   bool keep_pixels = true, const std::string& from = "");

}  // namespace tandem
