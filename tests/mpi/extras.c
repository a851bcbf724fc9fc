/* mpi-test extras: the predefined complex types and MPI_CXX_BOOL, datatype
 * names, MPI_Type_match_size, MPI_Status_set_elements_x, MPI_Cart_map,
 * MPI_Graph_map and the error classes, codes and strings a program adds,
 * at any number of ranks.
 *  - complex: a ring of MPI_C_DOUBLE_COMPLEX values; allreduce MPI_SUM and
 *    MPI_PROD over float, double and long double complex (exact values);
 *    MPI_CXX_BOOL with MPI_LAND and MPI_LOR; MPI_MAX on a complex type is
 *    MPI_ERR_OP; sizes from MPI_Type_size;
 *  - names: predefined ones by default, MPI_Type_set_name on a derived and
 *    a predefined type, a derived type without one is "", and a freed
 *    type's name does not pass to the next type made;
 *  - attributes on datatypes: MPI_TYPE_DUP_FN and a copy function of the
 *    program's run at MPI_Type_dup, MPI_TYPE_NULL_COPY_FN keeps one back,
 *    delete functions run at MPI_Type_delete_attr, at replacement and at
 *    MPI_Type_free; a communicator's keyval is refused (MPI_ERR_KEYVAL);
 *  - MPI_Type_match_size for each class, a size no type has (MPI_ERR_ARG);
 *  - MPI_Status_set_elements_x then MPI_Get_elements_x;
 *  - MPI_Cart_map and MPI_Graph_map: the rank itself inside, MPI_UNDEFINED
 *    outside;
 *  - MPI_Comm_idup: rank 1 starts it and then sends to rank 0, which
 *    receives before it starts its own (rank 1 waits for rank 0's part of
 *    the dup: a blocking dup would deadlock there); the new communicator
 *    is congruent, carries a ring of its own
 *    and an attribute copied by MPI_COMM_DUP_FN;
 *  - MPI_Add_error_class, _code, _string: MPI_Error_class and
 *    MPI_Error_string on them, MPI_LASTUSEDCODE, a handler of the
 *    program's called with an added code.
 * -DREFERENCE_MPI leaves out what Open MPI 4.1 does otherwise (noted
 * there), so that the test can be checked under it.
 * Every failed check prints a line; rank 0 prints "extras: ok N ranks". */
#include <complex.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define TEST_NAME "extras"
#define MAX_RANKS 256
static int failures[MAX_RANKS], handled_code[MAX_RANKS];
#include "tally.h"

static void on_error(MPI_Comm* comm, int* code, ...) {
  (void)comm;
  int r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  handled_code[r] = *code;
}

/* Per world rank: the ranks of a process share globals. */
static int deletes[MAX_RANKS], copies[MAX_RANKS];

static int count_delete(MPI_Datatype t, int key, void* value, void* extra) {
  (void)t;
  (void)key;
  (void)extra;
  ++deletes[*(int*)value];
  return MPI_SUCCESS;
}

/* Copies, and counts: the value is a pointer to the rank's world rank. */
static int count_copy(MPI_Datatype t, int key, void* extra, void* in, void* out, int* flag) {
  (void)t;
  (void)key;
  (void)extra;
  ++copies[*(int*)in];
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}

static int name_is(MPI_Datatype t, const char* want) {
  char name[MPI_MAX_OBJECT_NAME];
  int len = -1;
  MPI_Type_get_name(t, name, &len);
  return strcmp(name, want) == 0 && len == (int)strlen(want);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  /* ---- complex types and C++'s bool ---- */
  int s = 0;
  MPI_Type_size(MPI_C_FLOAT_COMPLEX, &s);
  CHECK(s == (int)sizeof(float _Complex), "MPI_C_FLOAT_COMPLEX size %d", s);
  MPI_Type_size(MPI_C_DOUBLE_COMPLEX, &s);
  CHECK(s == (int)sizeof(double _Complex), "MPI_C_DOUBLE_COMPLEX size %d", s);
  MPI_Type_size(MPI_C_LONG_DOUBLE_COMPLEX, &s);
  CHECK(s == (int)sizeof(long double _Complex), "MPI_C_LONG_DOUBLE_COMPLEX size %d", s);
  MPI_Type_size(MPI_CXX_DOUBLE_COMPLEX, &s);
  CHECK(s == (int)sizeof(double _Complex), "MPI_CXX_DOUBLE_COMPLEX size %d", s);
  MPI_Type_size(MPI_CXX_BOOL, &s);
  CHECK(s == 1, "MPI_CXX_BOOL size %d", s);

  double _Complex out[2] = {rank + 2.0 * I, -rank + 0.5 * I}, in[2] = {0, 0};
  MPI_Sendrecv(out, 2, MPI_C_DOUBLE_COMPLEX, (rank + 1) % size, 3, in, 2, MPI_C_DOUBLE_COMPLEX,
               (rank + size - 1) % size, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  const int left = (rank + size - 1) % size;
  CHECK(creal(in[0]) == left && cimag(in[0]) == 2.0 && creal(in[1]) == -left && cimag(in[1]) == 0.5,
        "ring of double complex: got (%g,%g) (%g,%g) from rank %d", creal(in[0]), cimag(in[0]),
        creal(in[1]), cimag(in[1]), left);

  /* Sum of (r + 1i) over the ranks: n(n-1)/2 + n i. Product of i (each
   * rank's): i^n. */
  float _Complex fs = (float)rank + 1.0f * I, fsum = 0;
  MPI_Allreduce(&fs, &fsum, 1, MPI_C_FLOAT_COMPLEX, MPI_SUM, MPI_COMM_WORLD);
  CHECK(crealf(fsum) == size * (size - 1) / 2.0f && cimagf(fsum) == (float)size,
        "float complex sum (%g,%g)", crealf(fsum), cimagf(fsum));
  double _Complex di = I, dprod = 0;
  MPI_Allreduce(&di, &dprod, 1, MPI_C_DOUBLE_COMPLEX, MPI_PROD, MPI_COMM_WORLD);
  const double want_re[4] = {1, 0, -1, 0}, want_im[4] = {0, 1, 0, -1};
  CHECK(creal(dprod) == want_re[size % 4] && cimag(dprod) == want_im[size % 4],
        "double complex product of i over %d ranks: (%g,%g)", size, creal(dprod), cimag(dprod));
  long double _Complex ls = 1.0L + (long double)rank * I, lsum = 0;
  MPI_Allreduce(&ls, &lsum, 1, MPI_C_LONG_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD);
  CHECK(creall(lsum) == (long double)size && cimagl(lsum) == size * (size - 1) / 2.0L,
        "long double complex sum (%Lg,%Lg)", creall(lsum), cimagl(lsum));
  double _Complex dmax = 0;
  int rc = MPI_Allreduce(&di, &dmax, 1, MPI_C_DOUBLE_COMPLEX, MPI_MAX, MPI_COMM_WORLD);
  int cls = -1;
  MPI_Error_class(rc, &cls);
  CHECK(cls == MPI_ERR_OP, "MPI_MAX on double complex gave class %d", cls);

  _Bool mine = rank != 1, all = 0, any = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_CXX_BOOL, MPI_LAND, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &any, 1, MPI_CXX_BOOL, MPI_LOR, MPI_COMM_WORLD);
  CHECK(all == (size == 1) && any == 1, "MPI_CXX_BOOL: land %d lor %d", (int)all, (int)any);

  /* ---- names ---- */
  CHECK(name_is(MPI_INT, "MPI_INT"), "MPI_INT's name");
  CHECK(name_is(MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX"), "MPI_C_DOUBLE_COMPLEX's name");
  MPI_Datatype pair, again;
  MPI_Type_contiguous(2, MPI_DOUBLE, &pair);
  CHECK(name_is(pair, ""), "a derived type has no name");
  MPI_Type_set_name(pair, "pair of doubles");
  CHECK(name_is(pair, "pair of doubles"), "the derived type's name");
  MPI_Type_free(&pair);
  MPI_Type_contiguous(3, MPI_DOUBLE, &again);
  CHECK(name_is(again, ""), "a new type got a freed type's name");
  MPI_Type_free(&again);
#ifndef REFERENCE_MPI
  /* Renaming a predefined type is the rank's own affair in weft (in Open
   * MPI it renames it for the whole process). */
  MPI_Type_set_name(MPI_FLOAT, "single");
  CHECK(name_is(MPI_FLOAT, "single"), "MPI_FLOAT renamed");
#endif

  /* ---- attributes on datatypes ---- */
  {
    int dup_key, mine_key, null_key, comm_key, *got = NULL, found = 0;
    static int ranks_of[MAX_RANKS]; /* each rank's value: its rank */
    ranks_of[rank] = rank;
    void* v = &ranks_of[rank];
    MPI_Type_create_keyval(MPI_TYPE_DUP_FN, count_delete, &dup_key, NULL);
    MPI_Type_create_keyval(count_copy, count_delete, &mine_key, NULL);
    MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, count_delete, &null_key, NULL);
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &comm_key, NULL);
    MPI_Datatype a, b;
    MPI_Type_contiguous(4, MPI_INT, &a);
    MPI_Type_set_attr(a, dup_key, v);
    MPI_Type_set_attr(a, mine_key, v);
    MPI_Type_set_attr(a, null_key, v);
    MPI_Type_set_attr(a, null_key, v); /* replaced: one delete */
    CHECK(deletes[rank] == 1, "replacing an attribute ran %d deletes", deletes[rank]);
    MPI_Type_dup(a, &b);
    CHECK(copies[rank] == 1, "MPI_Type_dup ran %d copy functions", copies[rank]);
    MPI_Type_get_attr(b, dup_key, &got, &found);
    CHECK(found && got == v, "MPI_TYPE_DUP_FN's attribute on the dup: %d", found);
    MPI_Type_get_attr(b, mine_key, &got, &found);
    CHECK(found && got == v, "the copied attribute on the dup: %d", found);
    MPI_Type_get_attr(b, null_key, &got, &found);
    CHECK(!found, "MPI_TYPE_NULL_COPY_FN's attribute reached the dup");
    MPI_Type_delete_attr(a, mine_key);
    CHECK(deletes[rank] == 2, "MPI_Type_delete_attr: %d deletes", deletes[rank]);
    MPI_Type_free(&a); /* dup_key and null_key: two more */
#ifndef REFERENCE_MPI
    /* At once in weft; Open MPI 4.1 waits until the dup, which refers to
     * the first, is freed too. */
    CHECK(deletes[rank] == 4, "MPI_Type_free of the first: %d deletes", deletes[rank]);
#endif
    MPI_Type_free(&b); /* dup_key and mine_key */
    CHECK(deletes[rank] == 6, "MPI_Type_free of the dup: %d deletes", deletes[rank]);
    MPI_Datatype c;
    MPI_Type_contiguous(2, MPI_INT, &c);
#ifndef REFERENCE_MPI
    /* (Open MPI 4.1 says MPI_ERR_OTHER.) */
    rc = MPI_Type_set_attr(c, comm_key, v);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_KEYVAL, "a communicator's keyval on a type gave class %d", cls);
#endif
    MPI_Type_free(&c);
    MPI_Type_free_keyval(&dup_key);
    MPI_Type_free_keyval(&mine_key);
    MPI_Type_free_keyval(&null_key);
    MPI_Comm_free_keyval(&comm_key);
  }

  /* ---- MPI_Type_match_size ---- */
  MPI_Datatype t = MPI_DATATYPE_NULL;
  MPI_Type_match_size(MPI_TYPECLASS_REAL, 8, &t);
  MPI_Type_size(t, &s);
  CHECK(s == 8, "real of 8 bytes has size %d", s);
  MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 4, &t);
  MPI_Type_size(t, &s);
  CHECK(s == 4, "integer of 4 bytes has size %d", s);
  MPI_Type_match_size(MPI_TYPECLASS_COMPLEX, 16, &t);
  MPI_Type_size(t, &s);
  CHECK(s == 16, "complex of 16 bytes has size %d", s);
  rc = MPI_Type_match_size(MPI_TYPECLASS_REAL, 3, &t);
  MPI_Error_class(rc, &cls);
  CHECK(cls == MPI_ERR_ARG, "a real of 3 bytes gave class %d", cls);

  /* ---- MPI_Status_set_elements_x ---- */
  MPI_Status st;
  MPI_Count n = -1;
  MPI_Status_set_elements_x(&st, MPI_INT, 5);
  MPI_Get_elements_x(&st, MPI_INT, &n);
  CHECK(n == 5, "set_elements_x then get_elements_x: %lld", n);

#ifndef REFERENCE_MPI
  /* ---- MPI_Cart_map, MPI_Graph_map (Open MPI 4.1 gives a rank outside
   * the grid its own rank, not MPI_UNDEFINED as the standard says) ---- */
  const int dims[1] = {size > 1 ? size - 1 : 1}, periods[1] = {0};
  int newrank = -5;
  MPI_Cart_map(MPI_COMM_WORLD, 1, dims, periods, &newrank);
  CHECK(newrank == (rank < dims[0] ? rank : MPI_UNDEFINED), "MPI_Cart_map gave %d", newrank);
  const int index[1] = {0}, edges[1] = {0};
  MPI_Graph_map(MPI_COMM_WORLD, 1, index, edges, &newrank);
  CHECK(newrank == (rank == 0 ? 0 : MPI_UNDEFINED), "MPI_Graph_map gave %d", newrank);
#endif

  /* ---- MPI_Comm_idup ---- */
  {
    int key = MPI_KEYVAL_INVALID, value = 7, *seen = NULL, found = 0;
    MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
    MPI_Comm base;
    MPI_Comm_dup(MPI_COMM_WORLD, &base);
    MPI_Comm_set_attr(base, key, &value);
    MPI_Comm copy = MPI_COMM_NULL;
    MPI_Request req = MPI_REQUEST_NULL;
    int token = 0;
    if (rank == 0 && size > 1) MPI_Recv(&token, 1, MPI_INT, 1, 11, base, MPI_STATUS_IGNORE);
    MPI_Comm_idup(base, &copy, &req);
    if (rank == 1) {
      token = 42;
      MPI_Send(&token, 1, MPI_INT, 0, 11, base);
    }
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    CHECK(rank != 0 || size == 1 || token == 42, "token before idup: %d", token);
    int cmp = -1;
    MPI_Comm_compare(base, copy, &cmp);
    CHECK(cmp == MPI_CONGRUENT, "idup's communicator compares %d", cmp);
    MPI_Comm_get_attr(copy, key, &seen, &found);
    CHECK(found && seen == &value, "idup copied the attribute: found %d", found);
    int cr, cs, got = -1;
    MPI_Comm_rank(copy, &cr);
    MPI_Comm_size(copy, &cs);
    MPI_Sendrecv(&cr, 1, MPI_INT, (cr + 1) % cs, 12, &got, 1, MPI_INT, (cr + cs - 1) % cs, 12, copy,
                 MPI_STATUS_IGNORE);
    CHECK(got == (cr + cs - 1) % cs, "ring on idup's communicator: %d", got);
    MPI_Comm_free(&copy);
    MPI_Comm_free(&base);
    MPI_Comm_free_keyval(&key);
  }

  /* ---- error classes, codes and strings the program adds ---- */
  int my_class = -1, my_code = -1, flag = 0, *last = NULL;
  MPI_Add_error_class(&my_class);
  MPI_Add_error_code(my_class, &my_code);
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &last, &flag);
  CHECK(
      flag && last != NULL && *last >= my_code && my_code > my_class && my_class > MPI_ERR_LASTCODE,
      "class %d, code %d, MPI_LASTUSEDCODE %d", my_class, my_code, last ? *last : -1);
  cls = -1;
  MPI_Error_class(my_code, &cls);
  CHECK(cls == my_class, "the added code's class: %d, expected %d", cls, my_class);
#ifndef REFERENCE_MPI
  /* A class is its own class (Open MPI 4.1 says MPI_ERR_UNKNOWN). */
  MPI_Error_class(my_class, &cls);
  CHECK(cls == my_class, "the added class's class: %d", cls);
#endif
  char text[MPI_MAX_ERROR_STRING];
  int len = -1;
  MPI_Error_string(my_code, text, &len);
  CHECK(len == 0 && text[0] == '\0', "no string yet: \"%s\"", text);
  MPI_Add_error_string(my_code, "the widget broke");
  MPI_Error_string(my_code, text, &len);
  CHECK(strcmp(text, "the widget broke") == 0 && len == 16, "string \"%s\"", text);
  int rc_bad = MPI_Add_error_string(MPI_ERR_RANK, "no");
  MPI_Error_class(rc_bad, &cls);
  CHECK(cls == MPI_ERR_ARG, "a predefined class's string changed: class %d", cls);
  int code_of_predefined = -1;
  MPI_Add_error_code(MPI_ERR_OTHER, &code_of_predefined);
  MPI_Error_class(code_of_predefined, &cls);
  CHECK(cls == MPI_ERR_OTHER, "a code of MPI_ERR_OTHER is of class %d", cls);
  MPI_Errhandler eh;
  MPI_Comm_create_errhandler(on_error, &eh);
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_set_errhandler(dup, eh);
  MPI_Comm_call_errhandler(dup, my_code);
  CHECK(handled_code[rank] == my_code, "the handler got code %d", handled_code[rank]);
  MPI_Comm_free(&dup);
  MPI_Errhandler_free(&eh);

  const int code = tally(TEST_NAME, rank, size, failures[rank]);
  MPI_Finalize();
  return code;
}
