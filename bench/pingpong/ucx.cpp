// ucx_pingpong: the plain UCX baseline for weft's cross-node pingpong, beside
// mpi_pingpong (mpi.cpp). Ranks 0 and 1 bounce a message of each size with UCP
// active messages; the one-way time is half a round trip. It uses no weft
// runtime at all, only the benchmark harness for its flags and its output,
// so that weft's ucx transport can be compared with the UCX it runs over, in
// the same run and with the same UCX: the gap between the two is weft's own
// cost over UCX.
//
// To keep that comparison fair the UCP context asks for the features weft's
// ucx transport asks for (UCP_FEATURE_AM | UCP_FEATURE_RMA |
// UCP_FEATURE_WAKEUP: they decide which UCT transports and protocols UCP
// sets up), and the worker is UCS_THREAD_MODE_SERIALIZED like weft's;
// endpoints come from the peer's worker address with no error handling (as
// weft's on one host). MPI only exchanges the worker addresses and brackets
// each measurement with barriers; the timed loop is UCP alone:
//   send: ucp_am_send_nbx (UCP_AM_SEND_FLAG_EAGER up to 8 KiB, as weft's
//         small messages; above, UCX's own choice, rendezvous for large
//         ones), waited for when it returns a request;
//   receive: an AM handler (UCP_AM_FLAG_WHOLE_MSG) copies eager data into
//         the receive buffer and sets a flag; rendezvous data is left
//         pending (UCS_INPROGRESS) and fetched by ucp_am_recv_data_nbx into
//         the receive buffer from the loop, which spins on
//         ucp_worker_progress.
// With --touch=true each rank reads the whole message it received (and
// checks it) and writes the whole message before sending, as mpi_pingpong
// and weft's pingpong --touch=true do.
//
//   mpirun -n 2 build/release/bench/ucx_pingpong --json
//
// Every rank takes part in the barriers; ranks above 1 only wait (they open
// no UCP context), so the program runs under any -n >= 2.
#include <mpi.h>
#include <ucp/api/ucp.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "pingpong/baseline.hpp"

namespace {

const char* about =
    "ucx_pingpong: one-way latency and bandwidth between MPI ranks 0 and 1 with plain UCP\n"
    "active messages (the UCX baseline for weft's ucx transport; MPI only exchanges the\n"
    "worker addresses; run under mpirun with -n 2 or more). Flags:\n"
    "  --bytes=LIST   message sizes (default 8,64,512,4096,32768,262144,1048576,4194304)\n"
    "  --iters=N      round trips per measurement for small messages (default 2000; fewer\n"
    "                 for large ones, at least 20, about 64 MiB moved per measurement)\n"
    "  --touch=BOOL   true: the receiver reads every byte (and checks it) and the sender\n"
    "                 writes every byte before each send (default false)";

// Active-message id of the ping and of the pong (one handler serves both).
constexpr unsigned am_id = 0;
// Largest message sent with UCP_AM_SEND_FLAG_EAGER; above it UCX chooses
// (eager, or rendezvous for large messages).
constexpr long eager_limit = 8 << 10;

[[noreturn]] void fail(int code, const char* what) {
  std::fprintf(stderr, "ucx_pingpong: %s\n", what);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);  // not reached: MPI_Abort ends every rank
}

void check(ucs_status_t s, const char* call) {
  if (s == UCS_OK) return;
  char what[256];
  std::snprintf(what, sizeof what, "%s failed: %s", call, ucs_status_string(s));
  fail(1, what);
}

// What the AM handler leaves for the loop: one message at a time (each
// side sends only after the previous message was answered).
struct inbox {
  char* buf = nullptr;        // receive buffer (the largest size)
  std::size_t expect = 0;     // the size being measured
  bool arrived = false;       // a message came (copied, or rndv_desc set)
  void* rndv_desc = nullptr;  // rendezvous data still to fetch
  std::size_t length = 0;     // its length
};

ucs_status_t on_am(void* arg, const void*, std::size_t, void* data, std::size_t length,
                   const ucp_am_recv_param_t* param) {
  auto* in = static_cast<inbox*>(arg);
  if (in->arrived) fail(1, "a message arrived before the previous one was answered");
  if (length != in->expect) {
    char what[128];
    std::snprintf(what, sizeof what, "a %zu-byte message arrived, %zu expected", length,
                  in->expect);
    fail(1, what);
  }
  in->arrived = true;
  if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
    in->rndv_desc = data;  // fetched by ucp_am_recv_data_nbx in the loop
    in->length = length;
    return UCS_INPROGRESS;
  }
  std::memcpy(in->buf, data, length);
  return UCS_OK;
}

struct completion {
  bool done = false;
  ucs_status_t status = UCS_OK;
};

void on_send_done(void*, ucs_status_t status, void* user_data) {
  auto* c = static_cast<completion*>(user_data);
  c->status = status;
  c->done = true;
}

void on_recv_done(void*, ucs_status_t status, std::size_t, void* user_data) {
  on_send_done(nullptr, status, user_data);
}

// Waits for a non-blocking call's result: NULL (done at once), an error, or
// a request that the callback completes while the worker progresses.
void wait(ucp_worker_h worker, ucs_status_ptr_t r, const completion& c, const char* call) {
  if (r == nullptr) return;
  if (UCS_PTR_IS_ERR(r)) check(UCS_PTR_STATUS(r), call);
  while (!c.done) ucp_worker_progress(worker);
  ucp_request_free(r);
  check(c.status, call);
}

void send(ucp_worker_h worker, ucp_ep_h ep, const char* data, long bytes) {
  completion c;
  ucp_request_param_t p{};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  p.cb.send = &on_send_done;
  p.user_data = &c;
  p.flags = bytes <= eager_limit ? UCP_AM_SEND_FLAG_EAGER : 0;
  wait(worker, ucp_am_send_nbx(ep, am_id, nullptr, 0, data, std::size_t(bytes), &p), c,
       "ucp_am_send_nbx");
}

// Spins on the worker until the next message is whole in in.buf.
void receive(ucp_worker_h worker, inbox& in) {
  while (!in.arrived) ucp_worker_progress(worker);
  if (in.rndv_desc != nullptr) {
    completion c;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv_am = &on_recv_done;
    p.user_data = &c;
    void* desc = in.rndv_desc;
    in.rndv_desc = nullptr;
    wait(worker, ucp_am_recv_data_nbx(worker, desc, in.buf, in.length, &p), c,
         "ucp_am_recv_data_nbx");
  }
  in.arrived = false;
}

}  // namespace

int main(int argc, char** argv) {
  weft::bench::baseline_job job;
  if (!weft::bench::start_baseline(argc, argv, "ucx_pingpong", about, job)) return 2;
  const int rank = job.rank, size = job.size;
  const bool touch = job.touch;
  const long iters = job.iters;
  const std::vector<long>& sizes = job.sizes;
  const weft::bench::cli& cli = job.args;
  const bool active = rank < 2;  // ranks 0 and 1 ping-pong; the others wait
  const int peer = 1 - rank;

  // UCP: context, worker, this worker's address (ranks 0 and 1 only).
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  ucp_address_t* my_addr = nullptr;
  std::size_t my_addr_len = 0;
  if (active) {
    ucp_config_t* config = nullptr;
    check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
    params.features = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;  // as weft's
    params.estimated_num_eps = 1;
    const ucs_status_t s = ucp_init(&params, config, &context);
    ucp_config_release(config);
    check(s, "ucp_init");
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    check(ucp_worker_create(context, &wp, &worker), "ucp_worker_create");
    check(ucp_worker_get_address(worker, &my_addr, &my_addr_len), "ucp_worker_get_address");
  }

  // The addresses' lengths, then the addresses (MPI's only part in the data).
  const auto ranks = static_cast<std::size_t>(size);
  std::vector<unsigned long long> lens(ranks, 0);
  const unsigned long long my_len = my_addr_len;
  MPI_Allgather(&my_len, 1, MPI_UNSIGNED_LONG_LONG, lens.data(), 1, MPI_UNSIGNED_LONG_LONG,
                MPI_COMM_WORLD);
  std::vector<int> counts(ranks), displs(ranks);
  int total = 0;
  for (int i = 0; i < size; ++i) {
    counts[std::size_t(i)] = int(lens[std::size_t(i)]);
    displs[std::size_t(i)] = total;
    total += counts[std::size_t(i)];
  }
  std::vector<char> addrs(std::size_t(std::max(total, 1)));
  MPI_Allgatherv(my_addr, int(my_addr_len), MPI_BYTE, addrs.data(), counts.data(), displs.data(),
                 MPI_BYTE, MPI_COMM_WORLD);
  if (my_addr != nullptr) ucp_worker_release_address(worker, my_addr);

  const long largest = *std::max_element(sizes.begin(), sizes.end());
  std::vector<char> sbuf(static_cast<std::size_t>(largest), 1);
  std::vector<char> rbuf(static_cast<std::size_t>(largest), 1);
  inbox in;
  in.buf = rbuf.data();
  ucp_ep_h ep = nullptr;
  if (active) {
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                    UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = am_id;
    hp.flags = UCP_AM_FLAG_WHOLE_MSG;
    hp.cb = &on_am;
    hp.arg = &in;
    check(ucp_worker_set_am_recv_handler(worker, &hp), "ucp_worker_set_am_recv_handler");
    ucp_ep_params_t ep_params{};
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    const char* peer_addr = addrs.data() + displs[std::size_t(peer)];
    ep_params.address = reinterpret_cast<const ucp_address_t*>(peer_addr);
    ep_params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    check(ucp_ep_create(worker, &ep_params, &ep), "ucp_ep_create");
  }

  unsigned char fill = 1;
  // --touch: the receiver reads what came in (and checks it)...
  auto check_received = [&](long bytes) {
    if (touch && !weft::bench::payload_is_whole(rbuf.data(), std::size_t(bytes)))
      fail(1, "a torn payload arrived");
  };
  // ...and the sender writes what goes out.
  auto fill_outgoing = [&](long bytes) {
    if (touch) weft::bench::fill_payload(sbuf.data(), std::size_t(bytes), ++fill);
  };
  weft::bench::reporter out("ucx_pingpong", cli.json);
  MPI_Barrier(MPI_COMM_WORLD);
  for (long bytes : sizes) {
    const long n = weft::bench::round_trips(iters, bytes);
    in.expect = std::size_t(bytes);
    std::vector<double> oneway_ns;
    for (int r = -1; r < cli.repeat; ++r) {  // r = -1: warm-up (and endpoint wire-up)
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      if (rank == 0) {
        for (long i = 0; i < n; ++i) {
          fill_outgoing(bytes);
          send(worker, ep, sbuf.data(), bytes);
          receive(worker, in);
          check_received(bytes);
        }
      } else if (rank == 1) {
        for (long i = 0; i < n; ++i) {
          receive(worker, in);
          check_received(bytes);
          fill_outgoing(bytes);
          send(worker, ep, sbuf.data(), bytes);
        }
      }
      const double elapsed = MPI_Wtime() - t0;
      if (r >= 0) oneway_ns.push_back(elapsed * 1e9 / double(2 * n));
    }
    if (rank != 0) continue;
    weft::bench::latency_bandwidth_rows(
        out, {{"transport", "plain-ucx"}, {"ranks", size}, {"touch", touch}, {"bytes", bytes}},
        bytes, oneway_ns);
  }
  if (rank == 0) out.flush();

  // Teardown: both sides close (flushing) while progressing, then wait for
  // each other before the worker goes.
  if (active) {
    completion c;
    ucp_request_param_t p{};
    p.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    p.cb.send = &on_send_done;
    p.user_data = &c;
    p.flags = 0;
    wait(worker, ucp_ep_close_nbx(ep, &p), c, "ucp_ep_close_nbx");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (active) {
    ucp_worker_destroy(worker);
    ucp_cleanup(context);
  }
  MPI_Finalize();
  return 0;
}
