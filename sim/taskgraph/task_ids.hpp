#pragma once
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <vector>

// Lists of task indices held by every task. At 16,384 GPUs a graph has 2.3 million tasks; a
// std::vector per list cost 24 bytes in the task plus a heap block (32 bytes at least) per
// non-empty list, more than the rest of the task.
namespace dtsim::taskgraph {

// The read side both lists share, as std::vector<int> offers it.
template <class List>
struct IdsView {
  using value_type = int;
  using iterator = int*;
  using const_iterator = const int*;
  using size_type = std::size_t;

  bool empty() const { return self().size() == 0; }
  int* begin() { return self().data(); }
  int* end() { return self().data() + self().size(); }
  const int* begin() const { return self().data(); }
  const int* end() const { return self().data() + self().size(); }
  int& operator[](std::size_t i) { return self().data()[i]; }
  int operator[](std::size_t i) const { return self().data()[i]; }
  int at(std::size_t i) const {
    if (i >= self().size()) throw std::out_of_range("task id list index");
    return self().data()[i];
  }
  std::vector<int> to_vector() const { return {begin(), end()}; }
  friend bool operator==(const List& a, const List& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
  friend bool operator==(const List& a, const std::vector<int>& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }

 private:
  List& self() { return static_cast<List&>(*this); }
  const List& self() const { return static_cast<const List&>(*this); }
};

// A task's dependencies: nearly every task has one or two (the previous task on its stream and
// the transfer it waits for), so two sit in the list itself and only longer lists (gradient
// syncs waiting on every replica) take a heap block. 12 bytes.
class TaskIds : public IdsView<TaskIds> {
 public:
  TaskIds() = default;
  TaskIds(std::initializer_list<int> ids) { assign(ids.begin(), ids.size()); }
  TaskIds(const std::vector<int>& ids) { assign(ids.data(), ids.size()); }  // implicit, as the vector it replaces
  TaskIds(const TaskIds& o) { assign(o.data(), o.size()); }
  TaskIds(TaskIds&& o) noexcept { take(o); }
  TaskIds& operator=(const TaskIds& o) {
    if (this != &o) {
      TaskIds copy(o);
      release();
      take(copy);
    }
    return *this;
  }
  TaskIds& operator=(TaskIds&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  ~TaskIds() { release(); }

  std::size_t size() const { return size_; }
  int* data() { return size_ <= kInline ? words_ : heap(); }
  const int* data() const { return size_ <= kInline ? words_ : heap(); }
  void push_back(int id) {
    if (size_ < kInline) {
      words_[size_++] = id;
      return;
    }
    // On the heap the capacity is the size rounded up to a power of two, so it need not be kept.
    if (size_ == kInline || std::has_single_bit(size_)) {
      int* grown = new int[std::bit_ceil(size_ + 1)];
      std::copy(data(), data() + size_, grown);
      if (size_ > kInline) delete[] heap();
      set_heap(grown);
    }
    heap()[size_++] = id;
  }
  void clear() { release(); }

 private:
  static constexpr std::uint32_t kInline = 2;
  int* heap() const {
    int* p;
    std::memcpy(&p, words_, sizeof p);
    return p;
  }
  void set_heap(int* p) { std::memcpy(words_, &p, sizeof p); }
  void assign(const int* ids, std::size_t n) {
    size_ = static_cast<std::uint32_t>(n);
    if (n <= kInline) {
      std::copy(ids, ids + n, words_);
      return;
    }
    int* p = new int[std::bit_ceil(size_)];
    std::copy(ids, ids + n, p);
    set_heap(p);
  }
  void take(TaskIds& o) {
    size_ = o.size_;
    std::memcpy(words_, o.words_, sizeof words_);
    o.size_ = 0;
  }
  void release() {
    if (size_ > kInline) delete[] heap();
    size_ = 0;
  }

  std::uint32_t size_ = 0;
  int words_[kInline] = {};  // the ids, or a pointer to them beyond kInline
  static_assert(sizeof(int*) <= sizeof(int) * kInline);
};

// A list that almost every task leaves empty (quorum waits, waits on the previous step): one
// pointer, null while empty. 8 bytes.
class RareTaskIds : public IdsView<RareTaskIds> {
 public:
  RareTaskIds() = default;
  RareTaskIds(std::initializer_list<int> ids) : RareTaskIds(std::vector<int>(ids)) {}
  RareTaskIds(std::vector<int> ids) {  // implicit, as the vector it replaces
    if (!ids.empty()) ids_ = std::make_unique<std::vector<int>>(std::move(ids));
  }
  RareTaskIds(const RareTaskIds& o) : RareTaskIds(o.ids_ ? *o.ids_ : std::vector<int>{}) {}
  RareTaskIds(RareTaskIds&&) noexcept = default;
  RareTaskIds& operator=(const RareTaskIds& o) {
    if (this != &o) ids_ = o.ids_ ? std::make_unique<std::vector<int>>(*o.ids_) : nullptr;
    return *this;
  }
  RareTaskIds& operator=(RareTaskIds&&) noexcept = default;

  std::size_t size() const { return ids_ ? ids_->size() : 0; }
  int* data() { return ids_ ? ids_->data() : nullptr; }
  const int* data() const { return ids_ ? ids_->data() : nullptr; }
  void push_back(int id) {
    if (!ids_) ids_ = std::make_unique<std::vector<int>>();
    ids_->push_back(id);
  }
  void clear() { ids_.reset(); }

 private:
  std::unique_ptr<std::vector<int>> ids_;
};

}  // namespace dtsim::taskgraph
