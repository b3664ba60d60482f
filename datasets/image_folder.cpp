// Image folder reader: one sub-folder per class of image files (has_image_extension), decoded by
// image_decode.h.
#include "datasets/image_folder.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <memory>
#include <new>

#include "datasets/file_io.h"
#include "datasets/image_decode.h"
#include "engine/error.h"
#include "engine/file_check.h"

namespace tandem {

namespace fs = std::filesystem;

namespace {

constexpr size_t kSkippedListed = 10;

const char* kLayoutHint =
    "lay the images out as FOLDER/train/CLASS/IMAGE and FOLDER/test/CLASS/IMAGE (one sub-folder "
    "per class of PNG, JPEG, BMP, GIF, TGA, PGM or PPM files) and point data.path at "
    "FOLDER";

struct ClassFiles {
  std::string name;
  std::vector<std::string> files;  // sorted paths
};

// Sub-folders (sorted) and regular files (sorted) of `dir`; hidden entries are left out.
void list_dir(const std::string& dir, std::vector<std::string>* folders,
              std::vector<std::string>* files) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    std::error_code type_ec;
    if (folders && it->is_directory(type_ec))
      folders->push_back(name);
    else if (files && it->is_regular_file(type_ec))
      files->push_back(name);
  }
  if (ec)
    throw DataError("cannot list the folder '" + dir + "': " + ec.message(),
                    "check that the folder exists and is readable");
  if (folders) std::sort(folders->begin(), folders->end());
  if (files) std::sort(files->begin(), files->end());
}

// The bytes of `path`, or why not in *error: a regular file of a sane size only, so that a FIFO
// or a device (/dev/zero) is refused at once instead of hanging or filling memory.
std::vector<uint8_t> read_bytes(const std::string& path, std::string* error) {
  std::vector<uint8_t> bytes;
  try {
    const ReadFile file(path, kMaxImageBytes,
                        [&](const std::string& why) { throw DataError(why); });
    bytes.resize(static_cast<size_t>(file.size()));
    if (!file.read_at(0, bytes.data(), bytes.size())) *error = "cannot be read";
  } catch (const DataError& e) {
    *error = e.cause();
  }
  return bytes;
}

// Decodes one image into `out` (C*H*W bytes, CHW) at the model's shape; returns "" or why not.
// Errors from the image itself (corrupt, unreadable) start with "decode:" so skip_bad can skip
// them; a size mismatch with resize off is always an error.
// Runs on OpenMP's threads (load_image_folder, predict), where nothing may throw.
std::string decode(const std::string& path, int c, int h, int w, bool resize, uint8_t* out) {
  try {
    std::string error;
    const std::vector<uint8_t> bytes = read_bytes(path, &error);
    if (!error.empty()) return "decode:" + error;
    const DecodedImage d = decode_image_bytes(bytes.data(), bytes.size(), c, h, w, resize, out);
    if (d.status == DecodedImage::kOk) return "";
    return (d.status == DecodedImage::kWrongSize ? "size:" : "decode:") + d.why;
  } catch (const std::bad_alloc&) {
    return "decode:cannot be decoded: out of memory";
  }
}

}  // namespace

bool has_image_extension(const std::string& name) {
  std::string ext = fs::path(name).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  // .psd, .hdr and .pic are read too, to be refused by name with the reason (image_decode.h).
  for (const char* e : {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tga", ".pgm", ".ppm", ".pnm",
                        ".psd", ".hdr", ".pic"})
    if (ext == e) return true;
  return false;
}

Dataset load_image_folder(const std::string& folder, const std::string& what,
                          const Shape& input_shape, int classes, const ImageFolderOptions& options,
                          const std::vector<std::string>& known_classes, const std::string& from) {
  if (input_shape.rank() != 3 || input_shape[0] < 1 || input_shape[0] > 4)
    throw DataError(
        "image folders need a model input of (channels, height, width) with 1 to 4 "
        "channels, but the model's input is " +
            input_shape.str(),
        "set the model's input to {shape: [C, H, W]}, e.g. [1, 28, 28] for gray or "
        "[3, 32, 32] for RGB images (add a flatten layer before dense layers)");
  data_io::require_folder(folder, "image folder " + what, kLayoutHint, from);
  const int c = static_cast<int>(input_shape[0]), h = static_cast<int>(input_shape[1]),
            w = static_cast<int>(input_shape[2]);

  std::vector<std::string> class_dirs, loose;
  list_dir(folder, &class_dirs, &loose);
  if (class_dirs.empty())
    throw DataError("the image folder " + what + " data '" + folder + "' has no class sub-folders" +
                        (loose.empty() ? ""
                                       : " (it holds " + std::to_string(loose.size()) +
                                             " files directly, such as '" + loose[0] + "')"),
                    kLayoutHint);
  if (!loose.empty())
    spdlog::warn(
        "{}: {} outside the class sub-folders {} not used (such as '{}')", folder,
        loose.size() == 1 ? std::string("1 file") : std::to_string(loose.size()) + " files",
        loose.size() == 1 ? "is" : "are", loose[0]);

  const bool train = known_classes.empty();
  if (train && classes > 0 && static_cast<int>(class_dirs.size()) > classes)
    throw DataError("the image folder '" + folder + "' has " + std::to_string(class_dirs.size()) +
                        " class sub-folders but the model has " + std::to_string(classes) +
                        " outputs",
                    "give the last dense layer " + std::to_string(class_dirs.size()) +
                        " units, or remove the extra class folders");
  std::vector<ClassFiles> found;
  for (const std::string& name : class_dirs) {
    const std::string dir = data_io::join(folder, name);
    if (!train &&
        std::find(known_classes.begin(), known_classes.end(), name) == known_classes.end())
      throw DataError("the test class folder '" + dir +
                          "' has no counterpart among the train "
                          "classes",
                      "give the train and test splits the same class sub-folders");
    std::vector<std::string> files;
    list_dir(dir, nullptr, &files);
    ClassFiles cf{name, {}};
    size_t others = 0;
    for (const std::string& f : files) {
      if (has_image_extension(f))
        cf.files.push_back(data_io::join(dir, f));
      else
        ++others;
    }
    if (cf.files.empty())
      throw DataError("the class folder '" + dir + "' holds no images" +
                          (others ? " (only " + std::to_string(others) +
                                        (others == 1 ? " file" : " files") + " of other types)"
                                  : ""),
                      std::string("put ") + kImageKinds + " images in it, or remove the folder");
    if (others)
      spdlog::warn("{}: {} that {} not {} images {} not used", dir,
                   others == 1 ? std::string("1 file") : std::to_string(others) + " files",
                   others == 1 ? "is" : "are", kImageKinds, others == 1 ? "is" : "are");
    found.push_back(std::move(cf));
  }

  Dataset d;
  d.name = "image_folder " + what + " (" + folder + ")";
  d.sample_shape = input_shape;
  d.class_names = train ? class_dirs : known_classes;
  d.classes = static_cast<int>(d.class_names.size());
  std::vector<std::string> paths;
  std::vector<int32_t> labels;
  for (const ClassFiles& cf : found) {
    const int32_t label = static_cast<int32_t>(
        std::find(d.class_names.begin(), d.class_names.end(), cf.name) - d.class_names.begin());
    for (const std::string& p : cf.files) {
      paths.push_back(p);
      labels.push_back(label);
    }
  }

  // Decoding dominates: one image per iteration, the messages kept per file so that the first
  // failure reported is the same whatever the thread count. Without keep_pixels every image is
  // still decoded, into a scratch buffer, so that bad files are found before training.
  const int64_t n = static_cast<int64_t>(paths.size());
  const size_t numel = static_cast<size_t>(input_shape.numel());
  if (options.keep_pixels) d.images.resize(static_cast<size_t>(n) * numel);
  std::vector<std::string> errors(static_cast<size_t>(n));
#pragma omp parallel
  {
    std::vector<uint8_t> scratch(options.keep_pixels ? 0 : numel);
#pragma omp for schedule(dynamic, 16)
    for (int64_t i = 0; i < n; ++i)
      errors[i] = decode(paths[i], c, h, w, options.resize,
                         options.keep_pixels ? d.images.data() + i * numel : scratch.data());
  }

  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const std::string& e = errors[i];
    if (!e.empty()) {
      const bool corrupt = e.rfind("decode:", 0) == 0;
      const std::string why = e.substr(e.find(':') + 1);
      if (!corrupt)
        throw DataError("the image '" + paths[i] + "' " + why + " and data.resize is false",
                        "set data.resize: true (the default) to resize images to the model's "
                        "input, or resize the image files to " +
                            std::to_string(w) + "x" + std::to_string(h));
      if (!options.skip_bad)
        throw DataError("the image '" + paths[i] + "' " + why,
                        "replace or remove the file, or set data.skip_bad: true to leave out the "
                        "images that do not decode");
      if (d.skipped_examples.size() < kSkippedListed)
        d.skipped_examples.push_back(paths[i] + ": " + why);
      ++d.skipped;
      continue;
    }
    if (kept != i && options.keep_pixels)
      std::copy_n(d.images.data() + i * numel, numel, d.images.data() + kept * numel);
    paths[kept] = paths[i];
    labels[kept++] = labels[i];
  }
  if (options.keep_pixels) d.images.resize(static_cast<size_t>(kept) * numel);
  labels.resize(static_cast<size_t>(kept));
  paths.resize(static_cast<size_t>(kept));
  // With skip_bad a class can lose every image: it would silently never be learnt.
  for (const ClassFiles& cf : found) {
    const int32_t label = static_cast<int32_t>(
        std::find(d.class_names.begin(), d.class_names.end(), cf.name) - d.class_names.begin());
    if (std::find(labels.begin(), labels.end(), label) == labels.end())
      throw DataError("the class folder '" + data_io::join(folder, cf.name) +
                          "' holds no image that decodes (" + std::to_string(cf.files.size()) +
                          " skipped)",
                      "replace the corrupt images or remove the folder");
  }
  d.labels = std::move(labels);
  if (!options.keep_pixels) {
    auto files = std::make_shared<const std::vector<std::string>>(std::move(paths));
    const bool resize = options.resize;
    d.read = [files, c, h, w, resize](int64_t i, uint8_t* out) {
      const std::string& path = (*files)[static_cast<size_t>(i)];
      const std::string e = decode(path, c, h, w, resize, out);
      if (!e.empty())
        throw DataError("the image '" + path + "' " + e.substr(e.find(':') + 1) +
                            " now; it decoded when training started",
                        "restore the file, or remove it and start again (data.skip_bad: true "
                        "leaves out the images that do not decode)");
    };
  }
  return d;
}

int64_t count_image_files(const std::string& folder) {
  int64_t n = 0;
  try {
    std::vector<std::string> class_dirs;
    list_dir(folder, &class_dirs, nullptr);
    for (const std::string& name : class_dirs) {
      std::vector<std::string> files;
      list_dir(data_io::join(folder, name), nullptr, &files);
      n += std::count_if(files.begin(), files.end(), has_image_extension);
    }
  } catch (const DataError&) {
    // load_image_folder says what is wrong with the folder.
  }
  return n;
}

void check_image_input(const Shape& shape) {
  if (shape.rank() != 3)
    throw DataError("the model takes flat input " + shape.str() + ", not images",
                    "predict needs a model whose input is [C, H, W]");
}

std::string image_problem(const std::string& path, const Shape& shape, uint8_t* out) {
  if (shape.rank() != 3) return "cannot be given to a model of flat input " + shape.str();
  const std::string e = decode(path, static_cast<int>(shape[0]), static_cast<int>(shape[1]),
                               static_cast<int>(shape[2]), true, out);
  return e.empty() ? e : e.substr(e.find(':') + 1);
}

void decode_image(const std::string& path, const Shape& shape, uint8_t* out) {
  check_image_input(shape);
  if (const std::string why = image_problem(path, shape, out); !why.empty())
    throw DataError("the image '" + path + "' " + why,
                    std::string("give ") + kImageKinds + " files");
}

}  // namespace tandem
