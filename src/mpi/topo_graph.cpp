// Graph process topologies: MPI_Graph_create (every rank gives the whole
// graph) and the distributed graphs of MPI 2.2 (MPI_Dist_graph_create_adjacent:
// each rank its own neighbours; MPI_Dist_graph_create: any rank any edges,
// exchanged), with their queries. A graph communicator is a dup of the old
// one (the same ranks, never reordered: the standard allows it) whose
// handle at each rank holds that rank's neighbours (comm_view::graph), what
// the neighbourhood collectives (neighbor.cpp) send to and receive from.
#include <algorithm>
#include <memory>
#include <vector>
#include "mpi/mpi_internal.hpp"

#define WEFT_MPI_API extern "C" __attribute__((visibility("default")))

namespace weft::mpi {

namespace {

// A new communicator of comm_old's ranks in their order, with `g` as the
// calling rank's topology.
MPI_Comm make_graph_comm(const char* call, MPI_Comm comm_old, std::shared_ptr<graph_topology> g) {
  const int rank = comm_rank(call, comm_old);
  const MPI_Comm made = split_comm(call, comm_old, 0, rank);
  view(call, self(call), made).graph = std::move(g);
  return made;
}

void check_ranks(const char* call, const int* ranks, int n, int size, const char* what) {
  if (n > 0 && ranks == nullptr) fail(call, MPI_ERR_ARG, "%s is null for %d entries", what, n);
  for (int i = 0; i < n; ++i)
    if (ranks[i] < 0 || ranks[i] >= size)
      fail(call, MPI_ERR_RANK, "%s[%d] = %d is not a rank of the communicator (0..%d)", what, i,
           ranks[i], size - 1);
}

// The weights of `n` edges as given: MPI_UNWEIGHTED (none), MPI_WEIGHTS_EMPTY
// (none, for zero edges), or n of them.
std::vector<int> weights_of(const char* call, const int* w, int n, bool* weighted) {
  if (w == MPI_UNWEIGHTED) {
    *weighted = false;
    return {};
  }
  if (w == MPI_WEIGHTS_EMPTY || n == 0) return std::vector<int>(std::size_t(n), 1);
  if (w == nullptr) fail(call, MPI_ERR_ARG, "the weights are null for %d edges", n);
  for (int i = 0; i < n; ++i)
    if (w[i] < 0) fail(call, MPI_ERR_ARG, "weight %d is %d, negative", i, w[i]);
  return std::vector<int>(w, w + n);
}

const graph_topology& graph_of(const char* call, MPI_Comm comm, int kind) {
  const comm_view& v = view(call, self(call), comm);
  if (v.graph == nullptr || v.graph->kind != kind)
    fail(call, MPI_ERR_TOPOLOGY, "communicator %d has no %s topology (%s)", comm,
         kind == MPI_GRAPH ? "graph" : "distributed graph",
         kind == MPI_GRAPH ? "MPI_Graph_create"
                           : "MPI_Dist_graph_create or MPI_Dist_graph_create_adjacent");
  return *v.graph;
}

}  // namespace

}  // namespace weft::mpi

using namespace weft::mpi;

// MPI_UNWEIGHTED and MPI_WEIGHTS_EMPTY (mpi.h): defined here, in a linkage
// block (a lone `extern "C"` declaration would only declare them).
extern "C" {
__attribute__((visibility("default"))) int MPI_weft_unweighted_[1];
__attribute__((visibility("default"))) int MPI_weft_weights_empty_[1];
}

// Where MPI_Graph_create would put the calling rank: its own rank (weft
// never reorders), or MPI_UNDEFINED outside the graph.
WEFT_MPI_API int MPI_Graph_map(MPI_Comm comm, int nnodes, const int index[], const int edges[],
                               int* newrank) {
  return guard(__func__, comm, [&] {
    (void)index;
    (void)edges;
    const char* call = "MPI_Graph_map";
    intra_view(call, self(call), comm);
    const int size = comm_size(call, comm), rank = comm_rank(call, comm);
    if (nnodes < 1 || nnodes > size)
      fail(call, MPI_ERR_ARG, "nnodes %d is not in 1..%d (the communicator's size)", nnodes, size);
    *newrank = rank < nnodes ? rank : MPI_UNDEFINED;
  });
}

WEFT_MPI_API int MPI_Graph_create(MPI_Comm comm_old, int nnodes, const int index[],
                                  const int edges[], int reorder, MPI_Comm* comm_graph) {
  return guard(__func__, comm_old, [&] {
    (void)reorder;
    const char* call = "MPI_Graph_create";
    const int size = comm_size(call, comm_old), rank = comm_rank(call, comm_old);
    if (nnodes < 0 || nnodes > size)
      fail(call, MPI_ERR_ARG, "nnodes %d is not in 0..%d (the communicator's size)", nnodes, size);
    if (nnodes > 0 && index == nullptr) fail(call, MPI_ERR_ARG, "index is null");
    for (int i = 0; i < nnodes; ++i)
      if (index[i] < (i == 0 ? 0 : index[i - 1]))
        fail(call, MPI_ERR_ARG, "index[%d] = %d is less than the one before", i, index[i]);
    const int nedges = nnodes > 0 ? index[nnodes - 1] : 0;
    check_ranks(call, edges, nedges, nnodes, "edges");
    auto g = std::make_shared<graph_topology>();
    g->kind = MPI_GRAPH;
    g->index.assign(index, index + nnodes);
    g->edges.assign(edges, edges + nedges);
    if (rank < nnodes) {
      const int lo = rank == 0 ? 0 : index[rank - 1];
      g->sources.assign(edges + lo, edges + index[rank]);
      g->destinations = g->sources;
    }
    if (rank >= nnodes) {  // not in the graph: MPI_COMM_NULL, as MPI_Cart_create does
      split_comm(call, comm_old, MPI_UNDEFINED, rank);
      *comm_graph = MPI_COMM_NULL;
      return;
    }
    const int made = split_comm(call, comm_old, 0, rank);
    view(call, self(call), made).graph = std::move(g);
    *comm_graph = made;
  });
}

WEFT_MPI_API int MPI_Graphdims_get(MPI_Comm comm, int* nnodes, int* nedges) {
  return guard(__func__, comm, [&] {
    const graph_topology& g = graph_of("MPI_Graphdims_get", comm, MPI_GRAPH);
    *nnodes = int(g.index.size());
    *nedges = int(g.edges.size());
  });
}

WEFT_MPI_API int MPI_Graph_get(MPI_Comm comm, int maxindex, int maxedges, int index[],
                               int edges[]) {
  return guard(__func__, comm, [&] {
    const graph_topology& g = graph_of("MPI_Graph_get", comm, MPI_GRAPH);
    for (int i = 0; i < maxindex && i < int(g.index.size()); ++i)
      index[i] = g.index[std::size_t(i)];
    for (int i = 0; i < maxedges && i < int(g.edges.size()); ++i)
      edges[i] = g.edges[std::size_t(i)];
  });
}

WEFT_MPI_API int MPI_Graph_neighbors_count(MPI_Comm comm, int rank, int* nneighbors) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Graph_neighbors_count";
    const graph_topology& g = graph_of(call, comm, MPI_GRAPH);
    if (rank < 0 || rank >= int(g.index.size()))
      fail(call, MPI_ERR_RANK, "rank %d is not a node of the graph (0..%d)", rank,
           int(g.index.size()) - 1);
    *nneighbors = g.index[std::size_t(rank)] - (rank == 0 ? 0 : g.index[std::size_t(rank - 1)]);
  });
}

WEFT_MPI_API int MPI_Graph_neighbors(MPI_Comm comm, int rank, int maxneighbors, int neighbors[]) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Graph_neighbors";
    const graph_topology& g = graph_of(call, comm, MPI_GRAPH);
    if (rank < 0 || rank >= int(g.index.size()))
      fail(call, MPI_ERR_RANK, "rank %d is not a node of the graph (0..%d)", rank,
           int(g.index.size()) - 1);
    const int lo = rank == 0 ? 0 : g.index[std::size_t(rank - 1)];
    for (int i = lo, k = 0; i < g.index[std::size_t(rank)] && k < maxneighbors; ++i, ++k)
      neighbors[k] = g.edges[std::size_t(i)];
  });
}

WEFT_MPI_API int MPI_Dist_graph_create_adjacent(MPI_Comm comm_old, int indegree,
                                                const int sources[], const int sourceweights[],
                                                int outdegree, const int destinations[],
                                                const int destweights[], MPI_Info info, int reorder,
                                                MPI_Comm* comm_dist_graph) {
  return guard(__func__, comm_old, [&] {
    (void)info, (void)reorder;
    const char* call = "MPI_Dist_graph_create_adjacent";
    const int size = comm_size(call, comm_old);
    if (indegree < 0 || outdegree < 0)
      fail(call, MPI_ERR_ARG, "indegree %d or outdegree %d is negative", indegree, outdegree);
    check_ranks(call, sources, indegree, size, "sources");
    check_ranks(call, destinations, outdegree, size, "destinations");
    auto g = std::make_shared<graph_topology>();
    g->kind = MPI_DIST_GRAPH;
    g->sources.assign(sources, sources + indegree);
    g->destinations.assign(destinations, destinations + outdegree);
    bool in_w = true, out_w = true;
    g->source_weights = weights_of(call, sourceweights, indegree, &in_w);
    g->destination_weights = weights_of(call, destweights, outdegree, &out_w);
    g->weighted = in_w && out_w;
    *comm_dist_graph = make_graph_comm(call, comm_old, std::move(g));
  });
}

// Any rank gives any edges (n sources, each with its degree and its
// destinations): every rank learns every edge (an allgather of the lists)
// and keeps those that end or start at it, in the order of the giving
// ranks, then of their lists.
WEFT_MPI_API int MPI_Dist_graph_create(MPI_Comm comm_old, int n, const int sources[],
                                       const int degrees[], const int destinations[],
                                       const int weights[], MPI_Info info, int reorder,
                                       MPI_Comm* comm_dist_graph) {
  return guard(__func__, comm_old, [&] {
    (void)info, (void)reorder;
    const char* call = "MPI_Dist_graph_create";
    const int size = comm_size(call, comm_old), rank = comm_rank(call, comm_old);
    if (n < 0) fail(call, MPI_ERR_ARG, "n %d is negative", n);
    check_ranks(call, sources, n, size, "sources");
    if (n > 0 && degrees == nullptr) fail(call, MPI_ERR_ARG, "degrees is null");
    int edges = 0;
    for (int i = 0; i < n; ++i) {
      if (degrees[i] < 0) fail(call, MPI_ERR_ARG, "degrees[%d] = %d is negative", i, degrees[i]);
      edges += degrees[i];
    }
    check_ranks(call, destinations, edges, size, "destinations");
    bool weighted = true;
    const std::vector<int> w = weights_of(call, weights, edges, &weighted);
    // This rank's edges as (source, destination, weight) triples.
    std::vector<int> mine;
    mine.reserve(std::size_t(edges) * 3);
    for (int i = 0, e = 0; i < n; ++i)
      for (int k = 0; k < degrees[i]; ++k, ++e) {
        mine.push_back(sources[i]);
        mine.push_back(destinations[e]);
        mine.push_back(weighted ? w[std::size_t(e)] : 1);
      }
    std::vector<int> counts(static_cast<std::size_t>(size)), displs(counts.size());
    int count = int(mine.size());
    int code = MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, comm_old);
    if (code != MPI_SUCCESS) fail(call, code, "exchanging the edges failed (error class %d)", code);
    int total = 0;
    for (int i = 0; i < size; ++i) {
      displs[std::size_t(i)] = total;
      total += counts[std::size_t(i)];
    }
    std::vector<int> all(std::size_t(total) + 1);
    code = MPI_Allgatherv(mine.data(), count, MPI_INT, all.data(), counts.data(), displs.data(),
                          MPI_INT, comm_old);
    if (code != MPI_SUCCESS) fail(call, code, "exchanging the edges failed (error class %d)", code);
    // Whether any rank gave weights: the standard asks all or none.
    int any_weights = weighted ? 1 : 0, all_weights = 0;
    MPI_Allreduce(&any_weights, &all_weights, 1, MPI_INT, MPI_LAND, comm_old);
    auto g = std::make_shared<graph_topology>();
    g->kind = MPI_DIST_GRAPH;
    g->weighted = all_weights != 0;
    for (int i = 0; i + 2 < total; i += 3) {
      const int s = all[std::size_t(i)], d = all[std::size_t(i + 1)], wt = all[std::size_t(i + 2)];
      if (d == rank) {
        g->sources.push_back(s);
        g->source_weights.push_back(wt);
      }
      if (s == rank) {
        g->destinations.push_back(d);
        g->destination_weights.push_back(wt);
      }
    }
    *comm_dist_graph = make_graph_comm(call, comm_old, std::move(g));
  });
}

WEFT_MPI_API int MPI_Dist_graph_neighbors_count(MPI_Comm comm, int* indegree, int* outdegree,
                                                int* weighted) {
  return guard(__func__, comm, [&] {
    const graph_topology& g = graph_of("MPI_Dist_graph_neighbors_count", comm, MPI_DIST_GRAPH);
    *indegree = int(g.sources.size());
    *outdegree = int(g.destinations.size());
    *weighted = g.weighted ? 1 : 0;
  });
}

WEFT_MPI_API int MPI_Dist_graph_neighbors(MPI_Comm comm, int maxindegree, int sources[],
                                          int sourceweights[], int maxoutdegree, int destinations[],
                                          int destweights[]) {
  return guard(__func__, comm, [&] {
    const graph_topology& g = graph_of("MPI_Dist_graph_neighbors", comm, MPI_DIST_GRAPH);
    for (int i = 0; i < maxindegree && i < int(g.sources.size()); ++i) {
      sources[i] = g.sources[std::size_t(i)];
      if (g.weighted && sourceweights != MPI_UNWEIGHTED && sourceweights != nullptr)
        sourceweights[i] = g.source_weights[std::size_t(i)];
    }
    for (int i = 0; i < maxoutdegree && i < int(g.destinations.size()); ++i) {
      destinations[i] = g.destinations[std::size_t(i)];
      if (g.weighted && destweights != MPI_UNWEIGHTED && destweights != nullptr)
        destweights[i] = g.destination_weights[std::size_t(i)];
    }
  });
}
