// A transport's pool of message memory (lesson 5): one mapping that peers
// can read (registered with UCX, or a shared-memory segment the processes
// of a host map), handed out in power-of-two slots -- to the transport for
// its own copies, and to core for its large message blocks
// (base::registered_memory), so that a large message is written where it
// leaves from. Private to weft_net (ucx.cpp, shm.cpp).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>
#include "weft/base/memory.hpp"

namespace weft::net {

// Blocks of a pool in power-of-two classes, carved from the front on first
// use and recycled per class. Rejected: a general first-fit allocator with
// coalescing; message sizes repeat in the applications we target, and a
// class list is one vector pop on the send path.
class slot_pool {
 public:
  static constexpr std::size_t none = ~std::size_t(0);

  void reset(std::size_t bytes, std::size_t min_block) {
    size_ = bytes;
    bump_ = 0;
    min_shift_ = ceil_log2(std::max<std::size_t>(min_block, 4096));
    max_shift_ = size_ >= 4 ? floor_log2(size_ / 4) : 0;  // room for 4 of the largest
    if (max_shift_ < min_shift_) max_shift_ = size_ ? floor_log2(size_) : 0;
    free_.assign(max_shift_ >= min_shift_ ? max_shift_ - min_shift_ + 1 : 0, {});
  }
  // Offset of a free block of at least `bytes`, or none.
  std::size_t take(std::size_t bytes, unsigned& cls) {
    unsigned shift = std::max(min_shift_, ceil_log2(bytes));
    if (free_.empty() || shift > max_shift_) return none;
    cls = shift - min_shift_;
    if (!free_[cls].empty()) return pop(cls);
    std::size_t block = std::size_t(1) << shift;
    if (bump_ + block <= size_) {
      std::size_t off = bump_;
      bump_ += block;
      return off;
    }
    // A larger free block rather than no block; it returns to its own class.
    for (unsigned c = cls + 1; c < free_.size(); ++c)
      if (!free_[c].empty()) {
        cls = c;
        return pop(c);
      }
    return none;
  }
  void give(std::size_t offset, unsigned cls) { free_[cls].push_back(offset); }
  unsigned min_shift() const { return min_shift_; }

 private:
  std::size_t pop(unsigned c) {
    std::size_t off = free_[c].back();
    free_[c].pop_back();
    return off;
  }
  static unsigned floor_log2(std::size_t x) { return unsigned(63 - __builtin_clzll(x)); }
  static unsigned ceil_log2(std::size_t x) { return x <= 1 ? 0 : floor_log2(x - 1) + 1; }

  std::size_t size_ = 0, bump_ = 0;
  unsigned min_shift_ = 12, max_shift_ = 0;
  std::vector<std::vector<std::size_t>> free_;
};

// The slots of one mapping, from any thread under one lock (a slot holds at
// least 16 KiB, so the lock is never the cost). It outlives its transport
// while core holds blocks of it: the transport calls retire() when it ends,
// and the last deallocate then releases the mapping (`unmap`).
//
// Lending (the shm transport): a slot sent to a peer that reads it in place
// is lent -- one reference more -- and core's free of it only drops core's
// reference; the slot is free again once the peer gives it back (give_back)
// or the block comes back as a message (keep: the loan becomes core's
// reference again). Loans still out when the transport retires are written
// off: their peers hold their own mappings.
class message_pool final : public base::registered_memory {
 public:
  // Over [base, base + bytes); blocks of core's messages from `min_message`
  // bytes on (smaller ones stay in core's per-PE caches).
  message_pool(void* base, std::size_t bytes, std::size_t min_block, std::size_t min_message,
               std::function<void()> unmap)
      : base_(static_cast<std::byte*>(base)),
        bytes_(bytes),
        min_message_(min_message),
        unmap_(std::move(unmap)) {
    slots_.reset(bytes, min_block);
    class_at_.assign((bytes >> slots_.min_shift()) + 1, 0);
    refs_.assign(class_at_.size(), 0);
  }
  message_pool(const message_pool&) = delete;
  message_pool& operator=(const message_pool&) = delete;

  std::byte* base() const { return base_; }
  std::size_t bytes() const { return bytes_; }

  // Every slot starts on a multiple of this: a pointer into the first
  // slot_align bytes of a slot names the slot.
  static constexpr std::size_t slot_align = 4096;

  // A slot of at least `bytes`, or null.
  void* allocate(std::size_t bytes) override {
    std::lock_guard<std::mutex> lock(mutex_);
    unsigned cls = 0;
    const std::size_t off = slots_.take(bytes, cls);
    if (off == slot_pool::none) return nullptr;
    class_at_[off >> slots_.min_shift()] = std::uint8_t(cls);
    refs_[off >> slots_.min_shift()] = 1;
    ++live_;
    return base_ + off;
  }
  void deallocate(void* p) override { drop(p, false); }
  // p (in the first slot_align bytes of a slot core holds): the slot goes to
  // a peer that reads it in place.
  void lend(const void* p) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++refs_[slot_of(p) >> slots_.min_shift()];
    ++live_;
    ++lent_;
  }
  // The peer is done with a lent slot.
  void give_back(const void* p) { drop(p, true); }
  // A lent slot came back as a message core now holds.
  void keep(const void*) {
    std::lock_guard<std::mutex> lock(mutex_);
    --lent_;
  }
  bool contains(const void* p) const override {
    const auto* b = static_cast<const std::byte*>(p);
    return b >= base_ && b < base_ + bytes_;
  }
  std::size_t min_bytes() const override { return min_message_; }
  // The transport is done with the pool: it goes now, or with its last block.
  void retire() {
    bool now = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      retired_ = true;
      live_ -= lent_;
      lent_ = 0;
      now = live_ == 0;
    }
    if (now) delete this;
  }

 private:
  ~message_pool() override {
    if (unmap_) unmap_();
  }
  std::size_t slot_of(const void* p) const {
    const std::size_t off = std::size_t(static_cast<const std::byte*>(p) - base_);
    return off & ~(slot_align - 1);
  }
  void drop(const void* p, bool loan) {
    bool last = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (loan && retired_) return;  // written off
      const std::size_t off = slot_of(p);
      const std::size_t g = off >> slots_.min_shift();
      if (--refs_[g] == 0) slots_.give(off, class_at_[g]);
      if (loan) --lent_;
      last = --live_ == 0 && retired_;
    }
    if (last) delete this;
  }
  std::mutex mutex_;
  std::byte* const base_;
  const std::size_t bytes_;
  const std::size_t min_message_;
  std::function<void()> unmap_;
  slot_pool slots_;                     // guarded by mutex_
  std::vector<std::uint8_t> class_at_;  // guarded by mutex_: a slot's class, by offset
  std::vector<std::uint16_t> refs_;     // guarded by mutex_: references to a slot, by offset
  std::size_t live_ = 0;                // guarded by mutex_: references given out
  std::size_t lent_ = 0;                // guarded by mutex_: of which loans to peers
  bool retired_ = false;                // guarded by mutex_
};

}  // namespace weft::net
