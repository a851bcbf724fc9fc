// Arrays balanced together (--weft:lb-arrays=together). Where arrays work
// on one another -- examples/md's cells and the computes between them --
// balancing each alone places it around the other's old loads: each step
// sees only its own elements, and the other array's move in its own step
// undoes the premise. Together, the arrays that call at_sync are placed in
// one step as one set of objects, as Charm++ does for its AtSync arrays.
//
// Each array still runs its own step up to the point where the strategy
// runs (its round of records, its counting waves) and after it (plan
// messages, moves, resume). In between, its root sends the records to PE 0,
// which waits for every array that takes part, runs the strategy once over
// all their records, and sends each root its part of the plan. With
// --weft:lb-comm=element the root sends what its elements sent as well
// (gathered in its counting waves, to elements of any array); each record
// names the receiver's array, so that PE 0 joins the arrays' graphs into
// one: edges between a compute and its cells, which a graph partitioner
// (--weft:lb=comm) can then keep on one PE.
//
// Which arrays take part: an array's first at_sync on a PE tells PE 0 (one
// message per PE and array, once), and an array that took part in a step
// takes part in its next one. A joint step is the k-th step of each array
// (k counted per array on PE 0): it runs when every array taking part whose
// steps so far number k has sent its k-th. An array whose first step
// reaches PE 0 before any of its elements' join does (a race only at the
// very start) is placed alone that once, never waited for, and from then
// on it takes part. So the arrays must call at_sync equally often -- the
// same contract as Charm++'s -- or the earlier ones wait for a step of the
// later that may never come (the job then ends quiescent, with the error
// that says so).
#include <cstring>
#include <map>
#include <string>
#include <vector>
#include "objects/internal.hpp"
#include "weft/base/error.hpp"

namespace weft::objects::detail {

namespace {

// PE 0's view: per array taking part, its steps placed so far and, while
// it waits for the others, its records.
struct group_member {
  std::uint64_t steps = 0;
  bool arrived = false;
  int root_pe = -1;
  std::string name;
  std::uint64_t step = 0;  // the array's own step number (stats, dumps)
  std::vector<sync_record> records;
  std::vector<comm_record> comm;  // what its elements sent (--weft:lb-comm)
};
thread_local std::map<std::uint64_t, group_member> t_members;

// Places the arrays whose k-th step it is, if each of them has arrived.
void place_if_ready(std::uint64_t k) {
  std::vector<std::map<std::uint64_t, group_member>::iterator> group;
  for (auto it = t_members.begin(); it != t_members.end(); ++it) {
    if (it->second.steps != k) continue;
    if (!it->second.arrived) return;
    group.push_back(it);
  }
  if (group.empty()) return;
  std::vector<sync_record> all;
  std::vector<comm_record> comm;
  std::vector<step_array> arrays;
  std::string name = group.size() > 1 ? "arrays together: " : "";
  for (std::size_t i = 0; i < group.size(); ++i) {
    const group_member& g = group[i]->second;
    all.insert(all.end(), g.records.begin(), g.records.end());
    comm.insert(comm.end(), g.comm.begin(), g.comm.end());
    arrays.push_back({group[i]->first, g.records.size()});
    name += (i == 0 ? "" : " + ") + g.name;
  }
  balance_plan plan = balancer()(name, k, arrays, all, comm);
  if (plan.pe.size() != all.size())
    base::fatal("lb: the balancer placed %zu elements of %s, not the %zu that took part",
                plan.pe.size(), name.c_str(), all.size());
  std::size_t at = 0;
  for (auto it : group) {
    group_member& g = it->second;
    const std::size_t n = g.records.size();
    const std::string summary =
        group.size() > 1 ? plan.summary + " (over " + std::to_string(all.size()) + " elements of " +
                               std::to_string(group.size()) + " arrays)"
                         : plan.summary;
    // [element count][a PE per element][the stats summary]
    const std::uint64_t count = n;
    message_ptr m =
        new_control_message(get_local_collection(it->first).ref, index_key{}, op_sync_group_plan,
                            sizeof count + n * sizeof(int) + summary.size());
    std::byte* p = args_of(*m);
    std::memcpy(p, &count, sizeof count);
    if (n != 0) std::memcpy(p + sizeof count, plan.pe.data() + at, n * sizeof(int));
    if (!summary.empty())
      std::memcpy(p + sizeof count + n * sizeof(int), summary.data(), summary.size());
    header_of(*m).args.round = std::uint32_t(g.step);
    send_object_to_pe(g.root_pe, std::move(m));
    at += n;
    g.records.clear();
    g.records.shrink_to_fit();
    g.comm.clear();
    g.comm.shrink_to_fit();
    g.arrived = false;
    ++g.steps;
  }
}

}  // namespace

void join_group(local_collection& lc) {
  lc.sync_joined = true;
  send_object_to_pe(0, new_control_message(lc.ref, index_key{}, op_sync_group_join, 0));
}

// [record count][the records][what the array's elements sent]
void send_records_to_group(local_collection& lc, std::uint64_t step) {
  const std::vector<sync_record>& records = lc.sync.records;
  const std::vector<comm_record>& comm = lc.sync.comm;
  const std::uint64_t n = records.size();
  message_ptr m =
      new_control_message(lc.ref, index_key{}, op_sync_group_records,
                          sizeof n + n * sizeof(sync_record) + comm.size() * sizeof(comm_record));
  header_of(*m).arg_pe = my_pe();
  header_of(*m).args.round = std::uint32_t(step);
  std::memcpy(args_of(*m), &n, sizeof n);
  append_bytes(*m, sizeof n, records);
  append_bytes(*m, sizeof n + n * sizeof(sync_record), comm);
  send_object_to_pe(0, std::move(m));
}

void receive_group_join(message_ptr m) {
  t_members.try_emplace(header_of(*m).collection);
}

void receive_group_records(message_ptr m) {
  const obj_header& h = header_of(*m);
  // An array first heard of here is placed with those whose steps so far
  // number as few as its own (none): alone, where the others are past
  // their first step.
  group_member& g = t_members.try_emplace(h.collection).first->second;
  if (g.arrived)
    base::fatal("lb: %s sent a second step's records before its first was placed",
                collection_name(get_local_collection(h.collection).ref).c_str());
  g.arrived = true;
  g.root_pe = h.arg_pe;
  g.step = h.args.round;
  g.name = collection_name(get_local_collection(h.collection).ref);
  std::uint64_t n = 0;
  std::memcpy(&n, args_of(*m), sizeof n);
  g.records.resize(n);
  if (n != 0) std::memcpy(g.records.data(), args_of(*m) + sizeof n, n * sizeof(sync_record));
  g.comm = read_bytes<comm_record>(*m, sizeof n + n * sizeof(sync_record));
  place_if_ready(g.steps);
}

void receive_group_plan(message_ptr m) {
  const obj_header& h = header_of(*m);
  local_collection& lc = get_local_collection(h.collection);
  const std::byte* p = args_of(*m);
  std::uint64_t count = 0;
  std::memcpy(&count, p, sizeof count);
  balance_plan plan;
  plan.pe.resize(count);
  if (count != 0) std::memcpy(plan.pe.data(), p + sizeof count, count * sizeof(int));
  const std::size_t used = sizeof count + count * sizeof(int);
  plan.summary.assign(reinterpret_cast<const char*>(p + used), args_size(*m) - used);
  carry_out_plan(lc, h.args.round, std::move(plan));
}

}  // namespace weft::objects::detail
