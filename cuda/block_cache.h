// The caching allocator's bookkeeping (size rounding, free-list choice, peak), apart from CUDA:
// DevicePool runs it on cudaMalloc/cudaFree, the tests on a fake allocator on the CPU.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <utility>

namespace tandem {

class BlockCache {
 public:
  using Alloc = std::function<void*(size_t bytes)>;  // nullptr: out of memory; throws otherwise
  using Free = std::function<void(void* p, size_t bytes)>;

  BlockCache(Alloc alloc, Free free) : alloc_(std::move(alloc)), free_(std::move(free)) {}
  ~BlockCache() { release_cached(); }
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  // Small sizes in 512-byte steps; from 1 MiB on in 2 MiB steps, so that batches of a few sizes
  // (the last, smaller one) share blocks.
  static size_t round_size(size_t bytes) {
    bytes = std::max<size_t>(bytes, 1);
    constexpr size_t kSmall = 512, kLarge = 2u << 20;
    if (bytes < kLargeFrom) return (bytes + kSmall - 1) / kSmall * kSmall;
    return (bytes + kLarge - 1) / kLarge * kLarge;
  }

  // A block of at least `bytes`, its size in *size: a cached one of the same rounded size (or, from
  // 1 MiB on, at most a quarter larger), else a new one; when the allocator is out of memory,
  // every cached block is freed and it is asked once more. nullptr: still out of memory.
  void* take(size_t bytes, size_t* size) {
    size_t want = round_size(bytes);
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cached_.lower_bound(want);
      if (it != cached_.end() &&
          (it->first == want || (want >= kLargeFrom && it->first <= want + want / 4))) {
        p = it->second;
        want = it->first;
        cached_.erase(it);
      }
    }
    if (!p) {
      p = alloc_(want);
      if (!p) {
        release_cached();
        p = alloc_(want);
      }
      if (!p) {
        *size = want;
        return nullptr;
      }
      std::lock_guard<std::mutex> lock(mu_);
      reserved_ += want;
    }
    std::lock_guard<std::mutex> lock(mu_);
    in_use_ += want;
    peak_ = std::max(peak_, in_use_);
    *size = want;
    return p;
  }

  // Back to the cache, for the next take() of its size (the caller orders the reuse on the device).
  void give_back(void* p, size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    in_use_ -= size;
    cached_.emplace(size, p);
  }

  // Frees every cached block (after an allocation failure, and at the end).
  void release_cached() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [size, p] : cached_) {
      free_(p, size);
      reserved_ -= size;
    }
    cached_.clear();
  }

  size_t in_use() const { return locked(in_use_); }      // bytes of the blocks handed out
  size_t peak() const { return locked(peak_); }          // the most in use since reset_peak()
  size_t reserved() const { return locked(reserved_); }  // bytes held from the allocator
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mu_);
    peak_ = in_use_;
  }

 private:
  static constexpr size_t kLargeFrom = 1u << 20;
  size_t locked(const size_t& v) const {
    std::lock_guard<std::mutex> lock(mu_);
    return v;
  }

  Alloc alloc_;
  Free free_;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> cached_;  // size -> block
  size_t in_use_ = 0, peak_ = 0, reserved_ = 0;
};

}  // namespace tandem
