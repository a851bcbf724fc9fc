/* mpi-test comm: communicators, groups, attributes, names and error
 * handlers at any number of ranks.
 *  - dup: same size and ranks, congruent; its messages never match a
 *    receive of the parent (same tag, wildcards) and vice versa;
 *  - split by parity with keys reversing the order; a ring inside each
 *    half; MPI_UNDEFINED gives MPI_COMM_NULL; split_type shared;
 *  - create (the first half) and create_group (the odd ranks), others get
 *    MPI_COMM_NULL; an allgather-like exchange inside each;
 *  - groups: size, rank, translate, union, intersection, difference,
 *    incl, excl, range_incl, range_excl, compare, MPI_GROUP_EMPTY;
 *  - attributes: a keyval copied by dup through MPI_COMM_DUP_FN, one with
 *    a copy function that refuses, delete functions run by free and by
 *    delete_attr; MPI_TAG_UB on MPI_COMM_WORLD;
 *  - names; MPI_ERRORS_RETURN (a bad rank returns MPI_ERR_RANK, a freed
 *    communicator MPI_ERR_COMM), a handler of the program's, and
 *    MPI_Comm_call_errhandler;
 *  - 300 dup/free cycles (handles reused, contexts never).
 * Every failed check prints a line; rank 0 prints "comm: ok N ranks". */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

/* The ranks of a process share its globals: what a rank counts is
 * indexed by its world rank. */
#define MAX_RANKS 256
static int failures[MAX_RANKS], handler_calls[MAX_RANKS], handler_code[MAX_RANKS];
#define CHECK(cond, ...)                       \
  do {                                         \
    if (!(cond)) {                             \
      ++failures[rank];                        \
      printf("comm: FAIL on rank %d: ", rank); \
      printf(__VA_ARGS__);                     \
      printf("\n");                            \
    }                                          \
  } while (0)

/* Adds the attribute's value to the int `extra` points to (the rank's). */
static int count_delete(MPI_Comm comm, int key, void* value, void* extra) {
  (void)comm;
  (void)key;
  *(int*)extra += (int)(long)value;
  return MPI_SUCCESS;
}

static int refuse_copy(MPI_Comm comm, int key, void* extra, void* in, void* out, int* flag) {
  (void)comm;
  (void)key;
  (void)extra;
  (void)in;
  (void)out;
  *flag = 0;
  return MPI_SUCCESS;
}

static void my_handler(MPI_Comm* comm, int* code, ...) {
  (void)comm;
  int me;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  ++handler_calls[me];
  handler_code[me] = *code;
}

/* Every rank of `comm` sends its world rank to every other; checks that
 * rank r of `comm` is world rank expect[r]. */
static void exchange(MPI_Comm comm, const int* expect, const char* what) {
  int n, r;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &r);
  int world, rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &world);
  rank = world;
  CHECK(expect[r] == world, "%s: my rank %d should be world rank %d, I am %d", what, r, expect[r],
        world);
  for (int i = 0; i < n; ++i)
    if (i != r) MPI_Send(&world, 1, MPI_INT, i, 9, comm);
  for (int i = 0; i < n; ++i) {
    if (i == r) continue;
    int got = -1;
    MPI_Status st;
    MPI_Recv(&got, 1, MPI_INT, i, 9, comm, &st);
    CHECK(got == expect[i] && st.MPI_SOURCE == i, "%s: from rank %d got world %d (expected %d)",
          what, i, got, expect[i]);
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int size, rank, deletes = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int expect[MAX_RANKS];
  if (size > MAX_RANKS) {
    printf("comm: FAIL: at most %d ranks\n", MAX_RANKS);
    return 1;
  }

  /* dup */
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  int n = -1, r = -1, cmp = -1;
  MPI_Comm_size(dup, &n);
  MPI_Comm_rank(dup, &r);
  CHECK(n == size && r == rank, "dup: size %d rank %d", n, r);
  MPI_Comm_compare(MPI_COMM_WORLD, dup, &cmp);
  CHECK(cmp == MPI_CONGRUENT, "compare(world, dup) = %d", cmp);
  MPI_Comm_compare(dup, dup, &cmp);
  CHECK(cmp == MPI_IDENT, "compare(dup, dup) = %d", cmp);
  {
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int a = 100 + rank, b = 200 + rank, got1 = -1, got2 = -1;
    MPI_Send(&a, 1, MPI_INT, next, 5, dup);
    MPI_Send(&b, 1, MPI_INT, next, 5, MPI_COMM_WORLD);
    MPI_Recv(&got1, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(&got2, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, dup, MPI_STATUS_IGNORE);
    CHECK(got1 == 200 + prev && got2 == 100 + prev, "dup contexts mixed: world got %d, dup %d",
          got1, got2);
  }

  /* split: parity, reversed order */
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
  {
    int k = 0;
    for (int w = size - 1; w >= 0; --w)
      if (w % 2 == rank % 2) expect[k++] = w;
    MPI_Comm_size(half, &n);
    CHECK(n == k, "split: size %d, expected %d", n, k);
    exchange(half, expect, "split");
    MPI_Group g;
    MPI_Comm_group(half, &g);
    int gs = -1, gr = -1;
    MPI_Group_size(g, &gs);
    MPI_Group_rank(g, &gr);
    MPI_Comm_rank(half, &r);
    CHECK(gs == k && gr == r, "group of split: size %d rank %d", gs, gr);
    MPI_Group_free(&g);
    CHECK(g == MPI_GROUP_NULL, "MPI_Group_free left %d", g);
  }
  MPI_Comm none;
  MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 1, 0, &none);
  if (rank == 0)
    CHECK(none == MPI_COMM_NULL, "split with MPI_UNDEFINED gave %d", none);
  else {
    MPI_Comm_size(none, &n);
    CHECK(n == size - 1, "split without rank 0: size %d", n);
    MPI_Comm_free(&none);
  }
  MPI_Comm shared;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared);
  MPI_Comm_size(shared, &n);
  CHECK(n >= 1 && n <= size, "split_type shared: size %d", n);
  MPI_Comm_free(&shared);

  /* groups */
  MPI_Group world_group, first, rest, odd, u, in, diff, ranged, ranged_out;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  int half_n = (size + 1) / 2, ranks[MAX_RANKS];
  for (int i = 0; i < half_n; ++i) ranks[i] = i;
  MPI_Group_incl(world_group, half_n, ranks, &first);
  MPI_Group_excl(world_group, half_n, ranks, &rest);
  int range[1][3] = {{1, size - 1, 2}};
  MPI_Group_range_incl(world_group, size > 1 ? 1 : 0, range, &odd);
  MPI_Group_union(first, rest, &u);
  MPI_Group_compare(u, world_group, &cmp);
  CHECK(cmp == MPI_IDENT, "union(first, rest) vs world: %d", cmp);
  MPI_Group_union(rest, first, &u);
  MPI_Group_compare(u, world_group, &cmp);
  CHECK(cmp == (size > 1 && half_n < size ? MPI_SIMILAR : MPI_IDENT), "union(rest, first): %d",
        cmp);
  MPI_Group_intersection(first, odd, &in);
  MPI_Group_difference(world_group, first, &diff);
  MPI_Group_compare(diff, rest, &cmp);
  CHECK(cmp == MPI_IDENT || (size == 1 && diff == MPI_GROUP_EMPTY), "difference vs excl: %d", cmp);
  MPI_Group_size(in, &n);
  CHECK(n == half_n / 2, "intersection(first half, odd): size %d, expected %d", n, half_n / 2);
  MPI_Group_range_excl(world_group, size > 1 ? 1 : 0, range, &ranged_out);
  MPI_Group_size(ranged_out, &n);
  CHECK(n == (size + 1) / 2, "range_excl of odd ranks: size %d", n);
  {
    int from[2] = {0, size - 1}, to[2] = {-5, -5};
    MPI_Group_translate_ranks(world_group, 2, from, rest, to);
    CHECK(to[0] == MPI_UNDEFINED, "translate 0 into rest: %d", to[0]);
    CHECK(size == 1 || to[1] == size - 1 - half_n, "translate %d into rest: %d", size - 1, to[1]);
  }
  MPI_Group_incl(world_group, 0, ranks, &ranged);
  CHECK(ranged == MPI_GROUP_EMPTY, "an empty incl is %d, not MPI_GROUP_EMPTY", ranged);
  MPI_Group_rank(odd, &r);
  CHECK(r == (rank % 2 ? rank / 2 : MPI_UNDEFINED), "rank in odd: %d", r);

  /* create (the first half) and create_group (the odd ranks) */
  MPI_Comm made;
  MPI_Comm_create(MPI_COMM_WORLD, first, &made);
  if (rank < half_n) {
    for (int i = 0; i < half_n; ++i) expect[i] = i;
    exchange(made, expect, "create");
    MPI_Comm_free(&made);
  } else
    CHECK(made == MPI_COMM_NULL, "create: a rank outside the group got %d", made);
  if (rank % 2) {
    MPI_Comm odd_comm;
    MPI_Comm_create_group(MPI_COMM_WORLD, odd, 77, &odd_comm);
    int k = 0;
    for (int w = 1; w < size; w += 2) expect[k++] = w;
    exchange(odd_comm, expect, "create_group");
    MPI_Comm_free(&odd_comm);
  }
  MPI_Group_free(&world_group);
  MPI_Group_free(&first);
  MPI_Group_free(&rest);
  MPI_Group_free(&odd);
  MPI_Group_free(&in);
  MPI_Group_free(&diff);
  MPI_Group_free(&ranged_out);

  /* attributes */
  int copied_key, refused_key, flag = 0;
  void* value = 0;
  MPI_Comm_create_keyval(MPI_COMM_DUP_FN, count_delete, &copied_key, &deletes);
  MPI_Comm_create_keyval(refuse_copy, count_delete, &refused_key, &deletes);
  MPI_Comm_set_attr(dup, copied_key, (void*)1L);
  MPI_Comm_set_attr(dup, refused_key, (void*)10L);
  MPI_Comm dup2;
  MPI_Comm_dup(dup, &dup2);
  MPI_Comm_get_attr(dup2, copied_key, &value, &flag);
  CHECK(flag == 1 && value == (void*)1L, "dup's copy of an attribute: flag %d value %p", flag,
        value);
  MPI_Comm_get_attr(dup2, refused_key, &value, &flag);
  CHECK(flag == 0, "an attribute whose copy function refused was copied");
  MPI_Comm_free(&dup2); /* deletes the copied one: +1 */
  CHECK(deletes == 1 && dup2 == MPI_COMM_NULL, "after freeing dup2: %d deletes", deletes);
  MPI_Comm_delete_attr(dup, refused_key);          /* +10 */
  MPI_Comm_set_attr(dup, copied_key, (void*)100L); /* replaces 1: +1 */
  CHECK(deletes == 12, "after delete_attr and set_attr: %d deletes", deletes);
  int* tag_ub = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
  CHECK(flag == 1 && tag_ub != 0 && *tag_ub >= 32767, "MPI_TAG_UB: flag %d", flag);

  /* names */
  char name[MPI_MAX_OBJECT_NAME];
  int len = 0;
  MPI_Comm_get_name(MPI_COMM_WORLD, name, &len);
  CHECK(strcmp(name, "MPI_COMM_WORLD") == 0 && len == 14, "world's name: %s", name);
  MPI_Comm_set_name(dup, "my dup");
  MPI_Comm_get_name(dup, name, &len);
  CHECK(strcmp(name, "my dup") == 0, "dup's name: %s", name);

  /* error handlers */
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  int one = 1;
  int code = MPI_Send(&one, 1, MPI_INT, size + 3, 0, dup);
  CHECK(code == MPI_ERR_RANK, "a bad rank under MPI_ERRORS_RETURN returned %d", code);
  MPI_Errhandler h;
  MPI_Comm_create_errhandler(my_handler, &h);
  MPI_Comm_set_errhandler(dup, h);
  code = MPI_Send(&one, 1, MPI_INT, 0, -7, dup);
  CHECK(handler_calls[rank] == 1 && handler_code[rank] == MPI_ERR_TAG && code == MPI_ERR_TAG,
        "the program's handler: %d call(s), code %d, returned %d", handler_calls[rank],
        handler_code[rank], code);
  MPI_Comm_call_errhandler(dup, MPI_ERR_OTHER);
  CHECK(handler_calls[rank] == 2 && handler_code[rank] == MPI_ERR_OTHER,
        "call_errhandler: %d, code %d", handler_calls[rank], handler_code[rank]);
  MPI_Errhandler got;
  MPI_Comm_get_errhandler(dup, &got);
  CHECK(got == h, "get_errhandler: %d, expected %d", got, h);
  MPI_Errhandler_free(&h);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm freed = dup;
  MPI_Comm_free(&dup); /* deletes the 100: +100 */
  CHECK(deletes == 112, "after freeing dup: %d deletes", deletes);
  code = MPI_Comm_size(freed, &n);
  CHECK(code == MPI_ERR_COMM, "a freed communicator returned %d", code);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  MPI_Comm_free_keyval(&copied_key);
  MPI_Comm_free_keyval(&refused_key);
  CHECK(copied_key == MPI_KEYVAL_INVALID, "free_keyval left %d", copied_key);

  /* many dup/free cycles, each used once */
  for (int i = 0; i < 300; ++i) {
    MPI_Comm c;
    MPI_Comm_dup(i % 2 ? half : MPI_COMM_WORLD, &c);
    int cs, cr, token = i, got_token = -1;
    MPI_Comm_size(c, &cs);
    MPI_Comm_rank(c, &cr);
    MPI_Sendrecv(&token, 1, MPI_INT, (cr + 1) % cs, 1, &got_token, 1, MPI_INT, (cr + cs - 1) % cs,
                 1, c, MPI_STATUS_IGNORE);
    CHECK(got_token == i, "cycle %d: got %d", i, got_token);
    MPI_Comm_free(&c);
  }
  MPI_Comm_free(&half);

  int all_ok = failures[rank];
  /* Failures of every rank reach rank 0 (no collectives needed). */
  if (rank == 0) {
    for (int i = 1; i < size; ++i) {
      int f = 0;
      MPI_Recv(&f, 1, MPI_INT, i, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      all_ok += f;
    }
    if (all_ok == 0) printf("comm: ok %d ranks\n", size);
  } else {
    MPI_Send(&failures[rank], 1, MPI_INT, 0, 99, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return failures[rank] != 0;
}
