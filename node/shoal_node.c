/*  shoal_node: the node's reactor and its request handlers.

    All node state lives in shoal_node_t and is touched by one thread, the
    actor's, through one zloop. Readers: the pipe (commands from shoald) and
    the ROUTER (requests from clients and peers), and one DEALER per peer
    (replies from peers, read by the mesh). One periodic tick (s_tick) drives
    everything that needs time to pass.

    Every request is answered, a malformed one with 400 naming what was wrong;
    nothing a client sends can stop the node from serving the next one.
*/
#include "shoal_node.h"
#include "shoal_auth.h"
#include "shoal_claims.h"
#include "shoal_data.h"
#include "shoal_fault.h"
#include "shoal_gate.h"
#include "shoal_guests.h"
#include "shoal_members.h"
#include "shoal_mesh.h"
#include "shoal_metrics.h"
#include "shoal_events.h"
#include "shoal_moves.h"
#include "shoal_drain.h"
#include "shoal_damage.h"
#include "shoal_sync.h"
#include "shoal_txn.h"
#include "shoal_leases.h"
#include "shoal_locks.h"
#include "shoal_fsck.h"
#include "shoal_fsck_checks.h"
#include "shoal_objects.h"
#include "shoal_oplog.h"
#include "shoal_proto.h"
#include "shoal_store.h"
#include "shoal.h"
#include "shoal_alloc.h"

#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/timerfd.h>

#define S_MB (1024 * 1024)
#define S_KEYS_DIR "keys"
#define S_DB_DIR "db"
#define S_ADMIN_NAME "admin"
//  The period of the node's one tick: the finest timeout it keeps (probe
//  timeouts are tens of ms and up) is measured in these steps.
#define S_TICK_MS 20
//  A tick this late means the reactor was held up (a slow handler, a slow
//  write, no CPU): logged, since every timeout the node judges is judged
//  late by as much.
#define S_TICK_LATE_MS 250
//  How often the tick asks the authentication handler how many client keys
//  it admits (status reports the last answer).
#define S_CLIENTS_COUNT_MS 1000
#define NS_PER_MS 1000000L
//  Entries a step of the migration of a store of layout 1 moves: one step
//  runs per reactor turn, between the requests, so it must stay well
//  inside a probe's timeout (a few tens of ms on an idle machine, about a
//  hundred at load 12).
#define S_MIGRATE_STEP_ENTRIES 1000
//  The pause between two migration steps, in ms: the reactor polls its
//  sockets between them.
#define S_MIGRATE_STEP_MS 1

struct _shoal_node_t {
    shoal_settings_t settings;      //  what the node runs with (reloadable keys change)
    char *config_path;              //  re-read on reload; NULL when none was given
    shoal_store_t *store;           //  the node's RocksDB
    shoal_oplog_t *oplog;           //  the replicated datasets, in the store
    shoal_members_t *members;       //  peers remembered across restarts, in the store
    shoal_mesh_t *mesh;             //  membership, failure detection, peer DEALERs
    shoal_sync_t *sync;             //  oplog replication and peer-confirmed prune
    shoal_guests_t *guests;         //  the guest actor: every guest operation runs there
    shoal_claims_t *claims;         //  the claims this node owns
    shoal_moves_t *moves;           //  live moves from and to this node
    shoal_drain_t *drain;           //  the draining mark, and a drain of this node's claims
    shoal_txn_t *txn;               //  each claim's own keys and their transactions
    shoal_leases_t *leases;         //  leases this node granted, and what is attached to them
    shoal_locks_t *locks;           //  the claims' read/write locks
    shoal_objects_t *objects;       //  storage objects: the catalog, this node's instances and their locks
    shoal_damage_t *damage;         //  accounts of what the store lost or cannot read
    shoal_metrics_t *metrics;       //  counts and gauges, served on metrics/bind
    shoal_events_t *events;         //  the event stream watchers follow
    shoal_fsck_t *fsck;             //  the consistency sweep: its runs and their checks
    shoal_fsck_node_t fsck_node;    //  what the sweep's built-in checks read and mend through
    zactor_t *auth;                 //  ZAP handler: who may connect, with which role
    uint64_t clients;               //  client keys it admitted when it last said (status)
    int64_t clients_asked_ms;       //  when the tick last asked it (monotonic)
    zsock_t *router;                //  CURVE server for peers and clients
    zactor_t *gate;                 //  closes the router's connections that do not authenticate
    zsock_t *pipe;                  //  to shoald, while the actor runs
    int tick_fd;                    //  timerfd of the tick, -1 when none
    int migrate_timer;              //  the reactor's timer of the migration's steps, -1 when none
    int64_t last_tick_ms;           //  monotonic time of the last tick, 0 before the first
    char *endpoint;                 //  advertised endpoint with the bound port
    char *admin_cert;               //  the admin client cert kept under keys/, if any
    int64_t started_ms;             //  monotonic clock at start, for uptime
    bool stopped_cleanly;           //  the reactor ended its loop: the store may be marked clean
    uint64_t requests;              //  requests answered, for the log at stop
};

//  Creates DIR and its parents. Returns 0 or -1 with *ERROR_P.
static int
s_dir_ensure(const char *dir, const char *what, char **error_p)
{
    if (zsys_dir_create("%s", dir) != 0) {
        *error_p = zsys_sprintf("cannot create %s %s: %s", what, dir, strerror(errno));
        return -1;
    }
    return 0;
}

//  Generates the cluster key and a first admin client when they are missing
//  and the settings allow it, so that a new node runs on its defaults alone.
static int
s_keys_ensure(shoal_node_t *self, char **error_p)
{
    shoal_settings_t *settings = &self->settings;
    char *secret = zsys_sprintf("%s_secret", settings->cluster_cert);
    bool have_cluster = access(secret, R_OK) == 0;
    free(secret);
    if (!have_cluster) {
        if (!settings->generate_keys) {
            *error_p = zsys_sprintf("cluster key %s_secret is missing (make one with "
                                    "`shoalctl keygen cluster DIR`, or set security/generate_keys = 1)",
                                    settings->cluster_cert);
            return -1;
        }
        if (shoal_keygen_cluster(settings->cluster_cert, error_p))
            return -1;
        zsys_info("node: generated a new cluster key at %s", settings->cluster_cert);
    }
    if (s_dir_ensure(settings->clients_dir, "clients directory", error_p))
        return -1;
    zdir_t *clients = zdir_new(settings->clients_dir, NULL);
    bool empty = !clients || zdir_count(clients) == 0;
    zdir_destroy(&clients);
    //  The admin key is named after its node (admin-NODEID): the public
    //  half of one node's admin key copied into another node's clients
    //  directory then sits beside that node's own, never over it.
    char *admin_name = zsys_sprintf("%s-%s", S_ADMIN_NAME, settings->node_id);
    if (empty && settings->generate_keys) {
        //  The admin's secret stays under keys/; only its public half goes to
        //  the clients directory the ZAP handler reads.
        char *mine = zsys_sprintf("%s/%s/%s.cert", settings->data_dir, S_KEYS_DIR, admin_name);
        char *published = zsys_sprintf("%s/%s.cert", settings->clients_dir, admin_name);
        int rc = shoal_keygen_client(mine, admin_name, SHOAL_ROLE_ADMIN, NULL, error_p);
        zcert_t *cert = rc == 0 ? zcert_load(mine) : NULL;
        if (cert && zcert_save_public(cert, published) == 0) {
            zsys_info("node: generated admin client key %s (public half in %s)", mine, published);
        }
        else
        if (rc == 0) {
            *error_p = zsys_sprintf("cannot write %s: %s", published, strerror(errno));
            rc = -1;
        }
        zcert_destroy(&cert);
        free(mine);
        free(published);
        if (rc) {
            free(admin_name);
            return -1;
        }
    }
    //  This node's admin key, or the admin.cert a node made before keys
    //  were named after their node.
    const char *names[] = { admin_name, S_ADMIN_NAME };
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !self->admin_cert; i++) {
        char *admin = zsys_sprintf("%s/%s/%s.cert", settings->data_dir, S_KEYS_DIR, names[i]);
        char *admin_secret = zsys_sprintf("%s_secret", admin);
        if (access(admin_secret, R_OK) == 0)
            self->admin_cert = admin;
        else
            free(admin);
        free(admin_secret);
    }
    free(admin_name);
    return 0;
}

//  Replaces the port of ENDPOINT with PORT: a bind to port 0 or '*' learns
//  its port only when bound.
static char *
s_endpoint_with_port(const char *endpoint, int port)
{
    const char *colon = strrchr(endpoint, ':');
    return zsys_sprintf("%.*s:%d", (int) (colon - endpoint), endpoint, port);
}

//  The epoch of a registry value, for the oplog's ordering.
static int
s_registry_epoch(const uint8_t *value, size_t size, uint64_t *epoch, void *arg)
{
    shoal_registry_record_t record;
    char error[256];
    if (shoal_msg_registry_record_codec.decode(value, size, &record, error, sizeof error))
        return -1;
    *epoch = record.epoch;
    shoal_msg_registry_record_codec.clear(&record);
    return 0;
}

//  Told by shoal_data of every local write: the sync pushes it to peers.
static void
s_written(const shoal_oplog_entry_t *entry, void *arg)
{
    shoal_node_t *self = (shoal_node_t *) arg;
    shoal_sync_written(self->sync, entry);
}

//  Told by the claim store of every claim and move record written: metrics
//  count it, the event stream tells it.
static void
s_store_changed(const shoal_claim_record_t *previous, const shoal_claim_record_t *record,
                const shoal_move_t *move, shoal_move_role_t deleted_role, const char *deleted_claim, void *arg)
{
    shoal_node_t *self = (shoal_node_t *) arg;
    shoal_metrics_store_changed(previous, record, move, deleted_role, deleted_claim, self->metrics);
    shoal_events_store_changed(previous, record, move, deleted_role, deleted_claim, self->events);
}

//  Says at start what a salvage open dropped from the store's log.
static void
s_salvage_report(shoal_node_t *self)
{
    const shoal_wal_report_t *report = shoal_store_salvaged(self->store);
    if (!report->count) {
        if (self->settings.salvage)
            zsys_info("node: salvage: the store's log was intact, nothing was dropped");
        return;
    }
    char *text = shoal_wal_report_describe(report, shoal_store_cf_name_by_id, SIZE_MAX);
    zsys_warning("node: salvage: the store lost what these damaged log records held: %s", text);
    free(text);
}

static void s_resume_parked(shoal_envelope_t **request_p, const shoal_caller_t *caller, zframe_t *routing_id,
                            void *arg);

shoal_node_t *
shoal_node_new(shoal_settings_t *settings, const char *config_path, char **error_p)
{
    shoal_node_t *self = (shoal_node_t *) zmalloc(sizeof *self);
    self->tick_fd = -1;
    self->migrate_timer = -1;
    self->settings = *settings;
    memset(settings, 0, sizeof *settings);
    self->config_path = config_path ? shoal_strdup(config_path) : NULL;
    self->started_ms = zclock_mono();
    zcert_t *cluster = NULL;
    char *db_dir = zsys_sprintf("%s/%s", self->settings.data_dir, S_DB_DIR);

    if (s_dir_ensure(self->settings.data_dir, "data directory", error_p))
        goto failed;
    //  The store comes first: its lock is what keeps a second node off this
    //  data directory, before that node touches any key file.
    shoal_store_options_t options;
    shoal_store_options_default(&options);
    options.sync = self->settings.store_sync;
    options.cache_bytes = (size_t) self->settings.cache_mb * S_MB;
    options.salvage = self->settings.salvage;
    options.reserve_bytes = (uint64_t) self->settings.reserve_mb * S_MB;
    self->store = shoal_store_new(db_dir, &options, error_p);
    if (!self->store)
        goto failed;
    s_salvage_report(self);
    shoal_oplog_options_t oplog_options;
    shoal_oplog_options_default(&oplog_options);
    oplog_options.node = self->settings.node_id;
    oplog_options.sync = self->settings.store_sync;
    oplog_options.max_clock_ahead_ms = (uint64_t) self->settings.max_clock_ahead_ms;
    //  A store of layout 1 is migrated a step per reactor turn once the node
    //  serves (s_migrate_step), not before: every read answers alike
    //  meanwhile. A reconcile needed now finishes it first.
    oplog_options.migrate_in_steps = true;
    oplog_options.migrate_batch = S_MIGRATE_STEP_ENTRIES;
    self->oplog = shoal_oplog_new(self->store, &oplog_options);
    //  Every write to the log is one batch but a bulk load's, which marks
    //  itself while it runs: reconcile runs when a load's mark survived (a
    //  stop cut it, or it failed), when the store predates the marks and
    //  the counts kept beside them, or when asked to; not otherwise, even
    //  after a crash. A large log is not read through at every start.
    bool clean = false, torn = true;
    const char *why = "asked to at every start (oplog/reconcile_always)";
    int rc = self->oplog ? shoal_oplog_take_clean_mark(self->oplog, &clean) : -1;
    if (rc == 0 && !self->settings.reconcile_always)
        rc = shoal_oplog_torn(self->oplog, &torn, &why);
    if (rc == 0 && torn) {
        zsys_info("node: reconciling the operation log: %s", why);
        rc = shoal_oplog_reconcile(self->oplog, NULL);
    }
    else
    if (rc == 0 && clean)
        zsys_info("node: the store was closed cleanly, no reconcile needed");
    else
    if (rc == 0)
        zsys_info("node: no clean-stop mark, but no reconcile is needed: %s", why);
    if (rc) {
        *error_p = zsys_sprintf("cannot open the operation log in %s: %s", db_dir,
                                self->oplog ? shoal_oplog_error(self->oplog) : shoal_store_error(self->store));
        goto failed;
    }
    if (s_keys_ensure(self, error_p))
        goto failed;
    cluster = zcert_load(self->settings.cluster_cert);
    if (!cluster || streq(zcert_secret_txt(cluster), "0000000000000000000000000000000000000000")) {
        *error_p = zsys_sprintf("cannot read the cluster key %s_secret", self->settings.cluster_cert);
        goto failed;
    }
    //  Registered before any entry is applied: the registry's order is
    //  decided by epoch whatever order its entries arrive in.
    if (shoal_oplog_set_epoch(self->oplog, SHOAL_REGISTRY_DATASET, s_registry_epoch, NULL)) {
        *error_p = zsys_sprintf("cannot order the registry: %s", shoal_oplog_error(self->oplog));
        goto failed;
    }
    //  The ZAP handler must run before the bind: libzmq admits anyone to a
    //  CURVE server while no handler is listening.
    self->auth = shoal_auth_new(zcert_public_txt(cluster), self->settings.clients_dir, self->settings.verbose,
                                self->settings.throttle_ms);
    if (!self->auth) {
        *error_p = shoal_strdup("cannot start the authentication handler");
        goto failed;
    }
    //  The first count, before the reactor reads the handler's answers.
    zstr_send(self->auth, "COUNT");
    char *count = zstr_recv(self->auth);
    self->clients = count ? strtoull(count, NULL, 10) : 0;
    free(count);
    self->router = zsock_new(ZMQ_ROUTER);
    zsock_set_zap_domain(self->router, "shoal");
    zcert_apply(cluster, self->router);
    zsock_set_curve_server(self->router, 1);
    zsock_set_maxmsgsize(self->router, (int) (self->settings.max_message_mb * S_MB));
    zsock_set_linger(self->router, 0);
    //  Watched from before the bind, so that no connection passes unseen.
    shoal_gate_options_t gate = shoal_gate_options(&self->settings);
    self->gate = shoal_gate_new(self->router, "node", &gate);
    if (!self->gate) {
        *error_p = shoal_strdup("cannot watch the router's connections");
        goto failed;
    }
    int port = zsock_bind(self->router, "%s", self->settings.bind);
    if (port < 0) {
        *error_p = zsys_sprintf("cannot bind %s: %s", self->settings.bind, zmq_strerror(zmq_errno()));
        goto failed;
    }
    self->endpoint = s_endpoint_with_port(self->settings.advertise, port);
    self->tick_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct itimerspec period = {
        { 0, S_TICK_MS * NS_PER_MS }, { 0, S_TICK_MS * NS_PER_MS }
    };
    if (self->tick_fd < 0 || timerfd_settime(self->tick_fd, 0, &period, NULL)) {
        *error_p = zsys_sprintf("cannot make the node's tick: %s", strerror(errno));
        goto failed;
    }
    self->members = shoal_members_new(self->store);
    self->mesh = shoal_mesh_new(&self->settings, self->endpoint, cluster, self->members);
    self->sync = shoal_sync_new(&self->settings, self->oplog, self->mesh, self->members);
    //  After the sync: reconciling may write to the registry, which the
    //  sync then pushes.
    self->guests = shoal_guests_new(&self->settings);
    self->claims = shoal_claims_new(&self->settings, self->endpoint, self->store, self->oplog, self->guests,
                                    s_written, self, error_p);
    if (!self->claims)
        goto failed;
    self->moves = shoal_moves_new(&self->settings, self->endpoint, cluster, self->claims, self->guests,
                                  self->mesh, error_p);
    if (!self->moves)
        goto failed;
    //  After the moves it asks for: a node marked draining refuses new
    //  claims from its start on.
    self->drain = shoal_drain_new(&self->settings, self->store, self->claims, self->moves, self->mesh, error_p);
    if (!self->drain)
        goto failed;
    //  After the moves: a claim's keys go with it in the move's final step.
    self->txn = shoal_txn_new(&self->settings, self->store, self->claims, self->mesh);
    shoal_moves_set_txn(self->moves, self->txn);
    self->leases = shoal_leases_new(&self->settings, self->txn, self->mesh, error_p);
    if (!self->leases)
        goto failed;
    shoal_leases_set_resume(self->leases, s_resume_parked, self);
    self->locks = shoal_locks_new(&self->settings, self->txn, self->claims, self->mesh);
    //  The lock sweep runs inside the membership event that declares a
    //  holder's node dead or back, before anything else sees it.
    shoal_mesh_subscribe(self->mesh, shoal_locks_mesh_event, self->locks);
    //  Objects: the catalog is a replicated dataset, written as kv is; the
    //  instances' bytes come and go over a receiver of their own.
    self->objects = shoal_objects_new(&self->settings, self->endpoint, cluster, self->store, self->oplog, self->mesh,
                                      s_written, self, error_p);
    if (!self->objects)
        goto failed;
    shoal_mesh_subscribe(self->mesh, shoal_objects_mesh_event, self->objects);
    shoal_claims_set_objects(self->claims, self->objects);
    self->damage = shoal_damage_new(self->store, shoal_claims_store(self->claims), self->moves, self->sync);
    //  Metrics: the claim store tells of every claim and move record
    //  written, the modules of refusals, ended moves and catch-ups.
    self->metrics = shoal_metrics_new(self->settings.metrics_bind, self->settings.node_id,
                                      shoal_claims_store(self->claims), error_p);
    if (!self->metrics)
        goto failed;
    if (self->metrics && shoal_metrics_port(self->metrics))
        zsys_info("node: metrics on port %d at /metrics (metrics/bind %s)", shoal_metrics_port(self->metrics),
                  self->settings.metrics_bind);
    //  Events: the same observer and mesh events, numbered and sent to watchers.
    self->events = shoal_events_new(self->settings.data_dir, self->settings.node_id,
                                    (size_t) self->settings.events_kept, self->router, error_p);
    if (!self->events)
        goto failed;
    shoal_claim_store_set_observer(shoal_claims_store(self->claims), s_store_changed, self);
    //  The sweep: one check per store and module, the storage objects'
    //  catalog's last.
    self->fsck = shoal_fsck_new(&self->settings, self->settings.node_id, self->store);
    self->fsck_node = (shoal_fsck_node_t) {
        .node_id = self->settings.node_id, .data_dir = self->settings.data_dir,
        .guest_dir = self->settings.guest_dir, .memory_dir = self->settings.guest_memory_dir, .oplog = self->oplog, .claims = shoal_claims_store(self->claims),
        .space = shoal_txn_space(self->txn), .moves = self->moves,
    };
    shoal_fsck_checks_register(self->fsck, &self->fsck_node);
    shoal_fsck_objects_register(self->fsck, self->objects);
    shoal_mesh_subscribe(self->mesh, shoal_metrics_mesh_event, self->metrics);
    shoal_mesh_subscribe(self->mesh, shoal_events_mesh_event, self->events);
    shoal_admission_set_metrics(shoal_claims_admission(self->claims), self->metrics);
    shoal_moves_set_metrics(self->moves, self->metrics);
    shoal_sync_set_metrics(self->sync, self->metrics);
    zcert_destroy(&cluster);
    free(db_dir);
    return self;
failed:
    zcert_destroy(&cluster);
    free(db_dir);
    shoal_node_destroy(&self);
    return NULL;
}

void
shoal_node_destroy(shoal_node_t **self_p)
{
    if (*self_p) {
        shoal_node_t *self = *self_p;
        //  The mesh goes first: its pending requests end with callbacks
        //  into the sync, and a relayed probe may still answer on the router.
        if (self->drain)
            shoal_drain_stop(self->drain);
        if (self->moves)
            shoal_moves_stop(self->moves);
        shoal_mesh_destroy(&self->mesh);
        //  Its run reads the store and the modules below.
        shoal_fsck_destroy(&self->fsck);
        shoal_damage_destroy(&self->damage);
        //  Before the claims and moves its answers go to: what they queued
        //  runs first (an aborted move's resume), the rest is cancelled.
        shoal_guests_destroy(&self->guests);
        if (self->claims)
            shoal_claim_store_set_observer(shoal_claims_store(self->claims), NULL, NULL);
        shoal_moves_destroy(&self->moves);
        //  After the moves: their last ends are told to it, and dropped.
        shoal_drain_destroy(&self->drain);
        shoal_locks_destroy(&self->locks);
        shoal_objects_destroy(&self->objects);
        shoal_leases_destroy(&self->leases);
        shoal_txn_destroy(&self->txn);
        shoal_claims_destroy(&self->claims);
        shoal_sync_destroy(&self->sync);
        shoal_members_destroy(&self->members);
        shoal_metrics_destroy(&self->metrics);
        shoal_events_destroy(&self->events);
        zactor_destroy(&self->gate);
        zsock_destroy(&self->router);
        if (self->tick_fd >= 0)
            close(self->tick_fd);
        zactor_destroy(&self->auth);
        //  Every writer has stopped: the mark is the last write.
        if (self->stopped_cleanly && self->oplog && shoal_oplog_mark_clean(self->oplog))
            zsys_warning("node: cannot mark the store closed cleanly: %s", shoal_oplog_error(self->oplog));
        shoal_oplog_destroy(&self->oplog);
        shoal_store_destroy(&self->store);
        shoal_settings_clear(&self->settings);
        free(self->config_path);
        free(self->endpoint);
        free(self->admin_cert);
        free(self);
        *self_p = NULL;
    }
}

const char *
shoal_node_endpoint(shoal_node_t *self)
{
    return self->endpoint;
}

const char *
shoal_node_admin_cert(shoal_node_t *self)
{
    return self->admin_cert;
}

//  The authentication handler answered COUNT: status reports it from now
//  on. Status itself never waits on that thread (nor on its read of the
//  clients directory); its figure is at most S_CLIENTS_COUNT_MS old.
static int
s_handle_auth(zloop_t *loop, zsock_t *auth, void *arg)
{
    shoal_node_t *self = (shoal_node_t *) arg;
    zmsg_t *msg = zmsg_recv(auth);
    //  A signal answers VERBOSE: nothing to keep.
    if (msg && zmsg_signal(msg) < 0) {
        char *count = zmsg_popstr(msg);
        if (count)
            self->clients = strtoull(count, NULL, 10);
        free(count);
    }
    zmsg_destroy(&msg);
    return 0;
}

static shoal_envelope_t *
s_handle_status(shoal_node_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    //  A tenant counts its own claims only: the others' are none of its business.
    int64_t claims = shoal_claims_count(self->claims, shoal_caller_is_tenant(caller) ? caller->tenant : NULL);
    if (claims < 0)
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "cannot count claims: %s",
                                    shoal_store_error(self->store));
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    shoal_msg_status_reply_t *body = shoal_envelope_new_body(reply);
    assert(body);
    body->node_id = shoal_strdup(self->settings.node_id);
    body->version = shoal_strdup(SHOAL_VERSION);
    body->uptime_ms = (uint64_t) (zclock_mono() - self->started_ms);
    body->endpoint = shoal_strdup(self->endpoint);
    //  A tenant learns nothing about where the node keeps its files.
    bool privileged = !streq(caller->role, SHOAL_ROLE_TENANT);
    body->data_dir = shoal_strdup(privileged ? self->settings.data_dir : "");
    body->claims = (uint64_t) claims;
    body->peers = shoal_mesh_size(self->mesh);
    body->clients = privileged ? self->clients : 0;
    body->role = shoal_strdup(caller->role);
    body->tenant = shoal_strdup(caller->tenant);
    shoal_oplog_migration_t migration;
    shoal_oplog_migration(self->oplog, &migration);
    body->oplog_migrating = migration.migrating;
    body->oplog_migrated = migration.moved;
    if (privileged)
        shoal_damage_status(self->damage, body);
    return reply;
}

//  Answers a request that waited for a lease's home (a copy of a lease it
//  names, or a lookup), now that the peers answered (shoal_leases_park).
static void
s_resume_parked(shoal_envelope_t **request_p, const shoal_caller_t *caller, zframe_t *routing_id, void *arg)
{
    shoal_node_t *self = (shoal_node_t *) arg;
    shoal_envelope_t *request = *request_p;
    shoal_envelope_t *reply = shoal_locks_handles(request->type) ? shoal_locks_handle(self->locks, request, caller)
                            : shoal_leases_handles(request->type) ? shoal_leases_handle(self->leases, request, caller)
                            : shoal_txn_handle(self->txn, request, caller);
    //  It may name another lease missing here: it waits again, for that one.
    if (shoal_leases_park(self->leases, reply, request_p, caller, routing_id)) {
        shoal_envelope_destroy(&reply);
        return;
    }
    char error[512];
    zmsg_t *answer = shoal_envelope_encode(reply, error, sizeof error);
    if (answer) {
        zframe_t *to = zframe_dup(routing_id);
        zmsg_prepend(answer, &to);
        zmsg_send(&answer, self->router);
    }
    else
        zsys_error("node: cannot encode the reply to %s: %s", shoal_msg_type_name(request->type), error);
    shoal_envelope_destroy(&reply);
    shoal_envelope_destroy(request_p);
}

//  Decodes one request, answers it, and sends the reply back to its sender.
static int
s_handle_router(zloop_t *loop, zsock_t *router, void *arg)
{
    shoal_node_t *self = (shoal_node_t *) arg;
    zmsg_t *msg = zmsg_recv(router);
    if (!msg)
        return 0;
    zframe_t *routing_id = zmsg_pop(msg);
    zframe_t *first = zmsg_first(msg);
    //  Every frame that passed the handshake carries the ZAP metadata.
    shoal_caller_t caller = { "", "", "" };
    if (first) {
        const char *role = zframe_meta(first, SHOAL_META_ROLE);
        const char *tenant = zframe_meta(first, SHOAL_META_TENANT);
        const char *name = zframe_meta(first, SHOAL_META_NAME);
        caller.role = role ? role : "";
        caller.tenant = tenant ? tenant : "";
        caller.name = name ? name : "";
    }
    char error[512];
    shoal_envelope_t *request = shoal_envelope_decode(msg, error, sizeof error);
    shoal_envelope_t *reply = NULL;
    if (!request) {
        reply = shoal_envelope_reply(NULL, SHOAL_STATUS_BAD_REQUEST, "%s", error);
        if (self->settings.verbose)
            zsys_info("node: bad request from %s: %s", caller.name, error);
    }
    else
    if (request->status != 0)
        reply = shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST,
                                     "a request carries status 0, this one %u", request->status);
    else
    if (!*caller.role)
        reply = shoal_envelope_reply(request, SHOAL_STATUS_UNAUTHORIZED, "%s", "no role on this connection");
    else
    switch (request->type) {
        case SHOAL_MSG_STATUS:
            reply = s_handle_status(self, request, &caller);
            break;
        case SHOAL_MSG_OPLOG_PRUNE:
            //  Peers that have not confirmed what a prune would remove hold
            //  it back, manual or not.
            reply = shoal_sync_check_prune(self->sync, request, &caller);
            if (!reply)
                reply = shoal_data_handle(self->oplog, request, &caller, s_written, self);
            break;
        default:
            if (shoal_events_handles(request->type)) {
                reply = shoal_events_handle(self->events, request, &caller, routing_id);
                break;
            }
            if (shoal_mesh_handles(request->type)) {
                reply = shoal_mesh_handle(self->mesh, request, &caller, routing_id);
                break;
            }
            if (shoal_sync_handles(request->type)) {
                reply = shoal_sync_handle(self->sync, request, &caller);
                break;
            }
            if (shoal_fsck_handles(request->type)) {
                reply = shoal_fsck_handle(self->fsck, request, &caller);
                break;
            }
            if (shoal_damage_handles(request->type)) {
                reply = shoal_damage_handle(self->damage, request, &caller);
                break;
            }
            if (shoal_moves_handles(request->type)) {
                reply = shoal_moves_handle(self->moves, request, &caller, routing_id);
                break;
            }
            if (shoal_objects_handles(request->type)) {
                reply = shoal_objects_handle(self->objects, request, &caller, routing_id);
                break;
            }
            if (shoal_drain_handles(request->type)) {
                reply = shoal_drain_handle(self->drain, request, &caller);
                break;
            }
            if (shoal_locks_handles(request->type)) {
                reply = shoal_locks_handle(self->locks, request, &caller);
                //  A lease from another node: the request waits for its copy.
                if (shoal_leases_park(self->leases, reply, &request, &caller, routing_id))
                    shoal_envelope_destroy(&reply);
                break;
            }
            if (shoal_leases_handles(request->type)) {
                reply = shoal_leases_handle(self->leases, request, &caller);
                //  A lookup of a lease not held here waits for the peers' answers.
                if (shoal_leases_park(self->leases, reply, &request, &caller, routing_id))
                    shoal_envelope_destroy(&reply);
                break;
            }
            if (shoal_txn_handles(request->type)) {
                reply = shoal_txn_handle(self->txn, request, &caller);
                if (shoal_leases_park(self->leases, reply, &request, &caller, routing_id))
                    shoal_envelope_destroy(&reply);
                break;
            }
            if (shoal_claims_handles(request->type)) {
                reply = shoal_claims_handle(self->claims, request, &caller, routing_id);
                break;
            }
            if (shoal_data_handles(request->type)) {
                reply = shoal_damage_refuse_data(self->damage, request);
                if (!reply)
                    reply = shoal_data_handle(self->oplog, request, &caller, s_written, self);
                break;
            }
            reply = shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST,
                                         "%s is not a request", shoal_msg_type_name(request->type));
            break;
    }
    if (!reply) {
        //  The mesh, a move or a guest's operation answers this one later.
        self->requests++;
        zframe_destroy(&routing_id);
        shoal_envelope_destroy(&request);
        zmsg_destroy(&msg);
        return 0;
    }
    if (self->settings.verbose && request)
        zsys_info("node: %s from %s (%s): %u", shoal_msg_type_name(request->type),
                  caller.name, caller.role, reply->status);
    zmsg_t *answer = shoal_envelope_encode(reply, error, sizeof error);
    if (!answer) {
        //  A reply this node built does not encode: a bug, reported as one.
        zsys_error("node: cannot encode the reply to %s: %s",
                   request ? shoal_msg_type_name(request->type) : "a bad request", error);
        shoal_envelope_t *fallback = shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", error);
        answer = shoal_envelope_encode(fallback, error, sizeof error);
        shoal_envelope_destroy(&fallback);
    }
    if (answer) {
        zmsg_prepend(answer, &routing_id);
        zmsg_send(&answer, router);
    }
    self->requests++;
    zframe_destroy(&routing_id);
    shoal_envelope_destroy(&request);
    shoal_envelope_destroy(&reply);
    zmsg_destroy(&msg);
    return 0;
}

//  Re-reads the configuration and applies its reloadable keys. A
//  configuration that no longer validates is refused whole.
static int
s_reload(shoal_node_t *self)
{
    shoal_settings_t fresh;
    char error[512];
    if (shoal_config_load(self->config_path, &fresh, error, sizeof error)) {
        zsys_error("config: reload refused, the node keeps its settings: %s", error);
        return -1;
    }
    bool was_verbose = self->settings.verbose;
    int changed = shoal_config_apply_reload(&self->settings, &fresh);
    shoal_settings_clear(&fresh);
    //  Its signal comes back to s_handle_auth, which has no use for it.
    if (self->settings.verbose != was_verbose)
        zstr_sendx(self->auth, "VERBOSE", self->settings.verbose ? "1" : "0", NULL);
    zsys_info("config: reloaded %s, %d key(s) changed",
              self->config_path ? self->config_path : "(defaults and environment)", changed);
    return 0;
}

static int
s_handle_pipe(zloop_t *loop, zsock_t *pipe, void *arg)
{
    shoal_node_t *self = (shoal_node_t *) arg;
    zmsg_t *msg = zmsg_recv(pipe);
    if (!msg)
        return -1;
    char *command = zmsg_popstr(msg);
    int rc = 0;
    if (!command || streq(command, "$TERM"))
        rc = -1;
    else
    if (streq(command, "RELOAD"))
        zsock_signal(pipe, s_reload(self) == 0 ? 0 : 1);
    else
        zsys_error("node: unknown command '%s' on the pipe", command);
    free(command);
    zmsg_destroy(&msg);
    return rc;
}

//  The node's one periodic tick. It is a timerfd read like a socket, not a
//  zloop timer: zloop calls a round's readers after its timers, from a
//  copy of its poll set, so a socket a timer ended and destroyed (a peer's
//  DEALER, a mover's pipe) could still be called; after a reader, zloop
//  rebuilds the set first. Its jobs, each short and each checking its own
//  interval:
//    - mesh: time out unanswered requests to peers (probes, joins, sync)
//    - mesh: retry joining until a seed lets this node in
//    - mesh: turn suspects that nobody refuted into dead members
//    - mesh: start the probe of the next peer, once per probe interval
//    - sync: once per sync interval, exchange heads with the next alive
//      peer (anti-entropy; the exchange also confirms what each side holds)
//    - sync: once per sync interval, prune below the retention cutoff and
//      every tracked peer's confirmations (when retention is set)
//    - moves: step timeouts, retries towards the other side, the sweep
//    - drain: settle a drain a restart interrupted, ask the peers'
//      capacity when a move slot is free, start moves, end the drain
//    - claims: the death watch, one look at a guest in flight at a time
//      (guest/watch_interval_ms between walks)
//    - guests: the drivers' time limits follow the live settings
//    - damage: take damaged replicated datasets again from a peer
//    - metrics: once a second sample the gauges; publish what changed
//    - txn: remove the keys of claims no longer held here, a few per tick
//    - leases: end those whose time came, with what is attached to them
//    - events: forget watchers whose lease ran out
//    - fsck: a slice of the sweep in progress (bounded: fsck/slice_keys
//      keys, for up to 8 ms when an operator waits for it), or a periodic
//      sweep's start every fsck/interval_s
//    - objects: give up adds and arrivals whose sender went silent
//    - auth: once every S_CLIENTS_COUNT_MS, ask how many client keys are
//      admitted (answered to s_handle_auth)
//    - stop the node when the mesh refused its id
//  (The migration of a store of layout 1 runs on a timer of its own,
//  s_migrate_step, a bounded step every reactor turn until it ends.)
static int
s_tick(zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
    shoal_node_t *self = (shoal_node_t *) arg;
    uint64_t expirations;
    if (read(item->fd, &expirations, sizeof expirations) < 0 && errno != EAGAIN)
        zsys_warning("node: cannot read the tick's timer: %s", strerror(errno));
    int64_t now = zclock_mono();
    if (self->last_tick_ms && now - self->last_tick_ms >= S_TICK_LATE_MS)
        zsys_warning("node: the reactor was held up: a tick came %" PRId64 " ms after the last, not %d",
                     now - self->last_tick_ms, S_TICK_MS);
    if (self->last_tick_ms)
        shoal_metrics_tick_late(self->metrics, now - self->last_tick_ms - S_TICK_MS);
    self->last_tick_ms = now;
    shoal_mesh_tick(self->mesh);
    shoal_sync_tick(self->sync);
    shoal_moves_tick(self->moves);
    shoal_drain_tick(self->drain);
    shoal_claims_tick(self->claims);
    shoal_guests_tick(self->guests);
    shoal_damage_tick(self->damage);
    shoal_metrics_tick(self->metrics, self->mesh, self->oplog, self->store);
    shoal_txn_tick(self->txn);
    shoal_leases_tick(self->leases);
    shoal_events_tick(self->events);
    shoal_fsck_tick(self->fsck);
    shoal_objects_tick(self->objects);
    if (now - self->clients_asked_ms >= S_CLIENTS_COUNT_MS) {
        zstr_send(self->auth, "COUNT");
        self->clients_asked_ms = now;
    }
    return shoal_mesh_failure(self->mesh) ? -1 : 0;
}

//  Runs one step of the migration of a store of layout 1, on the reactor,
//  where every other writer of the log's keys runs (shoal_oplog_migrate.c
//  says why not on a worker); ends the timer once the store is layout 2.
//  SHOAL_FAULT=oplog:migrate:hold=PATH holds it after its first write.
static int
s_migrate_step(zloop_t *loop, int timer_id, void *arg)
{
    shoal_node_t *self = (shoal_node_t *) arg;
    shoal_oplog_migration_t migration;
    shoal_oplog_migration(self->oplog, &migration);
    if (migration.writes > 0 && shoal_fault_held("oplog", "migrate"))
        return 0;
    bool done = false;
    if (shoal_oplog_migrate_step(self->oplog, &done)) {
        //  The store answers alike unmigrated: the next start resumes.
        zsys_error("node: the migration of the operation log stops until the next start: %s",
                   shoal_oplog_error(self->oplog));
        done = true;
    }
    if (done) {
        zloop_timer_end(loop, timer_id);
        self->migrate_timer = -1;
    }
    return 0;
}

void
shoal_node_actor(zsock_t *pipe, void *args)
{
    shoal_node_t *self = (shoal_node_t *) args;
    self->pipe = pipe;
    pthread_setname_np(pthread_self(), "shoal-reactor");
    zsock_signal(pipe, 0);
    zloop_t *loop = zloop_new();
    zloop_reader(loop, pipe, s_handle_pipe, self);
    zloop_reader(loop, self->router, s_handle_router, self);
    zloop_reader(loop, zactor_sock(self->auth), s_handle_auth, self);
    //  A bad request must never end the loop: readers return 0 on it.
    zloop_reader_set_tolerant(loop, self->router);
    zmq_pollitem_t tick = { NULL, self->tick_fd, ZMQ_POLLIN, 0 };
    const char *failure = NULL;
    if (zloop_poller(loop, &tick, s_tick, self))
        failure = "out of memory for the node's tick";
    else
    if (shoal_guests_start(self->guests, loop))
        failure = "cannot read the guest actor's answers";
    else {
        zsys_info("node: %s serving at %s", self->settings.node_id, self->endpoint);
        shoal_mesh_start(self->mesh, loop, self->router);
        shoal_sync_start(self->sync, loop);
        shoal_claims_start(self->claims, self->router);
        shoal_moves_start(self->moves, loop, self->router);
        shoal_objects_start(self->objects, loop, self->router);
        if (shoal_oplog_migrating(self->oplog))
            self->migrate_timer = zloop_timer(loop, S_MIGRATE_STEP_MS, 0, s_migrate_step, self);
        zloop_start(loop);
        shoal_drain_stop(self->drain);
        shoal_moves_stop(self->moves);
        shoal_objects_stop(self->objects);
        failure = shoal_mesh_failure(self->mesh);
    }
    if (failure)
        //  shoald reports it and exits 1: the node cannot serve.
        zstr_sendx(pipe, "FAILED", failure, NULL);
    else
        shoal_mesh_leave(self->mesh);
    //  Peer DEALERs leave the reactor before it goes, and so do the bulk
    //  catch-ups, once the mesh has told them of their last replies.
    shoal_mesh_destroy(&self->mesh);
    shoal_sync_stop(self->sync);
    zloop_destroy(&loop);
    self->stopped_cleanly = true;
    zsys_info("node: %s stopping after %" PRIu64 " request(s)", self->settings.node_id, self->requests);
    shoal_node_destroy(&self);
}
