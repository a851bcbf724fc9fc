// A transport's pool of message memory (lesson 5): one mapping that peers
// can read (registered with UCX, or a shared-memory segment the processes
// of a host map), handed out in power-of-two slots -- to the transport for
// its own copies, and to core for its large message blocks
// (base::registered_memory), so that a large message is written where it
// leaves from. Private to weft_net (ucx/ and shm/).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>
#include "weft/base/memory.hpp"

namespace weft::net {

// Blocks of a pool in power-of-two classes, a buddy allocator: a block of
// 2^k bytes starts at a multiple of 2^k; taking splits a larger free block
// when its class has none, giving merges a block with its free buddy. So
// memory that served one size serves another once it is free again: with
// classes that never split or merge, a pool once filled with 512 KiB slots
// never had a 4 MiB one again, all of it free (a phase of an application
// that sends larger messages than the one before, the shm test of growing
// sizes). Blocks of the largest class are carved from the front on first
// use; a pool that is no multiple of them ends in smaller ones. Rejected: a
// general first-fit allocator; a class list is one vector pop on the send
// path, and merging costs a few steps on the free.
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
    free_class_.assign((size_ >> min_shift_) + 1, 0);
    free_index_.assign(free_class_.size(), 0);
  }
  // Offset of a free block of at least `bytes` (its class in `cls`), or none.
  std::size_t take(std::size_t bytes, unsigned& cls) {
    const unsigned shift = std::max(min_shift_, ceil_log2(bytes));
    if (free_.empty() || shift > max_shift_) return none;
    const unsigned want = shift - min_shift_;
    for (;;) {
      unsigned c = want;
      while (c < free_.size() && free_[c].empty()) ++c;
      if (c < free_.size()) {
        const std::size_t off = pop(c);
        while (c > want) {  // the upper halves stay free, one per class
          --c;
          push(off + block_bytes(c), c);
        }
        cls = want;
        return off;
      }
      if (!carve()) return none;
    }
  }
  void give(std::size_t offset, unsigned cls) {
    unsigned c = cls;
    while (c + 1 < free_.size()) {
      const std::size_t buddy = offset ^ block_bytes(c);
      if (buddy >= bump_ || free_class_[buddy >> min_shift_] != c + 1) break;
      remove(buddy, c);
      offset = std::min(offset, buddy);
      ++c;
    }
    push(offset, c);
  }
  unsigned min_shift() const { return min_shift_; }

 private:
  std::size_t block_bytes(unsigned c) const { return std::size_t(1) << (c + min_shift_); }
  // The next block from the front: the largest class that starts here and
  // fits before the end. False when not even the smallest fits.
  bool carve() {
    for (unsigned c = unsigned(free_.size()); c-- > 0;) {
      const std::size_t block = block_bytes(c);
      if ((bump_ & (block - 1)) == 0 && bump_ + block <= size_) {
        push(bump_, c);
        bump_ += block;
        return true;
      }
    }
    return false;
  }
  void push(std::size_t off, unsigned c) {
    free_class_[off >> min_shift_] = std::uint8_t(c + 1);
    free_index_[off >> min_shift_] = std::uint32_t(free_[c].size());
    free_[c].push_back(off);
  }
  std::size_t pop(unsigned c) {
    const std::size_t off = free_[c].back();
    free_[c].pop_back();
    free_class_[off >> min_shift_] = 0;
    return off;
  }
  // A free block out of the middle of its class's list.
  void remove(std::size_t off, unsigned c) {
    const std::uint32_t i = free_index_[off >> min_shift_];
    const std::size_t last = free_[c].back();
    free_[c][i] = last;
    free_index_[last >> min_shift_] = i;
    free_[c].pop_back();
    free_class_[off >> min_shift_] = 0;
  }
  static unsigned floor_log2(std::size_t x) { return unsigned(63 - __builtin_clzll(x)); }
  static unsigned ceil_log2(std::size_t x) { return x <= 1 ? 0 : floor_log2(x - 1) + 1; }

  std::size_t size_ = 0, bump_ = 0;  // bump_: carved up to here
  unsigned min_shift_ = 12, max_shift_ = 0;
  std::vector<std::vector<std::size_t>> free_;  // free blocks' offsets, by class
  // By offset >> min_shift_, for a block's start: its class + 1 while it is
  // free (0: not a free block's start), and its place in free_[class].
  std::vector<std::uint8_t> free_class_;
  std::vector<std::uint32_t> free_index_;
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
