#pragma once
// PyTorch's CUDA caching allocator, replayed over a list of allocations and frees: what it
// reserves from the device (cudaMalloc'd segments, never returned during training) against what
// tensors hold. The rules are c10/cuda/CUDACachingAllocator.cpp's with its default settings (no
// max_split_size, no power-of-two rounding, no expandable segments), one stream:
// - a request rounds up to 512 bytes (kMinBlockSize);
// - up to 1 MiB (kSmallSize) it comes from the small pool, whose segments are 2 MiB (kSmallBuffer);
//   larger ones from the large pool, whose segments are 20 MiB (kLargeBuffer) below 10 MiB
//   (kMinLargeAlloc) and the request rounded up to 2 MiB (kRoundLarge) from there;
// - a request takes the smallest cached free block of its pool that holds it, lowest address
//   first among equals (BlockComparatorSize), and only when none does a new segment;
// - the block is split when what is left is at least 512 bytes (small pool) or more than 1 MiB
//   (large pool); the rest stays cached as a free block;
// - a freed block merges with free neighbours of its segment.
#include <cstdint>
#include <set>
#include <tuple>
#include <vector>

namespace dtsim::strategies {

class CachingAllocator {
 public:
  // A tensor of `bytes`; returns its handle for free().
  int allocate(double bytes);
  void free(int handle);

  std::int64_t allocated() const { return allocated_; }
  std::int64_t reserved() const { return reserved_; }
  std::int64_t peak_allocated() const { return peak_allocated_; }
  std::int64_t peak_reserved() const { return peak_reserved_; }

 private:
  struct Block {
    std::int64_t address = 0, size = 0;
    bool small = false, used = false;
    int prev = -1, next = -1;  // neighbours in the same segment
  };
  // (size, address, block): the smallest that holds a request, lowest address among equals.
  using Key = std::tuple<std::int64_t, std::int64_t, int>;
  static Key key(const Block& b, int id) { return {b.size, b.address, id}; }
  std::set<Key>& pool(bool small) { return small ? small_free_ : large_free_; }
  int new_segment(std::int64_t size, bool small);
  void split(int b, std::int64_t size);
  void merge_next(int b);

  std::vector<Block> blocks_;
  std::set<Key> small_free_, large_free_;
  std::int64_t next_address_ = 0;
  std::int64_t allocated_ = 0, reserved_ = 0, peak_allocated_ = 0, peak_reserved_ = 0;
};

// The size a request is rounded to and the segment a new one takes (exposed for tests).
std::int64_t allocator_round(std::int64_t bytes);
std::int64_t allocator_segment(std::int64_t rounded);

}  // namespace dtsim::strategies
