// Crash safety: a process killed (SIGKILL) while it writes checkpoints in a loop leaves a newest
// checkpoint that loads in full, and no temporary file that passes for one.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "engine/backend_registry.h"
#include "engine/checkpoint.h"
#include "engine/error.h"
#include "tools/checkpoints.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kKeep = 2;

// Tensors big enough (a few MB) that a kill often lands in the middle of a write.
NamedTensors crash_tensors(Backend& backend) {
  return {{"conv2d_1.weight", Tensor(backend, Shape{64, 64, 3, 3})},
          {"dense_1.weight", Tensor(backend, Shape{512, 1024})},
          {"optimizer.dense_1.weight.velocity", Tensor(backend, Shape{512, 1024})}};
}

// Every value of the checkpoint of epoch E.
float value_of(int64_t epoch) { return static_cast<float>(epoch % 4096) + 0.5f; }

// The child: epoch-E.safetensors for E = first, first+1, ... with pruning, like a training run;
// one byte on `ready` after the first complete file. It never returns: it is killed. It only
// copies memory and writes files: a forked child must not start threads (OpenMP) of its own.
[[noreturn]] void write_forever(Backend& backend, NamedTensors& tensors, const std::string& dir,
                                int64_t first, int ready) {
  try {
    std::vector<float> host;
    for (int64_t e = first;; ++e) {
      for (auto& [name, t] : tensors) {
        host.assign(static_cast<size_t>(t.numel()), value_of(e));
        backend.upload(t, host.data());
      }
      CheckpointMeta meta;
      meta.device = "cpu";
      meta.epoch = e;
      meta.step = static_cast<uint64_t>(e) * 10;
      write_checkpoint(fmt::format("{}/epoch-{}.safetensors", dir, e), tensors, meta);
      prune_checkpoints(dir, kKeep);
      if (e == first && ::write(ready, "x", 1) != 1) ::_exit(3);
    }
  } catch (const Error&) {
    ::_exit(2);
  }
}

TEST(CrashSafety, AKilledWriterLeavesANewestCheckpointThatLoads) {
  // In memory where it can be: no disk sync to wait for, so most kills land mid-write.
  const std::string dir =
      (fs::is_directory("/dev/shm") ? std::string("/dev/shm/") : ::testing::TempDir()) +
      "tandem_crash_safety";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::unique_ptr<Backend> backend = create_backend("cpu", {});
  NamedTensors written = crash_tensors(*backend);
  std::mt19937 rng(6);
  std::uniform_int_distribution<int> delay_ms(2, 50);
  int64_t newest = 0;
  for (int round = 0; round < 10; ++round) {
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const int64_t first = newest + 1;
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(ready[0]);
      write_forever(*backend, written, dir, first, ready[1]);
    }
    ::close(ready[1]);
    // A bound on the wait, so that a writer that hangs fails the test instead of stalling it.
    pollfd first_file{ready[0], POLLIN, 0};
    char byte = 0;
    const bool wrote = ::poll(&first_file, 1, 20000) == 1 && ::read(ready[0], &byte, 1) == 1;
    ::close(ready[0]);
    if (wrote) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    ::kill(child, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(wrote) << "the writer ended before its first checkpoint, status " << status;
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;

    const std::string found = find_checkpoint(dir);
    const std::string name = fs::path(found).filename().string();
    EXPECT_TRUE(name.starts_with("epoch-") && name.ends_with(".safetensors")) << name;
    NamedTensors into = crash_tensors(*backend);
    CheckpointMeta meta;
    ASSERT_NO_THROW(meta = read_checkpoint(found, into)) << "round " << round << ": " << found;
    EXPECT_EQ(name, fmt::format("epoch-{}.safetensors", meta.epoch));
    EXPECT_GE(meta.epoch, first) << "round " << round;
    EXPECT_EQ(meta.step, static_cast<uint64_t>(meta.epoch) * 10);
    for (auto& [tensor_name, t] : into) {
      std::vector<float> v(static_cast<size_t>(t.numel()));
      backend->download(v.data(), t);
      EXPECT_EQ(std::count(v.begin(), v.end(), value_of(meta.epoch)), t.numel()) << tensor_name;
    }
    // The newest by time is the highest epoch; at most one more than kept (killed before pruning).
    int64_t files = 0, highest = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string n = e.path().filename().string();
      if (!n.starts_with("epoch-") || e.path().extension() != ".safetensors") continue;
      ++files;
      highest = std::max(highest, read_checkpoint_meta(e.path().string()).epoch);
    }
    EXPECT_EQ(highest, meta.epoch) << "round " << round;
    EXPECT_LE(files, kKeep + 1);
    newest = meta.epoch;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tandem
