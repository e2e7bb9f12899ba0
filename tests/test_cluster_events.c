/*  test_cluster_events: the event stream of real nodes, watched with
    libshoal during a live move, by an admin and by a tenant, and across a
    restart of the node. */
#include "shoal_test.h"
#include "shoal_cluster.h"
#include "shoal_move_check.h"

#include <czmq.h>
#include <pthread.h>
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
        char *dir = strdup(shoal_cluster_data_dir(cluster, index));
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

    //  An admin on each node, and the tenant on the source.
    s_watcher_t *source = s_watch(shoal_cluster_client_new(cluster, 1), "claims,moves", 0);
    s_watcher_t *target = s_watch(shoal_cluster_client_new(cluster, 2), "claims,moves", 0);
    s_watcher_t *tenant = s_watch(s_tenant_client(cluster, 1), "", 0);
    CHECK(source->answered && target->answered && tenant->answered);
    //  A tenant may not watch the mesh alone.
    shoal_client_t *nosy = s_tenant_client(cluster, 1);
    CHECK_INT(shoal_client_watch(nosy, "members", 0, s_collect, source), 403);
    CHECK_INT(shoal_client_watch(nosy, "claims,nonsense", 0, s_collect, source), 400);
    shoal_client_destroy(&nosy);

    CHECK_INT(s_create(cluster, 1, "ev", S_TENANT, 1000 * 1000), 200);
    CHECK_INT(s_create(cluster, 1, "theirs", S_OTHER, 0), 200);
    shoal_client_t *mover = shoal_cluster_client_new(cluster, 1);
    shoal_client_set_timeout(mover, 10000);
    shoal_move_info_t info = { 0 };
    CHECK_INT(shoal_client_move(mover, "ev", "n2", 300, &info), 200);
    int64_t deadline = shoal_test_now_ms() + S_MOVE_WAIT_MS;
    while (!info.done && shoal_test_now_ms() < deadline) {
        usleep(20000);
        shoal_move_info_clear(&info);
        CHECK_INT(shoal_client_move_status(mover, "ev", &info), 200);
    }
    CHECK_STR(info.phase, "done");
    shoal_move_info_clear(&info);
    shoal_client_destroy(&mover);
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
    s_snapshot(source, &s_copy);
    CHECK(s_copy.count >= 2);
    uint64_t first = s_copy.events[0].seq;
    char after[32], creating[128], running[128];
    snprintf(after, sizeof after, "%" PRIu64, first - 1);
    snprintf(creating, sizeof creating, "{\"seq\":%" PRIu64 ",\"previous_seq\":%" PRIu64
             ",\"kind\":\"claim\",\"what\":\"creating\"", first, first - 1);
    snprintf(running, sizeof running, "{\"seq\":%" PRIu64 ",\"previous_seq\":%" PRIu64
             ",\"kind\":\"claim\",\"what\":\"running\"", first + 1, first);
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

#define S_TEST(fn) do { SHOAL_TEST(fn); shoal_cluster_destroy_all(); shoal_move_check_cleanup(); } while (0)

int
main(void)
{
    S_TEST(test_a_move_watched);
    S_TEST(test_missed_across_a_restart);
    return shoal_test_finish();
}
