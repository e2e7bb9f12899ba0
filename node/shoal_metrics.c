/*  shoal_metrics: counts, histograms and gauges of one node, rendered in
    Prometheus' text format and served by libmicrohttpd. See shoal_metrics.h.

    DESIGN
    1.  Every number is the reactor's: the counters and histograms change in
        calls the reactor makes, the gauges are sampled by its tick. No
        lock guards them, since only the reactor touches them.
    2.  The reactor renders the whole text (a few kilobytes, a few
        microseconds) when something changed, at most once per tick, and
        swaps it in as the published text under PUBLISHED_LOCK. That lock is
        held for a pointer swap or a copy, never for I/O.
    3.  libmicrohttpd runs its own thread (MHD_USE_INTERNAL_POLLING_THREAD)
        and answers each GET /metrics with a copy of the published text. A
        slow or stuck scraper holds its connection, not the reactor.
    4.  Names follow Prometheus' conventions: the shoal_ prefix, units in
        the name (_seconds, _bytes), _total on counters, label values from
        closed sets (states, reasons, roles) or from peers and datasets,
        whose numbers are the mesh's and the log's own.
*/
#include "shoal_metrics.h"
#include "shoal_auth.h"
#include "shoal_names.h"
#include "shoal_alloc.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>

//  How often the gauges are sampled (they cost store reads and a walk of
//  the peers).
#define METRICS_SAMPLE_MS 1000
#define METRICS_PATH "/metrics"
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
//  Scrapes served at once; more wait in the kernel's backlog.
#define METRICS_CONNECTIONS 16
#define METRICS_CONNECTION_TIMEOUT_S 10
#define METRICS_HOST_MAX 256
#define METRICS_MS_PER_S 1000.0

//  The buckets of each histogram (upper bounds, +Inf implied).
static const double s_duration_buckets[] = { 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300 };
static const double s_rounds_buckets[] = { 1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30 };
static const double s_bytes_buckets[] = { 1e6, 4e6, 16e6, 64e6, 256e6, 1e9, 4e9, 16e9, 64e9 };
static const double s_downtime_buckets[] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5 };
static const double s_lateness_buckets[] = { 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5 };
#define METRICS_BUCKETS_MAX 12
#define S_COUNT(array) (sizeof (array) / sizeof (array)[0])

typedef struct {
    const char *name;                   //  family name, with its unit
    const char *help;                   //  its HELP line
    const double *bounds;               //  upper bounds, ascending
    size_t bound_count;                 //  how many
    uint64_t counts[METRICS_BUCKETS_MAX];   //  observations per bucket (not cumulative)
    uint64_t count;                     //  every observation
    double sum;                         //  their sum
} s_histogram_t;

//  Why a move aborted: the label of shoal_moves_aborted_total.
typedef enum {
    S_ABORT_REFUSED,            //  the target refused it (429, 507)
    S_ABORT_OPERATOR,           //  an operator aborted it (409)
    S_ABORT_DOWNTIME,           //  the final round would have passed the downtime budget
    S_ABORT_UNAVAILABLE,        //  the target stopped answering, left or restarted (503)
    S_ABORT_ERROR,              //  this node failed (500, or anything else)
    S_ABORT_COUNT
} s_abort_t;

static const char *s_abort_names[S_ABORT_COUNT] = {
    "target_refused", "operator", "downtime_budget", "unavailable", "error"
};

static const char *s_refusal_names[SHOAL_REFUSED_COUNT] = {
    "max_claims", "tenant_max_claims", "max_running", "memory", "disk", "guest_rate", "no_space",
    "move_concurrency"
};

//  The roles of a move record, as labels; 0 is none.
#define S_ROLES 3
static const char *s_role_names[S_ROLES] = { "", "source", "target" };
#define S_CLAIM_STATES (SHOAL_CLAIM_RELEASED + 1)
#define S_MEMBER_STATES (SHOAL_MEMBER_LEFT + 1)
#define S_MESH_EVENTS (SHOAL_MESH_REJOINED + 1)

struct _shoal_metrics_t {
    char *node_id;                      //  the node's id, in the info family
    struct MHD_Daemon *daemon;          //  the HTTP server, or NULL when metrics/bind is empty
    int port;                           //  the port it listens on (0: none)
    pthread_mutex_t published_lock;     //  guards PUBLISHED
    char *published;                    //  the text the server hands out; swapped by the reactor
    bool dirty;                         //  something changed since the last publish
    int64_t next_sample;                //  monotonic ms of the next gauge sample
    //  Counted from the claim store's observer.
    int64_t claims[S_CLAIM_STATES];     //  claims this node holds, by state (released ones included)
    zhashx_t *moves;                    //  "role/claim" -> move state last seen: moves in flight here
    uint64_t moves_started[S_ROLES];    //  moves seen starting, by role
    uint64_t moves_committed[S_ROLES];  //  moves past the point of no return (source), adopted (target)
    //  Counted by calls from the modules.
    uint64_t refusals[SHOAL_REFUSED_COUNT];     //  admission refusals by reason
    uint64_t moves_aborted[S_ABORT_COUNT];      //  outgoing moves aborted, by reason
    uint64_t moves_moved;               //  outgoing moves that ended with the guest on the target
    s_histogram_t move_duration;        //  outgoing moves' duration, moved or aborted
    s_histogram_t move_rounds;          //  their rounds
    s_histogram_t move_bytes;           //  their bytes sent
    s_histogram_t move_node_downtime;   //  pause to start, as the nodes saw it (moved ones)
    s_histogram_t move_guest_downtime;  //  the longest gap of the guest's own clock (moved ones)
    s_histogram_t move_switch_gap;      //  the guest's own clock across the switch (moved ones)
    s_histogram_t tick_lateness;        //  how much later than its period each tick came
    uint64_t member_events[S_MESH_EVENTS];  //  membership events, by kind
    uint64_t catchup_bytes;             //  bytes taken by catch-ups in bulk
    uint64_t write_stalls;              //  samples that found writes newly slowed or stopped
    //  Sampled once per METRICS_SAMPLE_MS.
    bool sampled;                       //  the gauges below hold a sample
    int64_t members[S_MEMBER_STATES];   //  peers by state
    zlistx_t *peer_lags;                //  "peer\tlag" lines of the last sample
    zlistx_t *datasets;                 //  "dataset\tentries\twatermark_ms" lines of the last sample
    shoal_store_stats_t store;          //  the store's size and stall state
    bool stalled;                       //  the last sample found writes slowed or stopped
};

static void
s_histogram_init(s_histogram_t *histogram, const char *name, const char *help, const double *bounds,
                 size_t count)
{
    assert(count <= METRICS_BUCKETS_MAX);
    memset(histogram, 0, sizeof *histogram);
    histogram->name = name;
    histogram->help = help;
    histogram->bounds = bounds;
    histogram->bound_count = count;
}

static void
s_observe(s_histogram_t *histogram, double value)
{
    size_t bucket = 0;
    while (bucket < histogram->bound_count && value > histogram->bounds[bucket])
        bucket++;
    if (bucket < histogram->bound_count)
        histogram->counts[bucket]++;
    histogram->count++;
    histogram->sum += value;
}

//  Answers GET /metrics with a copy of the published text; on the
//  server's thread.
static enum MHD_Result
s_answer(void *arg, struct MHD_Connection *connection, const char *url, const char *method,
         const char *version, const char *upload_data, size_t *upload_data_size, void **request_state)
{
    shoal_metrics_t *self = (shoal_metrics_t *) arg;
    const char *text = "";
    unsigned int status = MHD_HTTP_OK;
    char *copy = NULL;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        status = MHD_HTTP_METHOD_NOT_ALLOWED;
        text = "only GET " METRICS_PATH "\n";
    }
    else
    if (strcmp(url, METRICS_PATH) != 0 && strcmp(url, "/") != 0) {
        status = MHD_HTTP_NOT_FOUND;
        text = "the metrics are at " METRICS_PATH "\n";
    }
    else {
        pthread_mutex_lock(&self->published_lock);
        copy = shoal_strdup(self->published ? self->published : "");
        pthread_mutex_unlock(&self->published_lock);
    }
    struct MHD_Response *response = copy
        ? MHD_create_response_from_buffer(strlen(copy), copy, MHD_RESPMEM_MUST_FREE)
        : MHD_create_response_from_buffer(strlen(text), (void *) text, MHD_RESPMEM_PERSISTENT);
    if (!response) {
        free(copy);
        return MHD_NO;
    }
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE,
                            status == MHD_HTTP_OK ? METRICS_CONTENT_TYPE : "text/plain");
    enum MHD_Result rc = MHD_queue_response(connection, status, response);
    MHD_destroy_response(response);
    return rc;
}

//  Parses BIND ("HOST:PORT") into ADDRESS. Returns 0 or -1 with *ERROR_P.
static int
s_address(const char *bind, struct sockaddr_storage *address, char **error_p)
{
    const char *colon = strrchr(bind, ':');
    char host[METRICS_HOST_MAX];
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : -1;
    if (!colon || colon == bind || (size_t) (colon - bind) >= sizeof host || !*(colon + 1) || *end
        || port < 0 || port > 65535) {
        *error_p = zsys_sprintf("metrics/bind = '%s': expected HOST:PORT with a port from 0 to 65535", bind);
        return -1;
    }
    snprintf(host, sizeof host, "%.*s", (int) (colon - bind), bind);
    //  [::1]:9400 names an IPv6 host.
    char *name = host;
    if (*name == '[' && name[strlen(name) - 1] == ']') {
        name[strlen(name) - 1] = 0;
        name++;
    }
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
    struct addrinfo *found = NULL;
    int rc = getaddrinfo(streq(name, "*") ? NULL : name, NULL, &hints, &found);
    if (rc != 0 || !found) {
        *error_p = zsys_sprintf("metrics/bind = '%s': cannot resolve %s: %s", bind, name, gai_strerror(rc));
        return -1;
    }
    memset(address, 0, sizeof *address);
    memcpy(address, found->ai_addr, found->ai_addrlen);
    if (address->ss_family == AF_INET6)
        ((struct sockaddr_in6 *) address)->sin6_port = htons((uint16_t) port);
    else
        ((struct sockaddr_in *) address)->sin_port = htons((uint16_t) port);
    freeaddrinfo(found);
    return 0;
}

static void s_publish(shoal_metrics_t *self);

shoal_metrics_t *
shoal_metrics_new(const char *bind, const char *node_id, shoal_claim_store_t *claims, char **error_p)
{
    shoal_metrics_t *self = (shoal_metrics_t *) zmalloc(sizeof *self);
    self->node_id = shoal_strdup(node_id);
    pthread_mutex_init(&self->published_lock, NULL);
    self->moves = zhashx_new();
    self->peer_lags = zlistx_new();
    zlistx_set_destructor(self->peer_lags, (zlistx_destructor_fn *) zstr_free);
    self->datasets = zlistx_new();
    zlistx_set_destructor(self->datasets, (zlistx_destructor_fn *) zstr_free);
    s_histogram_init(&self->move_duration, "shoal_move_duration_seconds",
                     "Outgoing moves from start to end, moved or aborted.", s_duration_buckets,
                     S_COUNT(s_duration_buckets));
    s_histogram_init(&self->move_rounds, "shoal_move_rounds", "Rounds an outgoing move sent, the baseline included.",
                     s_rounds_buckets, S_COUNT(s_rounds_buckets));
    s_histogram_init(&self->move_bytes, "shoal_move_bytes", "Bytes an outgoing move sent.", s_bytes_buckets,
                     S_COUNT(s_bytes_buckets));
    s_histogram_init(&self->move_node_downtime, "shoal_move_node_downtime_seconds",
                     "Moved claims: guest paused on the source to started on the target, as the nodes saw it.",
                     s_downtime_buckets, S_COUNT(s_downtime_buckets));
    s_histogram_init(&self->move_guest_downtime, "shoal_move_guest_downtime_seconds",
                     "Moved claims: the longest gap of the guest's own tick clock.", s_downtime_buckets,
                     S_COUNT(s_downtime_buckets));
    s_histogram_init(&self->move_switch_gap, "shoal_move_guest_switch_gap_seconds",
                     "Moved claims: the guest's own tick clock across the switch, its last tick on the source to "
                     "its first on the target.", s_downtime_buckets, S_COUNT(s_downtime_buckets));
    s_histogram_init(&self->tick_lateness, "shoal_reactor_tick_lateness_seconds",
                     "How much later than its period each tick of the reactor came.", s_lateness_buckets,
                     S_COUNT(s_lateness_buckets));
    shoal_claim_records_t list = { 0 };
    if (claims && shoal_claim_store_list(claims, &list) == 0)
        for (size_t i = 0; i < list.count; i++)
            if (list.items[i].state < S_CLAIM_STATES)
                self->claims[list.items[i].state]++;
    shoal_claim_records_clear(&list);
    if (bind && *bind) {
        struct sockaddr_storage address;
        if (s_address(bind, &address, error_p)) {
            shoal_metrics_destroy(&self);
            return NULL;
        }
        unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
        if (address.ss_family == AF_INET6)
            flags |= MHD_USE_IPv6;
        self->daemon = MHD_start_daemon(flags, 0, NULL, NULL, s_answer, self,
                                        MHD_OPTION_SOCK_ADDR, (struct sockaddr *) &address,
                                        MHD_OPTION_CONNECTION_LIMIT, (unsigned int) METRICS_CONNECTIONS,
                                        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int) METRICS_CONNECTION_TIMEOUT_S,
                                        MHD_OPTION_END);
        if (!self->daemon) {
            *error_p = zsys_sprintf("metrics/bind = '%s': cannot serve there (%s)", bind,
                                    errno ? strerror(errno) : "libmicrohttpd refused it");
            shoal_metrics_destroy(&self);
            return NULL;
        }
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(self->daemon, MHD_DAEMON_INFO_BIND_PORT);
        self->port = info ? info->port : 0;
    }
    s_publish(self);
    return self;
}

void
shoal_metrics_destroy(shoal_metrics_t **self_p)
{
    if (*self_p) {
        shoal_metrics_t *self = *self_p;
        //  The server's thread ends here, before what it reads goes.
        if (self->daemon)
            MHD_stop_daemon(self->daemon);
        pthread_mutex_destroy(&self->published_lock);
        free(self->published);
        zhashx_destroy(&self->moves);
        zlistx_destroy(&self->peer_lags);
        zlistx_destroy(&self->datasets);
        free(self->node_id);
        free(self);
        *self_p = NULL;
    }
}

int
shoal_metrics_port(shoal_metrics_t *self)
{
    return self ? self->port : 0;
}

char *
shoal_metrics_text(shoal_metrics_t *self)
{
    if (!self)
        return shoal_strdup("");
    pthread_mutex_lock(&self->published_lock);
    char *copy = shoal_strdup(self->published ? self->published : "");
    pthread_mutex_unlock(&self->published_lock);
    return copy;
}

//  The move map's key of ROLE's record of CLAIM_ID.
static void
s_move_key(char *key, size_t size, shoal_move_role_t role, const char *claim_id)
{
    snprintf(key, size, "%d/%s", (int) role, claim_id);
}

void
shoal_metrics_store_changed(const shoal_claim_record_t *previous, const shoal_claim_record_t *record,
                            const shoal_move_t *move, shoal_move_role_t deleted_role, const char *deleted_claim,
                            void *arg)
{
    shoal_metrics_t *self = (shoal_metrics_t *) arg;
    if (!self)
        return;
    if (previous && previous->state < S_CLAIM_STATES)
        self->claims[previous->state]--;
    if (record && record->state < S_CLAIM_STATES)
        self->claims[record->state]++;
    char key[SHOAL_KV_KEY_MAX + 16];
    if (move && move->role < S_ROLES && move->claim_id) {
        s_move_key(key, sizeof key, move->role, move->claim_id);
        uintptr_t was = (uintptr_t) zhashx_lookup(self->moves, key);
        //  The map holds state + 1, so that a state of 0 still reads as seen.
        if (!was)
            self->moves_started[move->role]++;
        if (was != (uintptr_t) move->state + 1
            && (move->state == SHOAL_MOVE_COMMITTED || move->state == SHOAL_MOVE_ADOPTED))
            self->moves_committed[move->role]++;
        zhashx_update(self->moves, key, (void *) ((uintptr_t) move->state + 1));
    }
    if (deleted_claim) {
        s_move_key(key, sizeof key, deleted_role, deleted_claim);
        zhashx_delete(self->moves, key);
    }
    self->dirty = true;
}

void
shoal_metrics_mesh_event(shoal_mesh_event_t event, const char *node_id, const char *endpoint, void *arg)
{
    shoal_metrics_t *self = (shoal_metrics_t *) arg;
    if (!self || (int) event < 0 || event >= S_MESH_EVENTS)
        return;
    self->member_events[event]++;
    self->dirty = true;
}

void
shoal_metrics_refused(shoal_metrics_t *self, shoal_refusal_t reason)
{
    if (!self || reason >= SHOAL_REFUSED_COUNT)
        return;
    self->refusals[reason]++;
    self->dirty = true;
}

//  The reason label of an abort the caller heard as STATUS, with ERROR.
static s_abort_t
s_abort_reason(uint32_t status, const char *error)
{
    if (error && strstr(error, "downtime"))
        return S_ABORT_DOWNTIME;
    switch (status) {
        case SHOAL_STATUS_TOO_MANY:
        case SHOAL_STATUS_NO_SPACE:
            return S_ABORT_REFUSED;
        case SHOAL_STATUS_CONFLICT:
            return S_ABORT_OPERATOR;
        case SHOAL_STATUS_UNAVAILABLE:
            return S_ABORT_UNAVAILABLE;
        default:
            return S_ABORT_ERROR;
    }
}

void
shoal_metrics_move_ended(shoal_metrics_t *self, const shoal_move_t *move, uint32_t status)
{
    if (!self)
        return;
    bool moved = move->state == SHOAL_MOVE_STARTED;
    if (moved)
        self->moves_moved++;
    else
        self->moves_aborted[s_abort_reason(status, move->error)]++;
    s_observe(&self->move_duration, (double) move->total_ms / METRICS_MS_PER_S);
    s_observe(&self->move_rounds, (double) move->round);
    s_observe(&self->move_bytes, (double) move->bytes_sent);
    if (moved) {
        s_observe(&self->move_node_downtime, (double) move->node_downtime_ms / METRICS_MS_PER_S);
        s_observe(&self->move_guest_downtime, (double) move->guest_downtime_ms / METRICS_MS_PER_S);
        s_observe(&self->move_switch_gap, (double) move->guest_switch_gap_ms / METRICS_MS_PER_S);
    }
    self->dirty = true;
}

void
shoal_metrics_catchup(shoal_metrics_t *self, uint64_t bytes)
{
    if (!self)
        return;
    self->catchup_bytes += bytes;
    self->dirty = true;
}

void
shoal_metrics_catchup_page(shoal_metrics_t *self, const shoal_msg_bulk_t *page)
{
    uint64_t bytes = 0;
    for (size_t i = 0; self && i < page->count; i++)
        bytes += page->sizes[i];
    shoal_metrics_catchup(self, bytes);
}

void
shoal_metrics_tick_late(shoal_metrics_t *self, int64_t late_ms)
{
    if (!self)
        return;
    s_observe(&self->tick_lateness, late_ms > 0 ? (double) late_ms / METRICS_MS_PER_S : 0);
    //  Every tick observes: publishing for each would render the text 50
    //  times a second for one histogram; the sample's publish carries it.
}

//  Samples the peers as the mesh lists them to an admin.
static void
s_sample_mesh(shoal_metrics_t *self, shoal_mesh_t *mesh)
{
    memset(self->members, 0, sizeof self->members);
    zlistx_purge(self->peer_lags);
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_PEERS, 0);
    shoal_caller_t admin = { SHOAL_ROLE_ADMIN, "", "metrics" };
    shoal_envelope_t *reply = request ? shoal_mesh_handle(mesh, request, &admin, NULL) : NULL;
    if (reply && reply->status == SHOAL_STATUS_OK && reply->body) {
        const shoal_msg_peers_t *peers = (const shoal_msg_peers_t *) reply->body;
        for (size_t i = 0; i < peers->count; i++) {
            const shoal_msg_peer_t *peer = &peers->peers[i];
            if (peer->self)
                continue;
            if (peer->state < S_MEMBER_STATES)
                self->members[peer->state]++;
            zlistx_add_end(self->peer_lags, zsys_sprintf("%s\t%" PRIu64, peer->node_id, peer->lag));
        }
    }
    shoal_envelope_destroy(&reply);
    shoal_envelope_destroy(&request);
}

static void
s_sample_oplog(shoal_metrics_t *self, shoal_oplog_t *oplog)
{
    zlistx_purge(self->datasets);
    zlistx_t *datasets = shoal_oplog_datasets(oplog);
    if (!datasets)
        return;
    for (const char *dataset = (const char *) zlistx_first(datasets); dataset;
         dataset = (const char *) zlistx_next(datasets)) {
        shoal_oplog_counts_t counts = { 0, 0 };
        shoal_hlc_stamp_t watermark = { 0, 0 };
        bool found = false;
        if (shoal_oplog_counts(oplog, dataset, &counts)
            || shoal_oplog_watermark(oplog, dataset, &watermark, &found))
            continue;
        zlistx_add_end(self->datasets, zsys_sprintf("%s\t%" PRIu64 "\t%" PRIu64, dataset, counts.entries,
                                                    found ? watermark.wall_ms : 0));
    }
    zlistx_destroy(&datasets);
}

static void
s_sample_store(shoal_metrics_t *self, shoal_store_t *store)
{
    shoal_store_stats_t stats;
    if (shoal_store_stats(store, &stats))
        return;
    bool stalled = stats.write_stopped || stats.delayed_write_rate > 0;
    if (stalled && !self->stalled)
        self->write_stalls++;
    self->stalled = stalled;
    self->store = stats;
}

void
shoal_metrics_tick(shoal_metrics_t *self, shoal_mesh_t *mesh, shoal_oplog_t *oplog, shoal_store_t *store)
{
    if (!self)
        return;
    int64_t now = zclock_mono();
    if (now >= self->next_sample) {
        self->next_sample = now + METRICS_SAMPLE_MS;
        if (mesh)
            s_sample_mesh(self, mesh);
        if (oplog)
            s_sample_oplog(self, oplog);
        if (store)
            s_sample_store(self, store);
        self->sampled = true;
        self->dirty = true;
    }
    if (self->dirty)
        s_publish(self);
}

//  Rendering

//  Writes a label value with the escapes the text format asks for.
static void
s_label_value(zchunk_t *out, const char *value)
{
    for (const char *c = value; *c; c++) {
        if (*c == '\\' || *c == '"')
            zchunk_extend(out, "\\", 1);
        if (*c == '\n')
            zchunk_extend(out, "\\n", 2);
        else
            zchunk_extend(out, c, 1);
    }
}

static void
s_printf(zchunk_t *out, const char *format, ...) CHECK_PRINTF(2);
static void
s_printf(zchunk_t *out, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *text = zsys_vprintf(format, args);
    va_end(args);
    if (text)
        zchunk_extend(out, text, strlen(text));
    free(text);
}

static void
s_family(zchunk_t *out, const char *name, const char *type, const char *help)
{
    s_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

//  One sample NAME{LABEL="VALUE"} NUMBER (LABEL NULL: no label).
static void
s_sample(zchunk_t *out, const char *name, const char *label, const char *value, double number)
{
    s_printf(out, "%s", name);
    if (label) {
        s_printf(out, "{%s=\"", label);
        s_label_value(out, value);
        s_printf(out, "\"}");
    }
    s_printf(out, " %.17g\n", number);
}

static void
s_histogram_render(zchunk_t *out, const s_histogram_t *histogram)
{
    s_family(out, histogram->name, "histogram", histogram->help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < histogram->bound_count; i++) {
        cumulative += histogram->counts[i];
        s_printf(out, "%s_bucket{le=\"%.17g\"} %" PRIu64 "\n", histogram->name, histogram->bounds[i], cumulative);
    }
    s_printf(out, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", histogram->name, histogram->count);
    s_printf(out, "%s_sum %.17g\n%s_count %" PRIu64 "\n", histogram->name, histogram->sum, histogram->name,
             histogram->count);
}

//  Each tab-separated line of LINES as NAME{LABEL="first"} second-or-COLUMN.
static void
s_lines_render(zchunk_t *out, const char *name, const char *label, zlistx_t *lines, int column, double scale)
{
    for (const char *line = (const char *) zlistx_first(lines); line; line = (const char *) zlistx_next(lines)) {
        char *copy = shoal_strdup(line);
        char *rest = copy;
        char *fields[3] = { NULL, NULL, NULL };
        for (int i = 0; i < 3 && rest; i++)
            fields[i] = strsep(&rest, "\t");
        if (fields[column])
            s_sample(out, name, label, fields[0], strtod(fields[column], NULL) * scale);
        free(copy);
    }
}

static void
s_publish(shoal_metrics_t *self)
{
    zchunk_t *out = zchunk_new(NULL, 8192);
    s_family(out, "shoal_node_info", "gauge", "The node's id and version, as labels of a constant 1.");
    s_printf(out, "shoal_node_info{node=\"");
    s_label_value(out, self->node_id);
    s_printf(out, "\",version=\"%s\"} 1\n", SHOAL_VERSION);

    s_family(out, "shoal_claims", "gauge", "Claims this node holds, by state.");
    for (int state = SHOAL_CLAIM_CREATING; state < S_CLAIM_STATES; state++)
        s_sample(out, "shoal_claims", "state", shoal_claim_state_name((shoal_claim_state_t) state),
                 (double) self->claims[state]);
    s_family(out, "shoal_admission_refusals_total", "counter", "Requests admission refused, by the limit that refused.");
    for (int reason = 0; reason < SHOAL_REFUSED_COUNT; reason++)
        s_sample(out, "shoal_admission_refusals_total", "reason", s_refusal_names[reason],
                 (double) self->refusals[reason]);

    s_family(out, "shoal_moves_started_total", "counter", "Moves that started on this node, by its role in them.");
    for (int role = 1; role < S_ROLES; role++)
        s_sample(out, "shoal_moves_started_total", "role", s_role_names[role], (double) self->moves_started[role]);
    s_family(out, "shoal_moves_committed_total", "counter",
             "Moves past the point of no return: committed (source) or adopted (target).");
    for (int role = 1; role < S_ROLES; role++)
        s_sample(out, "shoal_moves_committed_total", "role", s_role_names[role],
                 (double) self->moves_committed[role]);
    s_family(out, "shoal_moves_moved_total", "counter", "Outgoing moves that ended with the guest running on the target.");
    s_sample(out, "shoal_moves_moved_total", NULL, NULL, (double) self->moves_moved);
    s_family(out, "shoal_moves_aborted_total", "counter", "Outgoing moves aborted, by reason.");
    for (int reason = 0; reason < S_ABORT_COUNT; reason++)
        s_sample(out, "shoal_moves_aborted_total", "reason", s_abort_names[reason],
                 (double) self->moves_aborted[reason]);
    int64_t in_flight[S_ROLES] = { 0, 0, 0 };
    for (void *item = zhashx_first(self->moves); item; item = zhashx_next(self->moves)) {
        const char *key = (const char *) zhashx_cursor(self->moves);
        int role = key[0] - '0';
        shoal_move_state_t state = (shoal_move_state_t) ((uintptr_t) item - 1);
        if (role > 0 && role < S_ROLES && state != SHOAL_MOVE_ABORTED && state != SHOAL_MOVE_STARTED
            && state != SHOAL_MOVE_ADOPTED)
            in_flight[role]++;
    }
    s_family(out, "shoal_moves_in_flight", "gauge", "Moves under way on this node, by its role in them.");
    for (int role = 1; role < S_ROLES; role++)
        s_sample(out, "shoal_moves_in_flight", "role", s_role_names[role], (double) in_flight[role]);
    s_histogram_render(out, &self->move_duration);
    s_histogram_render(out, &self->move_rounds);
    s_histogram_render(out, &self->move_bytes);
    s_histogram_render(out, &self->move_node_downtime);
    s_histogram_render(out, &self->move_guest_downtime);
    s_histogram_render(out, &self->move_switch_gap);

    s_family(out, "shoal_member_events_total", "counter", "Membership events this node saw, by kind.");
    for (int event = 0; event < S_MESH_EVENTS; event++)
        s_sample(out, "shoal_member_events_total", "event", shoal_mesh_event_name((shoal_mesh_event_t) event),
                 (double) self->member_events[event]);
    s_family(out, "shoal_member_suspicions_total", "counter", "Peers this node came to suspect.");
    s_sample(out, "shoal_member_suspicions_total", NULL, NULL, (double) self->member_events[SHOAL_MESH_SUSPECT]);
    s_family(out, "shoal_sync_catchup_bytes_total", "counter", "Bytes taken from peers by catch-ups in bulk.");
    s_sample(out, "shoal_sync_catchup_bytes_total", NULL, NULL, (double) self->catchup_bytes);
    s_family(out, "shoal_store_write_stalls_total", "counter",
             "Times the store was found, sampled each second, to have begun slowing or stopping writes.");
    s_sample(out, "shoal_store_write_stalls_total", NULL, NULL, (double) self->write_stalls);
    s_histogram_render(out, &self->tick_lateness);

    if (self->sampled) {
        s_family(out, "shoal_members", "gauge", "Peers this node knows, by state.");
        for (int state = SHOAL_MEMBER_ALIVE; state < S_MEMBER_STATES; state++)
            s_sample(out, "shoal_members", "state", shoal_member_state_name((shoal_member_state_t) state),
                     (double) self->members[state]);
        s_family(out, "shoal_peer_lag_entries", "gauge",
                 "Entries this node holds that a peer lacked at their last head exchange.");
        s_lines_render(out, "shoal_peer_lag_entries", "peer", self->peer_lags, 1, 1);
        s_family(out, "shoal_oplog_entries", "gauge", "Entries in the operation log, by dataset.");
        s_lines_render(out, "shoal_oplog_entries", "dataset", self->datasets, 1, 1);
        s_family(out, "shoal_oplog_prune_watermark_seconds", "gauge",
                 "Wall time up to which a dataset's log was pruned (0: never), by dataset.");
        s_lines_render(out, "shoal_oplog_prune_watermark_seconds", "dataset", self->datasets, 2,
                       1 / METRICS_MS_PER_S);
        s_family(out, "shoal_store_size_bytes", "gauge", "The store's table files and unflushed memtables.");
        s_sample(out, "shoal_store_size_bytes", NULL, NULL,
                 (double) (self->store.sst_bytes + self->store.memtable_bytes));
        s_family(out, "shoal_store_write_stopped", "gauge", "1 while the store stops writes for compaction.");
        s_sample(out, "shoal_store_write_stopped", NULL, NULL, self->store.write_stopped ? 1 : 0);
        s_family(out, "shoal_store_delayed_write_rate_bytes", "gauge",
                 "The rate, bytes per second, the store slows writes to (0: not slowed).");
        s_sample(out, "shoal_store_delayed_write_rate_bytes", NULL, NULL, (double) self->store.delayed_write_rate);
    }
    zchunk_extend(out, "", 1);
    char *text = shoal_strdup((const char *) zchunk_data(out));
    zchunk_destroy(&out);
    pthread_mutex_lock(&self->published_lock);
    char *old = self->published;
    self->published = text;
    pthread_mutex_unlock(&self->published_lock);
    free(old);
    self->dirty = false;
}
