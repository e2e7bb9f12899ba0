/*  bench_raw: the raw limits a benchmark compares shoal against, measured in
    its own run (the machine is noisy: limits.md quotes figures for
    orientation, never for a ratio): CURVE transfers, and a file copied on
    one disk (bench_raw_copy).

    Each transfer runs between two processes forked for it, talking plain
    libzmq over CURVE on tcp loopback, with the malloc settings shoald
    starts with (shoal_malloc_tune), so that the comparison is with the
    same library, cipher and allocator and nothing of shoal:

      stream  PUSH to PULL, messages of BENCH_RAW_STREAM_MESSAGE sent
              zero-copy (zmq_msg_init_data), no pacing: the ceiling
              limits.md quotes for CURVE.
      paged   DEALER asks, ROUTER answers with one message of the size
              asked for (ordinary zmq_send), WINDOW requests in flight: the
              shape of a paged pull.

    The clock starts once the CURVE handshake is done and stops at the last
    byte received.

    The process helpers below are what the transfers run on; a bench uses
    them for the processes it starts itself (its nodes), so that an
    interrupted run leaves none of them behind.
*/
#ifndef BENCH_RAW_H_INCLUDED
#define BENCH_RAW_H_INCLUDED

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

//  The stream's message size: what limits.md measured with.
#define BENCH_RAW_STREAM_MESSAGE (1024 * 1024)

//  Seconds the zero-copy stream of TOTAL bytes took, or -1 on failure
//  (with the reason on stderr).
double bench_raw_stream(uint64_t total);

//  Where a transfer runs when not on loopback: each side in a network
//  namespace of its own (as `ip netns` names them), the receiving side
//  bound to SERVER_HOST there.
typedef struct {
    const char *server_netns;   //  the receiving side's namespace (NULL: this one)
    const char *server_host;    //  the address it binds (NULL: 127.0.0.1)
    const char *client_netns;   //  the sending side's namespace (NULL: this one)
} bench_raw_path_t;

//  The same stream on PATH: what a link between two namespaces carries.
double bench_raw_stream_on(uint64_t total, const bench_raw_path_t *path);

//  Seconds the paged transfer of TOTAL bytes in pages of PAGE_BYTES, WINDOW
//  requests in flight, took, or -1 on failure.
double bench_raw_paged(uint64_t total, size_t page_bytes, size_t window);

//  Seconds a copy of the file FROM to TO (made, or emptied) took, on its
//  disk alone: read and written around the page cache (O_DIRECT) in 4 MiB
//  blocks, a reader and a writer thread four blocks apart, then made
//  durable (fdatasync): what an object's replicate between two nodes
//  whose data share one disk cannot beat. Returns -1 on failure (the
//  reason on stderr).
double bench_raw_copy(const char *from, const char *to);

//  Seconds on a monotonic clock.
double bench_raw_now(void);

//  Forks a child that dies with the bench (PR_SET_PDEATHSIG). Returns the
//  pid in the parent, 0 in the child, -1 on failure.
pid_t bench_raw_fork_bound(void);

//  Waits up to TIMEOUT_MS for PID to exit. Returns its exit code (128 +
//  signal when killed), or -1 when it still runs or is not our child.
int bench_raw_wait(pid_t pid, int timeout_ms);

//  Stops *PID_P (SIGTERM, SIGKILL after a bound; WHAT names it in the
//  message) and sets it to 0. Nothing happens when *PID_P is 0.
void bench_raw_stop(pid_t *pid_p, const char *what);

#endif
