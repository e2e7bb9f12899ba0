/*  test_node_limits: sizes, names and tenant numbers at their limits,
    through a real shoald. Whatever a node accepts it can read back and
    list; whatever it refuses is refused with 400 (or 507) naming the rule,
    and leaves nothing behind. Some requests are sent as raw protobuf bytes,
    as a hostile client would: libshoal refuses to build them.
*/
#include "shoal_test.h"
#include "shoal_node_fixture.h"
#include "shoal_proto.h"

#include "shoal_image.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <dirent.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define S_CALL_TIMEOUT_MS 10000
#define S_MB (1024 * 1024)
#define S_KIB 1024
//  A value a little under the frame limit: the node accepted it once, then
//  could neither read it back nor replicate it.
#define S_NEAR_FRAME_VALUE (S_MB - 60)
//  Six values of 250 KiB: more than one frame's worth in one scan.
#define S_BIG_VALUES 6
#define S_BIG_VALUE (250 * S_KIB)
//  The longest key and dataset name the protocol admits.
#define S_KEY_MAX 1024
#define S_DATASET_MAX 256
#define S_TENANT "acme/web"
#define S_OTHER_TENANT "rival/app"
#define S_TIB (1024ULL * 1024 * 1024 * 1024)

typedef shoal_node_fixture_t s_node_t;

static shoal_client_t *
s_client(s_node_t *node, const char *cert)
{
    return shoal_node_fixture_client(node, cert, S_CALL_TIMEOUT_MS);
}

static bool
s_node_start(s_node_t *node, const char *name, const char *config)
{
    shoal_node_fixture_init(node, name, 0);
    if (config) {
        FILE *file = fopen(node->config_path, "w");
        if (!file)
            return false;
        fputs(config, file);
        fclose(file);
    }
    char *env[] = { "SHOAL_GUEST_STOP_TIMEOUT_MS=2000", NULL };
    return shoal_node_fixture_start(node, env);
}

// ---------------------------------------------------------------------------
//  Raw protobuf, written by hand

typedef struct {
    uint8_t *bytes;
    size_t size;
} s_wire_t;

static void
s_wire_byte(s_wire_t *wire, uint8_t byte)
{
    wire->bytes = realloc(wire->bytes, wire->size + 1);
    wire->bytes[wire->size++] = byte;
}

static void
s_wire_varint(s_wire_t *wire, uint64_t value)
{
    while (value >= 0x80) {
        s_wire_byte(wire, (uint8_t) (value | 0x80));
        value >>= 7;
    }
    s_wire_byte(wire, (uint8_t) value);
}

static void
s_wire_uint(s_wire_t *wire, int field, uint64_t value)
{
    s_wire_varint(wire, (uint64_t) field << 3);
    s_wire_varint(wire, value);
}

static void
s_wire_data(s_wire_t *wire, int field, const void *data, size_t size)
{
    s_wire_varint(wire, ((uint64_t) field << 3) | 2);
    s_wire_varint(wire, size);
    wire->bytes = realloc(wire->bytes, wire->size + size + 1);
    if (size)
        memcpy(wire->bytes + wire->size, data, size);
    wire->size += size;
}

//  A DEALER holding NODE's admin key, connected.
static zsock_t *
s_raw_dealer(s_node_t *node)
{
    zcert_t *mine = zcert_load(node->admin_cert);
    zcert_t *cluster = zcert_load(node->cluster_cert);
    if (!mine || !cluster) {
        zcert_destroy(&mine);
        zcert_destroy(&cluster);
        return NULL;
    }
    zsock_t *dealer = zsock_new(ZMQ_DEALER);
    zsock_set_linger(dealer, 0);
    zsock_set_rcvtimeo(dealer, S_CALL_TIMEOUT_MS);
    zcert_apply(mine, dealer);
    zsock_set_curve_serverkey(dealer, zcert_public_txt(cluster));
    zsock_connect(dealer, "%s", node->endpoint);
    zcert_destroy(&mine);
    zcert_destroy(&cluster);
    return dealer;
}

//  Sends a request of TYPE whose payload is BODY, through DEALER, and
//  returns the reply's status with its message in MESSAGE; -1 without one.
static int
s_raw_call(zsock_t *dealer, int type, const s_wire_t *body, char *message, size_t message_size)
{
    s_wire_t envelope = { NULL, 0 };
    s_wire_uint(&envelope, 1, SHOAL_PROTOCOL_VERSION);
    s_wire_uint(&envelope, 2, (uint64_t) type);
    s_wire_uint(&envelope, 3, 77);
    s_wire_data(&envelope, 7, body->bytes, body->size);
    zmsg_t *msg = zmsg_new();
    zmsg_addmem(msg, envelope.bytes, envelope.size);
    free(envelope.bytes);
    zmsg_send(&msg, dealer);
    zmsg_t *reply = zmsg_recv(dealer);
    int status = -1;
    char error[256];
    shoal_envelope_t *decoded = reply ? shoal_envelope_decode(reply, error, sizeof error) : NULL;
    if (decoded) {
        status = (int) decoded->status;
        snprintf(message, message_size, "%s", decoded->message ? decoded->message : "");
    }
    shoal_envelope_destroy(&decoded);
    zmsg_destroy(&reply);
    return status;
}

//  A raw kv_put of DATASET (DATASET_SIZE bytes, NULs allowed), KEY and a
//  VALUE_SIZE-byte value.
static int
s_raw_put(zsock_t *dealer, const char *dataset, size_t dataset_size, const char *key, size_t key_size,
          size_t value_size, char *message, size_t message_size)
{
    s_wire_t body = { NULL, 0 };
    s_wire_data(&body, 1, dataset, dataset_size);
    s_wire_data(&body, 2, key, key_size);
    uint8_t *value = calloc(1, value_size + 1);
    s_wire_data(&body, 3, value, value_size);
    free(value);
    int status = s_raw_call(dealer, SHOAL_MSG_KV_PUT, &body, message, message_size);
    free(body.bytes);
    return status;
}

// ---------------------------------------------------------------------------
//  Tests

//  A value the node could never send back is refused at the put, naming
//  the limit; nothing is written.
static void
test_value_near_frame_refused(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, "n1", NULL));
    zsock_t *dealer = s_raw_dealer(&node);
    CHECK(dealer);
    char message[512] = "";
    int put = s_raw_put(dealer, "app", 3, "big", 3, S_NEAR_FRAME_VALUE, message, sizeof message);
    zsock_destroy(&dealer);
    shoal_client_t *client = s_client(&node, node.admin_cert);
    shoal_kv_value_t value;
    int get = shoal_client_kv_get(client, "app", "big", &value);
    shoal_kv_value_clear(&value);
    //  Through libshoal: refused before it is sent, with the same words.
    char *near = calloc(1, S_NEAR_FRAME_VALUE);
    int client_put = shoal_client_kv_put(client, "app", "big", near, S_NEAR_FRAME_VALUE, NULL);
    bool client_says = shoal_test_contains(shoal_client_error(client), "value limit");
    free(near);
    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    CHECK_INT(put, 400);
    CHECK_MSG(shoal_test_contains(message, "value limit"), "%s", message);
    CHECK_INT(get, 404);
    CHECK(client_put != 200);
    CHECK(client_says);
}

//  Six values of 250 KiB: a scan answers pages that fit a frame, and
//  paging reads every key.
static void
test_scan_pages_fit_a_frame(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, "n1", NULL));
    shoal_client_t *client = s_client(&node, node.admin_cert);
    char *data = malloc(S_BIG_VALUE);
    memset(data, 'v', S_BIG_VALUE);
    int written = 0;
    for (int i = 0; i < S_BIG_VALUES; i++) {
        char key[16];
        snprintf(key, sizeof key, "big-%d", i);
        written += shoal_client_kv_put(client, "big", key, data, S_BIG_VALUE, NULL) == 200;
    }
    free(data);
    int first = 0, pages = 0;
    size_t seen = 0, whole = 0;
    char *after = NULL;
    while (pages < 2 * S_BIG_VALUES) {
        shoal_kv_page_t page;
        int rc = shoal_client_kv_scan(client, "big", "", after, 0, &page);
        if (pages++ == 0)
            first = rc;
        if (rc != 200)
            break;
        seen += page.count;
        for (size_t i = 0; i < page.count; i++)
            whole += page.items[i].size == S_BIG_VALUE;
        bool more = page.more;
        free(after);
        after = page.count ? shoal_strdup(page.items[page.count - 1].key) : NULL;
        shoal_kv_page_clear(&page);
        if (!more || !after)
            break;
    }
    free(after);
    char *error = shoal_strdup(shoal_client_error(client));
    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    CHECK_INT(written, S_BIG_VALUES);
    CHECK_MSG(first == 200, "first scan: %d %s", first, error);
    CHECK_INT(seen, S_BIG_VALUES);
    CHECK_INT(whole, S_BIG_VALUES);
    CHECK(pages > 1);
    free(error);
}

//  The longest key the protocol admits, in a short dataset and in the
//  longest dataset name, is written, read and listed.
static void
test_longest_keys_fit_the_store(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, "n1", NULL));
    shoal_client_t *client = s_client(&node, node.admin_cert);
    char key[S_KEY_MAX + 1];
    memset(key, 'k', S_KEY_MAX);
    key[S_KEY_MAX] = '\0';
    //  Four parts of 63 letters and three slashes: 255 bytes, then one more.
    char dataset[S_DATASET_MAX + 1];
    memset(dataset, 'd', S_DATASET_MAX);
    dataset[63] = dataset[127] = dataset[191] = '/';
    dataset[S_DATASET_MAX] = '\0';
    const char *datasets[] = { "app", dataset };
    int puts[2], gets[2], scans[2];
    size_t listed[2];
    for (int i = 0; i < 2; i++) {
        puts[i] = shoal_client_kv_put(client, datasets[i], key, "v", 1, NULL);
        shoal_kv_value_t value;
        gets[i] = shoal_client_kv_get(client, datasets[i], key, &value);
        shoal_kv_value_clear(&value);
        shoal_kv_page_t page;
        scans[i] = shoal_client_kv_scan(client, datasets[i], "", NULL, 0, &page);
        listed[i] = scans[i] == 200 ? page.count : 0;
        shoal_kv_page_clear(&page);
    }
    char *error = shoal_strdup(shoal_client_error(client));
    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    for (int i = 0; i < 2; i++) {
        CHECK_MSG(puts[i] == 200, "put in dataset %d: %d %s", i, puts[i], error);
        CHECK_INT(gets[i], 200);
        CHECK_INT(scans[i], 200);
        CHECK_INT(listed[i], 1);
    }
    free(error);
}

//  A NUL inside a name, text that is not UTF-8 and a dataset name outside
//  the alphabet are refused with 400 naming the rule; nothing is written
//  under a cut name.
static void
test_names_are_checked(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, "n1", NULL));
    zsock_t *dealer = s_raw_dealer(&node);
    CHECK(dealer);
    char nul_message[512] = "", utf8_message[512] = "";
    int nul = s_raw_put(dealer, "nulds\0evil", 10, "k", 1, 1, nul_message, sizeof nul_message);
    int utf8 = s_raw_put(dealer, "app", 3, "k\xff\xfe", 3, 1, utf8_message, sizeof utf8_message);
    zsock_destroy(&dealer);
    shoal_client_t *client = s_client(&node, node.admin_cert);
    shoal_kv_value_t value;
    int cut = shoal_client_kv_get(client, "nulds", "k", &value);
    shoal_kv_value_clear(&value);
    int spaced = shoal_client_kv_put(client, "bad name", "k", "v", 1, NULL);
    bool spaced_says = shoal_test_contains(shoal_client_error(client), "letters, digits");
    int dotted = shoal_client_kv_put(client, "app/.hidden", "k", "v", 1, NULL);
    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    CHECK_INT(nul, 400);
    CHECK_MSG(shoal_test_contains(nul_message, "NUL"), "%s", nul_message);
    CHECK_INT(utf8, 400);
    CHECK_MSG(shoal_test_contains(utf8_message, "UTF-8"), "%s", utf8_message);
    CHECK_INT(cut, 404);
    CHECK(spaced != 200);
    CHECK(spaced_says);
    CHECK(dotted != 200);
}

static int
s_create(shoal_client_t *client, const char *tenant, const char *id, uint64_t disk, uint64_t rate)
{
    shoal_claim_spec_t spec = { .tenant = tenant, .memory_bytes = S_MB, .id = id, .disk_bytes = disk,
                                .rate = rate };
    return shoal_client_claim_create(client, &spec, NULL);
}

//  The claims TENANT's counters hold on the node, or -1.
static int64_t
s_tenant_claims(shoal_client_t *admin, const char *tenant)
{
    shoal_counters_t counters;
    int rc = shoal_client_counters(admin, tenant, &counters);
    int64_t claims = rc == 200 && counters.count == 1 ? (int64_t) counters.scopes[0].claims : -1;
    shoal_counters_clear(&counters);
    return claims;
}

//  A disk beyond limits/disk_mb (256 GiB by default), or beyond the space
//  free where guests live, is refused with 507 naming which; nothing is
//  left behind that counts against the tenant.
static void
test_disk_is_admitted(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, "n1", NULL));
    shoal_client_t *admin = s_client(&node, node.admin_cert);
    int over_limit = s_create(admin, S_TENANT, "two-tib", 2 * S_TIB, 0);
    bool names_limit = shoal_test_contains(shoal_client_error(admin), "limits/disk_mb");
    int within = s_create(admin, S_TENANT, "small", 4 * S_MB, 0);
    int64_t claims = s_tenant_claims(admin, S_TENANT);
    shoal_claim_list_t list;
    int listed = shoal_client_claim_list(admin, &list);
    size_t count = list.count;
    shoal_claim_list_clear(&list);
    shoal_client_destroy(&admin);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    shoal_node_fixture_guests_kill(&node);
    CHECK_INT(over_limit, 507);
    CHECK(names_limit);
    CHECK_INT(within, 200);
    CHECK_INT(claims, 1);
    CHECK_INT(listed, 200);
    CHECK_INT(count, 1);

    //  No disk limit to speak of: the free space decides.
    s_node_t roomy;
    CHECK(s_node_start(&roomy, "n2", "limits\n    disk_mb = 1000000000\n"));
    char *guests = zsys_sprintf("%s/guests", roomy.data_dir);
    struct statvfs space;
    int read_space = statvfs(guests, &space);
    free(guests);
    uint64_t free_bytes = (uint64_t) space.f_bavail * space.f_frsize;
    admin = s_client(&roomy, roomy.admin_cert);
    int over_free = s_create(admin, S_TENANT, "too-big", free_bytes + S_TIB, 0);
    bool names_space = shoal_test_contains(shoal_client_error(admin), "free in");
    int64_t roomy_claims = s_tenant_claims(admin, S_TENANT);
    shoal_client_destroy(&admin);
    CHECK_INT(shoal_test_stop(roomy.pid, SIGTERM), 0);
    shoal_node_fixture_guests_kill(&roomy);

    CHECK_INT(read_space, 0);
    CHECK_INT(over_free, 507);
    CHECK(names_space);
    CHECK_INT(roomy_claims, 0);
}

//  A guest load faster than limits/guest_rate_mb (256 MiB/s by default) is
//  refused with 400 naming the cap; one within it runs.
static void
test_guest_rate_is_capped(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, "n1", NULL));
    char *mine = shoal_node_fixture_tenant_key(&node, "web", S_TENANT);
    CHECK(mine);
    shoal_client_t *tenant = s_client(&node, mine);
    int too_fast = s_create(tenant, S_TENANT, "fast", 0, S_TIB);
    bool names_cap = shoal_test_contains(shoal_client_error(tenant), "limits/guest_rate_mb");
    int just_over = s_create(tenant, S_TENANT, "over", 0, 256 * S_MB + 1);
    int within = s_create(tenant, S_TENANT, "slow", 0, S_MB);
    shoal_client_destroy(&tenant);
    shoal_client_t *admin = s_client(&node, node.admin_cert);
    int64_t claims = s_tenant_claims(admin, S_TENANT);
    shoal_client_destroy(&admin);
    free(mine);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    shoal_node_fixture_guests_kill(&node);
    CHECK_INT(too_fast, 400);
    CHECK(names_cap);
    CHECK_INT(just_over, 400);
    CHECK_INT(within, 200);
    CHECK_INT(claims, 1);
}

//  Claim ids are scoped to their tenant: a tenant choosing an id another
//  tenant holds gets its own claim, never a 409 that would tell it the id
//  exists; status counts the caller's claims only.
static void
test_claim_ids_are_tenant_scoped(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, "n1", NULL));
    char *acme_key = shoal_node_fixture_tenant_key(&node, "acme", S_TENANT);
    char *rival_key = shoal_node_fixture_tenant_key(&node, "rival", S_OTHER_TENANT);
    CHECK(acme_key && rival_key);
    shoal_client_t *acme = s_client(&node, acme_key);
    shoal_client_t *rival = s_client(&node, rival_key);
    shoal_client_t *admin = s_client(&node, node.admin_cert);
    int first = s_create(acme, S_TENANT, "web", 0, 0);
    int second = s_create(acme, S_TENANT, "db", 0, 0);
    int same_name = s_create(rival, S_OTHER_TENANT, "web", 0, 0);
    int again = s_create(rival, S_OTHER_TENANT, "web", 0, 0);
    int foreign = s_create(rival, S_OTHER_TENANT, "acme/web/db", 0, 0);
    shoal_claim_info_t info;
    int shown = shoal_client_claim_show(rival, "web", &info);
    bool own_shown = shown == 200 && streq(info.tenant, S_OTHER_TENANT) && streq(info.id, "rival/app/web");
    shoal_claim_info_clear(&info);
    int by_id = shoal_client_claim_show(acme, "acme/web/web", &info);
    shoal_claim_info_clear(&info);
    int theirs = shoal_client_claim_show(rival, "acme/web/db", &info);
    shoal_claim_info_clear(&info);
    shoal_status_t status;
    int rival_status = shoal_client_status(rival, &status);
    uint64_t rival_counts = status.claims;
    shoal_status_clear(&status);
    int admin_status = shoal_client_status(admin, &status);
    uint64_t admin_counts = status.claims;
    shoal_status_clear(&status);
    shoal_client_destroy(&acme);
    shoal_client_destroy(&rival);
    shoal_client_destroy(&admin);
    free(acme_key);
    free(rival_key);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    shoal_node_fixture_guests_kill(&node);
    CHECK_INT(first, 200);
    CHECK_INT(second, 200);
    CHECK_INT(same_name, 200);
    CHECK_INT(again, 409);
    CHECK(foreign != 200 && foreign != 409);
    CHECK(own_shown);
    CHECK_INT(by_id, 200);
    CHECK_INT(theirs, 404);
    CHECK_INT(rival_status, 200);
    CHECK_INT(rival_counts, 1);
    CHECK_INT(admin_status, 200);
    CHECK_INT(admin_counts, 3);
}

//  How many times NEEDLE occurs in HAYSTACK.
static size_t
s_count(const char *haystack, const char *needle)
{
    size_t count = 0;
    for (const char *at = haystack ? strstr(haystack, needle) : NULL; at; at = strstr(at + 1, needle))
        count++;
    return count;
}

//  shoalctl --json prints one document per command, an answer or an error,
//  and valid UTF-8 whatever the text it reports holds.
static void
test_shoalctl_json_is_one_document(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, "n1", NULL));
    char *mine = shoal_node_fixture_tenant_key(&node, "web", S_TENANT);
    CHECK(mine);
    const char *shoalctl = shoal_test_program("shoalctl");
    //  A scan of a dataset the tenant may not read fails at its first page.
    char *scan[] = { (char *) shoalctl, "--endpoint", node.endpoint, "--cert", mine, "--cluster-key",
                     node.cluster_cert, "--json", "kv", "scan", "-d", "rival/app/data", NULL };
    //  A claim id that is not UTF-8, echoed in the error.
    char *show[] = { (char *) shoalctl, "--endpoint", node.endpoint, "--cert", node.admin_cert, "--cluster-key",
                     node.cluster_cert, "--json", "claim", "show", "bad\xff\xfeid", NULL };
    char *out_scan = NULL, *out_show = NULL;
    int code_scan = shoal_test_capture(scan, NULL, 20000, &out_scan);
    int code_show = shoal_test_capture(show, NULL, 20000, &out_show);
    free(mine);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    CHECK(code_scan != 0);
    CHECK_MSG(s_count(out_scan, "\"ok\"") == 1 && s_count(out_scan, "\"ok\":false") == 1, "%s", out_scan);
    CHECK_MSG(s_count(out_scan, "\n") == 1, "%s", out_scan);
    CHECK(code_show != 0);
    //  The bytes that are not UTF-8 come out as U+FFFD escapes, nothing raw.
    bool escaped = out_show && shoal_test_contains(out_show, "bad\\ufffd\\ufffdid");
    for (const char *c = out_show; c && *c; c++)
        escaped = escaped && (unsigned char) *c < 0x80;
    CHECK_MSG(escaped, "%s", out_show);
    CHECK_MSG(s_count(out_show, "\"ok\":false") == 1, "%s", out_show);
    free(out_scan);
    free(out_show);
}

int
main(void)
{
    zsys_init();
    SHOAL_TEST(test_value_near_frame_refused);
    SHOAL_TEST(test_scan_pages_fit_a_frame);
    SHOAL_TEST(test_longest_keys_fit_the_store);
    SHOAL_TEST(test_names_are_checked);
    SHOAL_TEST(test_disk_is_admitted);
    SHOAL_TEST(test_guest_rate_is_capped);
    SHOAL_TEST(test_claim_ids_are_tenant_scoped);
    SHOAL_TEST(test_shoalctl_json_is_one_document);
    return shoal_test_finish();
}
