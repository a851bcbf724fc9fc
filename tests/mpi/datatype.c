/* mpi-test datatype: derived datatypes at any number of ranks.
 *  - every constructor (contiguous, vector, hvector, indexed, hindexed,
 *    indexed_block, hindexed_block, struct, resized, dup): size, lb,
 *    extent, true lb and extent, envelope and contents;
 *  - nested types: a vector of structs, an indexed of vectors, a struct
 *    of a resized struct;
 *  - pack and unpack round trips, MPI_PACKED messages, Pack_size;
 *  - around the ring (each rank sends to the next): a matrix column (a
 *    vector) received as contiguous ints and back, arrays of structs with
 *    a resized extent, an indexed of vectors, a struct of absolute
 *    addresses from MPI_BOTTOM; every byte of the receive buffer is
 *    checked, the gaps the type skips included;
 *  - a short message: Get_count gives MPI_UNDEFINED, Get_elements the
 *    values that came, and only those are written;
 *  - a receive whose type is freed before the message comes;
 *  - every rank makes and frees types while the others do (one table).
 * Every failed check prints a line; rank 0 prints "datatype: ok N ranks". */
#include <mpi.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define CHECK(cond, ...)                           \
  do {                                             \
    if (!(cond)) {                                 \
      ++*fails;                                    \
      printf("datatype: FAIL on rank %d: ", rank); \
      printf(__VA_ARGS__);                         \
      printf("\n");                                \
      fflush(stdout);                              \
    }                                              \
  } while (0)

static void bounds(int rank, int* fails, const char* what, MPI_Datatype t, int size, MPI_Aint lb,
                   MPI_Aint extent, MPI_Aint true_lb, MPI_Aint true_extent) {
  int s = -1;
  MPI_Aint l = -1, e = -1, tl = -1, te = -1;
  MPI_Count sx = -1, lx = -1, ex = -1;
  MPI_Type_size(t, &s);
  MPI_Type_size_x(t, &sx);
  MPI_Type_get_extent(t, &l, &e);
  MPI_Type_get_extent_x(t, &lx, &ex);
  MPI_Type_get_true_extent(t, &tl, &te);
  CHECK(s == size && sx == size, "%s: size %d (%lld), expected %d", what, s, sx, size);
  CHECK(l == lb && e == extent && lx == lb && ex == extent,
        "%s: lb %ld extent %ld, expected %ld %ld", what, l, e, lb, extent);
  CHECK(tl == true_lb && te == true_extent, "%s: true lb %ld extent %ld, expected %ld %ld", what,
        tl, te, true_lb, true_extent);
}

struct particle {
  char tag;
  double x;
  int ids[2];
};

/* MPI_Type_create_struct of struct particle, resized to its C size. */
static MPI_Datatype particle_type(void) {
  int lengths[3] = {1, 1, 2};
  MPI_Aint disps[3] = {offsetof(struct particle, tag), offsetof(struct particle, x),
                       offsetof(struct particle, ids)};
  MPI_Datatype types[3] = {MPI_CHAR, MPI_DOUBLE, MPI_INT}, t, r;
  MPI_Type_create_struct(3, lengths, disps, types, &t);
  MPI_Type_create_resized(t, 0, sizeof(struct particle), &r);
  MPI_Type_free(&t);
  MPI_Type_commit(&r);
  return r;
}

static void constructors(int rank, int* fails) {
  MPI_Datatype t;
  MPI_Type_contiguous(3, MPI_INT, &t);
  bounds(rank, fails, "contiguous", t, 12, 0, 12, 0, 12);
  MPI_Type_free(&t);
  CHECK(t == MPI_DATATYPE_NULL, "MPI_Type_free left %d", t);
  MPI_Type_vector(3, 2, 4, MPI_DOUBLE, &t);
  bounds(rank, fails, "vector", t, 48, 0, 80, 0, 80);
  int ni, na, nt, comb;
  MPI_Type_get_envelope(t, &ni, &na, &nt, &comb);
  CHECK(comb == MPI_COMBINER_VECTOR && ni == 3 && na == 0 && nt == 1, "vector envelope");
  int ints[3];
  MPI_Datatype inner;
  MPI_Type_get_contents(t, 3, 0, 1, ints, NULL, &inner);
  CHECK(ints[0] == 3 && ints[1] == 2 && ints[2] == 4 && inner == MPI_DOUBLE, "vector contents");
  MPI_Type_free(&t);
  MPI_Type_vector(2, 1, -3, MPI_INT, &t); /* a negative stride */
  bounds(rank, fails, "vector stride -3", t, 8, -12, 16, -12, 16);
  MPI_Type_free(&t);
  MPI_Type_create_hvector(2, 1, 20, MPI_INT, &t);
  bounds(rank, fails, "hvector", t, 8, 0, 24, 0, 24);
  MPI_Type_free(&t);
  MPI_Type_hvector(3, 2, 10, MPI_SHORT, &t);
  bounds(rank, fails, "hvector (MPI-1)", t, 12, 0, 24, 0, 24);
  MPI_Type_free(&t);
  int lens[3] = {1, 2, 1}, disps[3] = {5, 0, 9};
  MPI_Type_indexed(3, lens, disps, MPI_INT, &t);
  bounds(rank, fails, "indexed", t, 16, 0, 40, 0, 40);
  MPI_Type_free(&t);
  int lens2[2] = {2, 1}, disps2[2] = {3, 7};
  MPI_Type_indexed(2, lens2, disps2, MPI_INT, &t);
  bounds(rank, fails, "indexed from 3", t, 12, 12, 20, 12, 20);
  MPI_Type_free(&t);
  int ones[2] = {1, 1};
  MPI_Aint hdisps[2] = {16, 4};
  MPI_Type_create_hindexed(2, ones, hdisps, MPI_SHORT, &t);
  bounds(rank, fails, "hindexed", t, 4, 4, 14, 4, 14);
  MPI_Type_free(&t);
  int bdisps[3] = {0, 4, 8};
  MPI_Type_create_indexed_block(3, 2, bdisps, MPI_FLOAT, &t);
  bounds(rank, fails, "indexed_block", t, 24, 0, 40, 0, 40);
  MPI_Type_free(&t);
  MPI_Aint hbdisps[2] = {0, 40};
  MPI_Type_create_hindexed_block(2, 3, hbdisps, MPI_CHAR, &t);
  bounds(rank, fails, "hindexed_block", t, 6, 0, 43, 0, 43);
  MPI_Type_free(&t);

  /* A struct's extent is its C size (padding to its alignment). */
  int slens[3] = {1, 1, 2};
  MPI_Aint sdisps[3] = {offsetof(struct particle, tag), offsetof(struct particle, x),
                        offsetof(struct particle, ids)};
  MPI_Datatype stypes[3] = {MPI_CHAR, MPI_DOUBLE, MPI_INT};
  MPI_Type_create_struct(3, slens, sdisps, stypes, &t);
  bounds(rank, fails, "struct", t, 17, 0, (MPI_Aint)sizeof(struct particle), 0,
         (MPI_Aint)offsetof(struct particle, ids) + 8);
  MPI_Type_get_envelope(t, &ni, &na, &nt, &comb);
  CHECK(comb == MPI_COMBINER_STRUCT && ni == 4 && na == 3 && nt == 3, "struct envelope");
  MPI_Type_free(&t);

  struct padded {
    double d;
    char c;
  };
  int plens[2] = {1, 1};
  MPI_Aint pdisps[2] = {offsetof(struct padded, d), offsetof(struct padded, c)};
  MPI_Datatype ptypes[2] = {MPI_DOUBLE, MPI_CHAR};
  MPI_Type_create_struct(2, plens, pdisps, ptypes, &t);
  bounds(rank, fails, "struct {double; char}", t, 9, 0, (MPI_Aint)sizeof(struct padded), 0, 9);
  MPI_Type_free(&t);

  MPI_Type_create_resized(MPI_INT, -4, 12, &t);
  bounds(rank, fails, "resized int", t, 4, -4, 12, 0, 4);
  MPI_Aint ext = 0, lb = 0, ub = 0;
  MPI_Type_extent(t, &ext);
  MPI_Type_lb(t, &lb);
  MPI_Type_ub(t, &ub);
  CHECK(ext == 12 && lb == -4 && ub == 8, "MPI-1 extent %ld lb %ld ub %ld", ext, lb, ub);
  /* The resized bounds hold in what is made of it. */
  MPI_Datatype c2;
  MPI_Type_contiguous(2, t, &c2);
  bounds(rank, fails, "contiguous of resized", c2, 8, -4, 24, 0, 16);
  MPI_Datatype d;
  MPI_Type_dup(c2, &d);
  bounds(rank, fails, "dup", d, 8, -4, 24, 0, 16);
  MPI_Type_get_envelope(d, &ni, &na, &nt, &comb);
  CHECK(comb == MPI_COMBINER_DUP && nt == 1, "dup envelope");
  MPI_Datatype got;
  MPI_Type_get_contents(d, 0, 0, 1, NULL, NULL, &got);
  CHECK(got != c2 && got != MPI_DATATYPE_NULL, "dup contents: a new handle");
  MPI_Type_free(&c2); /* the contents keep the map */
  bounds(rank, fails, "a type of the contents", got, 8, -4, 24, 0, 16);
  MPI_Type_free(&got);
  MPI_Type_free(&d);
  MPI_Type_free(&t);

  /* Nested: a vector of structs, an indexed of vectors. */
  MPI_Datatype p = particle_type(), vp;
  const MPI_Aint ps = (MPI_Aint)sizeof(struct particle);
  bounds(rank, fails, "particle", p, 17, 0, ps, 0, (MPI_Aint)offsetof(struct particle, ids) + 8);
  MPI_Type_vector(2, 1, 2, p, &vp);
  bounds(rank, fails, "vector of structs", vp, 34, 0, 3 * ps, 0,
         2 * ps + (MPI_Aint)offsetof(struct particle, ids) + 8);
  MPI_Type_free(&vp);
  MPI_Type_free(&p);
  MPI_Datatype col, ix;
  MPI_Type_vector(2, 1, 3, MPI_INT, &col); /* ints 0 and 3: extent 16 */
  int ilens[2] = {1, 2}, idisps[2] = {2, 0};
  MPI_Type_indexed(2, ilens, idisps, col, &ix); /* cols at 32, then 0 and 16 */
  bounds(rank, fails, "indexed of vectors", ix, 24, 0, 48, 0, 48);
  MPI_Type_free(&ix);
  MPI_Type_free(&col);
  MPI_Datatype empty;
  MPI_Type_contiguous(0, MPI_INT, &empty);
  bounds(rank, fails, "empty", empty, 0, 0, 0, 0, 0);
  MPI_Type_free(&empty);
}

/* Pack and unpack, in one rank. */
static void packing(int rank, int* fails) {
  double m[4][5];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) m[i][j] = i * 10 + j;
  MPI_Datatype col;
  MPI_Type_vector(4, 1, 5, MPI_DOUBLE, &col);
  MPI_Type_commit(&col);
  int need = 0;
  MPI_Pack_size(2, col, MPI_COMM_WORLD, &need);
  CHECK(need == 64, "Pack_size of 2 columns: %d", need);
  char buf[128];
  int pos = 0, seven = 7;
  MPI_Pack(&seven, 1, MPI_INT, buf, sizeof buf, &pos, MPI_COMM_WORLD);
  MPI_Pack(&m[0][1], 1, col, buf, sizeof buf, &pos, MPI_COMM_WORLD);
  CHECK(pos == 36, "position after packing %d", pos);
  double packed[4];
  memcpy(packed, buf + 4, sizeof packed);
  for (int i = 0; i < 4; ++i) CHECK(packed[i] == i * 10 + 1, "packed[%d] = %g", i, packed[i]);
  double back[4][5];
  memset(back, 0x5a, sizeof back);
  int got = 0;
  pos = 0;
  MPI_Unpack(buf, 36, &pos, &got, 1, MPI_INT, MPI_COMM_WORLD);
  MPI_Unpack(buf, 36, &pos, &back[0][3], 1, col, MPI_COMM_WORLD);
  CHECK(got == 7 && pos == 36, "unpacked %d, position %d", got, pos);
  unsigned char pattern[sizeof(double)];
  memset(pattern, 0x5a, sizeof pattern);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) {
      if (j == 3)
        CHECK(back[i][j] == i * 10 + 1, "back[%d][3] = %g", i, back[i][j]);
      else
        CHECK(memcmp(&back[i][j], pattern, sizeof pattern) == 0, "back[%d][%d] was written", i, j);
    }
  MPI_Type_free(&col);

  /* An array of structs: packed without the padding, unpacked with it. */
  MPI_Datatype p = particle_type();
  struct particle a[3], b[3];
  memset(a, 0, sizeof a);
  memset(b, 0x77, sizeof b);
  for (int i = 0; i < 3; ++i) {
    a[i].tag = (char)('a' + i);
    a[i].x = i + 0.5;
    a[i].ids[0] = i;
    a[i].ids[1] = -i;
  }
  pos = 0;
  MPI_Pack(a, 3, p, buf, sizeof buf, &pos, MPI_COMM_WORLD);
  CHECK(pos == 51, "3 particles pack into %d bytes", pos);
  CHECK(buf[0] == 'a' && buf[17] == 'b' && buf[34] == 'c', "packed particles");
  pos = 0;
  MPI_Unpack(buf, 51, &pos, b, 3, p, MPI_COMM_WORLD);
  for (int i = 0; i < 3; ++i) {
    CHECK(b[i].tag == 'a' + i && b[i].x == i + 0.5 && b[i].ids[0] == i && b[i].ids[1] == -i,
          "particle %d after the round trip", i);
    const unsigned char* pad = (const unsigned char*)&b[i] + 1;
    CHECK(pad[0] == 0x77, "particle %d's padding was written", i);
  }
  MPI_Type_free(&p);
}

static int next_of(int rank, int size) {
  return (rank + 1) % size;
}
static int prev_of(int rank, int size) {
  return (rank + size - 1) % size;
}

static void ring(int rank, int size, int* fails) {
  const int next = next_of(rank, size), prev = prev_of(rank, size);
  /* A column of a 6x5 matrix to 6 contiguous ints, and 6 ints into a
   * column: every other byte of the matrix untouched. */
  int mat[6][5], six[6], got[6];
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 5; ++j) mat[i][j] = rank * 1000 + i * 10 + j;
  MPI_Datatype col;
  MPI_Type_vector(6, 1, 5, MPI_INT, &col);
  MPI_Type_commit(&col);
  MPI_Send(&mat[0][2], 1, col, next, 1, MPI_COMM_WORLD);
  MPI_Status st;
  MPI_Recv(got, 6, MPI_INT, prev, 1, MPI_COMM_WORLD, &st);
  for (int i = 0; i < 6; ++i)
    CHECK(got[i] == prev * 1000 + i * 10 + 2, "column element %d: %d", i, got[i]);
  int n = -1;
  MPI_Get_count(&st, col, &n);
  CHECK(n == 1, "Get_count of one column: %d", n);
  MPI_Get_elements(&st, col, &n);
  CHECK(n == 6, "Get_elements of one column: %d", n);

  for (int i = 0; i < 6; ++i) six[i] = rank * 100 + i;
  int into[6][5];
  memset(into, 0x5a, sizeof into);
  MPI_Send(six, 6, MPI_INT, next, 2, MPI_COMM_WORLD);
  MPI_Recv(&into[0][4], 1, col, prev, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  const unsigned char* bytes = (const unsigned char*)into;
  for (size_t k = 0; k < sizeof into; ++k) {
    const size_t i = k / sizeof(int) / 5, j = k / sizeof(int) % 5;
    if (j == 4) {
      CHECK(into[i][j] == prev * 100 + (int)i, "into[%zu][4] = %d", i, into[i][j]);
      k += sizeof(int) - 1;
    } else {
      CHECK(bytes[k] == 0x5a, "byte %zu (row %zu, column %zu) of the receive was written", k, i, j);
    }
  }

  /* Arrays of structs both ways; an indexed of vectors to contiguous. */
  MPI_Datatype p = particle_type();
  struct particle a[4], b[4];
  memset(a, 0, sizeof a);
  memset(b, 0x33, sizeof b);
  for (int i = 0; i < 4; ++i) {
    a[i].tag = (char)('A' + rank % 26);
    a[i].x = rank + i * 0.25;
    a[i].ids[0] = rank;
    a[i].ids[1] = i;
  }
  MPI_Request rq;
  MPI_Irecv(b, 4, p, prev, 3, MPI_COMM_WORLD, &rq);
  MPI_Send(a, 4, p, next, 3, MPI_COMM_WORLD);
  MPI_Wait(&rq, &st);
  MPI_Get_count(&st, p, &n);
  CHECK(n == 4, "Get_count of 4 particles: %d", n);
  MPI_Get_elements(&st, p, &n);
  CHECK(n == 16, "Get_elements of 4 particles: %d", n);
  for (int i = 0; i < 4; ++i) {
    CHECK(b[i].tag == 'A' + prev % 26 && b[i].x == prev + i * 0.25 && b[i].ids[0] == prev &&
              b[i].ids[1] == i,
          "particle %d from rank %d", i, prev);
    CHECK(((unsigned char*)&b[i])[1] == 0x33, "particle %d's padding was written", i);
  }
  MPI_Type_free(&p);

  /* The column resized to one int: consecutive ones are the next
   * columns, so that the indexed type takes columns 2, 0 and 1. */
  MPI_Datatype colr, ix;
  MPI_Type_create_resized(col, 0, sizeof(int), &colr);
  int ilens[2] = {1, 2}, idisps[2] = {2, 0};
  MPI_Type_indexed(2, ilens, idisps, colr, &ix);
  MPI_Type_free(&colr);
  MPI_Type_commit(&ix);
  MPI_Send(&mat[0][0], 1, ix, next, 4, MPI_COMM_WORLD);
  int cols[18];
  MPI_Recv(cols, 18, MPI_INT, prev, 4, MPI_COMM_WORLD, &st);
  MPI_Get_count(&st, MPI_INT, &n);
  CHECK(n == 18, "indexed of vectors: %d ints", n);
  const int order[3] = {2, 0, 1};
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 6; ++i)
      CHECK(cols[c * 6 + i] == prev * 1000 + i * 10 + order[c], "indexed of vectors [%d]",
            c * 6 + i);
  MPI_Type_free(&ix);

  /* A type whose elements abut but start 3 ints into the buffer (one
   * memcpy from buf + 12): 3 of them out as 6 ints, and back. */
  MPI_Datatype late;
  int two_len = 2, at3 = 3;
  MPI_Type_indexed(1, &two_len, &at3, MPI_INT, &late);
  MPI_Type_commit(&late);
  int src9[9], got6[6], dst9[9];
  for (int i = 0; i < 9; ++i) src9[i] = rank * 10 + i;
  MPI_Send(src9, 3, late, next, 11, MPI_COMM_WORLD); /* src9[3..8] */
  MPI_Recv(got6, 6, MPI_INT, prev, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  for (int i = 0; i < 6; ++i) CHECK(got6[i] == prev * 10 + 3 + i, "late[%d] = %d", i, got6[i]);
  for (int i = 0; i < 9; ++i) dst9[i] = -7;
  MPI_Send(got6, 6, MPI_INT, next, 12, MPI_COMM_WORLD);
  MPI_Recv(dst9, 3, late, prev, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  const int pp = prev_of(prev, size);
  for (int i = 0; i < 9; ++i)
    CHECK(dst9[i] == (i < 3 ? -7 : pp * 10 + i), "late back [%d] = %d", i, dst9[i]);
  MPI_Type_free(&late);

  /* A short message: 5 doubles into two elements of 4. */
  double five[5], recv8[8];
  for (int i = 0; i < 5; ++i) five[i] = rank + i / 8.0;
  for (int i = 0; i < 8; ++i) recv8[i] = -1;
  MPI_Datatype four;
  MPI_Type_contiguous(4, MPI_DOUBLE, &four);
  MPI_Type_commit(&four);
  MPI_Send(five, 5, MPI_DOUBLE, next, 5, MPI_COMM_WORLD);
  MPI_Recv(recv8, 2, four, prev, 5, MPI_COMM_WORLD, &st);
  MPI_Get_count(&st, four, &n);
  CHECK(n == MPI_UNDEFINED, "Get_count of 1.25 elements: %d", n);
  MPI_Count nx = 0;
  MPI_Get_elements_x(&st, four, &nx);
  CHECK(nx == 5, "Get_elements_x of 5 doubles: %lld", nx);
  for (int i = 0; i < 8; ++i)
    CHECK(recv8[i] == (i < 5 ? prev + i / 8.0 : -1), "recv8[%d] = %g", i, recv8[i]);
  MPI_Type_free(&four);

  /* A struct of an int and a double: whole and partial elements. */
  MPI_Datatype s;
  int sl[2] = {1, 1};
  MPI_Aint sd[2] = {0, 8};
  MPI_Datatype styp[2] = {MPI_INT, MPI_DOUBLE};
  MPI_Type_create_struct(2, sl, sd, styp, &s);
  MPI_Type_commit(&s);
  char packed[32];
  int pos = 0, one = 1, two = 2;
  double half = 0.5;
  MPI_Pack(&one, 1, MPI_INT, packed, sizeof packed, &pos, MPI_COMM_WORLD);
  MPI_Pack(&half, 1, MPI_DOUBLE, packed, sizeof packed, &pos, MPI_COMM_WORLD);
  MPI_Pack(&two, 1, MPI_INT, packed, sizeof packed, &pos, MPI_COMM_WORLD);
  MPI_Send(packed, pos, MPI_PACKED, next, 6, MPI_COMM_WORLD);
  MPI_Send(packed, pos - 2, MPI_PACKED, next, 7, MPI_COMM_WORLD);
  struct {
    int i;
    double d;
  } two_s[2];
  memset(two_s, 0, sizeof two_s);
  MPI_Recv(two_s, 2, s, prev, 6, MPI_COMM_WORLD, &st);
  MPI_Get_elements(&st, s, &n);
  CHECK(n == 3, "Get_elements of an int, a double and an int: %d", n);
  MPI_Get_count(&st, s, &n);
  CHECK(n == MPI_UNDEFINED, "Get_count of 1 struct and an int: %d", n);
  CHECK(two_s[0].i == 1 && two_s[0].d == 0.5 && two_s[1].i == 2 && two_s[1].d == 0,
        "struct values");
  MPI_Recv(two_s, 2, s, prev, 7, MPI_COMM_WORLD, &st);
  MPI_Get_elements(&st, s, &n);
  CHECK(n == MPI_UNDEFINED, "Get_elements ending inside an int: %d", n);
  MPI_Type_free(&s);

  /* Absolute addresses from MPI_BOTTOM. */
  int iv = rank, iv_in = -1;
  double dv = rank * 2.5, dv_in = -1;
  MPI_Aint at[2], at_in[2];
  MPI_Get_address(&iv, &at[0]);
  MPI_Get_address(&dv, &at[1]);
  MPI_Get_address(&iv_in, &at_in[0]);
  MPI_Get_address(&dv_in, &at_in[1]);
  CHECK(MPI_Aint_diff(at[1], at[0]) == (char*)&dv - (char*)&iv, "MPI_Aint_diff");
  CHECK(MPI_Aint_add(at[0], 4) == at[0] + 4, "MPI_Aint_add");
  MPI_Datatype abs_out, abs_in;
  MPI_Type_create_struct(2, sl, at, styp, &abs_out);
  MPI_Type_create_struct(2, sl, at_in, styp, &abs_in);
  MPI_Type_commit(&abs_out);
  MPI_Type_commit(&abs_in);
  MPI_Irecv(MPI_BOTTOM, 1, abs_in, prev, 8, MPI_COMM_WORLD, &rq);
  MPI_Send(MPI_BOTTOM, 1, abs_out, next, 8, MPI_COMM_WORLD);
  MPI_Wait(&rq, MPI_STATUS_IGNORE);
  CHECK(iv_in == prev && dv_in == prev * 2.5, "from MPI_BOTTOM: %d %g", iv_in, dv_in);
  MPI_Type_free(&abs_out);
  MPI_Type_free(&abs_in);

  /* A receive whose type is freed before its message comes: the next
   * rank sends only once told to. */
  int cm[6][5];
  memset(cm, 0, sizeof cm);
  MPI_Datatype col2;
  MPI_Type_dup(col, &col2); /* committed, as col is */
  MPI_Irecv(&cm[0][1], 1, col2, prev, 9, MPI_COMM_WORLD, &rq);
  MPI_Type_free(&col2);
  MPI_Send(NULL, 0, MPI_INT, prev, 10, MPI_COMM_WORLD); /* go */
  MPI_Recv(NULL, 0, MPI_INT, next, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Send(six, 6, MPI_INT, next, 9, MPI_COMM_WORLD);
  MPI_Wait(&rq, MPI_STATUS_IGNORE);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 5; ++j)
      CHECK(cm[i][j] == (j == 1 ? prev * 100 + i : 0), "freed type's receive [%d][%d] = %d", i, j,
            cm[i][j]);
  MPI_Type_free(&col);
}

/* Many types made and freed at once on every rank: one table. */
static void churn(int rank, int* fails) {
  for (int i = 0; i < 3000; ++i) {
    MPI_Datatype t[3];
    for (int k = 0; k < 3; ++k) MPI_Type_vector(k + 1, 2, 3, MPI_INT, &t[k]);
    for (int k = 0; k < 3; ++k) {
      int s = 0;
      MPI_Type_size(t[k], &s);
      if (s != (k + 1) * 8) {
        CHECK(0, "type %d of round %d: size %d", t[k], i, s);
        return;
      }
      MPI_Type_free(&t[k]);
    }
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int fails = 0; /* on the rank's stack: ranks share the program's globals */
  constructors(rank, &fails);
  packing(rank, &fails);
  ring(rank, size, &fails);
  churn(rank, &fails);
  /* Rank 0 adds up the failures. */
  if (rank == 0) {
    int total = fails;
    for (int r = 1; r < size; ++r) {
      int f = 0;
      MPI_Recv(&f, 1, MPI_INT, r, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      total += f;
    }
    if (total == 0) printf("datatype: ok %d ranks\n", size);
  } else {
    MPI_Send(&fails, 1, MPI_INT, 0, 99, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
