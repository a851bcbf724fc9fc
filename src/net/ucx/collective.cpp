// The ucx transport's allgather and barrier (a barrier is an allgather of
// nothing), and the startup and finalize rounds built on them.
//
// Design: every node sends its part to every other as an am_coll control
// message, numbered by round (every node runs the same rounds in the same
// order), and progresses UCX until the parts of all others are in. Not
// PMIx: a PMIx fence is a trip through the launcher's daemons
// (pmix_bootstrap.hpp), so PMIx is used at init and in finalize only.
#include <cstring>
#include <string>
#include "ucx_transport.hpp"

namespace weft::net::ucx {

// timeout_s > 0: a node whose part has not come by then is named in a fatal
// error.
void ucx_transport::allgather_within(const void* mine, std::size_t bytes, void* all,
                                     double timeout_s, const char* what) {
  if (bytes > 0)
    std::memcpy(static_cast<std::byte*>(all) + std::size_t(rank_) * bytes, mine, bytes);
  if (size_ == 1) return;
  std::uint64_t round = next_allgather_round_++;
  am_header h;
  h.size = bytes;
  h.cookie = round;
  for (int p = 0; p < size_; ++p)
    if (p != rank_) send_control(p, am_coll, h, mine, bytes);
  auto arrived = [&] {
    auto it = allgather_rounds_.find(round);
    return it != allgather_rounds_.end() && it->second.count == size_ - 1;
  };
  progress_until(arrived, timeout_s, [&] {
    auto it = allgather_rounds_.find(round);
    std::string missing;
    for (int p = 0; p < size_; ++p)
      if (p != rank_ && (it == allgather_rounds_.end() || !it->second.got[std::size_t(p)]))
        missing += (missing.empty() ? "" : ", ") + std::to_string(p);
    base::fatal("ucx transport (node %d): %s: no message from node(s) %s within %.0f s", rank_,
                what, missing.c_str(), timeout_s);
  });
  allgather_round& r = allgather_rounds_[round];
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    const auto& part = r.parts[std::size_t(p)];
    if (part.size() != bytes)
      base::fatal("ucx transport (node %d): %s: node %d passed %zu bytes, this node %zu", rank_,
                  what, p, part.size(), bytes);
    if (bytes > 0)
      std::memcpy(static_cast<std::byte*>(all) + std::size_t(p) * bytes, part.data(), bytes);
  }
  allgather_rounds_.erase(round);
}

// Recorded from the callback; a node that is ahead may send its part of a
// round this node has not started yet.
void ucx_transport::receive_allgather_part(int src, const am_header& h, const std::byte* data,
                                           std::size_t length) {
  allgather_round& r = allgather_rounds_[h.cookie];
  if (r.parts.empty()) {
    r.parts.resize(std::size_t(size_));
    r.got.assign(std::size_t(size_), false);
  }
  if (r.got[std::size_t(src)])
    base::fatal("ucx transport (node %d): two parts from node %d in collective round %llu", rank_,
                src, static_cast<unsigned long long>(h.cookie));
  r.got[std::size_t(src)] = true;
  r.parts[std::size_t(src)].assign(data, data + length);
  r.count++;
}

}  // namespace weft::net::ucx
