/*  test_cluster_metrics: the Prometheus endpoint of real nodes, scraped
    during a live move and after it, and checked by promtool. */
#include "shoal_test.h"
#include "shoal_cluster.h"
#include "shoal_move_check.h"
#include "shoal_alloc.h"

#include <arpa/inet.h>
#include <czmq.h>
#include <jansson.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#define S_MB (1024ull * 1024)
#define S_WAIT_MS 30000
#define S_MOVE_WAIT_MS 120000
#define S_TENANT "acme/web"
//  The guest's memory and load: enough for a move of several rounds that
//  a scrape can catch under way, little enough for a busy machine.
#define S_MEMORY (128 * S_MB)
#define S_RATE (4 * 1000 * 1000)
#define S_MEMORY_LIMIT_MB 512

//  GETs /metrics from PORT on loopback. Returns the body (caller frees), or
//  NULL with the reason on stderr. *STATUS_P gets the HTTP status.
static char *
s_scrape_path(int port, const char *path, int *status_p)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *) &address, sizeof address) != 0) {
        fprintf(stderr, "cannot connect to the metrics port %d: %s\n", port, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    char request[256];
    snprintf(request, sizeof request, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    if (write(fd, request, strlen(request)) != (ssize_t) strlen(request)) {
        close(fd);
        return NULL;
    }
    zchunk_t *answer = zchunk_new(NULL, 65536);
    char buffer[8192];
    ssize_t got;
    while ((got = read(fd, buffer, sizeof buffer)) > 0)
        zchunk_extend(answer, buffer, (size_t) got);
    close(fd);
    zchunk_extend(answer, "", 1);
    const char *text = (const char *) zchunk_data(answer);
    *status_p = strncmp(text, "HTTP/1.", 7) == 0 ? atoi(text + 9) : 0;
    const char *body = strstr(text, "\r\n\r\n");
    char *copy = body ? shoal_strdup(body + 4) : NULL;
    zchunk_destroy(&answer);
    return copy;
}

static char *
s_scrape(int port)
{
    int status = 0;
    char *body = s_scrape_path(port, "/metrics", &status);
    if (body && status != 200) {
        fprintf(stderr, "the metrics answered %d\n", status);
        zstr_free(&body);
    }
    return body;
}

//  The value of the sample whose line starts with SERIES and a space (a
//  name with its labels, exactly as rendered), or -1 when absent.
static double
s_value(const char *text, const char *series)
{
    size_t length = strlen(series);
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (strncmp(line, series, length) == 0 && line[length] == ' ')
            return strtod(line + length + 1, NULL);
    return -1;
}

//  Runs promtool's check on TEXT. Returns its exit code, its output in
//  *OUTPUT_P (caller frees).
static int
s_promtool(const char *text, char **output_p)
{
    char path[512];
    snprintf(path, sizeof path, "%s/scrape.txt", shoal_test_dir);
    FILE *file = fopen(path, "w");
    if (!file)
        return -1;
    fputs(text, file);
    fclose(file);
    char command[1024];
    snprintf(command, sizeof command, "promtool check metrics < '%s'", path);
    char *argv[] = { "/bin/sh", "-c", command, NULL };
    return shoal_test_capture(argv, NULL, 60000, output_p);
}

static int s_ports[3];

//  Starts a cluster of two whose nodes serve metrics on free ports.
static shoal_cluster_t *
s_cluster(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(2, NULL);
    if (!cluster)
        return NULL;
    char bind[64], memory[32];
    snprintf(memory, sizeof memory, "%d", S_MEMORY_LIMIT_MB);
    for (int index = 1; index <= 2; index++) {
        s_ports[index] = shoal_test_free_port();
        snprintf(bind, sizeof bind, "127.0.0.1:%d", s_ports[index]);
        shoal_cluster_node_setenv(cluster, index, "SHOAL_METRICS_BIND", bind);
        shoal_cluster_node_setenv(cluster, index, "SHOAL_LIMITS_MEMORY_MB", memory);
    }
    return cluster;
}

//  Counts the histogram's observations at or below LE and all of them.
static void
s_bucket(const char *text, const char *name, const char *le, double *at, double *count)
{
    char series[256];
    snprintf(series, sizeof series, "%s_bucket{le=\"%s\"}", name, le);
    *at = s_value(text, series);
    snprintf(series, sizeof series, "%s_count", name);
    *count = s_value(text, series);
}

//  The smallest bucket bound of NAME in TEXT that holds VALUE, as rendered.
static void
s_bound_for(const char *text, const char *name, double value, char *le, size_t size)
{
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s_bucket{le=\"", name);
    snprintf(le, size, "+Inf");
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, prefix, strlen(prefix)) != 0)
            continue;
        const char *bound = line + strlen(prefix);
        if (strncmp(bound, "+Inf", 4) == 0)
            return;
        if (value <= strtod(bound, NULL)) {
            snprintf(le, size, "%.*s", (int) (strchr(bound, '"') - bound), bound);
            return;
        }
    }
}

static void
test_scraped_during_and_after_a_move(void)
{
    shoal_cluster_t *cluster = s_cluster();
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_up(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));

    char *before = s_scrape(s_ports[1]);
    CHECK(before);
    CHECK(s_value(before, "shoal_moves_started_total{role=\"source\"}") == 0);
    CHECK(s_value(before, "shoal_claims{state=\"running\"}") == 0);
    zstr_free(&before);
    int status = 0;
    char *missing = s_scrape_path(s_ports[1], "/elsewhere", &status);
    CHECK_INT(status, 404);
    zstr_free(&missing);

    //  Two refusals: memory past the limit, then a disk past limits/disk_mb.
    shoal_client_t *n1 = shoal_cluster_client(cluster, 1);
    shoal_claim_spec_t big = { .tenant = S_TENANT, .memory_bytes = (S_MEMORY_LIMIT_MB + 1) * S_MB, .id = "big" };
    CHECK_INT(shoal_client_claim_create(n1, &big, NULL), 507);
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = S_MEMORY, .id = "mover", .rate = S_RATE,
                                .disk_bytes = 4 * S_MB };
    CHECK_INT(shoal_client_claim_create(n1, &spec, NULL), 200);
    shoal_claim_spec_t still = { .tenant = S_TENANT, .memory_bytes = S_MB, .id = "still" };
    CHECK_INT(shoal_client_claim_create(n1, &still, NULL), 200);
    CHECK_INT(shoal_client_claim_stop(n1, "still", NULL), 200);

    //  The move, scraped while it runs.
    shoal_client_t *mover = shoal_cluster_client_new(cluster, 1);
    shoal_client_set_timeout(mover, 10000);
    shoal_move_info_t info = { 0 };
    CHECK_INT(shoal_client_move(mover, "mover", "n2", 300, &info), 200);
    bool seen_in_flight = false;
    bool checked_in_flight = false;
    char *first_during = NULL;
    int scrapes = 0;
    int64_t deadline = shoal_test_now_ms() + S_MOVE_WAIT_MS;
    while (!info.done && shoal_test_now_ms() < deadline) {
        char *during = s_scrape(s_ports[1]);
        CHECK(during);
        if (!during)
            break;
        scrapes++;
        if (s_value(during, "shoal_moves_in_flight{role=\"source\"}") == 1) {
            seen_in_flight = true;
            CHECK(s_value(during, "shoal_moves_started_total{role=\"source\"}") == 1);
            CHECK(s_value(during, "shoal_moves_moved_total") == 0);
            CHECK(s_value(during, "shoal_move_duration_seconds_count") == 0);
        }
        //  promtool takes a while: the text it checks is kept for after the move.
        if (!first_during || (seen_in_flight && !checked_in_flight)) {
            zstr_free(&first_during);
            first_during = shoal_strdup(during);
            checked_in_flight = seen_in_flight;
        }
        zstr_free(&during);
        usleep(20000);
        shoal_move_info_clear(&info);
        CHECK_INT(shoal_client_move_status(mover, "mover", &info), 200);
    }
    char *checked = NULL;
    int checked_rc = first_during ? s_promtool(first_during, &checked) : -1;
    CHECK_MSG(checked_rc == 0, "promtool check metrics during the move: %d: %s", checked_rc, checked ? checked : "");
    zstr_free(&checked);
    zstr_free(&first_during);
    CHECK(info.done);
    CHECK_STR(info.phase, "done");
    CHECK_MSG(seen_in_flight, "no scrape of %d during the move saw it in flight", scrapes);
    fprintf(stderr, "  moved: %u rounds, %" PRIu64 " bytes, %" PRIu64 " ms, downtime %" PRIu64 " / %" PRIu64
            " ms, switch gap %" PRIu64 " ms; %d scrapes during it\n", info.round, info.bytes_sent, info.total_ms,
            info.node_downtime_ms, info.guest_downtime_ms, info.guest_switch_gap_ms, scrapes);
    //  The guest ran through the move: its clock crossed the switch, and the
    //  histogram below holds that figure, not a zero for a tick not known.
    CHECK(info.guest_switch_gap_ms > 0);

    //  After it: the source's counts and buckets say what happened. The
    //  published text follows the reactor within a tick: wait for it.
    char *after = NULL;
    deadline = shoal_test_now_ms() + S_WAIT_MS;
    while (shoal_test_now_ms() < deadline) {
        zstr_free(&after);
        after = s_scrape(s_ports[1]);
        //  Gauges are sampled once a second, and the target's registry
        //  entry reaches the source through the sync: wait for those too.
        if (after && s_value(after, "shoal_moves_moved_total") == 1 && s_value(after, "shoal_members{state=\"alive\"}") == 1
        &&  s_value(after, "shoal_oplog_entries{dataset=\"registry\"}") >= 2
        &&  s_value(after, "shoal_store_size_bytes") > 0
        &&  s_value(after, "shoal_reactor_tick_lateness_seconds_count") > 0)
            break;
        usleep(50000);
    }
    CHECK(after);
    CHECK(s_value(after, "shoal_moves_started_total{role=\"source\"}") == 1);
    CHECK(s_value(after, "shoal_moves_committed_total{role=\"source\"}") == 1);
    CHECK(s_value(after, "shoal_moves_moved_total") == 1);
    CHECK(s_value(after, "shoal_moves_aborted_total{reason=\"downtime_budget\"}") == 0);
    CHECK(s_value(after, "shoal_moves_in_flight{role=\"source\"}") == 0);
    CHECK(s_value(after, "shoal_admission_refusals_total{reason=\"memory\"}") == 1);
    CHECK(s_value(after, "shoal_claims{state=\"running\"}") == 0);
    CHECK(s_value(after, "shoal_claims{state=\"stopped\"}") == 1);
    CHECK(s_value(after, "shoal_members{state=\"alive\"}") == 1);
    CHECK(s_value(after, "shoal_member_events_total{event=\"joined\"}") >= 1);
    CHECK(s_value(after, "shoal_oplog_entries{dataset=\"registry\"}") >= 2);
    CHECK(s_value(after, "shoal_store_size_bytes") > 0);
    CHECK(s_value(after, "shoal_reactor_tick_lateness_seconds_count") > 0);
    //  Each histogram holds the one move, in the bucket of its figure and
    //  not in the one below.
    struct {
        const char *name;
        double value;
    } observed[] = {
        { "shoal_move_rounds", (double) info.round },
        { "shoal_move_bytes", (double) info.bytes_sent },
        { "shoal_move_duration_seconds", (double) info.total_ms / 1000 },
        { "shoal_move_node_downtime_seconds", (double) info.node_downtime_ms / 1000 },
        { "shoal_move_guest_downtime_seconds", (double) info.guest_downtime_ms / 1000 },
        { "shoal_move_guest_switch_gap_seconds", (double) info.guest_switch_gap_ms / 1000 },
    };
    for (size_t i = 0; i < sizeof observed / sizeof observed[0]; i++) {
        char le[64];
        double at, count;
        s_bound_for(after, observed[i].name, observed[i].value, le, sizeof le);
        s_bucket(after, observed[i].name, le, &at, &count);
        CHECK_MSG(at == 1 && count == 1, "%s: %g observed, le=%s holds %g of %g", observed[i].name,
                  observed[i].value, le, at, count);
        char series[256];
        snprintf(series, sizeof series, "%s_sum", observed[i].name);
        //  The duration is measured twice (the node's and the status's
        //  clocks read a moment apart): equal within a second.
        double sum = s_value(after, series);
        CHECK_MSG(sum >= observed[i].value - 1 && sum <= observed[i].value + 1, "%s: %g against %g", series, sum,
                  observed[i].value);
    }
    char *output = NULL;
    int rc = s_promtool(after, &output);
    CHECK_MSG(rc == 0, "promtool check metrics after the move: %d: %s", rc, output ? output : "");
    zstr_free(&output);
    zstr_free(&after);

    //  The target counted its side: one move adopted, one claim running.
    char *target = NULL;
    deadline = shoal_test_now_ms() + S_WAIT_MS;
    while (shoal_test_now_ms() < deadline) {
        zstr_free(&target);
        target = s_scrape(s_ports[2]);
        if (target && s_value(target, "shoal_moves_committed_total{role=\"target\"}") == 1
            && s_value(target, "shoal_claims{state=\"running\"}") == 1)
            break;
        usleep(50000);
    }
    CHECK(target);
    CHECK(s_value(target, "shoal_moves_started_total{role=\"target\"}") == 1);
    CHECK(s_value(target, "shoal_moves_committed_total{role=\"target\"}") == 1);
    CHECK(s_value(target, "shoal_claims{state=\"running\"}") == 1);
    zstr_free(&target);
    //  shoalctl top --once: one frame of the mesh, each node's row asked of
    //  the node itself; after the move n2 runs the claim, n1 its stopped one.
    char *frame = NULL;
    int code = shoal_cluster_ctl(cluster, 1, &frame, "top", "--once", NULL);
    CHECK_MSG(code == 0, "shoalctl top --once: %d: %s", code, frame ? frame : "");
    CHECK_MSG(frame && strstr(frame, "shoal top: n1") && strstr(frame, "MOVES IN FLIGHT") && strstr(frame, "(none)")
              && strstr(frame, "PEERS OF n1") && !strstr(frame, "\033["), "%s", frame ? frame : "");
    //  Rows: NODE STATE CLAIMS RUNNING ...
    char *row = frame ? strstr(frame, "\nn2 ") : NULL;
    unsigned long claims = 0, running = 0;
    CHECK_MSG(row && sscanf(row, " n2 alive %lu %lu", &claims, &running) == 2 && claims == 1 && running == 1, "%s",
              frame ? frame : "");
    row = frame ? strstr(frame, "\nn1 ") : NULL;
    CHECK_MSG(row && sscanf(row, " n1 self %lu %lu", &claims, &running) == 2 && claims == 1 && running == 0, "%s",
              frame ? frame : "");
    free(frame);
    //  shoalctl top --json: the same frame as one object, for scripts.
    frame = NULL;
    code = shoal_cluster_ctl(cluster, 1, &frame, "top", "--json", NULL);
    CHECK_MSG(code == 0, "shoalctl top --json: %d: %s", code, frame ? frame : "");
    json_error_t json_error;
    json_t *top = frame ? json_loads(frame, 0, &json_error) : NULL;
    CHECK_MSG(top, "shoalctl top --json is not one JSON object (%s): %s", top ? "" : json_error.text,
              frame ? frame : "");
    if (top) {
        CHECK(json_is_true(json_object_get(top, "ok")));
        CHECK_STR(json_string_value(json_object_get(top, "node_id")), "n1");
        json_t *nodes = json_object_get(top, "nodes");
        CHECK_INT(json_array_size(nodes), 2);
        bool saw_n1 = false, saw_n2 = false;
        for (size_t i = 0; i < json_array_size(nodes); i++) {
            json_t *node = json_array_get(nodes, i);
            const char *id = json_string_value(json_object_get(node, "node_id"));
            json_int_t node_claims = json_integer_value(json_object_get(node, "claims"));
            json_int_t node_running = json_integer_value(json_object_get(node, "running"));
            CHECK(json_is_integer(json_object_get(node, "memory_bytes")));
            CHECK_INT(json_integer_value(json_object_get(node, "moves_in_flight")), 0);
            if (id && streq(id, "n1")) {
                saw_n1 = true;
                CHECK_STR(json_string_value(json_object_get(node, "state")), "self");
                CHECK(node_claims == 1 && node_running == 0);
            }
            if (id && streq(id, "n2")) {
                saw_n2 = true;
                CHECK_STR(json_string_value(json_object_get(node, "state")), "alive");
                CHECK(node_claims == 1 && node_running == 1);
                CHECK(json_integer_value(json_object_get(node, "memory_bytes")) == (json_int_t) S_MEMORY);
            }
        }
        CHECK_MSG(saw_n1 && saw_n2, "%s", frame);
        CHECK(json_is_array(json_object_get(top, "moves")) && json_array_size(json_object_get(top, "moves")) == 0);
        json_t *peers = json_object_get(top, "peers");
        CHECK_INT(json_array_size(peers), 1);
        json_t *peer = json_array_get(peers, 0);
        CHECK_STR(json_string_value(json_object_get(peer, "node_id")), "n2");
        CHECK(json_is_integer(json_object_get(peer, "lag")) && json_is_integer(json_object_get(peer, "last_heard_ms")));
        json_decref(top);
    }
    free(frame);
    shoal_move_info_clear(&info);
    shoal_client_destroy(&mover);
    CHECK_MSG(shoal_move_check_settled(cluster, "mover", 2, S_WAIT_MS) == 0, "%s", shoal_move_check_error());
    shoal_cluster_destroy(&cluster);
}

//  A bind that cannot be parsed stops the start, named.
static void
test_bad_bind_is_refused(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(1, NULL);
    CHECK(cluster);
    shoal_cluster_node_setenv(cluster, 1, "SHOAL_METRICS_BIND", "nowhere");
    CHECK(shoal_cluster_start(cluster) != 0);
    char *log = shoal_test_slurp(shoal_cluster_log_path(cluster, 1));
    CHECK_MSG(log && strstr(log, "metrics/bind = 'nowhere'"), "%s", log ? log : "(no log)");
    free(log);
    shoal_cluster_destroy(&cluster);
}

#define S_TEST(fn) do { SHOAL_TEST(fn); shoal_cluster_destroy_all(); shoal_move_check_cleanup(); } while (0)

int
main(void)
{
    S_TEST(test_scraped_during_and_after_a_move);
    S_TEST(test_bad_bind_is_refused);
    return shoal_test_finish();
}
