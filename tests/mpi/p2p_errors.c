/* mpi-test p2p_errors: what a faulty program gets from the send modes,
 * probe, persistent requests and cancel, by the first argument (each
 * error is fatal, MPI_ERRORS_ARE_FATAL: a message naming the call, the
 * rank and the problem, exit 3):
 *   truncate_test     a receive posted before an 8-byte message that is
 *                     4 bytes long: MPI_Test reports MPI_ERR_TRUNCATE;
 *   truncate_waitall  the same found unexpected, completed by
 *                     MPI_Waitall: MPI_ERR_IN_STATUS naming the request;
 *   truncate_mrecv    MPI_Mrecv of it into 4 bytes: MPI_ERR_TRUNCATE;
 *   bsend_none        MPI_Bsend without an attached buffer: MPI_ERR_BUFFER;
 *   bsend_small       MPI_Bsend of 8 bytes with a buffer of 100 (it needs
 *                     8 + MPI_BSEND_OVERHEAD): MPI_ERR_BUFFER;
 *   attach_twice      a second MPI_Buffer_attach: MPI_ERR_BUFFER;
 *   start_active      MPI_Start of an active persistent request;
 *   start_plain       MPI_Start of a request MPI_Irecv made;
 *   mrecv_null        MPI_Mrecv of MPI_MESSAGE_NULL;
 *   cancel_inactive   MPI_Cancel of a persistent request never started;
 *   probe_rank        MPI_Probe of a source past the communicator;
 *   wait_owner        a truncated receive on a dup of MPI_COMM_WORLD whose
 *                     handler is MPI_ERRORS_RETURN: MPI_Wait returns
 *                     MPI_ERR_TRUNCATE (the request's communicator's
 *                     handler, not MPI_COMM_WORLD's); prints "returned 14",
 *                     then the same on MPI_COMM_SELF (fatal) ends the job;
 *   ssend_deadlock    every rank MPI_Ssends to the next first: the
 *                     deadlock report names each rank's MPI_Ssend (exit 4). */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, flag = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* what = argc > 1 ? argv[1] : "";
  long eight = 8;
  int four = 0;
  char space[100];
  MPI_Request r = MPI_REQUEST_NULL;
  MPI_Message m = MPI_MESSAGE_NULL;
  if (rank == 0 && strcmp(what, "truncate_test") == 0) {
    MPI_Irecv(&four, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &r);
    MPI_Send(&eight, 1, MPI_LONG, 0, 1, MPI_COMM_WORLD);
    while (!flag) MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
  } else if (rank == 0 && strcmp(what, "wait_owner") == 0) {
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_SELF, &dup);
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    MPI_Irecv(&four, 1, MPI_INT, 0, 1, dup, &r);
    MPI_Send(&eight, 1, MPI_LONG, 0, 1, dup);
    const int rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
    int cls = -1;
    MPI_Error_class(rc, &cls);
    printf("returned %d\n", cls);
    fflush(stdout);
    MPI_Irecv(&four, 1, MPI_INT, 0, 1, MPI_COMM_SELF, &r);
    MPI_Send(&eight, 1, MPI_LONG, 0, 1, MPI_COMM_SELF);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
  } else if (rank == 0 && strcmp(what, "truncate_waitall") == 0) {
    MPI_Request both[2];
    MPI_Isend(&eight, 1, MPI_LONG, 0, 1, MPI_COMM_WORLD, &both[0]);
    MPI_Probe(0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* unexpected now */
    MPI_Irecv(&four, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &both[1]);
    MPI_Waitall(2, both, MPI_STATUSES_IGNORE);
  } else if (rank == 0 && strcmp(what, "truncate_mrecv") == 0) {
    MPI_Send(&eight, 1, MPI_LONG, 0, 1, MPI_COMM_WORLD);
    MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &m, MPI_STATUS_IGNORE);
    MPI_Mrecv(&four, 1, MPI_INT, &m, MPI_STATUS_IGNORE);
  } else if (rank == 0 && strcmp(what, "bsend_none") == 0) {
    MPI_Bsend(&eight, 1, MPI_LONG, 0, 1, MPI_COMM_WORLD);
  } else if (rank == 0 && strcmp(what, "bsend_small") == 0) {
    MPI_Buffer_attach(space, 100);
    MPI_Bsend(&eight, 1, MPI_LONG, 0, 1, MPI_COMM_WORLD);
  } else if (rank == 0 && strcmp(what, "attach_twice") == 0) {
    MPI_Buffer_attach(space, 64);
    MPI_Buffer_attach(space + 64, 36);
  } else if (rank == 0 && strcmp(what, "start_active") == 0) {
    MPI_Recv_init(&four, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &r);
    MPI_Start(&r);
    MPI_Start(&r);
  } else if (rank == 0 && strcmp(what, "start_plain") == 0) {
    MPI_Irecv(&four, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &r);
    MPI_Start(&r);
  } else if (rank == 0 && strcmp(what, "mrecv_null") == 0) {
    MPI_Mrecv(&four, 1, MPI_INT, &m, MPI_STATUS_IGNORE);
  } else if (rank == 0 && strcmp(what, "cancel_inactive") == 0) {
    MPI_Recv_init(&four, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &r);
    MPI_Cancel(&r);
  } else if (rank == 0 && strcmp(what, "probe_rank") == 0) {
    MPI_Probe(size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (strcmp(what, "ssend_deadlock") == 0) {
    MPI_Ssend(&eight, 1, MPI_LONG, (rank + 1) % size, 5, MPI_COMM_WORLD);
    MPI_Recv(&eight, 1, MPI_LONG, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Finalize();
  return 0;
}
