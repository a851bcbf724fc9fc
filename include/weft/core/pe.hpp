// Where am I: the calling PE, its node, the job's sizes. Each query is O(1)
// and reads only thread-local state (my_pe() is on every send path).
// Contexts as in weft/core/run.hpp.
#pragma once
#include "weft/base/export.hpp"

namespace weft {

namespace detail {
struct pe_local {
  int pe = -1;      // in the job
  int num_pes = 0;  // in the job
  int node = 0;
  int num_nodes = 1;
  int rank = -1;      // in the node
  int node_size = 0;  // PEs per node (every node has as many)
};
// Constant-initialised, so reading it is one thread-pointer-relative load
// (no call, no initialisation guard): my_pe() is on every send path.
WEFT_API extern constinit thread_local pe_local t_pe_local;
inline pe_local& this_pe_local() noexcept {
  return t_pe_local;
}
// True on PE 0 while main_fn runs (its setup, before it first returns).
WEFT_API bool in_main_setup() noexcept;
}  // namespace detail

// PEs are numbered across the job: node n has PEs n*node_size() ..
// (n+1)*node_size()-1. In a one-process run the job is the node.
inline int my_pe() noexcept {
  return detail::this_pe_local().pe;
}  // -1 off a PE
inline int num_pes() noexcept {
  return detail::this_pe_local().num_pes;
}  // in the job
inline int my_node() noexcept {
  return detail::this_pe_local().node;
}
inline int num_nodes() noexcept {
  return detail::this_pe_local().num_nodes;
}
inline int my_rank() noexcept {
  return detail::this_pe_local().rank;
}  // this PE within its node (-1 off a PE)
inline int node_size() noexcept {
  return detail::this_pe_local().node_size;
}  // PEs per node
// The node of PE `pe` of the job (PE; 0 off a PE, where node_size() is 0).
inline int node_of(int pe) noexcept {
  const int per = detail::this_pe_local().node_size;
  return per > 0 ? pe / per : 0;
}

}  // namespace weft
