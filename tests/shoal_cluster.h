/*  shoal_cluster: several real shoald processes forming one mesh, for tests.

    A cluster starts N nodes, n1..nN, each a real shoald with its own data
    directory, all serving with one cluster key and all admitting one admin
    client key. Every node but n1 joins the mesh through n1, the seed. The
    mesh timeouts are small by default so that failure detection takes a
    second, not a minute. Everything lives under the current test directory
    (a second cluster of the same test in cluster2/, and so on):

        cluster/cluster.cert(_secret)   the cluster key every node serves with
        cluster/admin.cert(_secret)     the admin client every node admits
        cluster/n1/data, n1/clients     node n1's store and admitted clients
        cluster/n1.log                  node n1's output, across restarts

    In loopback mode the nodes listen on free 127.0.0.1 ports; they can be
    killed and restarted, not cut off. In namespace mode (root and `ip` and
    `nft` needed) each node runs in its own network namespace at
    198.18.X.i:7400, so shoal_cluster_cut makes a real partition: the node
    can neither reach nor be reached by any other node, while the test
    process still reaches every node and can write on both sides.

    Typical use:

        shoal_cluster_t *cluster = shoal_cluster_new(3, NULL);
        CHECK(shoal_cluster_start(cluster) == 0);
        CHECK_MSG(shoal_cluster_wait_all_alive(cluster, 10000) == 0, "%s", shoal_cluster_error(cluster));
        shoal_client_kv_put(shoal_cluster_client(cluster, 1), "app", "k", "v", 1, NULL);
        CHECK_MSG(shoal_cluster_wait_converged(cluster, "app", 10000) == 0, "%s", shoal_cluster_error(cluster));
        shoal_cluster_destroy(&cluster);

    Nodes are numbered from 1. Actions return 0 or -1; after -1 (and after a
    wait that timed out) shoal_cluster_error says what went wrong or what was
    last seen. A failed CHECK returns from the test without destroying its
    cluster: call shoal_cluster_destroy_all after each test (the test's main
    does), and the harness also tears everything down at exit.
*/
#ifndef SHOAL_CLUSTER_H_INCLUDED
#define SHOAL_CLUSTER_H_INCLUDED

#include "shoal_test.h"
#include "shoal.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

//  Mesh timeouts a cluster uses unless its options say otherwise.
#define SHOAL_CLUSTER_PROBE_INTERVAL_MS 100
#define SHOAL_CLUSTER_PROBE_TIMEOUT_MS 100
#define SHOAL_CLUSTER_SUSPECT_TIMEOUT_MS 1000
#define SHOAL_CLUSTER_SYNC_INTERVAL_MS 200
//  The port every node listens on in namespace mode (each has its own address).
#define SHOAL_CLUSTER_NETNS_PORT 7400

typedef struct {
    bool namespaces;            //  one network namespace per node, so cut/heal work
    int probe_interval_ms;      //  mesh/probe_interval_ms; 0: SHOAL_CLUSTER_PROBE_INTERVAL_MS
    int probe_timeout_ms;       //  mesh/probe_timeout_ms; 0: SHOAL_CLUSTER_PROBE_TIMEOUT_MS
    int suspect_timeout_ms;     //  mesh/suspect_timeout_ms; 0: SHOAL_CLUSTER_SUSPECT_TIMEOUT_MS
    int sync_interval_ms;       //  mesh/sync_interval_ms; 0: SHOAL_CLUSTER_SYNC_INTERVAL_MS
    int64_t retention_ms;       //  oplog/retention_ms; 0: entries are not pruned by age
    bool no_store_sync;         //  store/sync = 0: faster writes, lost on kill -9
    bool verbose;               //  log/verbose = 1 in every node's log
} shoal_cluster_options_t;

typedef struct _shoal_cluster_t shoal_cluster_t;

//  Prepares NODES nodes (keys, directories, and in namespace mode the
//  network) without starting them. OPTIONS may be NULL for loopback mode with
//  the default timeouts. Returns NULL on failure, with the reason on stderr.
shoal_cluster_t *
    shoal_cluster_new(int nodes, const shoal_cluster_options_t *options);

//  Stops every node (SIGTERM, SIGKILL after a bound), closes the clients and
//  removes every namespace and interface the cluster made. Safe twice.
void
    shoal_cluster_destroy(shoal_cluster_t **self_p);

//  Destroys every cluster still alive: after each test, and at exit.
void
    shoal_cluster_destroy_all(void);

//  What the last failed action or timed-out wait was about. Borrowed.
const char *
    shoal_cluster_error(shoal_cluster_t *self);

int
    shoal_cluster_size(shoal_cluster_t *self);

//  Starts every node that is not running, the seed first, and waits until
//  each answers status. It does not wait for the mesh to form.
int
    shoal_cluster_start(shoal_cluster_t *self);

//  Starts node INDEX on its data directory and port and waits until it
//  answers status (its client is reconnected).
int
    shoal_cluster_node_start(shoal_cluster_t *self, int index);

//  Sends SIGNAL to node INDEX and waits for it to exit (SIGKILL after 10 s).
//  Returns its exit code (128+signal when killed), or -1 when it was not running.
int
    shoal_cluster_node_kill(shoal_cluster_t *self, int index, int signal);

//  Stops node INDEX with SIGTERM if it runs, then starts it again.
int
    shoal_cluster_node_restart(shoal_cluster_t *self, int index);

bool
    shoal_cluster_node_running(shoal_cluster_t *self, int index);

//  Adds "NAME=VALUE" to node INDEX's environment from its next start on; a
//  later setting of the same name wins over the harness's own.
int
    shoal_cluster_node_setenv(shoal_cluster_t *self, int index, const char *name, const char *value);

//  Makes node INDEX serve with the cluster key at CERT_PATH (its _secret
//  beside it) instead of the cluster's, from its next start on. Such a node
//  is a stranger: the all-node waits leave it out, and its client checks it
//  against CERT_PATH.
int
    shoal_cluster_node_set_cluster_cert(shoal_cluster_t *self, int index, const char *cert_path);

//  Cuts node INDEX off from every other node / ends that (namespace mode only).
int
    shoal_cluster_cut(shoal_cluster_t *self, int index);
int
    shoal_cluster_heal(shoal_cluster_t *self, int index);

//  Limits node INDEX's link to RATE_MBIT megabits per second each way, as a
//  slower network would (namespace mode only; tc's token bucket filter).
int
    shoal_cluster_limit_rate(shoal_cluster_t *self, int index, int rate_mbit);

//  Node INDEX's id ("n1"...), endpoint, log file and data directory. Borrowed.
const char *
    shoal_cluster_node_id(shoal_cluster_t *self, int index);
const char *
    shoal_cluster_endpoint(shoal_cluster_t *self, int index);
const char *
    shoal_cluster_log_path(shoal_cluster_t *self, int index);
const char *
    shoal_cluster_data_dir(shoal_cluster_t *self, int index);
//  Node INDEX's process id (0 when stopped) and its network namespace ("" in
//  loopback mode), for running a command beside it with `ip netns exec`.
pid_t
    shoal_cluster_node_pid(shoal_cluster_t *self, int index);
const char *
    shoal_cluster_netns(shoal_cluster_t *self, int index);
//  The admin client certificate and the cluster's public certificate.
const char *
    shoal_cluster_admin_cert(shoal_cluster_t *self);
const char *
    shoal_cluster_cluster_cert(shoal_cluster_t *self);

//  The cluster's admin client to node INDEX (borrowed, 2 s timeout).
shoal_client_t *
    shoal_cluster_client(shoal_cluster_t *self, int index);

//  A new admin client to node INDEX, the caller's: one per thread.
shoal_client_t *
    shoal_cluster_client_new(shoal_cluster_t *self, int index);

//  Runs shoalctl against node INDEX as the admin with the arguments that
//  follow (NULL-terminated). Returns its exit code and *OUTPUT_P (stdout and
//  stderr, caller frees; may be NULL).
int
    shoal_cluster_ctl(shoal_cluster_t *self, int index, char **output_p, ...);

//  How node OBSERVER sees node TARGET: its state ("alive", "suspect", "dead",
//  "left"; "absent" when it is not listed) into STATE, and its incarnation
//  (may be NULL). Returns 0, or -1 when OBSERVER did not answer.
int
    shoal_cluster_peer_state(shoal_cluster_t *self, int observer, int target, char *state,
                             size_t state_size, uint64_t *incarnation);

//  A condition to wait for. It returns true when met; otherwise it may write
//  what it saw into WHY, which a timeout reports.
typedef bool (shoal_cluster_predicate_fn)(shoal_cluster_t *self, void *arg, char *why, size_t why_size);

//  Polls PREDICATE until it holds or TIMEOUT_MS pass. On timeout returns -1
//  and the error reads "waited N ms for WHAT; last seen: WHY".
int
    shoal_cluster_wait_until(shoal_cluster_t *self, shoal_cluster_predicate_fn *predicate, void *arg,
                             int timeout_ms, const char *what);

//  Every running member that is not cut lists every other one as alive.
int
    shoal_cluster_wait_all_alive(shoal_cluster_t *self, int timeout_ms);

//  A test's opening: shoal_cluster_start, then shoal_cluster_wait_all_alive
//  within TIMEOUT_MS. 0, or -1 with shoal_cluster_error saying which failed.
int
    shoal_cluster_up(shoal_cluster_t *self, int timeout_ms);

//  Node OBSERVER sees node TARGET in STATE.
int
    shoal_cluster_wait_state(shoal_cluster_t *self, int observer, int target, const char *state,
                             int timeout_ms);

//  Every running member that is not cut has identical oplog heads for
//  DATASET and identical live keys (same key, same writing entry).
int
    shoal_cluster_wait_converged(shoal_cluster_t *self, const char *dataset, int timeout_ms);

//  How many live keys starting with PREFIX (NULL: all) node INDEX has in DATASET.
int
    shoal_cluster_kv_count(shoal_cluster_t *self, int index, const char *dataset, const char *prefix,
                           size_t *count);

//  Whether namespace mode can run here; when not, WHY says what is missing.
bool
    shoal_cluster_namespaces_available(char *why, size_t why_size);

//  Whether we run under CI (CI set to anything but "", "0" or "false"),
//  where a test that needs namespaces fails instead of skipping.
bool
    shoal_cluster_in_ci(void);

//  At the top of a test that needs namespace mode: outside CI, prints
//  "skipped: WHY" and returns (the test counts as passed); under CI, fails.
#define SHOAL_CLUSTER_REQUIRE_NAMESPACES() do { \
    char _why[512]; \
    if (!shoal_cluster_namespaces_available(_why, sizeof _why)) { \
        if (shoal_cluster_in_ci()) { \
            fprintf(stderr, "%s:%d: namespace mode is required under CI: %s\n", __FILE__, __LINE__, _why); \
            shoal_test_failed = true; \
        } \
        else \
            printf("skipped: %s\n", _why); \
        return; \
    } } while (0)

#endif
