// Groups: ordered sets of world ranks, the rank's own handles (MPI_GROUP_EMPTY
// is 1, the others index rank_state::groups). Local operations: none sends
// a message.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include "mpi/mpi_internal.hpp"

#define WEFT_MPI_API extern "C" __attribute__((visibility("default")))

namespace weft::mpi {

namespace {

using members_t = std::vector<int>;

const members_t& members_of(const char* call, rank_state& me, MPI_Group group) {
  static const members_t empty;
  if (group == MPI_GROUP_EMPTY) return empty;
  if (group == MPI_GROUP_NULL) fail(call, MPI_ERR_GROUP, "the group is MPI_GROUP_NULL");
  if (group < 2 || std::size_t(group - 2) >= me.groups.size() ||
      me.groups[std::size_t(group - 2)] == nullptr)
    fail(call, MPI_ERR_GROUP, "%d is not a group of this rank (freed, or never made)", group);
  return *me.groups[std::size_t(group - 2)];
}

MPI_Group add_group(rank_state& me, members_t members) {
  if (members.empty()) return MPI_GROUP_EMPTY;
  auto shared = std::make_shared<const members_t>(std::move(members));
  for (std::size_t i = 0; i < me.groups.size(); ++i)
    if (me.groups[i] == nullptr) {
      me.groups[i] = std::move(shared);
      return MPI_Group(i + 2);
    }
  me.groups.push_back(std::move(shared));
  return MPI_Group(me.groups.size() + 1);
}

int position(const members_t& g, int world) {
  const auto at = std::find(g.begin(), g.end(), world);
  return at == g.end() ? MPI_UNDEFINED : int(at - g.begin());
}

// The ranks `ranks[0..n)` of a group of `size`: each in range and none twice.
void check_ranks(const char* call, int n, const int* ranks, int size) {
  if (n < 0 || n > size)
    fail(call, MPI_ERR_ARG, "n = %d is not in 0..%d (the group's size)", n, size);
  std::vector<char> seen(std::size_t(size), 0);
  for (int i = 0; i < n; ++i) {
    if (ranks[i] < 0 || ranks[i] >= size)
      fail(call, MPI_ERR_RANK, "ranks[%d] = %d is not in the group (size %d)", i, ranks[i], size);
    if (seen[std::size_t(ranks[i])]++) fail(call, MPI_ERR_RANK, "rank %d is named twice", ranks[i]);
  }
}

// The ranks that `n` triplets (first, last, stride) name, in order.
std::vector<int> expand_ranges(const char* call, int n, int ranges[][3], int size) {
  if (n < 0) fail(call, MPI_ERR_ARG, "n = %d is negative", n);
  std::vector<int> out;
  for (int i = 0; i < n; ++i) {
    const int first = ranges[i][0], last = ranges[i][1], stride = ranges[i][2];
    if (stride == 0) fail(call, MPI_ERR_ARG, "ranges[%d] has stride 0", i);
    if ((stride > 0 && first > last) || (stride < 0 && first < last))
      fail(call, MPI_ERR_ARG,
           "ranges[%d] = (%d, %d, %d) is empty (the stride goes away from the last)", i, first,
           last, stride);
    for (long r = first; stride > 0 ? r <= last : r >= last; r += stride) out.push_back(int(r));
  }
  check_ranks(call, int(out.size()), out.data(), size);
  return out;
}

}  // namespace

std::vector<int> group_members(const char* call, rank_state& me, MPI_Group group) {
  return members_of(call, me, group);
}

}  // namespace weft::mpi

using namespace weft::mpi;

WEFT_MPI_API int MPI_Comm_group(MPI_Comm comm, MPI_Group* group) {
  return guard(__func__, comm, [&] {
    rank_state& me = self("MPI_Comm_group");
    *group = add_group(me, view("MPI_Comm_group", me, comm).core->members);
  });
}

WEFT_MPI_API int MPI_Comm_remote_group(MPI_Comm comm, MPI_Group* group) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Comm_remote_group";
    rank_state& me = self(call);
    const comm_view& c = view(call, me, comm);
    if (c.remote == nullptr)
      fail(call, MPI_ERR_COMM, "communicator %d is not an intercommunicator", comm);
    *group = add_group(me, *c.remote);
  });
}

WEFT_MPI_API int MPI_Group_size(MPI_Group group, int* size) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    *size = int(members_of("MPI_Group_size", self("MPI_Group_size"), group).size());
  });
}

WEFT_MPI_API int MPI_Group_rank(MPI_Group group, int* rank) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    rank_state& me = self("MPI_Group_rank");
    *rank = position(members_of("MPI_Group_rank", me, group), me.rank);
  });
}

WEFT_MPI_API int MPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[],
                                           MPI_Group group2, int ranks2[]) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Group_translate_ranks";
    rank_state& me = self(call);
    const members_t& a = members_of(call, me, group1);
    const members_t& b = members_of(call, me, group2);
    if (n < 0) fail(call, MPI_ERR_ARG, "n = %d is negative", n);
    std::unordered_map<int, int> in_b;
    for (std::size_t i = 0; i < b.size(); ++i) in_b.emplace(b[i], int(i));
    for (int i = 0; i < n; ++i) {
      if (ranks1[i] == MPI_PROC_NULL) {
        ranks2[i] = MPI_PROC_NULL;
        continue;
      }
      if (ranks1[i] < 0 || std::size_t(ranks1[i]) >= a.size())
        fail(call, MPI_ERR_RANK, "ranks1[%d] = %d is not in group1 (size %zu)", i, ranks1[i],
             a.size());
      const auto at = in_b.find(a[std::size_t(ranks1[i])]);
      ranks2[i] = at == in_b.end() ? MPI_UNDEFINED : at->second;
    }
  });
}

WEFT_MPI_API int MPI_Group_compare(MPI_Group group1, MPI_Group group2, int* result) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    rank_state& me = self("MPI_Group_compare");
    const members_t& a = members_of("MPI_Group_compare", me, group1);
    const members_t& b = members_of("MPI_Group_compare", me, group2);
    *result = a == b                                                        ? MPI_IDENT
              : std::is_permutation(a.begin(), a.end(), b.begin(), b.end()) ? MPI_SIMILAR
                                                                            : MPI_UNEQUAL;
  });
}

namespace {

// Union, intersection, difference: the order of group1, then (union) group2's.
template <class Keep>
int combine(const char* call, MPI_Group group1, MPI_Group group2, MPI_Group* out, bool add_b,
            Keep keep_a) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    rank_state& me = self(call);
    const members_t& a = members_of(call, me, group1);
    const members_t& b = members_of(call, me, group2);
    const std::unordered_set<int> in_b(b.begin(), b.end());
    members_t r;
    for (int w : a)
      if (keep_a(in_b.count(w) != 0)) r.push_back(w);
    if (add_b) {
      const std::unordered_set<int> in_a(a.begin(), a.end());
      for (int w : b)
        if (!in_a.count(w)) r.push_back(w);
    }
    *out = add_group(me, std::move(r));
  });
}

}  // namespace

WEFT_MPI_API int MPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  return combine("MPI_Group_union", group1, group2, newgroup, true, [](bool) { return true; });
}

WEFT_MPI_API int MPI_Group_intersection(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  return combine("MPI_Group_intersection", group1, group2, newgroup, false,
                 [](bool in_b) { return in_b; });
}

WEFT_MPI_API int MPI_Group_difference(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  return combine("MPI_Group_difference", group1, group2, newgroup, false,
                 [](bool in_b) { return !in_b; });
}

namespace {

int include(const char* call, MPI_Group group, const std::vector<int>& picked, bool keep,
            MPI_Group* newgroup, rank_state& me) {
  const members_t& g = members_of(call, me, group);
  members_t r;
  if (keep) {
    for (int i : picked) r.push_back(g[std::size_t(i)]);
  } else {
    std::vector<char> drop(g.size(), 0);
    for (int i : picked) drop[std::size_t(i)] = 1;
    for (std::size_t i = 0; i < g.size(); ++i)
      if (!drop[i]) r.push_back(g[i]);
  }
  *newgroup = add_group(me, std::move(r));
  return MPI_SUCCESS;
}

int incl_excl(const char* call, MPI_Group group, int n, const int ranks[], MPI_Group* newgroup,
              bool keep) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    rank_state& me = self(call);
    check_ranks(call, n, ranks, int(members_of(call, me, group).size()));
    include(call, group, std::vector<int>(ranks, ranks + n), keep, newgroup, me);
  });
}

int range_incl_excl(const char* call, MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup,
                    bool keep) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    rank_state& me = self(call);
    const int size = int(members_of(call, me, group).size());
    include(call, group, expand_ranges(call, n, ranges, size), keep, newgroup, me);
  });
}

}  // namespace

WEFT_MPI_API int MPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup) {
  return incl_excl("MPI_Group_incl", group, n, ranks, newgroup, true);
}

WEFT_MPI_API int MPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup) {
  return incl_excl("MPI_Group_excl", group, n, ranks, newgroup, false);
}

WEFT_MPI_API int MPI_Group_range_incl(MPI_Group group, int n, int ranges[][3],
                                      MPI_Group* newgroup) {
  return range_incl_excl("MPI_Group_range_incl", group, n, ranges, newgroup, true);
}

WEFT_MPI_API int MPI_Group_range_excl(MPI_Group group, int n, int ranges[][3],
                                      MPI_Group* newgroup) {
  return range_incl_excl("MPI_Group_range_excl", group, n, ranges, newgroup, false);
}

WEFT_MPI_API int MPI_Group_free(MPI_Group* group) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    rank_state& me = self("MPI_Group_free");
    members_of("MPI_Group_free", me, *group);
    if (*group != MPI_GROUP_EMPTY) me.groups[std::size_t(*group - 2)] = nullptr;
    *group = MPI_GROUP_NULL;
  });
}
