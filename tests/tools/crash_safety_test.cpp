// Crash safety: a process killed (SIGKILL) while it writes checkpoints in a loop leaves a newest
// checkpoint that loads in full, and no temporary file that passes for one.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
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
#include "tests/tools/timeout_util.h"
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

// The temporary files in `dir`: hidden names with ".tmp." in them.
int temporaries(const std::string& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    n += name.starts_with(".") && name.find(".tmp.") != std::string::npos;
  }
  return n;
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
    // The killed writer's temporary file, if the kill caught one; the writer of the round before
    // removed the one its killed predecessor left.
    EXPECT_LE(temporaries(dir), 1) << "round " << round;
    newest = meta.epoch;
  }
  // Every writer is dead now: a later run removes what they left.
  remove_stale_temporaries(dir);
  EXPECT_EQ(temporaries(dir), 0);
  fs::remove_all(dir);
}

// Every value of writer k's checkpoints.
float writer_value(int k) { return 1.5f + static_cast<float>(k); }

// Two processes write one checkpoint file over and over, each with its own values and seed, while
// a third reads it: every read finds one writer's complete file, and both writers succeed.
TEST(CrashSafety, TwoWritersOfOneFileEachCommitAWholeFile) {
  const std::string dir =
      (fs::is_directory("/dev/shm") ? std::string("/dev/shm/") : ::testing::TempDir()) +
      "tandem_two_writers";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = dir + "/epoch-1.safetensors";
  std::unique_ptr<Backend> backend = create_backend("cpu", {});
  NamedTensors tensors = crash_tensors(*backend);
  constexpr int kWrites = 25;
  pid_t writers[2];
  for (int k = 0; k < 2; ++k) {
    writers[k] = ::fork();
    ASSERT_GE(writers[k], 0);
    if (writers[k] == 0) {
      try {
        std::vector<float> host;
        for (auto& [name, t] : tensors) {
          host.assign(static_cast<size_t>(t.numel()), writer_value(k));
          backend->upload(t, host.data());
        }
        CheckpointMeta meta;
        meta.device = "cpu";
        meta.seed = static_cast<uint64_t>(k);
        for (int i = 0; i < kWrites; ++i) write_checkpoint(path, tensors, meta);
      } catch (const Error&) {
        ::_exit(2);
      }
      ::_exit(0);
    }
  }
  int reads = 0, done = 0, status[2] = {-1, -1};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  NamedTensors into = crash_tensors(*backend);
  while (done < 2 && std::chrono::steady_clock::now() < deadline) {
    for (int k = 0; k < 2; ++k) {
      if (status[k] != -1) continue;
      int st = 0;
      if (::waitpid(writers[k], &st, WNOHANG) == writers[k]) status[k] = st, ++done;
    }
    if (!fs::exists(path)) continue;
    CheckpointMeta meta;
    ASSERT_NO_THROW(meta = read_checkpoint(path, into)) << "read " << reads;
    ASSERT_LT(meta.seed, 2u);
    for (auto& [name, t] : into) {
      std::vector<float> v(static_cast<size_t>(t.numel()));
      backend->download(v.data(), t);
      ASSERT_EQ(std::count(v.begin(), v.end(), writer_value(static_cast<int>(meta.seed))),
                t.numel())
          << name << ": a file mixes the writers' tensors (read " << reads << ")";
    }
    ++reads;
  }
  for (int k = 0; k < 2; ++k) {
    if (status[k] == -1) {
      ::kill(writers[k], SIGKILL);
      ::waitpid(writers[k], &status[k], 0);
      ADD_FAILURE() << "writer " << k << " did not finish in a minute";
      continue;
    }
    EXPECT_TRUE(WIFEXITED(status[k]) && WEXITSTATUS(status[k]) == 0)
        << "writer " << k << " failed, status " << status[k];
  }
  EXPECT_GT(reads, 0);
  EXPECT_EQ(temporaries(dir), 0) << "a writer left its temporary file";
  fs::remove_all(dir);
}

// A full disk (here a file size limit, which fails writes the same way) while a checkpoint is
// written: the write fails with a message, the previous file is whole, no temporary is left.
TEST(CrashSafety, AFullDiskLeavesThePreviousCheckpointAndNoTemporary) {
  const std::string dir = ::testing::TempDir() + "tandem_full_disk";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = dir + "/epoch-1.safetensors";
  std::unique_ptr<Backend> backend = create_backend("cpu", {});
  NamedTensors tensors = crash_tensors(*backend);
  std::vector<float> host;
  auto fill = [&](float v) {
    for (auto& [name, t] : tensors) {
      host.assign(static_cast<size_t>(t.numel()), v);
      backend->upload(t, host.data());
    }
  };
  fill(value_of(1));
  CheckpointMeta meta;
  meta.device = "cpu";
  meta.epoch = 1;
  write_checkpoint(path, tensors, meta);
  fill(value_of(2));
  const test::ChildResult r = test::run_in_child(30, [&] {
    ::signal(SIGXFSZ, SIG_IGN);  // the write fails with EFBIG instead of killing the process
    const rlimit limit{1 << 20, 1 << 20};  // 1 MiB: the checkpoint needs about 4
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 3;
    CheckpointMeta next = meta;
    next.epoch = 2;
    try {
      write_checkpoint(path, tensors, next);
    } catch (const CheckpointError& e) {
      return e.cause().find("cannot write checkpoint '" + path + "'") != std::string::npos ? 0 : 2;
    }
    return 1;
  });
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << "1: the write succeeded; 2: another message";
  NamedTensors into = crash_tensors(*backend);
  EXPECT_EQ(read_checkpoint(path, into).epoch, 1);
  for (auto& [name, t] : into) {
    std::vector<float> v(static_cast<size_t>(t.numel()));
    backend->download(v.data(), t);
    EXPECT_EQ(std::count(v.begin(), v.end(), value_of(1)), t.numel()) << name;
  }
  EXPECT_EQ(temporaries(dir), 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tandem
