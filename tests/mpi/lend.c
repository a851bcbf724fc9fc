/* mpi-test lend: large messages inside a process, where a send lends its
 * buffer and the receive copies straight from it (docs/mpi.md, "Messages").
 *  - a ring of 1 MiB messages, every byte checked, with blocking sends
 *    (each completes once its receive has copied) and receives posted
 *    before and after their messages arrive;
 *  - an MPI_Isend of 256 KiB is not complete until its receive is posted
 *    (the receiver posts it only after a later message tells it to);
 *  - a large send to itself (MPI_Isend, then MPI_Recv);
 *  - into a smaller receive: MPI_ERR_TRUNCATE under MPI_ERRORS_RETURN, and
 *    what fits copied;
 *  - into a derived receive type (a vector: every other double);
 *  - MPI_Sendrecv_replace, MPI_Bsend (never lent: complete at once),
 *    MPI_Mprobe + MPI_Mrecv (the send completes at the copy, not at the
 *    probe), and MPI_Cancel of a send not yet matched.
 * Rank 0 prints "lend: ok N ranks". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS 256
static int failures[MAX_RANKS];
#define CHECK(cond, ...)                       \
  do {                                         \
    if (!(cond)) {                             \
      ++failures[rank];                        \
      printf("lend: FAIL on rank %d: ", rank); \
      printf(__VA_ARGS__);                     \
      printf("\n");                            \
    }                                          \
  } while (0)

static unsigned char byte_of(int from, long i, int round) {
  return (unsigned char)(from * 31 + i * 7 + round);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  const long big = 1 << 20;
  unsigned char* out = malloc((size_t)big);
  unsigned char* in = malloc((size_t)big);

  /* A ring of 1 MiB, 4 rounds; odd rounds post the receive first. */
  for (int round = 0; round < 4; ++round) {
    for (long i = 0; i < big; ++i) out[i] = byte_of(rank, i, round);
    memset(in, 0, (size_t)big);
    MPI_Request r;
    if (round % 2) MPI_Irecv(in, (int)big, MPI_BYTE, prev, round, MPI_COMM_WORLD, &r);
    if (size == 1) {
      /* Alone: a blocking send to itself would wait for a receive never
       * posted (lent), so through MPI_Sendrecv. */
      if (round % 2 == 0)
        MPI_Sendrecv(out, (int)big, MPI_BYTE, 0, round, in, (int)big, MPI_BYTE, 0, round,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      else
        MPI_Send(out, (int)big, MPI_BYTE, next, round, MPI_COMM_WORLD);
    } else if (rank % 2 == 0 || round % 2) {
      MPI_Send(out, (int)big, MPI_BYTE, next, round, MPI_COMM_WORLD);
      if (round % 2 == 0)
        MPI_Recv(in, (int)big, MPI_BYTE, prev, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(in, (int)big, MPI_BYTE, prev, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(out, (int)big, MPI_BYTE, next, round, MPI_COMM_WORLD);
    }
    if (round % 2) MPI_Wait(&r, MPI_STATUS_IGNORE);
    long bad = 0;
    for (long i = 0; i < big; ++i) bad += in[i] != byte_of(prev, i, round);
    CHECK(bad == 0, "ring round %d: %ld wrong bytes from rank %d", round, bad, prev);
  }

  /* A lent MPI_Isend completes only once its receive is posted. */
  if (size > 1) {
    const int n = 256 << 10;
    if (rank == 0) {
      MPI_Request s;
      MPI_Isend(out, n, MPI_BYTE, 1, 40, MPI_COMM_WORLD, &s);
      int done = 0;
      for (int i = 0; i < 20 && !done; ++i) MPI_Test(&s, &done, MPI_STATUS_IGNORE);
      CHECK(!done, "a 256 KiB MPI_Isend completed before its receive was posted");
      int go = 1;
      MPI_Send(&go, 1, MPI_INT, 1, 41, MPI_COMM_WORLD);
      MPI_Wait(&s, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      int go = 0;
      MPI_Recv(&go, 1, MPI_INT, 0, 41, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Status st;
      MPI_Recv(in, n, MPI_BYTE, 0, 40, MPI_COMM_WORLD, &st);
      int count = -1;
      MPI_Get_count(&st, MPI_BYTE, &count);
      long bad = 0;
      for (long i = 0; i < n; ++i) bad += in[i] != byte_of(0, i, 3);
      CHECK(count == n && bad == 0, "a held 256 KiB message: count %d, %ld wrong bytes", count,
            bad);
    }
  }

  /* MPI_Mprobe matches a lent message but takes nothing from the buffer:
   * the send stays incomplete until MPI_Mrecv has copied. */
  if (size > 1) {
    const int n = 256 << 10;
    int token = 0;
    if (rank == 0) {
      for (int i = 0; i < n; ++i) out[i] = byte_of(0, i, 7);
      MPI_Request s;
      MPI_Isend(out, n, MPI_BYTE, 1, 60, MPI_COMM_WORLD, &s);
      MPI_Recv(&token, 1, MPI_INT, 1, 61, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* probed */
      int done = 0;
      MPI_Test(&s, &done, MPI_STATUS_IGNORE);
      CHECK(!done, "a lent send completed at MPI_Mprobe, before MPI_Mrecv copied it");
      MPI_Send(&token, 1, MPI_INT, 1, 62, MPI_COMM_WORLD);
      MPI_Wait(&s, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Message msg;
      MPI_Mprobe(0, 60, MPI_COMM_WORLD, &msg, MPI_STATUS_IGNORE);
      MPI_Send(&token, 1, MPI_INT, 0, 61, MPI_COMM_WORLD);
      MPI_Recv(&token, 1, MPI_INT, 0, 62, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Mrecv(in, n, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
      long bad = 0;
      for (int i = 0; i < n; ++i) bad += in[i] != byte_of(0, i, 7);
      CHECK(bad == 0, "Mrecv after Mprobe of a lent message: %ld wrong bytes", bad);
    }
  }

  /* To itself. */
  {
    for (long i = 0; i < big; ++i) out[i] = byte_of(rank, i, 9);
    MPI_Request s;
    MPI_Isend(out, (int)big, MPI_BYTE, rank, 50, MPI_COMM_WORLD, &s);
    MPI_Recv(in, (int)big, MPI_BYTE, rank, 50, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&s, MPI_STATUS_IGNORE);
    CHECK(memcmp(in, out, (size_t)big) == 0, "a 1 MiB message to itself differs");
  }

  /* Truncated: what fits, and the class. */
  {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    memset(in, 0, (size_t)big);
    MPI_Request s;
    MPI_Isend(out, (int)big, MPI_BYTE, rank, 51, MPI_COMM_WORLD, &s);
    const int code =
        MPI_Recv(in, (int)(big / 2), MPI_BYTE, rank, 51, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&s, MPI_STATUS_IGNORE);
    int cls = -1;
    MPI_Error_class(code, &cls);
    CHECK(cls == MPI_ERR_TRUNCATE, "a truncated large receive returned class %d", cls);
    CHECK(memcmp(in, out, (size_t)(big / 2)) == 0 && in[big / 2] == 0,
          "a truncated large receive took the wrong bytes");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  }

  /* Into a derived type: every other double of a buffer twice as long. */
  {
    const int n = 16384; /* 128 KiB of doubles */
    double* src = malloc(sizeof(double) * (size_t)n);
    double* dst = malloc(sizeof(double) * 2 * (size_t)n);
    for (int i = 0; i < n; ++i) src[i] = rank * 1e6 + i;
    for (int i = 0; i < 2 * n; ++i) dst[i] = -1;
    MPI_Datatype every_other;
    MPI_Type_vector(n, 1, 2, MPI_DOUBLE, &every_other);
    MPI_Type_commit(&every_other);
    MPI_Request s;
    MPI_Isend(src, n, MPI_DOUBLE, rank, 52, MPI_COMM_WORLD, &s);
    MPI_Recv(dst, 1, every_other, rank, 52, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&s, MPI_STATUS_IGNORE);
    long bad = 0;
    for (int i = 0; i < n; ++i) bad += dst[2 * i] != src[i] || dst[2 * i + 1] != -1;
    CHECK(bad == 0, "a vector receive of a lent message: %ld wrong", bad);
    MPI_Type_free(&every_other);
    free(src);
    free(dst);
  }

  /* MPI_Sendrecv_replace around the ring, 1 MiB. */
  {
    for (long i = 0; i < big; ++i) out[i] = byte_of(rank, i, 3);
    MPI_Sendrecv_replace(out, (int)big, MPI_BYTE, next, 53, prev, 53, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
    long bad = 0;
    for (long i = 0; i < big; ++i) bad += out[i] != byte_of(prev, i, 3);
    CHECK(bad == 0, "Sendrecv_replace of 1 MiB: %ld wrong bytes", bad);
  }

  /* MPI_Bsend of 256 KiB completes at once, never lent. */
  {
    const int n = 256 << 10;
    char* attached = malloc((size_t)n + MPI_BSEND_OVERHEAD);
    MPI_Buffer_attach(attached, n + MPI_BSEND_OVERHEAD);
    for (int i = 0; i < n; ++i) out[i] = byte_of(rank, i, 4);
    MPI_Bsend(out, n, MPI_BYTE, rank, 54, MPI_COMM_WORLD);
    memset(out, 0, (size_t)n); /* the send is done with it */
    MPI_Recv(in, n, MPI_BYTE, rank, 54, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    long bad = 0;
    for (int i = 0; i < n; ++i) bad += in[i] != byte_of(rank, i, 4);
    CHECK(bad == 0, "Bsend of 256 KiB: %ld wrong bytes", bad);
    void* back;
    int back_size;
    MPI_Buffer_detach(&back, &back_size);
    free(attached);
  }

  /* Mprobe + Mrecv of a lent message, and MPI_Cancel of an unmatched one. */
  {
    for (long i = 0; i < big; ++i) out[i] = byte_of(rank, i, 5);
    MPI_Request s;
    MPI_Isend(out, (int)big, MPI_BYTE, rank, 55, MPI_COMM_WORLD, &s);
    MPI_Message msg;
    MPI_Status st;
    MPI_Mprobe(rank, 55, MPI_COMM_WORLD, &msg, &st);
    int count = -1;
    MPI_Get_count(&st, MPI_BYTE, &count);
    CHECK(count == big, "Mprobe of a lent message: count %d", count);
    MPI_Mrecv(in, (int)big, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
    MPI_Wait(&s, MPI_STATUS_IGNORE);
    CHECK(memcmp(in, out, (size_t)big) == 0, "Mrecv of a lent message differs");

    MPI_Isend(out, (int)big, MPI_BYTE, rank, 56, MPI_COMM_WORLD, &s);
    MPI_Cancel(&s);
    MPI_Wait(&s, &st);
    int cancelled = 0;
    MPI_Test_cancelled(&st, &cancelled);
    CHECK(cancelled == 1, "a lent send not yet matched was not cancelled");
    int flag = 1;
    MPI_Iprobe(rank, 56, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    CHECK(flag == 0, "a cancelled lent send can still be received");
  }

  free(out);
  free(in);
  int all = failures[rank];
  if (rank == 0) {
    for (int r = 1; r < size; ++r) {
      int f = 0;
      MPI_Recv(&f, 1, MPI_INT, r, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      all += f;
    }
    if (all == 0) printf("lend: ok %d ranks\n", size);
  } else {
    MPI_Send(&failures[rank], 1, MPI_INT, 0, 99, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return failures[rank] != 0;
}
