// Data-parallel training (TrainOptions::comm): processes played by threads of this test, each
// with its own CPU backend, graph and data, summing through shared memory as MPI would. They must
// train like one process whose batch is theirs together, and agree on every decision.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>

#include "cpu/cpu_backend_impl.h"
#include "datasets/dataset.h"
#include "engine/backend_registry.h"
#include "engine/communicator.h"
#include "engine/error.h"
#include "engine/graph.h"
#include "engine/layer_registry.h"
#include "engine/trainer.h"
#include "tests/cpu/backend_test_util.h"
#include "tools/app.h"

namespace tandem {
namespace {

// What the threads of one run share: a slot each, and a barrier.
class Group {
 public:
  explicit Group(int size) : size_(size), slots_(static_cast<size_t>(size)) {}
  int size() const { return size_; }
  std::vector<char>& slot(int rank) { return slots_[static_cast<size_t>(rank)]; }
  // Every member waits here until all have come; a member that never comes fails the test.
  void barrier() {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return;
    }
    if (!changed_.wait_for(lock, std::chrono::seconds(60),
                           [&] { return generation_ != generation; }))
      throw std::runtime_error("a process of the run never reached the sum the others wait in");
  }

 private:
  int size_;
  std::vector<std::vector<char>> slots_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
};

// One member: sums in rank order, so every member gets the same bits.
class ThreadRank : public Communicator {
 public:
  ThreadRank(Group& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.size(); }
  int local_rank() const override { return rank_; }
  int local_size() const override { return group_.size(); }
  void sum(float* data, size_t n) override { sum_of(data, n); }
  void sum(double* data, size_t n) override { sum_of(data, n); }
  void broadcast(void* data, size_t bytes, int root) override {
    if (rank_ == root)
      group_.slot(root).assign(static_cast<char*>(data), static_cast<char*>(data) + bytes);
    group_.barrier();
    if (rank_ != root) std::memcpy(data, group_.slot(root).data(), bytes);
    group_.barrier();
  }
  [[noreturn]] void abort(int) override { std::terminate(); }

 private:
  template <typename T>
  void sum_of(T* data, size_t n) {
    group_.slot(rank_).assign(reinterpret_cast<char*>(data), reinterpret_cast<char*>(data + n));
    group_.barrier();
    for (size_t i = 0; i < n; ++i) {
      T s = 0;
      for (int r = 0; r < group_.size(); ++r)
        s += reinterpret_cast<const T*>(group_.slot(r).data())[i];
      data[i] = s;
    }
    group_.barrier();
  }
  Group& group_;
  int rank_;
};

constexpr const char* kPlainLayers = R"(  - conv2d: {filters: 4, kernel: 3}
  - relu
  - maxpool: {kernel: 2}
  - flatten
  - dense: {units: 3}
)";

// A run of a small model on synthetic data, as the trainer sets it up, on one CPU thread: 72
// training samples, so batches of 16 leave a ragged end (4 x 16 + 8).
struct SmallRun {
  Config config;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Graph> graph;
  std::unique_ptr<Loss> loss;
  DataSplits data;

  // own: the backend to train on (null: a CPU backend).
  explicit SmallRun(int64_t batch, const std::string& layers = kPlainLayers,
                    int64_t train_size = 72, std::unique_ptr<Backend> own = nullptr)
      : config(parse_config("name: dp\ninput: {shape: [1, 8, 8]}\nlayers:\n" + layers +
                                "\ndata: {format: synthetic, classes: 3, train_size: " +
                                std::to_string(train_size) + R"(, test_size: 40, seed: 9}
train:
  epochs: 2
  batch_size: )" + std::to_string(batch) +
                                R"(
  optimizer: {type: sgd, lr: 0.1, momentum: 0.9}
  seed: 4
)",
                            "dp.yaml")) {
    register_everything();
    BackendOptions o;
    o.threads = 1;
    backend = own ? std::move(own) : create_backend("cpu", o);
    graph = std::make_unique<Graph>(config);
    loss = make_loss(config.loss);
    data = load_data(config.data, config.input, static_cast<int>(graph->classes()));
    graph->allocate(*backend, batch, config.train.seed);
  }
  // wrap: puts a test's fault into the training batches; null: they come as they are.
  TrainResult train(TrainOptions options,
                    const std::function<std::unique_ptr<BatchSource>(BatchSource&)>& wrap = {}) {
    options.progress = false;
    Batcher train_src(data.train, config.train.batch_size, true, config.train.seed, {}, {});
    Batcher test_src(data.test, config.train.batch_size, false, config.train.seed, {}, {});
    std::unique_ptr<BatchSource> wrapped = wrap ? wrap(train_src) : nullptr;
    return tandem::train(config, *graph, *loss, *backend, wrapped ? *wrapped : train_src, &test_src,
                         options);
  }
  std::vector<float> values(const Tensor& t) {
    std::vector<float> v(static_cast<size_t>(t.numel()));
    backend->download(v.data(), t);
    return v;
  }
  std::vector<float> weights() { return values(graph->packed_values()); }
  // Every layer buffer (batch-norm running statistics), one after the other.
  std::vector<float> statistics() {
    std::vector<float> all;
    for (auto& named : graph->buffers()) {
      const std::vector<float> v = values(named.second);
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  }
};

// Runs `body(rank, comm)` for each of `size` processes in threads; rethrows the first failure.
void run_processes(int size, const std::function<void(int, Communicator&)>& body) {
  Group group(size);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      ThreadRank comm(group, r);
      try {
        body(r, comm);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

TEST(ShardedSource, ProcessesTakeTheBatchesInTurnAndTheRaggedEndGoesToTheFirst) {
  struct Numbered : BatchSource {  // batch b holds b + 1 samples, labelled b
    int64_t size() const override { return 15; }
    int64_t batches_per_epoch() const override { return 5; }
    void start_epoch(int64_t) override {}
    int64_t fill(int64_t b, float*, int32_t* labels) const override {
      for (int64_t i = 0; i <= b; ++i) labels[i] = static_cast<int32_t>(b);
      return b + 1;
    }
  } source;
  ShardedSource first(source, 0, 2), second(source, 1, 2);
  ASSERT_EQ(first.batches_per_epoch(), 3);
  ASSERT_EQ(second.batches_per_epoch(), 3);
  std::vector<int32_t> labels(8);
  std::vector<float> images(1);
  for (int64_t step = 0; step < 3; ++step) {
    EXPECT_EQ(first.fill(step, images.data(), labels.data()), 2 * step + 1);
    EXPECT_EQ(labels[0], 2 * step);
    const int64_t n = second.fill(step, images.data(), labels.data());
    if (step < 2) {
      EXPECT_EQ(n, 2 * step + 2);
      EXPECT_EQ(labels[0], 2 * step + 1);
    } else {
      EXPECT_EQ(n, 0) << "5 batches: the last step has one, the first process's";
    }
  }
}

TEST(DataParallel, TwoProcessesTrainLikeOneWhoseBatchIsBoth) {
  SmallRun one(32);
  const TrainResult whole = one.train({});
  ASSERT_EQ(whole.step_losses.size(), 6u);  // 3 steps an epoch: 32, 32, 8 samples
  const std::vector<float> whole_weights = one.weights();

  std::vector<TrainResult> results(2);
  std::vector<std::vector<float>> weights(2);
  run_processes(2, [&](int rank, Communicator& comm) {
    SmallRun half(16);  // 5 batches an epoch; the third step's is the first process's alone
    TrainOptions options;
    options.comm = &comm;
    results[static_cast<size_t>(rank)] = half.train(options);
    weights[static_cast<size_t>(rank)] = half.weights();
  });
  for (const TrainResult& r : results) {
    ASSERT_EQ(r.step_losses.size(), whole.step_losses.size());
    for (size_t i = 0; i < r.step_losses.size(); ++i)
      EXPECT_NEAR(r.step_losses[i], whole.step_losses[i], 1e-5 * std::fabs(whole.step_losses[i]))
          << "step " << i + 1;
    ASSERT_EQ(r.epochs.size(), 2u);
    for (size_t e = 0; e < 2; ++e) {
      // Every figure is the whole run's: both processes' samples.
      EXPECT_NEAR(r.epochs[e].train_loss, whole.epochs[e].train_loss, 1e-5);
      EXPECT_DOUBLE_EQ(r.epochs[e].train_accuracy, whole.epochs[e].train_accuracy);
      EXPECT_NEAR(r.epochs[e].test_loss, whole.epochs[e].test_loss, 1e-5);
      EXPECT_DOUBLE_EQ(r.epochs[e].test_accuracy, whole.epochs[e].test_accuracy);
    }
  }
  EXPECT_EQ(results[0].step_losses, results[1].step_losses);
  EXPECT_EQ(weights[0], weights[1]) << "the processes' weights must stay equal, bit for bit";
  EXPECT_LT(testing::relative_error(weights[0], {whole_weights.begin(), whole_weights.end()}),
            1e-5);
}

// Every batch is the source's first: processes that take other batches still see the same
// samples.
class FirstBatchOnly : public BatchSource {
 public:
  explicit FirstBatchOnly(BatchSource& source) : source_(source) {}
  int64_t size() const override { return source_.size(); }
  int64_t batches_per_epoch() const override { return source_.batches_per_epoch(); }
  void start_epoch(int64_t epoch) override { source_.start_epoch(epoch); }
  int64_t fill(int64_t, float* images, int32_t* labels) const override {
    return source_.fill(0, images, labels);
  }

 private:
  BatchSource& source_;
};

// A member that keeps what it contributed to the first sum of `n` floats (the first step's
// gradients, when n is the parameter count).
class RecordingRank : public ThreadRank {
 public:
  RecordingRank(Group& group, int rank, size_t n) : ThreadRank(group, rank), n_(n) {}
  void sum(float* data, size_t n) override {
    if (n == n_ && contribution.empty()) contribution.assign(data, data + n);
    ThreadRank::sum(data, n);
  }
  std::vector<float> contribution;

 private:
  size_t n_;
};

TEST(DataParallel, EachProcessDrawsItsOwnDropoutMasksAndTheWeightsStayEqual) {
  EXPECT_EQ(process_seed(4, 0), 4u) << "one process trains as it always did";
  EXPECT_NE(process_seed(4, 1), process_seed(4, 0));
  const std::string dropout =
      std::string(kPlainLayers)
          .insert(std::string(kPlainLayers).find("  - dense"), "  - dropout: {rate: 0.5}\n");
  // Both processes train on the same samples: their first gradients differ only where their
  // dropout masks do. Without dropout they are equal, which shows that the data is the same.
  auto run = [](const std::string& layers) {
    const size_t params = static_cast<size_t>(SmallRun(16, layers).weights().size());
    std::vector<std::vector<float>> contributions(2), weights(2);
    Group group(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] {
        RecordingRank comm(group, r, params);
        SmallRun half(16, layers);
        TrainOptions options;
        options.comm = &comm;
        half.train(options, [](BatchSource& s) { return std::make_unique<FirstBatchOnly>(s); });
        contributions[static_cast<size_t>(r)] = comm.contribution;
        weights[static_cast<size_t>(r)] = half.weights();
      });
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(contributions[0].size(), params) << "no sum of the gradients' size was seen";
    EXPECT_EQ(weights[0], weights[1]) << "the weights must stay equal, bit for bit";
    return contributions;
  };
  const auto plain = run(kPlainLayers);
  EXPECT_EQ(plain[0], plain[1]) << "the same samples without dropout: the same gradients";
  const auto masked = run(dropout);
  EXPECT_NE(masked[0], masked[1]) << "both processes drew the same dropout masks";
}

// "Device sums" as a GPU's NCCL makes them, here made through the communicator on host copies,
// counted: what the run hands its backend's own library. `given` keeps what each sum was given
// (its tensors one after the other, before the weight), one entry a call.
class CountedSums : public DeviceSums {
 public:
  CountedSums(Communicator& comm, Backend& backend, int* sums, int* broadcasts,
              std::vector<std::vector<float>>* given)
      : comm_(comm), backend_(backend), sums_(sums), broadcasts_(broadcasts), given_(given) {}
  std::string library() const override { return "CountedSums 1.0"; }
  void sum(const std::vector<Tensor*>& tensors, double weight) override {
    ++*sums_;
    given_->emplace_back();
    for (Tensor* t : tensors) {
      std::vector<float> v(static_cast<size_t>(t->numel()));
      backend_.download(v.data(), *t);
      given_->back().insert(given_->back().end(), v.begin(), v.end());
      for (float& x : v) x = weight == 0 ? 0.f : static_cast<float>(x * weight);
      comm_.sum(v.data(), v.size());
      backend_.upload(*t, v.data());
    }
  }
  void broadcast(const std::vector<Tensor*>& tensors, int root) override {
    ++*broadcasts_;
    for (Tensor* t : tensors) {
      std::vector<char> v(t->bytes());
      backend_.download(v.data(), *t);
      comm_.broadcast(v.data(), v.size(), root);
      backend_.upload(*t, v.data());
    }
  }

 private:
  Communicator& comm_;
  Backend& backend_;
  int *sums_, *broadcasts_;
  std::vector<std::vector<float>>* given_;
};

// A CPU backend with device sums of its own: offered or not, starting or failing to.
class BackendWithSums : public CpuBackend {
 public:
  BackendWithSums(bool offered, bool starts) : CpuBackend(1), offered_(offered), starts_(starts) {}
  bool device_sums_available(const Communicator&, std::string* why_not) override {
    if (!offered_) *why_not = "no sums library on this one";
    return offered_;
  }
  std::unique_ptr<DeviceSums> start_device_sums(Communicator& comm) override {
    if (!starts_) throw DeviceError("the sums library could not connect");
    return std::make_unique<CountedSums>(comm, *this, &sums, &broadcasts, &given);
  }
  int sums = 0, broadcasts = 0;
  std::vector<std::vector<float>> given;  // what each sum was given, in order

 private:
  bool offered_, starts_;
};

// Two processes of batch 16 with batch-norm statistics, each on a BackendWithSums; returns each
// one's counts of device sums and broadcasts, and checks they trained alike.
std::vector<std::pair<int, int>> run_with_sums(bool offered_by_second, bool starts_on_second) {
  const std::string layers =
      std::string(kPlainLayers)
          .insert(std::string(kPlainLayers).find("  - relu"), "  - batchnorm\n");
  std::vector<std::pair<int, int>> counts(2);
  std::vector<std::vector<float>> weights(2), stats(2);
  run_processes(2, [&](int rank, Communicator& comm) {
    auto own = std::make_unique<BackendWithSums>(rank == 0 || offered_by_second,
                                                 rank == 0 || starts_on_second);
    BackendWithSums* backend = own.get();
    SmallRun half(16, layers, 72, std::move(own));
    TrainOptions options;
    options.comm = &comm;
    half.train(options);
    counts[static_cast<size_t>(rank)] = {backend->sums, backend->broadcasts};
    weights[static_cast<size_t>(rank)] = half.weights();
    stats[static_cast<size_t>(rank)] = half.statistics();
  });
  EXPECT_EQ(weights[0], weights[1]);
  EXPECT_EQ(stats[0], stats[1]);
  return counts;
}

// The batch-norm statistics each process of a run had when the epoch ended, before the average
// (what it gave the last sum of the run), and what every process holds after it.
struct EndOfRunStatistics {
  std::vector<std::vector<float>> before, after;
};

EndOfRunStatistics statistics_of_run(int processes, int64_t train_size) {
  const std::string layers =
      std::string(kPlainLayers)
          .insert(std::string(kPlainLayers).find("  - relu"), "  - batchnorm\n");
  EndOfRunStatistics r;
  r.before.resize(static_cast<size_t>(processes));
  r.after.resize(static_cast<size_t>(processes));
  std::vector<std::vector<float>> weights(static_cast<size_t>(processes));
  run_processes(processes, [&](int rank, Communicator& comm) {
    auto own = std::make_unique<BackendWithSums>(true, true);
    BackendWithSums* backend = own.get();
    SmallRun part(16, layers, train_size, std::move(own));
    TrainOptions options;
    options.comm = &comm;
    part.train(options);
    const size_t k = static_cast<size_t>(rank);
    if (!backend->given.empty()) r.before[k] = backend->given.back();  // the run's last sum
    r.after[k] = part.statistics();
    weights[k] = part.weights();
  });
  for (int k = 1; k < processes; ++k) EXPECT_EQ(weights[static_cast<size_t>(k)], weights[0]);
  return r;
}

// The element-wise mean of `of`'s vectors, in double.
std::vector<double> mean_of(const std::vector<std::vector<float>>& of) {
  std::vector<double> m(of.at(0).size(), 0.0);
  for (const std::vector<float>& v : of)
    for (size_t i = 0; i < m.size(); ++i) m[i] += v.at(i) / static_cast<double>(of.size());
  return m;
}

void expect_holds(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-6 * std::max(1.0, std::fabs(want[i]))) << "statistic " << i;
}

TEST(DataParallel, BatchNormStatisticsBecomeTheProcessesAverage) {
  const EndOfRunStatistics r = statistics_of_run(2, 72);
  ASSERT_EQ(r.before[0].size(), 8u);  // running mean and variance of 4 channels
  // Each process saw other samples: its own statistics differ from the other's, so neither one's
  // (broadcast) would pass for the average.
  EXPECT_NE(r.before[0], r.before[1]);
  const std::vector<double> average = mean_of(r.before);
  for (const std::vector<float>& after : r.after) expect_holds(after, average);
}

// Two batches an epoch for three processes: the third never runs a step, and its statistics,
// which did not move, are not averaged in: every process ends with the first two's average.
TEST(DataParallel, BatchNormStatisticsAverageOnlyTheProcessesThatRanAStep) {
  const EndOfRunStatistics r = statistics_of_run(3, 32);
  ASSERT_EQ(r.before[2].size(), 8u);
  const std::vector<double> movers = mean_of({r.before[0], r.before[1]});
  const std::vector<double> all = mean_of(r.before);
  double apart = 0;  // how far the three-way mean is from the two-way one: the test's teeth
  for (size_t i = 0; i < all.size(); ++i) apart = std::max(apart, std::fabs(all[i] - movers[i]));
  EXPECT_GT(apart, 1e-3);
  for (const std::vector<float>& after : r.after) expect_holds(after, movers);
}

TEST(DataParallel, SumsGoToTheBackendsOwnLibraryWhenEveryProcessHasIt) {
  // 72 samples in batches of 16 for two processes: 3 steps an epoch, then the statistics; the
  // weights are broadcast at the start and after each epoch.
  const auto counts = run_with_sums(true, true);
  for (const auto& [sums, broadcasts] : counts) {
    EXPECT_EQ(sums, 2 * (3 + 1));
    EXPECT_EQ(broadcasts, 1 + 2);
  }
}

TEST(DataParallel, SumsGoThroughHostMemoryWhenOneProcessLacksTheLibrary) {
  for (const auto& [sums, broadcasts] : run_with_sums(false, false)) {
    EXPECT_EQ(sums, 0) << "every process must take the same path, or they wait for each other";
    EXPECT_EQ(broadcasts, 0);
  }
}

TEST(DataParallel, SumsGoThroughHostMemoryWhenTheLibraryFailsToConnectOneProcess) {
  for (const auto& [sums, broadcasts] : run_with_sums(true, false)) {
    EXPECT_EQ(sums, 0);
    EXPECT_EQ(broadcasts, 0);
  }
}

TEST(DataParallel, TheFallbackNamesItsReasonOnEachSide) {
  run_processes(2, [&](int rank, Communicator& comm) {
    BackendWithSums backend(rank == 0, true);
    TensorSums sums(comm, backend);
    if (rank == 0)
      EXPECT_NE(sums.fallback_reason().find("another process cannot sum in device memory"),
                std::string::npos)
          << sums.fallback_reason();
    else
      EXPECT_EQ(sums.fallback_reason(), "no sums library on this one");
    EXPECT_NE(sums.path().find("through host memory"), std::string::npos) << sums.path();
  });
  run_processes(2, [&](int, Communicator& comm) {
    BackendWithSums backend(true, true);
    TensorSums sums(comm, backend);
    EXPECT_EQ(sums.fallback_reason(), "");
    EXPECT_EQ(sums.path(), "CountedSums 1.0, in device memory");
  });
}

TEST(DataParallel, AStopAskedOfOneProcessStopsThemAllAtTheSameStep) {
  std::vector<TrainResult> results(2);
  std::vector<TrainPosition> saved(2);
  run_processes(2, [&](int rank, Communicator& comm) {
    SmallRun half(16);
    TrainOptions options;
    options.comm = &comm;
    int asked = 0;
    options.stop = [&] { return rank == 1 && ++asked == 2; };  // a signal seen by one process
    options.callbacks.push_back(on_checkpoint([&](const Checkpoint& c) {
      const TrainPosition& at = c.at;
      saved[static_cast<size_t>(rank)] = at;
    }));
    results[static_cast<size_t>(rank)] = half.train(options);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(results[static_cast<size_t>(r)].stopped) << "process " << r;
    EXPECT_EQ(results[static_cast<size_t>(r)].step_losses.size(), 2u) << "process " << r;
    EXPECT_EQ(saved[static_cast<size_t>(r)].step, 2u);
    EXPECT_EQ(saved[static_cast<size_t>(r)].batch, 2);
    EXPECT_TRUE(saved[static_cast<size_t>(r)].stopping);
  }
}

// The training batches with an infinite pixel in batch `step` of this process's share (a relu
// would pass a NaN on as 0; an infinity it passes on, to the loss).
class Poisoned : public BatchSource {
 public:
  Poisoned(BatchSource& source, int64_t step) : source_(source), step_(step) {}
  int64_t size() const override { return source_.size(); }
  int64_t batches_per_epoch() const override { return source_.batches_per_epoch(); }
  void start_epoch(int64_t e) override { source_.start_epoch(e); }
  int64_t fill(int64_t b, float* images, int32_t* labels) const override {
    const int64_t n = source_.fill(b, images, labels);
    if (b == step_ && n) images[0] = std::numeric_limits<float>::infinity();
    return n;
  }

 private:
  BatchSource& source_;
  int64_t step_;
};

TEST(DataParallel, ANonFiniteLossInOneProcessStopsEveryProcessAtThatStep) {
  std::vector<std::string> errors(2);
  run_processes(2, [&](int rank, Communicator& comm) {
    SmallRun half(16);
    TrainOptions options;
    options.comm = &comm;
    try {
      // Wrapped inside the share: the second process's second batch, the run's second step.
      half.train(options, [&](BatchSource& s) -> std::unique_ptr<BatchSource> {
        return std::make_unique<Poisoned>(s, rank == 1 ? 3 : -1);
      });
    } catch (const NumericsError& e) {
      errors[static_cast<size_t>(rank)] = e.cause();
    }
  });
  for (const std::string& e : errors) {
    EXPECT_EQ(e.rfind("the training loss became ", 0), 0u) << e;
    EXPECT_NE(e.find(" at step 2 (epoch 1, batch 2 of 3)"), std::string::npos) << e;
    // The cause is where it was: the second process's batch, whichever process tells it.
    EXPECT_NE(e.find("the input batch holds 1 non-finite value (check data.normalize) (in process "
                     "1's batch)"),
              std::string::npos)
        << e;
  }
  EXPECT_EQ(errors[0], errors[1]);
}

}  // namespace
}  // namespace tandem
