// Whole-file replacement (engine/atomic_file.h), which checkpoints, ONNX models, plots, metrics
// files and exported images are written through: the old file or the new one, never a part, and no
// temporary left behind, whatever the writer does.
#include "engine/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace tandem {
namespace {

namespace fs = std::filesystem;

struct Folder {
  fs::path dir;
  explicit Folder(const std::string& name) : dir(fs::path(::testing::TempDir()) / name) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Folder() { fs::remove_all(dir); }
  std::string file(const std::string& name) const { return (dir / name).string(); }
  int entries() const { return static_cast<int>(std::distance(fs::directory_iterator(dir), {})); }
};

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

bool put(FILE* f, const std::string& text) {
  return std::fwrite(text.data(), 1, text.size(), f) == text.size();
}

TEST(AtomicFile, ReplacesTheFileWholeAndLeavesNoTemporary) {
  Folder d("atomic_replace");
  const std::string path = d.file("model.bin");
  ASSERT_EQ(replace_file(path, [](FILE* f) { return put(f, "first"); }), "");
  ASSERT_EQ(replace_file(path, [](FILE* f) { return put(f, "second, longer"); }), "");
  EXPECT_EQ(read(path), "second, longer");
  EXPECT_EQ(d.entries(), 1);
  ASSERT_EQ(replace_file_with(path, "third"), "");
  EXPECT_EQ(read(path), "third");
  EXPECT_EQ(d.entries(), 1);
}

// Unsynced (exported images): the same file, the same clean-up, and a failed write the same.
TEST(AtomicFile, UnsyncedReplacesAsWholeAndFailsAsCleanly) {
  Folder d("atomic_unsynced");
  const std::string path = d.file("00001.png");
  ASSERT_EQ(replace_file_with(path, "old", false), "");
  ASSERT_EQ(replace_file_with(path, "new image", false), "");
  EXPECT_EQ(read(path), "new image");
  const std::string why = replace_file(
      path, [](FILE* f) { return put(f, "half") && false; }, false);
  EXPECT_NE(why.find("writing failed"), std::string::npos) << why;
  EXPECT_EQ(read(path), "new image");
  EXPECT_EQ(d.entries(), 1);
}

TEST(AtomicFile, AFailedWriteKeepsTheOldFileAndRemovesTheTemporary) {
  Folder d("atomic_failed");
  const std::string path = d.file("metrics.jsonl");
  ASSERT_EQ(replace_file(path, [](FILE* f) { return put(f, "old"); }), "");
  const std::string why = replace_file(path, [](FILE* f) {
    put(f, "half of the new");
    return false;  // as a full disk would make it
  });
  EXPECT_NE(why.find("writing failed"), std::string::npos) << why;
  EXPECT_EQ(read(path), "old");
  EXPECT_EQ(d.entries(), 1);
}

TEST(AtomicFile, AMissingFolderIsNamedWithTheSystemsReason) {
  Folder d("atomic_missing");
  const std::string why =
      replace_file(d.file("no/such/folder/x.onnx"), [](FILE* f) { return put(f, "x"); });
  EXPECT_NE(why.find("cannot create"), std::string::npos) << why;
  EXPECT_NE(why.find("No such file or directory"), std::string::npos) << why;
}

TEST(AtomicFile, TheNewFileIsAsReadableAsAnyTheUserMakes) {
  Folder d("atomic_mode");
  const std::string path = d.file("c.safetensors");
  const mode_t mask = ::umask(022);
  ASSERT_EQ(replace_file(path, [](FILE* f) { return put(f, "x"); }), "");
  ::umask(mask);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

// A writer that opens the file by name (PLplot): its file is synced and renamed the same way; one
// that writes nothing has failed, and the old file stays.
TEST(AtomicFile, AWriterByNameCommitsItsFileAndAnEmptyOneFails) {
  Folder d("atomic_by_name");
  const std::string path = d.file("plot.png");
  ASSERT_EQ(replace_file_by_name(path,
                                 [](const std::string& tmp) {
                                   std::ofstream(tmp) << "png bytes";
                                   return true;
                                 }),
            "");
  EXPECT_EQ(read(path), "png bytes");
  const std::string why = replace_file_by_name(path, [](const std::string&) { return true; });
  EXPECT_NE(why.find("writing failed"), std::string::npos) << why;
  EXPECT_EQ(read(path), "png bytes");
  EXPECT_EQ(d.entries(), 1);
}

}  // namespace
}  // namespace tandem
