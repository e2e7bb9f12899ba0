/*  test_node_data: replicated datasets and the oplog through a real shoald. */
#include "shoal_test.h"
#include "shoal_node_fixture.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <signal.h>
#include <unistd.h>

#define S_CALL_TIMEOUT_MS 5000

typedef shoal_node_fixture_t s_node_t;

static shoal_client_t *
s_client(s_node_t *node, const char *cert)
{
    return shoal_node_fixture_client(node, cert, S_CALL_TIMEOUT_MS);
}

//  Starts shoald as node NAME on PORT (0: a free one).
static bool
s_node_start(s_node_t *node, const char *name, int port)
{
    shoal_node_fixture_init(node, name, port);
    return shoal_node_fixture_start(node, NULL);
}

static int
s_port(s_node_t *node)
{
    return atoi(strrchr(node->endpoint, ':') + 1);
}

static void
test_kv_put_get_del_scan(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, "n1", 0));
    shoal_client_t *client = s_client(&node, node.admin_cert);
    shoal_kv_value_t value;
    int put = shoal_client_kv_put(client, "app", "color", "blue", 4, &value);
    bool stamped = put == 200 && strcmp(value.node, "n1") == 0 && strlen(value.hash) == 64 && value.wall_ms > 0;
    shoal_kv_value_clear(&value);
    int get = shoal_client_kv_get(client, "app", "color", &value);
    bool read = get == 200 && value.size == 4 && memcmp(value.value, "blue", 4) == 0;
    shoal_kv_value_clear(&value);
    //  A later write wins; a delete hides the key.
    shoal_client_kv_put(client, "app", "color", "green", 5, NULL);
    get = shoal_client_kv_get(client, "app", "color", &value);
    bool overwritten = get == 200 && value.size == 5 && memcmp(value.value, "green", 5) == 0;
    shoal_kv_value_clear(&value);
    int del = shoal_client_kv_del(client, "app", "color", NULL);
    int gone = shoal_client_kv_get(client, "app", "color", &value);
    bool says_what = shoal_test_contains(shoal_client_error(client), "no key 'color' in dataset 'app'");

    //  250 keys, paged 100 at a time, in key order.
    for (int i = 0; i < 250; i++) {
        char key[32], data[32];
        snprintf(key, sizeof key, "user/%04d", i);
        snprintf(data, sizeof data, "v%d", i);
        shoal_client_kv_put(client, "app", key, data, strlen(data), NULL);
    }
    shoal_client_kv_put(client, "app", "zzz", "other prefix", 12, NULL);
    size_t seen = 0, pages = 0;
    bool ordered = true;
    char *after = NULL;
    char last[64] = "";
    while (true) {
        shoal_kv_page_t page;
        int rc = shoal_client_kv_scan(client, "app", "user/", after, 100, &page);
        if (rc != 200)
            break;
        pages++;
        for (size_t i = 0; i < page.count; i++) {
            ordered = ordered && strcmp(page.items[i].key, last) > 0;
            snprintf(last, sizeof last, "%s", page.items[i].key);
            seen++;
        }
        bool more = page.more;
        free(after);
        after = page.count ? shoal_strdup(page.items[page.count - 1].key) : NULL;
        shoal_kv_page_clear(&page);
        if (!more)
            break;
    }
    free(after);
    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    CHECK_INT(put, 200);
    CHECK(stamped);
    CHECK(read);
    CHECK(overwritten);
    CHECK_INT(del, 200);
    CHECK_INT(gone, 404);
    CHECK(says_what);
    CHECK_INT(seen, 250);
    CHECK_INT(pages, 3);
    CHECK(ordered);
}

//  How many times TEXT occurs in NODE's log (across its restarts).
static size_t
s_log_count(const s_node_t *node, const char *text)
{
    char *log = shoal_test_slurp(node->log_path);
    size_t count = 0;
    for (const char *at = log ? strstr(log, text) : NULL; at; at = strstr(at + 1, text))
        count++;
    free(log);
    return count;
}

static void
test_kv_survives_restart(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, "n2", 0));
    shoal_client_t *client = s_client(&node, node.admin_cert);
    for (int i = 0; i < 100; i++) {
        char key[32];
        snprintf(key, sizeof key, "k%03d", i);
        CHECK_INT(shoal_client_kv_put(client, "durable", key, key, strlen(key), NULL), 200);
    }
    shoal_head_list_t before;
    CHECK_INT(shoal_client_oplog_heads(client, "durable", &before), 200);
    shoal_client_destroy(&client);
    //  kill -9: every acknowledged write was synced.
    CHECK_INT(shoal_test_stop(node.pid, SIGKILL), 128 + SIGKILL);
    int port = s_port(&node);
    bool restarted = s_node_start(&node, "n2", port);
    client = restarted ? s_client(&node, node.admin_cert) : NULL;
    shoal_kv_page_t page = { 0 };
    int scan = client ? shoal_client_kv_scan(client, "durable", NULL, NULL, 0, &page) : -1;
    shoal_head_list_t after = { 0 };
    int heads = client ? shoal_client_oplog_heads(client, "durable", &after) : -1;
    bool same_head = before.count == 1 && after.count == 1
                  && strcmp(before.heads[0].hash, after.heads[0].hash) == 0;
    size_t count = page.count;
    shoal_kv_page_clear(&page);
    shoal_head_list_clear(&before);
    shoal_head_list_clear(&after);
    shoal_client_destroy(&client);
    //  The kill left no clean-stop mark, and no bulk load's: the log was
    //  not reconciled (nor at the first start: a new store). A clean stop
    //  leaves its mark, and the next start reads nothing through either.
    int stopped = restarted ? shoal_test_stop(node.pid, SIGTERM) : -1;
    size_t reconciled = s_log_count(&node, "reconciling the operation log");
    bool again = stopped == 0 && s_node_start(&node, "n2", port);
    client = again ? s_client(&node, node.admin_cert) : NULL;
    int kept = client ? shoal_client_kv_scan(client, "durable", NULL, NULL, 0, &page) : -1;
    size_t kept_count = page.count;
    shoal_kv_page_clear(&page);
    shoal_client_destroy(&client);
    if (again)
        shoal_test_stop(node.pid, SIGTERM);
    CHECK(restarted);
    CHECK_INT(scan, 200);
    CHECK_INT(count, 100);
    CHECK_INT(heads, 200);
    CHECK(same_head);
    CHECK_INT(stopped, 0);
    CHECK_INT(reconciled, 0);
    CHECK(again);
    CHECK_INT(s_log_count(&node, "reconciling the operation log"), 0);
    CHECK_INT(s_log_count(&node, "no reconcile is needed: a new store"), 1);
    CHECK_INT(s_log_count(&node, "no reconcile is needed: no write was torn"), 1);
    CHECK_INT(s_log_count(&node, "closed cleanly, no reconcile needed"), 1);
    CHECK_INT(kept, 200);
    CHECK_INT(kept_count, 100);
}

static void
test_tenants_are_isolated(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, "n3", 0));
    char acme[4400], umbrella[4400];
    snprintf(acme, sizeof acme, "%s/clients/acme.cert", node.data_dir);
    snprintf(umbrella, sizeof umbrella, "%s/clients/umbrella.cert", node.data_dir);
    CHECK(shoal_keygen_client(acme, "acme", "tenant", "acme/web", NULL) == 0);
    CHECK(shoal_keygen_client(umbrella, "umbrella", "tenant", "umbrella/lab", NULL) == 0);
    shoal_client_t *a = s_client(&node, acme);
    shoal_client_t *u = s_client(&node, umbrella);
    shoal_client_t *admin = s_client(&node, node.admin_cert);
    int own = shoal_client_kv_put(a, "acme/web/config", "mode", "fast", 4, NULL);
    shoal_kv_value_t value;
    int other_reads = shoal_client_kv_get(u, "acme/web/config", "mode", &value);
    int other_writes = shoal_client_kv_put(u, "acme/web/config", "mode", "slow", 4, NULL);
    int outside = shoal_client_kv_put(a, "shared", "x", "1", 1, NULL);
    int bare_prefix = shoal_client_kv_put(a, "acme/web", "x", "1", 1, NULL);
    int registry = shoal_client_kv_put(admin, "registry", "claim-1", "x", 1, NULL);
    int still = shoal_client_kv_get(a, "acme/web/config", "mode", &value);
    bool intact = still == 200 && value.size == 4 && memcmp(value.value, "fast", 4) == 0;
    shoal_kv_value_clear(&value);
    shoal_dataset_list_t stats;
    int listed = shoal_client_oplog_stats(u, NULL, &stats);
    size_t visible = stats.count;
    shoal_dataset_list_clear(&stats);
    uint64_t pruned = 0;
    int tenant_prune = shoal_client_oplog_prune(a, NULL, 1, &pruned);
    shoal_client_destroy(&a);
    shoal_client_destroy(&u);
    shoal_client_destroy(&admin);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    CHECK_INT(own, 200);
    CHECK_INT(other_reads, 404);
    CHECK_INT(other_writes, 404);
    CHECK_INT(outside, 404);
    CHECK_INT(bare_prefix, 404);
    CHECK_INT(registry, 403);
    CHECK(intact);
    CHECK_INT(listed, 200);
    CHECK_INT(visible, 0);
    CHECK_INT(tenant_prune, 403);
}

static void
test_oplog_stats_and_prune(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, "n4", 0));
    shoal_client_t *client = s_client(&node, node.admin_cert);
    for (int i = 0; i < 50; i++) {
        char key[32];
        snprintf(key, sizeof key, "k%02d", i % 20);
        CHECK_INT(shoal_client_kv_put(client, "metrics", key, "x", 1, NULL), 200);
    }
    shoal_dataset_list_t stats;
    CHECK_INT(shoal_client_oplog_stats(client, "metrics", &stats), 200);
    bool counted = stats.count == 1 && stats.datasets[0].entries == 50 && stats.datasets[0].keys == 20
                && stats.datasets[0].nodes == 1 && stats.datasets[0].watermark_ms == 0;
    shoal_dataset_list_clear(&stats);
    uint64_t pruned = 0;
    uint64_t now = (uint64_t) zclock_time() + 1;
    int prune = shoal_client_oplog_prune(client, "metrics", now, &pruned);
    CHECK_INT(shoal_client_oplog_stats(client, "metrics", &stats), 200);
    bool emptied = stats.count == 1 && stats.datasets[0].entries == 0 && stats.datasets[0].keys == 20
                && stats.datasets[0].watermark_ms == now;
    shoal_dataset_list_clear(&stats);
    //  The materialised keys stay, and a new write still links to the head.
    shoal_kv_value_t value;
    int get = shoal_client_kv_get(client, "metrics", "k05", &value);
    shoal_kv_value_clear(&value);
    int put = shoal_client_kv_put(client, "metrics", "k05", "y", 1, NULL);
    int missing = shoal_client_oplog_stats(client, "nope", &stats);
    //  Heads of every dataset, when none is named.
    shoal_head_list_t heads;
    int all_heads = shoal_client_oplog_heads(client, NULL, &heads);
    bool one_head = heads.count == 1 && strcmp(heads.heads[0].dataset, "metrics") == 0;
    shoal_head_list_clear(&heads);
    shoal_client_destroy(&client);

    //  shoalctl shows the same.
    char *argv[] = { (char *) shoal_test_program("shoalctl"), "--endpoint", node.endpoint, "--cert",
                     node.admin_cert, "--cluster-key", node.cluster_cert, "oplog", "stats", NULL };
    char *output = NULL;
    int code = shoal_test_capture(argv, NULL, 20000, &output);
    bool shown = code == 0 && shoal_test_contains(output, "metrics");
    free(output);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    CHECK(counted);
    CHECK_INT(prune, 200);
    CHECK_INT(pruned, 50);
    CHECK(emptied);
    CHECK_INT(get, 200);
    CHECK_INT(put, 200);
    CHECK_INT(missing, 404);
    CHECK_INT(all_heads, 200);
    CHECK(one_head);
    CHECK(shown);
}

static void
test_shoalctl_kv(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, "n5", 0));
    char *base[] = { (char *) shoal_test_program("shoalctl"), "--endpoint", node.endpoint, "--cert",
                     node.admin_cert, "--cluster-key", node.cluster_cert };
    char *put[] = { base[0], base[1], base[2], base[3], base[4], base[5], base[6],
                    "kv", "put", "-d", "web", "greeting", "hello world", NULL };
    char *get[] = { base[0], base[1], base[2], base[3], base[4], base[5], base[6],
                    "kv", "get", "-d", "web", "greeting", NULL };
    char *scan[] = { base[0], base[1], base[2], base[3], base[4], base[5], base[6],
                     "--json", "kv", "scan", "-d", "web", NULL };
    char *bad[] = { base[0], base[1], base[2], base[3], base[4], base[5], base[6],
                    "kv", "put", "-d", "web", NULL };
    char *out_put = NULL, *out_get = NULL, *out_scan = NULL, *out_bad = NULL;
    int code_put = shoal_test_capture(put, NULL, 20000, &out_put);
    int code_get = shoal_test_capture(get, NULL, 20000, &out_get);
    int code_scan = shoal_test_capture(scan, NULL, 20000, &out_scan);
    int code_bad = shoal_test_capture(bad, NULL, 20000, &out_bad);
    bool put_ok = code_put == 0 && shoal_test_contains(out_put, "wrote web/greeting");
    bool get_ok = code_get == 0 && shoal_test_contains(out_get, "hello world");
    bool scan_ok = code_scan == 0 && shoal_test_contains(out_scan, "\"key\":\"greeting\"")
                && shoal_test_contains(out_scan, "\"value\":\"hello world\"");
    bool bad_ok = code_bad == 2 && shoal_test_contains(out_bad, "usage: kv put");
    free(out_put);
    free(out_get);
    free(out_scan);
    free(out_bad);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    CHECK(put_ok);
    CHECK(get_ok);
    CHECK(scan_ok);
    CHECK(bad_ok);
}

int
main(void)
{
    zsys_init();
    SHOAL_TEST(test_kv_put_get_del_scan);
    SHOAL_TEST(test_kv_survives_restart);
    SHOAL_TEST(test_tenants_are_isolated);
    SHOAL_TEST(test_oplog_stats_and_prune);
    SHOAL_TEST(test_shoalctl_kv);
    return shoal_test_finish();
}
