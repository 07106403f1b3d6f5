#include "strategies/caching_allocator.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace dtsim::strategies {

namespace {
// c10/cuda/CUDACachingAllocator.cpp's constants.
constexpr std::int64_t kMinBlockSize = 512;
constexpr std::int64_t kSmallSize = 1 << 20;
constexpr std::int64_t kSmallBuffer = 2 << 20;
constexpr std::int64_t kLargeBuffer = 20 << 20;
constexpr std::int64_t kMinLargeAlloc = 10 << 20;
constexpr std::int64_t kRoundLarge = 2 << 20;

std::int64_t round_up(std::int64_t n, std::int64_t to) { return (n + to - 1) / to * to; }
}  // namespace

std::int64_t allocator_round(std::int64_t bytes) {
  return bytes < kMinBlockSize ? kMinBlockSize : round_up(bytes, kMinBlockSize);
}

std::int64_t allocator_segment(std::int64_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return round_up(rounded, kRoundLarge);
}

int CachingAllocator::new_segment(std::int64_t size, bool small) {
  Block b;
  b.address = next_address_;
  b.size = size;
  b.small = small;
  next_address_ += size;
  reserved_ += size;
  peak_reserved_ = std::max(peak_reserved_, reserved_);
  blocks_.push_back(b);
  return static_cast<int>(blocks_.size()) - 1;
}

// Keeps the first `size` bytes in b; the rest becomes a free block after it.
void CachingAllocator::split(int b, std::int64_t size) {
  Block rest;
  rest.address = blocks_[b].address + size;
  rest.size = blocks_[b].size - size;
  rest.small = blocks_[b].small;
  rest.prev = b;
  rest.next = blocks_[b].next;
  blocks_.push_back(rest);
  const int r = static_cast<int>(blocks_.size()) - 1;
  if (rest.next >= 0) blocks_[rest.next].prev = r;
  blocks_[b].next = r;
  blocks_[b].size = size;
  pool(rest.small).insert(key(blocks_[r], r));
}

int CachingAllocator::allocate(double bytes) {
  if (!(bytes >= 0) || bytes > 1e18) throw std::invalid_argument("allocation of " + std::to_string(bytes) + " bytes");
  const std::int64_t size = allocator_round(static_cast<std::int64_t>(std::ceil(bytes)));
  const bool small = size <= kSmallSize;
  auto& free_blocks = pool(small);
  auto it = free_blocks.lower_bound(Key{size, -1, -1});
  int b;
  if (it != free_blocks.end()) {
    b = std::get<2>(*it);
    free_blocks.erase(it);
  } else {
    b = new_segment(allocator_segment(size), small);
  }
  const std::int64_t rest = blocks_[b].size - size;
  if (small ? rest >= kMinBlockSize : rest > kSmallSize) split(b, size);
  blocks_[b].used = true;
  allocated_ += blocks_[b].size;
  peak_allocated_ = std::max(peak_allocated_, allocated_);
  return b;
}

// Folds b's next neighbour, free, into b.
void CachingAllocator::merge_next(int b) {
  const int n = blocks_[b].next;
  pool(blocks_[n].small).erase(key(blocks_[n], n));
  blocks_[b].size += blocks_[n].size;
  blocks_[b].next = blocks_[n].next;
  if (blocks_[b].next >= 0) blocks_[blocks_[b].next].prev = b;
  blocks_[n].size = 0;
}

void CachingAllocator::free(int handle) {
  if (handle < 0 || handle >= static_cast<int>(blocks_.size()) || !blocks_[handle].used)
    throw std::logic_error("free of a block not allocated");
  int b = handle;
  blocks_[b].used = false;
  allocated_ -= blocks_[b].size;
  if (blocks_[b].next >= 0 && !blocks_[blocks_[b].next].used) merge_next(b);
  if (const int p = blocks_[b].prev; p >= 0 && !blocks_[p].used) {
    pool(blocks_[p].small).erase(key(blocks_[p], p));
    merge_next(p);
    b = p;
  }
  pool(blocks_[b].small).insert(key(blocks_[b], b));
}

}  // namespace dtsim::strategies
