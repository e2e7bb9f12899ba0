/*  test_cluster_events: the event stream of real nodes, watched with
    libshoal during a live move, by an admin and by a tenant, across a
    restart, a kill -9 and a restart of the machine (its boot id changed
    and the log's unsynced tail lost), and by a watcher that was away for
    longer than the node keeps events. */
#include "shoal_test.h"
#include "shoal_cluster.h"
#include "shoal_move_check.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#define S_MB (1024ull * 1024)
#define S_WAIT_MS 30000
#define S_MOVE_WAIT_MS 120000
#define S_TENANT "acme/web"
#define S_OTHER "other/app"
#define S_EVENTS_MAX 256
#define S_TEXT_MAX 128

typedef struct {
    uint64_t seq, previous_seq;
    char kind[S_TEXT_MAX], what[S_TEXT_MAX], claim[S_TEXT_MAX], tenant[S_TEXT_MAX];
} s_seen_t;

//  A watcher on its own thread, with its own client.
typedef struct {
    shoal_client_t *client;
    char kinds[S_TEXT_MAX];
    uint64_t after;
    pthread_t thread;
    pthread_mutex_t lock;
    s_seen_t events[S_EVENTS_MAX];  //  what it was sent, in order
    size_t count;
    shoal_watch_info_t first;       //  the node's first answer (its strings not kept)
    char first_message[1024];      //  its message
    bool answered;
    bool stop;                      //  set by the test: the watch ends
    int rc;                         //  what the watch returned
} s_watcher_t;

static int
s_collect(const shoal_event_t *event, const shoal_watch_info_t *info, void *arg)
{
    s_watcher_t *self = (s_watcher_t *) arg;
    pthread_mutex_lock(&self->lock);
    if (info && !self->answered) {
        self->first = *info;
        self->first.node_id = NULL;
        snprintf(self->first_message, sizeof self->first_message, "%s", info->message ? info->message : "");
        self->first.message = NULL;
        self->answered = true;
    }
    if (event && self->count < S_EVENTS_MAX) {
        s_seen_t *seen = &self->events[self->count++];
        seen->seq = event->seq;
        seen->previous_seq = event->previous_seq;
        snprintf(seen->kind, sizeof seen->kind, "%s", event->kind);
        snprintf(seen->what, sizeof seen->what, "%s", event->what);
        snprintf(seen->claim, sizeof seen->claim, "%s", event->claim_id);
        snprintf(seen->tenant, sizeof seen->tenant, "%s", event->tenant);
    }
    bool stop = self->stop;
    pthread_mutex_unlock(&self->lock);
    return stop ? 1 : 0;
}

static void *
s_watch_thread(void *arg)
{
    s_watcher_t *self = (s_watcher_t *) arg;
    self->rc = shoal_client_watch(self->client, self->kinds, self->after, s_collect, self);
    return NULL;
}

//  Starts a watch of KINDS after AFTER by CLIENT (taken) and waits for the
//  node's first answer.
static s_watcher_t *
s_watch(shoal_client_t *client, const char *kinds, uint64_t after)
{
    s_watcher_t *self = (s_watcher_t *) zmalloc(sizeof *self);
    self->client = client;
    snprintf(self->kinds, sizeof self->kinds, "%s", kinds);
    self->after = after;
    pthread_mutex_init(&self->lock, NULL);
    pthread_create(&self->thread, NULL, s_watch_thread, self);
    int64_t deadline = shoal_test_now_ms() + S_WAIT_MS;
    while (shoal_test_now_ms() < deadline) {
        pthread_mutex_lock(&self->lock);
        bool answered = self->answered;
        pthread_mutex_unlock(&self->lock);
        if (answered)
            break;
        usleep(10000);
    }
    return self;
}

static void
s_watch_end(s_watcher_t **self_p)
{
    s_watcher_t *self = *self_p;
    if (!self)
        return;
    pthread_mutex_lock(&self->lock);
    self->stop = true;
    pthread_mutex_unlock(&self->lock);
    pthread_join(self->thread, NULL);
    shoal_client_destroy(&self->client);
    pthread_mutex_destroy(&self->lock);
    free(self);
    *self_p = NULL;
}

//  Whether WATCHER has seen an event KIND WHAT of CLAIM.
static bool
s_saw(s_watcher_t *watcher, const char *kind, const char *what, const char *claim)
{
    pthread_mutex_lock(&watcher->lock);
    bool found = false;
    for (size_t i = 0; i < watcher->count && !found; i++)
        found = streq(watcher->events[i].kind, kind) && streq(watcher->events[i].what, what)
             && streq(watcher->events[i].claim, claim);
    pthread_mutex_unlock(&watcher->lock);
    return found;
}

static bool
s_wait_saw(s_watcher_t *watcher, const char *kind, const char *what, const char *claim)
{
    int64_t deadline = shoal_test_now_ms() + S_WAIT_MS;
    while (shoal_test_now_ms() < deadline) {
        if (s_saw(watcher, kind, what, claim))
            return true;
        usleep(20000);
    }
    fprintf(stderr, "no %s %s of %s came\n", kind, what, claim);
    return false;
}

//  A copy of what WATCHER was sent so far, checked without its lock held.
typedef struct {
    s_seen_t events[S_EVENTS_MAX];
    size_t count;
} s_copy_t;

static void
s_snapshot(s_watcher_t *watcher, s_copy_t *copy)
{
    pthread_mutex_lock(&watcher->lock);
    memcpy(copy->events, watcher->events, sizeof copy->events);
    copy->count = watcher->count;
    pthread_mutex_unlock(&watcher->lock);
}

//  The position of the first KIND WHAT of CLAIM from FROM on, or -1.
static int
s_index(const s_copy_t *copy, size_t from, const char *kind, const char *what, const char *claim)
{
    for (size_t i = from; i < copy->count; i++)
        if (streq(copy->events[i].kind, kind) && streq(copy->events[i].what, what)
            && streq(copy->events[i].claim, claim))
            return (int) i;
    return -1;
}

static s_copy_t s_copy;

//  Checks that each of the WANTED "kind what" steps of CLAIM comes in
//  order, and that every number follows the one before (CONTIGUOUS: by
//  one; always: previous_seq names it).
static void
s_check_order(s_watcher_t *watcher, const char *claim, const char *const *wanted, bool contiguous)
{
    s_snapshot(watcher, &s_copy);
    size_t at = 0;
    for (size_t i = 0; wanted[i]; i++) {
        char kind[S_TEXT_MAX], what[S_TEXT_MAX];
        CHECK(sscanf(wanted[i], "%127s %127s", kind, what) == 2);
        int found = s_index(&s_copy, at, kind, what, claim);
        CHECK_MSG(found >= 0, "%s: no '%s' after position %zu of %zu events", claim, wanted[i], at, s_copy.count);
        if (found >= 0)
            at = (size_t) found + 1;
    }
    for (size_t i = 1; i < s_copy.count; i++) {
        CHECK_MSG(s_copy.events[i].previous_seq == s_copy.events[i - 1].seq, "event %" PRIu64 " names %" PRIu64
                  " before it, not %" PRIu64, s_copy.events[i].seq, s_copy.events[i].previous_seq,
                  s_copy.events[i - 1].seq);
        if (contiguous)
            CHECK_MSG(s_copy.events[i].seq == s_copy.events[i - 1].seq + 1, "a gap: %" PRIu64 " then %" PRIu64,
                      s_copy.events[i - 1].seq, s_copy.events[i].seq);
    }
}

//  Prints what WATCHER was sent, for the log of a run.
static void
s_print(s_watcher_t *watcher, const char *name)
{
    s_snapshot(watcher, &s_copy);
    for (size_t i = 0; i < s_copy.count; i++)
        fprintf(stderr, "  %s %" PRIu64 " (after %" PRIu64 ") %s %s %s\n", name, s_copy.events[i].seq,
                s_copy.events[i].previous_seq, s_copy.events[i].kind, s_copy.events[i].what, s_copy.events[i].claim);
}

//  A client of node INDEX with a tenant key of S_TENANT, its public half
//  put into every node's clients directory.
static char s_tenant_cert[512];

static int
s_tenant_key(shoal_cluster_t *cluster, int nodes)
{
    snprintf(s_tenant_cert, sizeof s_tenant_cert, "%s/tenant.cert", shoal_test_dir);
    char *error = NULL;
    if (shoal_keygen_client(s_tenant_cert, "tenant-acme", "tenant", S_TENANT, &error)) {
        fprintf(stderr, "keygen: %s\n", error);
        free(error);
        return -1;
    }
    zcert_t *cert = zcert_load(s_tenant_cert);
    for (int index = 1; index <= nodes && cert; index++) {
        char *dir = shoal_strdup(shoal_cluster_data_dir(cluster, index));
        *strrchr(dir, '/') = 0;
        char published[1024];
        snprintf(published, sizeof published, "%s/clients/tenant.cert", dir);
        free(dir);
        if (zcert_save_public(cert, published))
            return -1;
    }
    zcert_destroy(&cert);
    return 0;
}

static shoal_client_t *
s_tenant_client(shoal_cluster_t *cluster, int index)
{
    return shoal_client_new(shoal_cluster_endpoint(cluster, index), s_tenant_cert,
                            shoal_cluster_cluster_cert(cluster), NULL);
}

static int
s_create(shoal_cluster_t *cluster, int index, const char *id, const char *tenant, uint64_t rate)
{
    shoal_claim_spec_t spec = { .tenant = tenant, .memory_bytes = 64 * S_MB, .id = id, .rate = rate };
    shoal_client_t *client = shoal_cluster_client(cluster, index);
    int rc = shoal_client_claim_create(client, &spec, NULL);
    if (rc != 200)
        fprintf(stderr, "create %s on n%d: %d %s\n", id, index, rc, shoal_client_error(client));
    return rc;
}

static void
test_a_move_watched(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(2, NULL);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_start(cluster) == 0, "%s", shoal_cluster_error(cluster));
    CHECK(s_tenant_key(cluster, 2) == 0);
    CHECK_MSG(shoal_cluster_wait_all_alive(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));

    //  An admin on each node, of everything (so that every number comes:
    //  a loaded machine may have a peer suspected meanwhile), and the
    //  tenant on the source.
    s_watcher_t *source = s_watch(shoal_cluster_client_new(cluster, 1), "", 0);
    s_watcher_t *target = s_watch(shoal_cluster_client_new(cluster, 2), "", 0);
    s_watcher_t *tenant = s_watch(s_tenant_client(cluster, 1), "", 0);
    CHECK(source->answered && target->answered && tenant->answered);
    //  A tenant may not watch the mesh alone.
    shoal_client_t *nosy = s_tenant_client(cluster, 1);
    CHECK_INT(shoal_client_watch(nosy, "members", 0, s_collect, source), 403);
    CHECK_INT(shoal_client_watch(nosy, "claims,nonsense", 0, s_collect, source), 400);
    shoal_client_destroy(&nosy);

    CHECK_INT(s_create(cluster, 1, "ev", S_TENANT, 1000 * 1000), 200);
    CHECK_INT(s_create(cluster, 1, "theirs", S_OTHER, 0), 200);
    CHECK_MSG(shoal_move_check_move(cluster, 1, "ev", 2, 300, S_MOVE_WAIT_MS) == 0, "%s", shoal_move_check_error());
    CHECK_MSG(shoal_move_check_settled(cluster, "ev", 2, S_WAIT_MS) == 0, "%s", shoal_move_check_error());
    CHECK_INT(shoal_client_claim_release(shoal_cluster_client(cluster, 2), "ev", NULL), 200);
    CHECK_INT(shoal_client_claim_release(shoal_cluster_client(cluster, 1), "theirs", NULL), 200);

    CHECK(s_wait_saw(source, "claim", "left", "ev"));
    CHECK(s_wait_saw(source, "claim", "released", "theirs"));
    CHECK(s_wait_saw(target, "claim", "released", "ev"));
    CHECK(s_wait_saw(tenant, "claim", "left", "ev"));
    const char *const on_source[] = {
        "claim creating", "claim running", "claim moving", "move pending", "move final", "move committed",
        "move started", "claim left", NULL
    };
    s_print(source, "n1");
    s_print(target, "n2");
    s_check_order(source, "ev", on_source, true);
    const char *const on_target[] = {
        "move receiving", "move received", "claim moving", "move adopted", "claim running", "claim released", NULL
    };
    s_check_order(target, "ev", on_target, true);
    s_check_order(tenant, "ev", on_source, false);
    //  The tenant saw its claim and nothing of the other tenant's.
    s_snapshot(tenant, &s_copy);
    for (size_t i = 0; i < s_copy.count; i++)
        CHECK_MSG(streq(s_copy.events[i].tenant, S_TENANT), "the tenant saw %s %s of %s (%s)",
                  s_copy.events[i].kind, s_copy.events[i].what, s_copy.events[i].claim, s_copy.events[i].tenant);
    s_snapshot(source, &s_copy);
    CHECK(s_index(&s_copy, 0, "claim", "running", "theirs") >= 0);
    //  shoalctl watch replays the same, one JSON object per line.
    //  Its first two claim events, after the number before the first.
    s_snapshot(source, &s_copy);
    int creating_at = s_index(&s_copy, 0, "claim", "creating", "ev");
    int running_at = s_index(&s_copy, 0, "claim", "running", "ev");
    CHECK(creating_at >= 0 && running_at > creating_at);
    for (int i = creating_at + 1; i < running_at; i++)
        CHECK_MSG(!streq(s_copy.events[i].kind, "claim"), "%s %s of %s between", s_copy.events[i].kind,
                  s_copy.events[i].what, s_copy.events[i].claim);
    uint64_t first = s_copy.events[creating_at].seq;
    uint64_t second = s_copy.events[running_at].seq;
    char after[32], creating[128], running[128];
    snprintf(after, sizeof after, "%" PRIu64, first - 1);
    snprintf(creating, sizeof creating, "{\"seq\":%" PRIu64 ",\"previous_seq\":%" PRIu64
             ",\"kind\":\"claim\",\"what\":\"creating\"", first, first - 1);
    snprintf(running, sizeof running, "{\"seq\":%" PRIu64 ",\"previous_seq\":%" PRIu64
             ",\"kind\":\"claim\",\"what\":\"running\"", second, first);
    char *output = NULL;
    int code = shoal_cluster_ctl(cluster, 1, &output, "watch", "claims", "--after", after, "--count", "2", "--json",
                                 NULL);
    CHECK_MSG(code == 0, "shoalctl watch: %d: %s", code, output ? output : "");
    CHECK_MSG(output && strstr(output, "\"replayed\":") && strstr(output, creating) && strstr(output, running),
              "%s", output ? output : "");
    free(output);
    s_watch_end(&source);
    s_watch_end(&target);
    s_watch_end(&tenant);
    shoal_cluster_destroy(&cluster);
}

static void
test_missed_across_a_restart(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(1, NULL);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_start(cluster) == 0, "%s", shoal_cluster_error(cluster));
    s_watcher_t *watcher = s_watch(shoal_cluster_client_new(cluster, 1), "claims", 0);
    CHECK(watcher->answered);
    CHECK_INT(s_create(cluster, 1, "before", S_TENANT, 0), 200);
    CHECK(s_wait_saw(watcher, "claim", "running", "before"));
    pthread_mutex_lock(&watcher->lock);
    uint64_t last = watcher->events[watcher->count - 1].seq;
    pthread_mutex_unlock(&watcher->lock);
    s_watch_end(&watcher);

    //  Away while the node restarts and works: what came is replayed.
    CHECK_MSG(shoal_cluster_node_restart(cluster, 1) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_INT(s_create(cluster, 1, "during", S_TENANT, 0), 200);
    CHECK_INT(shoal_client_claim_stop(shoal_cluster_client(cluster, 1), "before", NULL), 200);
    watcher = s_watch(shoal_cluster_client_new(cluster, 1), "claims", last);
    CHECK(watcher->answered);
    CHECK(watcher->first.replayed >= 3);
    CHECK_INT(watcher->first.missed_to, 0);
    CHECK(s_wait_saw(watcher, "claim", "stopped", "before"));
    const char *const missed[] = { "claim creating", "claim running", NULL };
    s_check_order(watcher, "during", missed, true);
    s_snapshot(watcher, &s_copy);
    CHECK(s_copy.count > 0 && s_copy.events[0].previous_seq == last && s_copy.events[0].seq == last + 1);
    s_watch_end(&watcher);

    //  A new watch from now on is told where the node stands, and gets no replay.
    watcher = s_watch(shoal_cluster_client_new(cluster, 1), "claims", 0);
    CHECK(watcher->answered && watcher->first.last_seq >= last + 3 && watcher->first.replayed == 0);
    s_watch_end(&watcher);
    shoal_cluster_destroy(&cluster);
}

//  The seqs WATCHER was sent, checked: each names the one before it
//  (PREVIOUS: what the first must name), each event is TENANT's when
//  TENANT is set. Returns the last seq, or 0 after a failed check.
static uint64_t
s_check_chain(s_watcher_t *watcher, uint64_t previous, const char *tenant)
{
    s_snapshot(watcher, &s_copy);
    uint64_t last = previous;
    for (size_t i = 0; i < s_copy.count; i++) {
        if (s_copy.events[i].previous_seq != last || s_copy.events[i].seq <= last) {
            fprintf(stderr, "event %" PRIu64 " names %" PRIu64 " before it; the last one seen was %" PRIu64 "\n",
                    s_copy.events[i].seq, s_copy.events[i].previous_seq, last);
            return 0;
        }
        if (tenant && !streq(s_copy.events[i].tenant, tenant)) {
            fprintf(stderr, "the watcher of %s was sent %s %s of %s (%s)\n", tenant, s_copy.events[i].kind,
                    s_copy.events[i].what, s_copy.events[i].claim, s_copy.events[i].tenant);
            return 0;
        }
        last = s_copy.events[i].seq;
    }
    return last;
}

//  The seq of the last event WATCHER was sent (0: none).
static uint64_t
s_last_seen(s_watcher_t *watcher)
{
    pthread_mutex_lock(&watcher->lock);
    uint64_t last = watcher->count ? watcher->events[watcher->count - 1].seq : 0;
    pthread_mutex_unlock(&watcher->lock);
    return last;
}

//  The node's last event number, as a new watch is told it.
static uint64_t
s_node_last(shoal_cluster_t *cluster, int index)
{
    s_watcher_t *probe = s_watch(shoal_cluster_client_new(cluster, index), "", 0);
    uint64_t last = probe->answered ? probe->first.last_seq : 0;
    s_watch_end(&probe);
    return last;
}

//  A node killed with SIGKILL gives no number twice and skips none: a
//  watcher of everything coming back sees every number once, in order,
//  from before the crash to after it. A tenant's watcher, while another
//  tenant works, sees gaps in the numbers, each explained: every event
//  names the last one that watcher was sent.
static void
test_a_crash_loses_no_number(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(1, NULL);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_start(cluster) == 0, "%s", shoal_cluster_error(cluster));
    CHECK(s_tenant_key(cluster, 1) == 0);
    s_watcher_t *all = s_watch(shoal_cluster_client_new(cluster, 1), "", 0);
    s_watcher_t *tenant = s_watch(s_tenant_client(cluster, 1), "", 0);
    CHECK(all->answered && tenant->answered);
    uint64_t all_from = all->first.last_seq, tenant_from = tenant->first.last_seq;

    //  Both tenants work, interleaved.
    CHECK_INT(s_create(cluster, 1, "t1", S_TENANT, 0), 200);
    CHECK_INT(s_create(cluster, 1, "o1", S_OTHER, 0), 200);
    CHECK_INT(s_create(cluster, 1, "o2", S_OTHER, 0), 200);
    CHECK_INT(s_create(cluster, 1, "t2", S_TENANT, 0), 200);
    CHECK(s_wait_saw(all, "claim", "running", "t2"));
    CHECK(s_wait_saw(tenant, "claim", "running", "t2"));
    uint64_t all_last = s_check_chain(all, all_from, NULL);
    CHECK(all_last > all_from);
    uint64_t tenant_last = s_check_chain(tenant, tenant_from, S_TENANT);
    CHECK(tenant_last > tenant_from);
    //  The admin's numbers follow by one; the tenant's skip the other
    //  tenant's events, which it was not sent.
    s_snapshot(all, &s_copy);
    for (size_t i = 1; i < s_copy.count; i++)
        CHECK_MSG(s_copy.events[i].seq == s_copy.events[i - 1].seq + 1, "a gap: %" PRIu64 " then %" PRIu64,
                  s_copy.events[i - 1].seq, s_copy.events[i].seq);
    s_snapshot(tenant, &s_copy);
    bool skipped = false;
    for (size_t i = 1; i < s_copy.count; i++)
        skipped |= s_copy.events[i].seq > s_copy.events[i - 1].seq + 1;
    CHECK_MSG(skipped, "the tenant's watcher skipped no number: the other tenant's events came through");
    s_watch_end(&all);
    s_watch_end(&tenant);

    //  Away while both tenants work, and the node is killed.
    CHECK_INT(s_create(cluster, 1, "o3", S_OTHER, 0), 200);
    CHECK_INT(s_create(cluster, 1, "t3", S_TENANT, 0), 200);
    CHECK_INT(shoal_client_claim_stop(shoal_cluster_client(cluster, 1), "t1", NULL), 200);
    CHECK_INT(shoal_client_claim_stop(shoal_cluster_client(cluster, 1), "o1", NULL), 200);
    uint64_t before_crash = s_node_last(cluster, 1);
    CHECK(before_crash > all_last);
    CHECK_INT(shoal_cluster_node_kill(cluster, 1, SIGKILL), 128 + SIGKILL);
    CHECK_MSG(shoal_cluster_node_start(cluster, 1) == 0, "%s", shoal_cluster_error(cluster));

    //  Everything after the last number seen is replayed, nothing is
    //  said to be lost, and the next number is the one after the crash's.
    all = s_watch(shoal_cluster_client_new(cluster, 1), "", all_last);
    CHECK(all->answered);
    CHECK_MSG(all->first.missed_to == 0, "a watcher of a node killed is told %" PRIu64 "..%" PRIu64 " are lost: %s",
              all->first.missed_from, all->first.missed_to, all->first_message);
    CHECK_MSG(all->first.last_seq >= before_crash && all->first.replayed == all->first.last_seq - all_last,
              "last %" PRIu64 " (before the crash %" PRIu64 "), replayed %" PRIu64 " after %" PRIu64,
              all->first.last_seq, before_crash, all->first.replayed, all_last);
    tenant = s_watch(s_tenant_client(cluster, 1), "", tenant_last);
    CHECK(tenant->answered && tenant->first.missed_to == 0);
    CHECK(s_wait_saw(tenant, "claim", "stopped", "t1"));
    CHECK_INT(s_create(cluster, 1, "o4", S_OTHER, 0), 200);
    CHECK_INT(s_create(cluster, 1, "t4", S_TENANT, 0), 200);
    CHECK(s_wait_saw(all, "claim", "running", "t4"));
    CHECK(s_wait_saw(tenant, "claim", "running", "t4"));
    s_print(all, "all");
    s_print(tenant, "tenant");
    CHECK(s_check_chain(all, all_last, NULL) > before_crash);
    s_snapshot(all, &s_copy);
    for (size_t i = 0; i < s_copy.count; i++)
        CHECK_MSG(s_copy.events[i].seq == all_last + 1 + i, "after %" PRIu64 ", event %zu is %" PRIu64, all_last, i,
                  s_copy.events[i].seq);
    CHECK(s_index(&s_copy, 0, "claim", "running", "t3") >= 0 && s_index(&s_copy, 0, "claim", "running", "o3") >= 0
          && s_index(&s_copy, 0, "claim", "stopped", "o1") >= 0);
    //  The tenant's: its own, each naming the one before, across the crash.
    CHECK(s_check_chain(tenant, tenant_last, S_TENANT) > before_crash);
    s_snapshot(tenant, &s_copy);
    CHECK(s_index(&s_copy, 0, "claim", "running", "t3") >= 0 && s_index(&s_copy, 0, "claim", "stopped", "t1") >= 0);
    s_watch_end(&all);
    s_watch_end(&tenant);
    const char *const claims[] = { "t1", "t2", "t3", "t4", "o1", "o2", "o3", "o4", NULL };
    for (size_t i = 0; claims[i]; i++)
        CHECK_INT(shoal_client_claim_release(shoal_cluster_client(cluster, 1), claims[i], NULL), 200);
    shoal_cluster_destroy(&cluster);
}

//  Replaces FILE's content by TEXT. Returns 0 or -1.
static int
s_write_file(const char *path, const char *text)
{
    FILE *file = fopen(path, "w");
    if (!file)
        return -1;
    int rc = fputs(text, file) >= 0 ? 0 : -1;
    return fclose(file) == 0 ? rc : -1;
}

//  A restart of the machine may lose the log's tail, which watchers were
//  sent: the node gives no number up to its synced reservation again, and
//  a returning watcher is told, in numbers and words, what is lost.
static void
test_a_machine_restart_reuses_no_number(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(1, NULL);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_start(cluster) == 0, "%s", shoal_cluster_error(cluster));
    s_watcher_t *watcher = s_watch(shoal_cluster_client_new(cluster, 1), "", 0);
    CHECK(watcher->answered);
    CHECK_INT(s_create(cluster, 1, "before", S_TENANT, 0), 200);
    CHECK(s_wait_saw(watcher, "claim", "running", "before"));
    uint64_t seen = s_last_seen(watcher);
    s_watch_end(&watcher);
    CHECK_INT(shoal_cluster_node_kill(cluster, 1, SIGKILL), 128 + SIGKILL);

    //  The machine restarted (another boot id), and the log lost what was
    //  not synced: here, all of it.
    char path[1024];
    snprintf(path, sizeof path, "%s/events.seq", shoal_cluster_data_dir(cluster, 1));
    char *text = shoal_test_slurp(path);
    unsigned long long reserved = 0;
    CHECK_MSG(text && sscanf(text, "reserved %llu\nboot ", &reserved) == 1 && reserved > seen, "%s: %s", path,
              text ? text : "(none)");
    free(text);
    char rebooted[128];
    snprintf(rebooted, sizeof rebooted, "reserved %llu\nboot 00000000-0000-0000-0000-000000000000\nlost 0\n",
             reserved);
    CHECK(s_write_file(path, rebooted) == 0);
    unsigned long long hole = reserved;
    snprintf(path, sizeof path, "%s/events.log", shoal_cluster_data_dir(cluster, 1));
    CHECK(truncate(path, 0) == 0);
    CHECK_MSG(shoal_cluster_node_start(cluster, 1) == 0, "%s", shoal_cluster_error(cluster));

    watcher = s_watch(shoal_cluster_client_new(cluster, 1), "", seen);
    CHECK(watcher->answered);
    CHECK_MSG(watcher->first.missed_from == seen + 1 && watcher->first.missed_to == reserved
              && watcher->first.last_seq == reserved && watcher->first.replayed == 0,
              "after %" PRIu64 ": missed %" PRIu64 "..%" PRIu64 ", last %" PRIu64 ", reserved %llu", seen,
              watcher->first.missed_from, watcher->first.missed_to, watcher->first.last_seq, reserved);
    CHECK_MSG(strstr(watcher->first_message, "no longer kept") && strstr(watcher->first_message, "machine restarted"),
              "%s", watcher->first_message);
    CHECK_INT(shoal_client_claim_stop(shoal_cluster_client(cluster, 1), "before", NULL), 200);
    CHECK(s_wait_saw(watcher, "claim", "stopped", "before"));
    //  The first new number comes after the reservation, and names the
    //  last one this watcher saw: the lost range was said in the reply.
    s_snapshot(watcher, &s_copy);
    CHECK(s_copy.count > 0 && s_copy.events[0].seq == reserved + 1 && s_copy.events[0].previous_seq == seen);
    s_watch_end(&watcher);

    //  A clean stop reserves nothing ahead: a restart of the machine after
    //  it loses no number.
    uint64_t last = s_node_last(cluster, 1);
    CHECK(last > reserved);
    CHECK_INT(shoal_cluster_node_kill(cluster, 1, SIGTERM), 0);
    snprintf(path, sizeof path, "%s/events.seq", shoal_cluster_data_dir(cluster, 1));
    text = shoal_test_slurp(path);
    unsigned long long lost = 0;
    CHECK_MSG(text && sscanf(text, "reserved %llu\nboot %*s\nlost %llu", &reserved, &lost) == 2 && reserved == last
              && lost == hole, "%s", text ? text : "");
    free(text);
    snprintf(rebooted, sizeof rebooted, "reserved %llu\nboot 00000000-0000-0000-0000-000000000000\nlost %llu\n",
             reserved, lost);
    CHECK(s_write_file(path, rebooted) == 0);
    CHECK_MSG(shoal_cluster_node_start(cluster, 1) == 0, "%s", shoal_cluster_error(cluster));
    watcher = s_watch(shoal_cluster_client_new(cluster, 1), "", seen);
    CHECK(watcher->answered && watcher->first.last_seq == last && watcher->first.missed_to == hole
          && watcher->first.replayed == last - hole);
    CHECK_MSG(strstr(watcher->first_message, "machine restarted"), "%s", watcher->first_message);
    s_watch_end(&watcher);

    //  A damaged reservation stops the start, named.
    CHECK_INT(shoal_cluster_node_kill(cluster, 1, SIGTERM), 0);
    CHECK(s_write_file(path, "reserved many\n") == 0);
    CHECK(shoal_cluster_node_start(cluster, 1) != 0);
    char *log = shoal_test_slurp(shoal_cluster_log_path(cluster, 1));
    CHECK_MSG(log && strstr(log, "events.seq does not read"), "%s", log ? log : "(no log)");
    free(log);
    CHECK(unlink(path) == 0);
    CHECK_MSG(shoal_cluster_node_start(cluster, 1) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_INT(shoal_client_claim_release(shoal_cluster_client(cluster, 1), "before", NULL), 200);
    shoal_cluster_destroy(&cluster);
}

//  A watcher away for longer than the node keeps events (events/kept) is
//  told which numbers are lost to it, in numbers and words, and gets the
//  kept ones; one that names a number the node never gave is refused.
static void
test_too_much_missed(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(1, NULL);
    CHECK(cluster);
    shoal_cluster_node_setenv(cluster, 1, "SHOAL_EVENTS_KEPT", "16");
    CHECK_MSG(shoal_cluster_start(cluster) == 0, "%s", shoal_cluster_error(cluster));
    uint64_t from = s_node_last(cluster, 1);
    CHECK_INT(s_create(cluster, 1, "busy", S_TENANT, 0), 200);
    //  A stop waits for the guest to end: slow on a loaded machine.
    shoal_client_t *client = shoal_cluster_client(cluster, 1);
    shoal_client_set_timeout(client, S_WAIT_MS);
    for (int i = 0; i < 10; i++) {
        CHECK_INT(shoal_client_claim_stop(client, "busy", NULL), 200);
        CHECK_INT(shoal_client_claim_start(client, "busy", NULL), 200);
    }
    uint64_t last = s_node_last(cluster, 1);
    CHECK_MSG(last >= from + 22, "%" PRIu64 " events after %" PRIu64, last, from);

    s_watcher_t *watcher = s_watch(shoal_cluster_client_new(cluster, 1), "", from + 1);
    CHECK(watcher->answered);
    uint64_t first_kept = last - 15;
    CHECK_MSG(watcher->first.first_kept_seq == first_kept && watcher->first.missed_from == from + 2
              && watcher->first.missed_to == first_kept - 1 && watcher->first.replayed == 16,
              "last %" PRIu64 ": first kept %" PRIu64 ", missed %" PRIu64 "..%" PRIu64 ", replayed %" PRIu64, last,
              watcher->first.first_kept_seq, watcher->first.missed_from, watcher->first.missed_to,
              watcher->first.replayed);
    char words[256];
    snprintf(words, sizeof words, "events %" PRIu64 " to %" PRIu64 " are no longer kept", from + 2, first_kept - 1);
    CHECK_MSG(strstr(watcher->first_message, words) && strstr(watcher->first_message, "events/kept")
              && strstr(watcher->first_message, "16 kept event(s) after them follow"), "%s", watcher->first_message);
    int64_t deadline = shoal_test_now_ms() + S_WAIT_MS;
    while (s_last_seen(watcher) < last && shoal_test_now_ms() < deadline)
        usleep(20000);
    //  The kept ones, in order, the first naming the last one seen.
    s_snapshot(watcher, &s_copy);
    CHECK_INT(s_copy.count, 16);
    CHECK(s_copy.events[0].seq == first_kept && s_copy.events[0].previous_seq == from + 1);
    CHECK(s_check_chain(watcher, from + 1, NULL) == last);
    s_watch_end(&watcher);

    //  shoalctl says the same.
    char after[32], expected[256];
    snprintf(after, sizeof after, "%" PRIu64, from + 1);
    char *output = NULL;
    int code = shoal_cluster_ctl(cluster, 1, &output, "watch", "--after", after, "--count", "1", NULL);
    CHECK_MSG(code == 0 && output && strstr(output, words), "shoalctl watch: %d: %s", code, output ? output : "");
    free(output);
    snprintf(expected, sizeof expected, "\"missed_from\":%" PRIu64 ",\"missed_to\":%" PRIu64, from + 2, first_kept - 1);
    code = shoal_cluster_ctl(cluster, 1, &output, "watch", "--after", after, "--count", "1", "--json", NULL);
    CHECK_MSG(code == 0 && output && strstr(output, expected) && strstr(output, words), "shoalctl watch --json: %d: %s",
              code, output ? output : "");
    free(output);

    //  A number past the node's last: not this node's, refused.
    shoal_client_t *stranger = shoal_cluster_client_new(cluster, 1);
    CHECK_INT(shoal_client_watch(stranger, "", last + 100, s_collect, NULL), 409);
    CHECK_MSG(strstr(shoal_client_error(stranger), "past node n1's last event"), "%s", shoal_client_error(stranger));
    shoal_client_destroy(&stranger);

    //  A restart keeps the same last events.
    CHECK_MSG(shoal_cluster_node_restart(cluster, 1) == 0, "%s", shoal_cluster_error(cluster));
    watcher = s_watch(shoal_cluster_client_new(cluster, 1), "", from + 1);
    CHECK(watcher->answered && watcher->first.first_kept_seq == first_kept && watcher->first.last_seq == last
          && watcher->first.missed_to == first_kept - 1);
    s_watch_end(&watcher);
    CHECK_INT(shoal_client_claim_release(shoal_cluster_client(cluster, 1), "busy", NULL), 200);
    shoal_cluster_destroy(&cluster);
}

#define S_TEST(fn) do { SHOAL_TEST(fn); shoal_cluster_destroy_all(); shoal_move_check_cleanup(); } while (0)

int
main(void)
{
    S_TEST(test_a_move_watched);
    S_TEST(test_missed_across_a_restart);
    S_TEST(test_a_crash_loses_no_number);
    S_TEST(test_a_machine_restart_reuses_no_number);
    S_TEST(test_too_much_missed);
    return shoal_test_finish();
}
