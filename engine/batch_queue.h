// BatchQueue: background workers cut the batches of an epoch ahead of the step that needs them.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/batch_source.h"

namespace tandem {

// Workers fill batches in order into a bounded ring of host buffers (pinned when the backend
// gives pinned memory) while the device computes; with no workers each batch is filled in the
// caller's thread when asked for. Either way next() hands out the same batches in the same order.
class BatchQueue {
 public:
  using HostAllocator = std::function<std::shared_ptr<void>(size_t bytes)>;
  struct Batch {
    int64_t n = 0;  // samples
    const float* images = nullptr;
    const int32_t* labels = nullptr;
  };

  // sample: floats per sample; workers: background threads (0: fill in the caller's thread).
  // `source` must outlive the queue; its fill() is called from the workers concurrently.
  BatchQueue(BatchSource& source, int64_t sample, int64_t max_batch, int workers,
             const HostAllocator& allocate);
  ~BatchQueue();
  BatchQueue(const BatchQueue&) = delete;
  BatchQueue& operator=(const BatchQueue&) = delete;

  // Starts epoch e at batch `first` (a resumed run starts mid-epoch).
  void start_epoch(int64_t epoch, int64_t first = 0);
  // The next batch of the epoch; valid until the next call to next() or start_epoch(). Rethrows
  // what a worker's fill() threw for this batch.
  Batch next();
  int workers() const { return static_cast<int>(threads_.size()); }

 private:
  struct Slot {
    std::shared_ptr<void> images, labels;
    int64_t batch = -1;  // -1: free
    bool ready = false;
    int64_t n = 0;
    std::exception_ptr error;
  };
  void fill(Slot& slot, int64_t batch);
  void work();
  Slot* claim_free_slot();  // under the lock

  BatchSource& source_;
  std::vector<Slot> slots_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int64_t next_fill_ = 0, next_take_ = 0, end_ = 0;
  Slot* held_ = nullptr;  // the slot next() handed out last
  int busy_ = 0;          // workers inside fill()
  bool paused_ = true, stop_ = false;
};

}  // namespace tandem
