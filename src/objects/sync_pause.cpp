// Steps without at_sync (periodic, on demand) pause the array's elements
// as at_sync steps do, so that they keep per sender-receiver order too.
//
// A step without at_sync moves elements between their entry methods while
// messages fly. Forwarding never loses one, but a message forwarded from
// an element's old PE can arrive after one its sender sent later, straight
// to the new PE, once the sender learnt it -- and an element that moves
// sends from two PEs. So, when such a step starts (op_lb_collect), every
// PE pauses the array: messages for its elements there wait, in arrival
// order, and count as taken; the root's counting waves (sync.cpp) then see
// when none is in flight, as in an at_sync step, before anything moves.
// A moving element's waiting messages go after it, on the same route
// (their number in its migration message: its new PE's part of the step
// waits for them); the resume lets every PE deliver what waited, in order,
// before anything sent after it.
//
// What may still overtake: messages sent to the array from outside it
// (chares, groups, main) while the elements move, as in an at_sync step
// (docs/lb.md, "Order and loss").
#include "objects/internal.hpp"

namespace weft::objects::detail {

void pause_message(local_collection& lc, message_ptr m) {
  const index_key key = header_of(*m).key;
  lc.paused_msgs[key].push_back(m.release());
  if (lc.followers.empty()) return;
  auto f = lc.followers.find(key);
  if (f == lc.followers.end()) return;
  if (--f->second == 0) lc.followers.erase(f);
  sync_follower_arrived(lc);
}

std::vector<message*> take_paused(local_collection& lc, const index_key& key) {
  if (lc.paused_msgs.empty()) return {};
  auto it = lc.paused_msgs.find(key);
  if (it == lc.paused_msgs.end()) return {};
  std::vector<message*> out = std::move(it->second);
  lc.paused_msgs.erase(it);
  // In flight again (the counting waves of the next step see them).
  lc.msgs_taken -= out.size();
  return out;
}

void expect_followers(local_collection& lc, const index_key& key, std::uint32_t n) {
  if (n == 0) return;
  lc.followers[key] += n;
  lc.sync_expected += n;
}

void resume_paused(local_collection& lc) {
  lc.paused = false;
  lc.deliver_fast = lc.created;
  key_map<std::vector<message*>> all;
  all.swap(lc.paused_msgs);
  // Each entry may insert, destroy or move elements: look each up again.
  for (auto& [key, msgs] : all)
    for (message* raw : msgs) {
      message_ptr m(raw);
      auto it = lc.local.find(key);
      if (it != lc.local.end() && it->second->obj != nullptr) {
        deliver_to_element(*it->second, std::move(m));
      } else {
        // Gone since (moved, destroyed): as any message that missed.
        --lc.msgs_taken;
        on_element_message_general(std::move(m));
      }
    }
}

}  // namespace weft::objects::detail
