// BatchQueue: a ring of host buffers filled in batch order by background workers.
#include "engine/batch_queue.h"

#include <pthread.h>

#include <csignal>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace tandem {

BatchQueue::BatchQueue(BatchSource& source, int64_t sample, int64_t max_batch, int workers,
                       const HostAllocator& allocate)
    : source_(source) {
  // Two buffers per worker keep every worker busy while the step holds one.
  slots_.resize(workers > 0 ? 2 * static_cast<size_t>(workers) + 1 : 1);
  for (Slot& s : slots_) {
    s.images = allocate(static_cast<size_t>(max_batch * sample) * sizeof(float));
    s.labels = allocate(static_cast<size_t>(max_batch) * sizeof(int32_t));
  }
  for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
}

BatchQueue::~BatchQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void BatchQueue::fill(Slot& slot, int64_t batch) {
  try {
    slot.n = source_.fill(batch, static_cast<float*>(slot.images.get()),
                          static_cast<int32_t*>(slot.labels.get()));
  } catch (...) {
    slot.error = std::current_exception();
  }
}

BatchQueue::Slot* BatchQueue::claim_free_slot() {
  for (Slot& s : slots_)
    if (s.batch < 0) return &s;
  return nullptr;
}

void BatchQueue::work() {
  // Ctrl-C and SIGTERM belong to the training thread, which checks for them after each step.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
#ifdef _OPENMP
  // A worker fills a whole batch by itself: a parallel region here would start a second team
  // of every core's threads beside the one computing the step.
  omp_set_num_threads(1);
#endif
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    Slot* slot = nullptr;
    changed_.wait(lock, [&] {
      if (stop_) return true;
      if (paused_ || next_fill_ >= end_) return false;
      slot = claim_free_slot();
      return slot != nullptr;
    });
    if (stop_) return;
    const int64_t batch = next_fill_++;
    slot->batch = batch;
    slot->ready = false;
    slot->error = nullptr;
    ++busy_;
    lock.unlock();
    fill(*slot, batch);
    lock.lock();
    slot->ready = true;
    --busy_;
    changed_.notify_all();
  }
}

void BatchQueue::start_epoch(int64_t epoch, int64_t first) {
  std::unique_lock<std::mutex> lock(mutex_);
  paused_ = true;
  changed_.wait(lock, [&] { return busy_ == 0; });
  // No worker is inside fill(): the source may change its order now.
  source_.start_epoch(epoch);
  for (Slot& s : slots_) s.batch = -1;
  held_ = nullptr;
  next_fill_ = next_take_ = first;
  end_ = source_.batches_per_epoch();
  paused_ = false;
  lock.unlock();
  changed_.notify_all();
}

BatchQueue::Batch BatchQueue::next() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (held_) {
    held_->batch = -1;
    held_ = nullptr;
    changed_.notify_all();
  }
  if (next_take_ >= end_) return {};
  const int64_t batch = next_take_++;
  if (threads_.empty()) {
    held_ = &slots_[0];
    held_->batch = batch;
    held_->error = nullptr;
    fill(*held_, batch);
  } else {
    changed_.wait(lock, [&] {
      for (Slot& s : slots_)
        if (s.batch == batch && s.ready) return (held_ = &s) != nullptr;
      return false;
    });
  }
  if (held_->error) std::rethrow_exception(held_->error);
  return {held_->n, static_cast<const float*>(held_->images.get()),
          static_cast<const int32_t*>(held_->labels.get())};
}

}  // namespace tandem
