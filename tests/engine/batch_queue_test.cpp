// BatchQueue: the same batches, in the same order, with or without background workers.
#include "engine/batch_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "engine/backend.h"
#include "engine/rng.h"

namespace tandem {
namespace {

// Sample i has every float equal to i and label i % 7; epoch e visits the samples in an order
// drawn from e; fills take a seeded random few hundred microseconds so workers finish out of
// order; batch `bad` throws.
class FakeSource : public BatchSource {
 public:
  FakeSource(int64_t samples, int64_t batch, int64_t sample_floats)
      : samples_(samples), batch_(batch), floats_(sample_floats) {}
  int64_t size() const override { return samples_; }
  int64_t batches_per_epoch() const override { return (samples_ + batch_ - 1) / batch_; }
  void start_epoch(int64_t epoch) override {
    EXPECT_EQ(filling_.load(), 0) << "start_epoch while a fill runs";
    epoch_ = epoch;
    order_.resize(static_cast<size_t>(samples_));
    for (int64_t i = 0; i < samples_; ++i) order_[i] = i;
    for (int64_t i = samples_ - 1; i > 0; --i)
      std::swap(order_[i], order_[static_cast<int64_t>(philox_uniform(7, epoch, i) * (i + 1))]);
  }
  int64_t fill(int64_t b, float* images, int32_t* labels) const override {
    ++filling_;
    const int64_t n = std::min(batch_, samples_ - b * batch_);
    std::this_thread::sleep_for(
        std::chrono::microseconds(static_cast<int>(philox_uniform(9, epoch_, b) * 400)));
    for (int64_t k = 0; k < n; ++k) {
      const int64_t s = order_[b * batch_ + k];
      labels[k] = static_cast<int32_t>(s % 7);
      std::fill(images + k * floats_, images + (k + 1) * floats_, static_cast<float>(s));
    }
    --filling_;
    ++filled_;
    if (b == bad) throw std::runtime_error("batch " + std::to_string(b) + " is bad");
    return n;
  }
  int64_t bad = -1;
  int64_t filled() const { return filled_.load(); }  // fills finished

 private:
  int64_t samples_, batch_, floats_, epoch_ = 0;
  std::vector<int64_t> order_;
  mutable std::atomic<int> filling_{0};
  mutable std::atomic<int64_t> filled_{0};
};

// Every sample of each batch of an epoch, as the queue hands them out; checks each sample's
// floats and label agree.
std::vector<int64_t> take_epoch(BatchQueue& q, int64_t epoch, int64_t first, int64_t floats) {
  std::vector<int64_t> seen;
  q.start_epoch(epoch, first);
  for (BatchQueue::Batch b = q.next(); b.n; b = q.next())
    for (int64_t k = 0; k < b.n; ++k) {
      const float v = b.images[k * floats];
      for (int64_t i = 1; i < floats; ++i) EXPECT_EQ(b.images[k * floats + i], v);
      EXPECT_EQ(b.labels[k], static_cast<int64_t>(v) % 7);
      seen.push_back(static_cast<int64_t>(v));
    }
  return seen;
}

TEST(BatchQueue, EveryWorkerCountDeliversEverySampleOncePerEpochInTheSameOrder) {
  const int64_t samples = 103, batch = 8, floats = 5;  // a short last batch
  FakeSource source(samples, batch, floats);
  std::vector<std::vector<int64_t>> reference;
  for (int workers : {0, 1, 3}) {
    BatchQueue q(source, floats, batch, workers, aligned_host_memory);
    EXPECT_EQ(q.workers(), workers);
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      std::vector<int64_t> seen = take_epoch(q, epoch, 0, floats);
      std::vector<int64_t> sorted = seen;
      std::sort(sorted.begin(), sorted.end());
      ASSERT_EQ(sorted.size(), static_cast<size_t>(samples)) << workers << " workers";
      for (int64_t i = 0; i < samples; ++i) EXPECT_EQ(sorted[i], i) << workers << " workers";
      if (workers == 0) reference.push_back(seen);
      else EXPECT_EQ(seen, reference[epoch]) << workers << " workers, epoch " << epoch;
    }
    EXPECT_NE(reference[0], reference[1]) << "epochs are shuffled differently";
  }
}

TEST(BatchQueue, StartsMidEpochAndRestartsBeforeAnEpochEnds) {
  const int64_t samples = 64, batch = 4, floats = 2;
  FakeSource source(samples, batch, floats);
  BatchQueue serial(source, floats, batch, 0, aligned_host_memory);
  const std::vector<int64_t> whole = take_epoch(serial, 1, 0, floats);
  BatchQueue q(source, floats, batch, 2, aligned_host_memory);
  // A resumed run starts at batch 5: the rest of the epoch, the same samples as a whole epoch's.
  EXPECT_EQ(take_epoch(q, 1, 5, floats),
            std::vector<int64_t>(whole.begin() + 5 * batch, whole.end()));
  // Leaving an epoch after one batch (a stopped run) while the workers fill ahead.
  q.start_epoch(2);
  ASSERT_EQ(q.next().n, batch);
  EXPECT_EQ(take_epoch(q, 1, 0, floats), whole);
}

TEST(BatchQueue, AWorkersErrorReachesTheStepThatNeedsThatBatch) {
  const int64_t samples = 40, batch = 4, floats = 1;
  FakeSource source(samples, batch, floats);
  source.bad = 6;
  for (int workers : {0, 2}) {
    BatchQueue q(source, floats, batch, workers, aligned_host_memory);
    q.start_epoch(0);
    for (int b = 0; b < 6; ++b) EXPECT_EQ(q.next().n, batch) << workers << " workers";
    try {
      q.next();
      ADD_FAILURE() << "batch 6 should throw with " << workers << " workers";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "batch 6 is bad");
    }
    EXPECT_EQ(q.next().n, batch) << "batch 7 still comes";
  }
}

TEST(BatchQueue, StopsWorkersThatWaitForAFreeBuffer) {
  FakeSource source(1000, 2, 1);
  auto q = std::make_unique<BatchQueue>(source, 1, 2, 4, aligned_host_memory);
  q->start_epoch(0);
  EXPECT_EQ(q->next().n, 2);
  // 4 workers have 9 buffers: the one handed out, and 8 that fill before every worker waits.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (source.filled() < 9 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(source.filled(), 9) << "the ring did not fill";
  q.reset();  // must return: joins workers blocked on a full ring
}

}  // namespace
}  // namespace tandem
