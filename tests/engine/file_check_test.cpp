// Paths checked before they are opened: regular files of a sane size only, anything else refused
// by what it is, without blocking on a FIFO or reading a device.
#include "engine/file_check.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "engine/error.h"
#include "engine/text.h"
#include "tests/tools/timeout_util.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

std::string scratch(const std::string& name) {
  const std::string path = test::test_temp_dir() + name;
  fs::remove_all(path);
  return path;
}

// The words a refusal of `path` gives (a refuse that throws them back).
std::string refusal(const std::string& path, uint64_t max_bytes) {
  try {
    read_whole_file(path, max_bytes, [](const std::string& why) { throw DataError(why); });
  } catch (const DataError& e) {
    return e.cause();
  }
  return "";
}

TEST(FileCheck, ARegularFileIsReadWhole) {
  const std::string path = scratch("plain.txt");
  std::ofstream(path) << "seven b";
  EXPECT_EQ(file_problem(path, 100), "");
  EXPECT_EQ(read_whole_file(path, 100, [](const std::string& why) { throw DataError(why); }),
            "seven b");
}

TEST(FileCheck, EachKindOfNonFileIsNamed) {
  const std::string dir = scratch("folder");
  fs::create_directories(dir);
  EXPECT_EQ(file_problem(dir, 100), "is a folder, not a file");
  EXPECT_EQ(file_problem("/dev/zero", 100), "is a character device, not a file");
  EXPECT_EQ(file_problem(scratch("absent"), 100), "does not exist");
  const std::string fifo = scratch("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(file_problem(fifo, 100), "is a FIFO (named pipe), not a file");
}

TEST(FileCheck, AFileOverTheLimitIsRefusedBeforeItIsRead) {
  const std::string path = scratch("big.bin");
  { std::ofstream(path) << "x"; }
  fs::resize_file(path, uint64_t{3} << 30);  // sparse: no disk, no memory
  EXPECT_EQ(refusal(path, uint64_t{1} << 20),
            "is 3.0 GiB, more than the 1.0 MiB such a file may have");
}

// Opening a FIFO for reading waits for a writer; the check must not. In a child, killed if it
// waits, so that a regression fails rather than hangs.
TEST(FileCheck, AFifoIsRefusedWithoutWaitingForAWriter) {
  const std::string fifo = scratch("waiting");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const test::ChildResult r = test::run_in_child(
      10, [&] { return refusal(fifo, 100) == "is a FIFO (named pipe), not a file" ? 0 : 1; });
  EXPECT_FALSE(r.timed_out) << "the read waited on the FIFO";
  EXPECT_EQ(r.exit_code, 0);
}

TEST(FileCheck, ADeviceIsRefusedWithoutReadingIt) {
  EXPECT_EQ(refusal("/dev/zero", uint64_t{1} << 40), "is a character device, not a file");
}

TEST(FileCheck, AnOutputPathMayBeAbsentOrAFileOnly) {
  const std::string path = scratch("out.csv");
  EXPECT_EQ(output_problem(path), "");
  std::ofstream(path) << "old";
  EXPECT_EQ(output_problem(path), "");
  EXPECT_EQ(output_problem("/dev/null"), "is a character device, not a file to write");
  const std::string fifo = scratch("out.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(output_problem(fifo), "is a FIFO (named pipe), not a file to write");
}

TEST(FileCheck, SizesReadForPeople) {
  EXPECT_EQ(format_bytes(1), "1 byte");
  EXPECT_EQ(format_bytes(1023), "1023 bytes");
  EXPECT_EQ(format_bytes(uint64_t{16} << 20), "16.0 MiB");
}

}  // namespace
}  // namespace tandem
