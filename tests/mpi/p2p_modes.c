/* mpi-test p2p_modes: the rest of point-to-point at any number of ranks.
 *  - synchronous sends wait for the receive: each rank's MPI_Issend to the
 *    next is not complete (MPI_Test, several times) until the next rank,
 *    told by a later message, posts its receive; MPI_Ssend in a ring;
 *  - buffered sends with an attached buffer sized per MPI_BSEND_OVERHEAD,
 *    MPI_Buffer_detach; ready sends to receives known to be posted;
 *    MPI_Sendrecv_replace around the ring;
 *  - MPI_Probe + MPI_Get_count, then a receive into a buffer of that size;
 *    a blocking probe woken by the message (a token ring); MPI_Iprobe;
 *  - MPI_Mprobe / MPI_Improbe with MPI_ANY_SOURCE and MPI_ANY_TAG at rank
 *    0 while every rank sends to it: each message taken once, in order
 *    per sender, received with MPI_Mrecv / MPI_Imrecv; MPI_PROC_NULL gives
 *    MPI_MESSAGE_NO_PROC;
 *  - persistent requests: a ring over many iterations (Startall, Waitall,
 *    Test loops), each send mode's init, inactive requests in the
 *    completion calls, MPI_Request_free;
 *  - MPI_Cancel of a posted receive (cancelled; a later message goes to the
 *    next receive), of a started persistent receive, of a standard send
 *    (not cancelled: it is received), of a synchronous send nobody
 *    received (cancelled: its message is gone) and of one received (not);
 *  - MPI_Waitsome, MPI_Testsome and MPI_Testany loops,
 *    MPI_Request_get_status, the status setters.
 * Every failed check prints a line; rank 0 prints "p2p_modes: ok N ranks". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond, ...)                            \
  do {                                              \
    if (!(cond)) {                                  \
      ++failures;                                   \
      printf("p2p_modes: FAIL on rank %d: ", rank); \
      printf(__VA_ARGS__);                          \
      printf("\n");                                 \
    }                                               \
  } while (0)

/* No collectives here: every rank reports to rank 0, which releases all
 * (rank 0 first says it is ready, so that no rank sends it anything while
 * it still takes messages with wildcards). */
static void barrier(int rank, int size) {
  int x = 0;
  if (rank == 0) {
    for (int i = 1; i < size; ++i) MPI_Send(&x, 1, MPI_INT, i, 990, MPI_COMM_WORLD);
    for (int i = 1; i < size; ++i)
      MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 991, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 1; i < size; ++i) MPI_Send(&x, 1, MPI_INT, i, 992, MPI_COMM_WORLD);
  } else {
    MPI_Recv(&x, 1, MPI_INT, 0, 990, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(&x, 1, MPI_INT, 0, 991, MPI_COMM_WORLD);
    MPI_Recv(&x, 1, MPI_INT, 0, 992, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  MPI_Status st;
  int flag = 0, count = -1, go = 1;

  /* Synchronous: the Issend stays incomplete until the receive is posted,
   * which the next rank does only after the later "go" message. */
  {
    int out = rank * 7, in = -1;
    MPI_Request s;
    MPI_Issend(&out, 1, MPI_INT, next, 10, MPI_COMM_WORLD, &s);
    int early = 0;
    for (int i = 0; i < 20; ++i) {
      MPI_Test(&s, &flag, MPI_STATUS_IGNORE);
      early += flag;
    }
    CHECK(early == 0 && s != MPI_REQUEST_NULL, "MPI_Issend completed before its receive");
    MPI_Send(&go, 1, MPI_INT, next, 11, MPI_COMM_WORLD);
    MPI_Recv(&go, 1, MPI_INT, prev, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(&in, 1, MPI_INT, prev, 10, MPI_COMM_WORLD, &st);
    MPI_Wait(&s, MPI_STATUS_IGNORE);
    CHECK(in == prev * 7 && st.MPI_SOURCE == prev, "Issend ring got %d from %d", in, st.MPI_SOURCE);
    /* Blocking, in a ring: rank 0 sends first, the others receive first. */
    if (size > 1) {
      int v = rank;
      if (rank == 0) {
        MPI_Ssend(&v, 1, MPI_INT, next, 12, MPI_COMM_WORLD);
        MPI_Recv(&v, 1, MPI_INT, prev, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(v == prev, "Ssend ring back at 0: %d", v);
      } else {
        MPI_Recv(&v, 1, MPI_INT, prev, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(v == prev, "Ssend ring: %d", v);
        v = rank;
        MPI_Ssend(&v, 1, MPI_INT, next, 12, MPI_COMM_WORLD);
      }
    }
    /* Received by a wildcard Mprobe: the probe is the match. */
    MPI_Issend(&out, 1, MPI_INT, next, 13, MPI_COMM_WORLD, &s);
    MPI_Message m;
    MPI_Mprobe(prev, 13, MPI_COMM_WORLD, &m, &st);
    MPI_Wait(&s, MPI_STATUS_IGNORE); /* the previous rank's mprobe acknowledged it */
    MPI_Mrecv(&in, 1, MPI_INT, &m, &st);
    CHECK(in == prev * 7 && m == MPI_MESSAGE_NULL, "Issend + Mprobe got %d", in);
    MPI_Ssend(&out, 1, MPI_INT, MPI_PROC_NULL, 14, MPI_COMM_WORLD);
  }

  /* Buffered and ready. */
  {
    int data[3][4];
    const int room = 3 * (int)(4 * sizeof(int) + MPI_BSEND_OVERHEAD);
    char* space = malloc((size_t)room);
    MPI_Buffer_attach(space, room);
    for (int k = 0; k < 3; ++k)
      for (int j = 0; j < 4; ++j) data[k][j] = rank * 100 + k * 10 + j;
    MPI_Bsend(data[0], 4, MPI_INT, next, 20, MPI_COMM_WORLD);
    MPI_Bsend(data[1], 4, MPI_INT, next, 20, MPI_COMM_WORLD);
    MPI_Request b;
    MPI_Ibsend(data[2], 4, MPI_INT, next, 20, MPI_COMM_WORLD, &b);
    MPI_Wait(&b, MPI_STATUS_IGNORE);
    for (int k = 0; k < 3; ++k) {
      int in[4] = {0};
      MPI_Recv(in, 4, MPI_INT, prev, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      CHECK(in[0] == prev * 100 + k * 10 && in[3] == prev * 100 + k * 10 + 3, "Bsend %d got %d %d",
            k, in[0], in[3]);
    }
    void* back = NULL;
    int back_size = 0;
    MPI_Buffer_detach(&back, &back_size);
    CHECK(back == space && back_size == room, "Buffer_detach gave %p %d", back, back_size);
    free(space);

    /* Ready: the receive is posted before the previous rank hears so. */
    int r1 = -1, r2 = -1, v1 = rank + 1, v2 = rank + 2;
    MPI_Request rq[2];
    MPI_Irecv(&r1, 1, MPI_INT, prev, 30, MPI_COMM_WORLD, &rq[0]);
    MPI_Irecv(&r2, 1, MPI_INT, prev, 31, MPI_COMM_WORLD, &rq[1]);
    MPI_Send(&go, 1, MPI_INT, prev, 32, MPI_COMM_WORLD);
    MPI_Recv(&go, 1, MPI_INT, next, 32, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Rsend(&v1, 1, MPI_INT, next, 30, MPI_COMM_WORLD);
    MPI_Request s;
    MPI_Irsend(&v2, 1, MPI_INT, next, 31, MPI_COMM_WORLD, &s);
    MPI_Wait(&s, MPI_STATUS_IGNORE);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    CHECK(r1 == prev + 1 && r2 == prev + 2, "Rsend got %d %d", r1, r2);

    /* Sendrecv_replace around the ring. */
    long ring[2] = {rank, rank * 2};
    MPI_Sendrecv_replace(ring, 2, MPI_LONG, next, 33, prev, 33, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_LONG, &count);
    CHECK(ring[0] == prev && ring[1] == prev * 2 && st.MPI_SOURCE == prev && count == 2,
          "Sendrecv_replace gave %ld %ld from %d count %d", ring[0], ring[1], st.MPI_SOURCE, count);
  }
  barrier(rank, size);

  /* Probe, then a receive of the size it says. */
  {
    const int n = (rank + 1) * 3;
    int* out = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; ++i) out[i] = rank * 1000 + i;
    MPI_Send(out, n, MPI_INT, next, 40, MPI_COMM_WORLD);
    MPI_Probe(MPI_ANY_SOURCE, 40, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_INT, &count);
    CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 40 && count == (prev + 1) * 3,
          "Probe: source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, count);
    int* in = malloc(sizeof(int) * (size_t)(count > 0 ? count : 1));
    MPI_Recv(in, count, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st);
    CHECK(in[0] == prev * 1000 && in[count - 1] == prev * 1000 + count - 1,
          "after Probe got %d .. %d", in[0], in[count - 1]);
    free(in);
    free(out);

    /* A token ring: each rank waits in MPI_Probe until the token comes. */
    int token = 0;
    if (rank == 0) MPI_Send(&token, 1, MPI_INT, next, 41, MPI_COMM_WORLD);
    MPI_Probe(prev, 41, MPI_COMM_WORLD, &st);
    MPI_Recv(&token, 1, MPI_INT, prev, 41, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(token == prev, "token ring: %d at rank %d", token, rank);
    ++token;
    if (rank != 0) MPI_Send(&token, 1, MPI_INT, next, 41, MPI_COMM_WORLD);

    /* Iprobe: nothing there, then a message. */
    MPI_Iprobe(MPI_ANY_SOURCE, 43, MPI_COMM_WORLD, &flag, &st);
    CHECK(flag == 0, "Iprobe found a message nobody sent");
    MPI_Send(&rank, 1, MPI_INT, next, 42, MPI_COMM_WORLD);
    for (flag = 0; !flag;) MPI_Iprobe(prev, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
    CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 42, "Iprobe: source %d tag %d", st.MPI_SOURCE,
          st.MPI_TAG);
    int v = -1;
    MPI_Recv(&v, 1, MPI_INT, prev, 42, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(v == prev, "after Iprobe got %d", v);
    MPI_Probe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st);
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "Probe of MPI_PROC_NULL: source %d", st.MPI_SOURCE);
    MPI_Iprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &flag, &st);
    CHECK(flag == 1 && st.MPI_SOURCE == MPI_PROC_NULL, "Iprobe of MPI_PROC_NULL");
  }
  barrier(rank, size);

  /* Matched probe with wildcards: all ranks send rank 0 three messages at
   * once; each is taken by one Mprobe/Improbe, in order per sender. */
  {
    enum { kEach = 3 };
    long out[kEach][16];
    MPI_Request s[kEach];
    for (int k = 0; k < kEach; ++k) {
      const int n = (rank + k) % 16 + 1;
      for (int j = 0; j < n; ++j) out[k][j] = rank * 100 + k;
      MPI_Isend(out[k], n, MPI_LONG, 0, 50 + k, MPI_COMM_WORLD, &s[k]);
    }
    if (rank == 0) {
      int next_k[64] = {0};
      for (int got = 0; got < kEach * size; ++got) {
        MPI_Message m = MPI_MESSAGE_NULL;
        if (got % 2 == 0) {
          MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &m, &st);
        } else {
          for (flag = 0; !flag;)
            MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m, &st);
        }
        const int from = st.MPI_SOURCE, k = st.MPI_TAG - 50;
        MPI_Get_count(&st, MPI_LONG, &count);
        CHECK(from >= 0 && from < size && k >= 0 && k < kEach && count == (from + k) % 16 + 1,
              "Mprobe: source %d tag %d count %d", from, st.MPI_TAG, count);
        if (from < 0 || from >= 64) break;
        CHECK(k == next_k[from], "from rank %d message %d came before %d", from, k, next_k[from]);
        next_k[from] = k + 1;
        long in[16] = {0};
        if (got % 3 == 2) {
          MPI_Request r;
          MPI_Imrecv(in, count, MPI_LONG, &m, &r);
          MPI_Wait(&r, &st);
        } else {
          MPI_Mrecv(in, count, MPI_LONG, &m, &st);
        }
        CHECK(m == MPI_MESSAGE_NULL && st.MPI_SOURCE == from && in[0] == from * 100 + k &&
                  in[count - 1] == from * 100 + k,
              "Mrecv from %d: %ld", from, in[0]);
      }
      MPI_Message left = MPI_MESSAGE_NULL;
      MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &left, &st);
      CHECK(flag == 0 && left == MPI_MESSAGE_NULL, "a message left after all were taken");
    }
    MPI_Waitall(kEach, s, MPI_STATUSES_IGNORE);
    MPI_Message none;
    MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &none, &st);
    CHECK(none == MPI_MESSAGE_NO_PROC && st.MPI_SOURCE == MPI_PROC_NULL, "Mprobe of PROC_NULL");
    int x = 5;
    MPI_Mrecv(&x, 1, MPI_INT, &none, &st);
    CHECK(none == MPI_MESSAGE_NULL && x == 5 && st.MPI_SOURCE == MPI_PROC_NULL,
          "Mrecv of MPI_MESSAGE_NO_PROC");
  }
  barrier(rank, size);

  /* Persistent requests: a ring over many iterations. */
  {
    enum { kIterations = 500 };
    long out = 0, in = -1;
    MPI_Request ring[2];
    MPI_Recv_init(&in, 1, MPI_LONG, prev, 60, MPI_COMM_WORLD, &ring[0]);
    MPI_Send_init(&out, 1, MPI_LONG, next, 60, MPI_COMM_WORLD, &ring[1]);
    /* Inactive: the completion calls take them as null, but keep them. */
    MPI_Wait(&ring[0], &st);
    CHECK(ring[0] != MPI_REQUEST_NULL && st.MPI_SOURCE == MPI_ANY_SOURCE,
          "Wait of an inactive persistent request: handle %d source %d", ring[0], st.MPI_SOURCE);
    int index = -2;
    MPI_Waitany(2, ring, &index, &st);
    CHECK(index == MPI_UNDEFINED, "Waitany of inactive requests: index %d", index);
    MPI_Request_get_status(ring[1], &flag, &st);
    CHECK(flag == 1, "Request_get_status of an inactive request: flag %d", flag);
    for (int i = 0; i < kIterations; ++i) {
      out = rank * 100000L + i;
      if (i % 3 == 0) {
        MPI_Startall(2, ring);
        MPI_Waitall(2, ring, MPI_STATUSES_IGNORE);
      } else if (i % 3 == 1) {
        MPI_Start(&ring[0]);
        MPI_Start(&ring[1]);
        for (int done = 0; !done;) MPI_Testall(2, ring, &done, MPI_STATUSES_IGNORE);
      } else {
        MPI_Start(&ring[1]);
        MPI_Start(&ring[0]);
        MPI_Wait(&ring[1], MPI_STATUS_IGNORE);
        for (flag = 0; !flag;) MPI_Test(&ring[0], &flag, &st);
        CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 60, "persistent status: %d %d", st.MPI_SOURCE,
              st.MPI_TAG);
      }
      if (in != prev * 100000L + i) {
        CHECK(0, "persistent ring iteration %d got %ld", i, in);
        break;
      }
      CHECK(ring[0] != MPI_REQUEST_NULL && ring[1] != MPI_REQUEST_NULL,
            "a persistent request was freed by its completion");
    }
    MPI_Request_free(&ring[0]);
    MPI_Request_free(&ring[1]);
    CHECK(ring[0] == MPI_REQUEST_NULL && ring[1] == MPI_REQUEST_NULL, "Request_free");

    /* Each send mode's init, to receives known to be posted (ready). */
    long modes_out[3] = {rank, rank + 1, rank + 2}, modes_in[3] = {-1, -1, -1};
    const int room = (int)(sizeof(long) + MPI_BSEND_OVERHEAD);
    char* space = malloc((size_t)room);
    MPI_Buffer_attach(space, room);
    MPI_Request q[6];
    for (int k = 0; k < 3; ++k)
      MPI_Recv_init(&modes_in[k], 1, MPI_LONG, prev, 61 + k, MPI_COMM_WORLD, &q[k]);
    MPI_Ssend_init(&modes_out[0], 1, MPI_LONG, next, 61, MPI_COMM_WORLD, &q[3]);
    MPI_Bsend_init(&modes_out[1], 1, MPI_LONG, next, 62, MPI_COMM_WORLD, &q[4]);
    MPI_Rsend_init(&modes_out[2], 1, MPI_LONG, next, 63, MPI_COMM_WORLD, &q[5]);
    for (int round = 0; round < 3; ++round) {
      MPI_Startall(3, q);
      MPI_Send(&go, 1, MPI_INT, prev, 64, MPI_COMM_WORLD);
      MPI_Recv(&go, 1, MPI_INT, next, 64, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Startall(3, q + 3);
      MPI_Waitall(6, q, MPI_STATUSES_IGNORE);
      CHECK(modes_in[0] == prev + round * 10 && modes_in[1] == prev + 1 + round * 10 &&
                modes_in[2] == prev + 2 + round * 10,
            "persistent modes round %d: %ld %ld %ld", round, modes_in[0], modes_in[1], modes_in[2]);
      for (int k = 0; k < 3; ++k) modes_out[k] += 10;
      /* Nobody sends before everyone has its receives of the round done. */
      barrier(rank, size);
    }
    for (int k = 0; k < 6; ++k) MPI_Request_free(&q[k]);
    void* back;
    int back_size;
    MPI_Buffer_detach(&back, &back_size);
    free(space);
  }
  barrier(rank, size);

  /* Cancel. */
  {
    int v = -1, w = -1;
    MPI_Request r, rp;
    MPI_Irecv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 70, MPI_COMM_WORLD, &r);
    MPI_Cancel(&r);
    MPI_Wait(&r, &st);
    MPI_Test_cancelled(&st, &flag);
    CHECK(flag == 1 && r == MPI_REQUEST_NULL, "a posted receive was not cancelled");
    /* A started persistent receive: cancelled, then started again. */
    MPI_Recv_init(&v, 1, MPI_INT, prev, 71, MPI_COMM_WORLD, &rp);
    MPI_Start(&rp);
    MPI_Cancel(&rp);
    MPI_Wait(&rp, &st);
    MPI_Test_cancelled(&st, &flag);
    CHECK(flag == 1 && rp != MPI_REQUEST_NULL, "a persistent receive was not cancelled");
    /* Nothing is sent to a rank before its receives are cancelled. */
    MPI_Send(&go, 1, MPI_INT, prev, 74, MPI_COMM_WORLD);
    MPI_Recv(&go, 1, MPI_INT, next, 74, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    /* The cancelled receive takes nothing: the message goes to the next. */
    MPI_Send(&rank, 1, MPI_INT, next, 70, MPI_COMM_WORLD);
    MPI_Recv(&w, 1, MPI_INT, prev, 70, MPI_COMM_WORLD, &st);
    MPI_Test_cancelled(&st, &flag);
    CHECK(v == -1 && w == prev && flag == 0, "after cancel: %d %d cancelled %d", v, w, flag);
    MPI_Start(&rp);
    MPI_Send(&rank, 1, MPI_INT, next, 71, MPI_COMM_WORLD);
    MPI_Wait(&rp, &st);
    MPI_Test_cancelled(&st, &flag);
    CHECK(flag == 0 && v == prev, "restarted persistent receive: %d cancelled %d", v, flag);
    MPI_Request_free(&rp);

    /* A send is not cancelled: its message arrives. */
    int out = rank + 5;
    MPI_Isend(&out, 1, MPI_INT, next, 72, MPI_COMM_WORLD, &r);
    MPI_Cancel(&r);
    MPI_Wait(&r, &st);
    MPI_Test_cancelled(&st, &flag);
    CHECK(flag == 0, "a send reported cancelled");
    MPI_Recv(&w, 1, MPI_INT, prev, 72, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(w == prev + 5, "the send cancel let through %d", w);

    /* A synchronous send nobody receives is cancelled: its message is
     * taken back from the next rank, which then finds nothing. */
    MPI_Issend(&out, 1, MPI_INT, next, 75, MPI_COMM_WORLD, &r);
    MPI_Cancel(&r);
    MPI_Wait(&r, &st);
    MPI_Test_cancelled(&st, &flag);
    CHECK(flag == 1, "an unmatched synchronous send was not cancelled");
    MPI_Send(&go, 1, MPI_INT, next, 76, MPI_COMM_WORLD);
    MPI_Recv(&go, 1, MPI_INT, prev, 76, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Iprobe(prev, 75, MPI_COMM_WORLD, &flag, &st);
    CHECK(flag == 0, "a cancelled synchronous send's message is still there");
    /* One already received is not. */
    MPI_Issend(&out, 1, MPI_INT, next, 77, MPI_COMM_WORLD, &r);
    MPI_Recv(&w, 1, MPI_INT, prev, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(&go, 1, MPI_INT, prev, 78, MPI_COMM_WORLD);
    MPI_Recv(&go, 1, MPI_INT, next, 78, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Cancel(&r);
    MPI_Wait(&r, &st);
    MPI_Test_cancelled(&st, &flag);
    CHECK(flag == 0 && w == prev + 5, "a received synchronous send: cancelled %d, got %d", flag, w);

    /* Freed while pending: a synchronous send (released by its
     * acknowledgement) and a started persistent send. */
    MPI_Issend(&out, 1, MPI_INT, next, 79, MPI_COMM_WORLD, &r);
    MPI_Request_free(&r);
    MPI_Send_init(&out, 1, MPI_INT, next, 79, MPI_COMM_WORLD, &rp);
    MPI_Start(&rp);
    MPI_Request_free(&rp);
    CHECK(r == MPI_REQUEST_NULL && rp == MPI_REQUEST_NULL, "freed requests not null");
    for (int k = 0; k < 2; ++k) {
      w = -1;
      MPI_Recv(&w, 1, MPI_INT, prev, 79, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      CHECK(w == prev + 5, "freed send %d delivered %d", k, w);
    }

    MPI_Status set;
    MPI_Status_set_elements(&set, MPI_DOUBLE, 3);
    MPI_Status_set_cancelled(&set, 1);
    MPI_Get_count(&set, MPI_DOUBLE, &count);
    MPI_Test_cancelled(&set, &flag);
    CHECK(count == 3 && flag == 1, "status setters: count %d cancelled %d", count, flag);
  }
  barrier(rank, size);

  /* Waitsome, Testsome, Testany; receives posted before the previous rank
   * may send (it waits for "go"), so they are seen incomplete first. */
  {
    enum { kBatch = 8 };
    int in[kBatch], out[kBatch], seen[kBatch];
    MPI_Request r[kBatch], s[kBatch];
    for (int form = 0; form < 3; ++form) {
      for (int i = 0; i < kBatch; ++i) {
        in[i] = -1;
        seen[i] = 0;
        MPI_Irecv(&in[i], 1, MPI_INT, prev, 80 + i, MPI_COMM_WORLD, &r[i]);
      }
      MPI_Request_get_status(r[0], &flag, &st);
      CHECK(flag == 0, "Request_get_status: complete before the send");
      MPI_Send(&go, 1, MPI_INT, prev, 89, MPI_COMM_WORLD);
      MPI_Recv(&go, 1, MPI_INT, next, 89, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int i = kBatch - 1; i >= 0; --i) {
        out[i] = rank * 10 + i + form * 1000;
        MPI_Isend(&out[i], 1, MPI_INT, next, 80 + i, MPI_COMM_WORLD, &s[i]);
      }
      int done = 0, rounds = 0;
      if (form == 2) {
        /* Request_get_status does not free: the request waits after it. */
        for (flag = 0; !flag;) MPI_Request_get_status(r[0], &flag, &st);
        CHECK(r[0] != MPI_REQUEST_NULL && st.MPI_TAG == 80, "Request_get_status freed it");
      }
      while (done < kBatch + 1 && rounds++ < 1000000) {
        int outcount = 0, indices[kBatch];
        MPI_Status sts[kBatch];
        if (form == 0) {
          MPI_Waitsome(kBatch, r, &outcount, indices, sts);
        } else if (form == 1) {
          MPI_Testsome(kBatch, r, &outcount, indices, sts);
        } else {
          int index = -1;
          MPI_Testany(kBatch, r, &index, &flag, &sts[0]);
          outcount = !flag ? 0 : index == MPI_UNDEFINED ? MPI_UNDEFINED : 1;
          indices[0] = index;
        }
        if (outcount == MPI_UNDEFINED) {
          ++done; /* all null now */
          break;
        }
        for (int j = 0; j < outcount; ++j) {
          const int i = indices[j];
          CHECK(i >= 0 && i < kBatch && r[i] == MPI_REQUEST_NULL && sts[j].MPI_TAG == 80 + i &&
                    sts[j].MPI_ERROR == MPI_SUCCESS,
                "form %d: index %d tag %d", form, i, sts[j].MPI_TAG);
          if (i >= 0 && i < kBatch) ++seen[i];
          ++done;
        }
      }
      for (int i = 0; i < kBatch; ++i)
        CHECK(seen[i] == 1 && in[i] == prev * 10 + i + form * 1000,
              "form %d: receive %d seen %d times, got %d", form, i, seen[i], in[i]);
      CHECK(done == kBatch + 1, "form %d: %d completions", form, done);
      MPI_Waitall(kBatch, s, MPI_STATUSES_IGNORE);
    }
  }

  /* Everyone done before rank 0 reports. */
  int token = failures;
  if (rank != 0) {
    MPI_Send(&token, 1, MPI_INT, 0, 999, MPI_COMM_WORLD);
  } else {
    for (int i = 1; i < size; ++i) {
      MPI_Recv(&token, 1, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      failures += token;
    }
    if (failures == 0) printf("p2p_modes: ok %d ranks\n", size);
  }
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
