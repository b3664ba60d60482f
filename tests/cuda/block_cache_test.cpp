// The GPU's caching allocator bookkeeping (BlockCache), on a fake allocator that counts and can
// run out of memory.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "cuda/block_cache.h"

namespace tandem {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Hands out distinct addresses up to `capacity` bytes in all; nullptr beyond.
struct FakeDevice {
  size_t capacity = size_t{1} << 40, held = 0;
  int mallocs = 0, frees = 0;
  std::set<void*> live;
  BlockCache cache{[this](size_t bytes) -> void* {
                     if (held + bytes > capacity) return nullptr;
                     held += bytes;
                     ++mallocs;
                     void* p = std::malloc(1);
                     live.insert(p);
                     return p;
                   },
                   [this](void* p, size_t bytes) {
                     held -= bytes;
                     ++frees;
                     live.erase(p);
                     std::free(p);
                   }};
};

TEST(BlockCache, RoundsSmallSizesTo512BytesAndLargeOnesTo2MiB) {
  EXPECT_EQ(BlockCache::round_size(0), 512u);
  EXPECT_EQ(BlockCache::round_size(1), 512u);
  EXPECT_EQ(BlockCache::round_size(513), 1024u);
  EXPECT_EQ(BlockCache::round_size(kMiB - 1), kMiB);
  EXPECT_EQ(BlockCache::round_size(kMiB), 2 * kMiB);
  EXPECT_EQ(BlockCache::round_size(5 * kMiB + 1), 6 * kMiB);
}

TEST(BlockCache, AFreedBlockServesTheNextRequestOfItsSizeWithoutANewAllocation) {
  FakeDevice d;
  size_t size = 0;
  void* a = d.cache.take(1000, &size);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(size, 1024u);
  d.cache.give_back(a, size);
  EXPECT_EQ(d.cache.take(1020, &size), a);
  EXPECT_EQ(d.mallocs, 1);
  EXPECT_EQ(d.cache.in_use(), 1024u);
  EXPECT_EQ(d.cache.reserved(), 1024u);
  d.cache.give_back(a, size);
}

TEST(BlockCache, ALargeRequestTakesACachedBlockAtMostAQuarterLarger) {
  FakeDevice d;
  size_t big_size = 0, size = 0;
  void* big = d.cache.take(10 * kMiB, &big_size);
  d.cache.give_back(big, big_size);
  EXPECT_EQ(d.cache.take(8 * kMiB, &size), big);  // 10 MiB for 8: within a quarter
  EXPECT_EQ(size, 10 * kMiB);
  d.cache.give_back(big, size);
  void* other = d.cache.take(4 * kMiB, &size);  // 10 MiB for 4 would waste most of it
  EXPECT_NE(other, big);
  EXPECT_EQ(size, 4 * kMiB);
  d.cache.give_back(other, size);
  // Small blocks are never handed out for another size: a block of 1024 bytes stays for 1024.
  void* small = d.cache.take(1024, &size);
  d.cache.give_back(small, size);
  void* half = d.cache.take(512, &size);
  EXPECT_NE(half, small);
  d.cache.give_back(half, size);
}

TEST(BlockCache, PeakIsTheMostInUseSinceTheLastReset) {
  FakeDevice d;
  size_t sa = 0, sb = 0;
  void* a = d.cache.take(2 * kMiB, &sa);
  void* b = d.cache.take(4 * kMiB, &sb);
  d.cache.give_back(b, sb);
  EXPECT_EQ(d.cache.in_use(), 2 * kMiB);
  EXPECT_EQ(d.cache.peak(), 6 * kMiB);
  d.cache.reset_peak();
  EXPECT_EQ(d.cache.peak(), 2 * kMiB);
  d.cache.give_back(a, sa);
  EXPECT_EQ(d.cache.peak(), 2 * kMiB);
  EXPECT_EQ(d.cache.reserved(), 6 * kMiB);  // both stay cached
}

TEST(BlockCache, OutOfMemoryFreesTheCachedBlocksAndAsksOnceMore) {
  FakeDevice d;
  d.capacity = 8 * kMiB;
  size_t s4 = 0, s6 = 0;
  void* a = d.cache.take(4 * kMiB, &s4);
  d.cache.give_back(a, s4);  // cached, but too small for 6 MiB
  void* b = d.cache.take(6 * kMiB, &s6);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(d.frees, 1);
  EXPECT_EQ(d.cache.reserved(), 6 * kMiB);
  EXPECT_EQ(d.held, 6 * kMiB);
  // Nothing left to free: the request fails, and says the size it asked for.
  size_t s = 0;
  EXPECT_EQ(d.cache.take(4 * kMiB, &s), nullptr);
  EXPECT_EQ(s, 4 * kMiB);
  EXPECT_EQ(d.cache.in_use(), 6 * kMiB);
  d.cache.give_back(b, s6);
}

TEST(BlockCache, ReleaseCachedGivesEveryFreeBlockBackButNotThoseInUse) {
  FakeDevice d;
  size_t s = 0, t = 0;
  void* a = d.cache.take(3000, &s);
  void* b = d.cache.take(3 * kMiB, &t);
  d.cache.give_back(a, s);
  d.cache.release_cached();
  EXPECT_EQ(d.frees, 1);
  EXPECT_EQ(d.live.count(b), 1u);
  EXPECT_EQ(d.cache.reserved(), t);
  d.cache.give_back(b, t);
}

}  // namespace
}  // namespace tandem
