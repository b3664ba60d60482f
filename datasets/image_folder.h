// Image folder reader: one sub-folder per class of PNG, JPEG, BMP, GIF, TGA, PGM or PPM files.
#pragma once

#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/image_decode.h"

namespace tandem {

struct ImageFolderOptions {
  bool resize = true;     // false: an image of another size than the model's input is an error
  bool skip_bad = false;  // true: images that do not decode are left out and counted
  // false: every image is still decoded (and checked) once, but the data set then decodes each
  // image from its file when asked instead of holding the pixels.
  bool keep_pixels = true;
};

// Reads one split from `folder`: each sub-folder is a class, the classes sorted by name (byte
// order), the images of a class sorted by file name. Every image is converted to the channel count
// of `input_shape` (C,H,W), C in 1..4 (gray <-> RGB, alpha added or dropped), and resized to HxW
// when its size differs. `what` names the split ("train", "test") in messages. `known_classes`
// empty: the classes are the sub-folders (at most `classes` of them when classes > 0); otherwise
// (the test split) every sub-folder must be one of them, and the labels index into them.
// Throws DataError naming the folder or file at fault: missing folder, no class folders, a class
// without images, an image that does not decode (unless skip_bad), a size mismatch with resize off.
// `from` says where the folder was given ("data.path in FILE", "--data"), for the message when it
// is missing.
Dataset load_image_folder(const std::string& folder, const std::string& what,
                          const Shape& input_shape, int classes, const ImageFolderOptions& options,
                          const std::vector<std::string>& known_classes = {},
                          const std::string& from = "");

// The image files in the class sub-folders of `folder` (0 where it cannot be listed): the samples
// load_image_folder would decode.
int64_t count_image_files(const std::string& folder);

// Whether a file name has the extension of an image file, in any case: PNG, JPEG, BMP, GIF (first
// frame), TGA and the binary PNM forms (PGM, PPM, PNM), which are decoded; PSD, HDR and PIC, which
// are read only to be refused by name (image_decode.h), not passed over in silence. The one list,
// for image folders (training) and predict.
bool has_image_extension(const std::string& name);

// Decodes one image file to `shape` (C,H,W) as uint8 CHW in `out`, converting channels and
// resizing; throws DataError naming the file and the reason when it does not decode.
void decode_image(const std::string& path, const Shape& shape, uint8_t* out);
// The same without throwing (for OpenMP's threads, and callers that go on past a bad file): ""
// when it decoded, else why not, as the end of a sentence that starts with the file's name.
std::string image_problem(const std::string& path, const Shape& shape, uint8_t* out);
// Throws DataError unless `shape` is an image's (C,H,W): first, for image_problem's callers.
void check_image_input(const Shape& shape);

}  // namespace tandem
