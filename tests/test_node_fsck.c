/*  test_node_fsck: the consistency sweep of a real shoald.

    Each inconsistency is planted by hand in a stopped node's store (the
    store opened directly, as only a test may) and in its data directory,
    the storage objects' files among them;
    the node starts, fsck names each with its key, --repair mends the safe
    ones and says what it did, and a second fsck finds only the unsafe
    ones, still named; the same for the guests' memory directories
    (guest/memory_dir). A healthy node kept busy while fsck runs has
    nothing to report. The counters, which every start recounts (seed
    003), are also planted in a store the sweep reads without a node.
*/
#include "shoal_test.h"
#include "shoal_node_fixture.h"
#include "shoal_image.h"
#include "shoal_store.h"
#include "shoal_claim_store.h"
#include "shoal_key_space.h"
#include "shoal_oplog.h"
#include "shoal_fsck.h"
#include "shoal_fsck_checks.h"

#include <czmq.h>
#include <dirent.h>
#include <signal.h>
#include <stdatomic.h>
#include <pthread.h>
#include <unistd.h>

#define S_MB (1024 * 1024)
#define S_TENANT "acme/web"
#define S_CALL_TIMEOUT_MS 20000
//  A sweep an operator waits for polls its state this often.
#define S_POLL_MS 50
//  The busy node: writers run until the sweeps are over.
#define S_BUSY_RUNS 3

typedef shoal_node_fixture_t s_node_t;

static bool
s_node_start(s_node_t *node)
{
    char *env[] = { "SHOAL_GUEST_STOP_TIMEOUT_MS=2000", NULL };
    return shoal_node_fixture_start(node, env);
}

static shoal_client_t *
s_client(s_node_t *node)
{
    return shoal_node_fixture_client(node, node->admin_cert, S_CALL_TIMEOUT_MS);
}

static int
s_create(shoal_client_t *client, const char *id)
{
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = S_MB, .id = id };
    return shoal_client_claim_create(client, &spec, NULL);
}

static int
s_put(shoal_client_t *client, const char *dataset, const char *key, const char *value)
{
    return shoal_client_kv_put(client, dataset, key, value, strlen(value), NULL);
}

//  The finding of REPORT at WHERE whose key holds KEY and whose problem
//  holds PROBLEM, or NULL.
static const shoal_fsck_finding_t *
s_finding(const shoal_fsck_report_t *report, const char *where, const char *key, const char *problem)
{
    for (size_t i = 0; i < report->count; i++) {
        const shoal_fsck_finding_t *finding = &report->findings[i];
        if (streq(finding->where, where) && strstr(finding->key, key) && strstr(finding->problem, problem))
            return finding;
    }
    return NULL;
}

static void
s_report_print(const shoal_fsck_report_t *report)
{
    for (size_t i = 0; i < report->count; i++)
        fprintf(stderr, "    finding: %s %s %s: %s (repairable %d, repaired '%s')\n", report->findings[i].check,
                report->findings[i].where, report->findings[i].key, report->findings[i].problem,
                report->findings[i].repairable, report->findings[i].repaired);
}

// ---------------------------------------------------------------------------
//  The planting tool: writes into a stopped node's store, by hand

typedef struct {
    shoal_store_t *store;
    shoal_claim_store_t *claims;
    shoal_key_space_t *space;
} s_plant_t;

static bool
s_plant_open(s_plant_t *plant, const s_node_t *node)
{
    char *db = zsys_sprintf("%s/db", node->data_dir);
    shoal_store_options_t options;
    shoal_store_options_default(&options);
    plant->store = shoal_store_new(db, &options, NULL);
    free(db);
    if (!plant->store)
        return false;
    plant->claims = shoal_claim_store_new(plant->store, true);
    plant->space = shoal_key_space_new(plant->store, true);
    return true;
}

static void
s_plant_close(s_plant_t *plant)
{
    shoal_key_space_destroy(&plant->space);
    shoal_claim_store_destroy(&plant->claims);
    shoal_store_destroy(&plant->store);
}

//  The first key of CF under the dataset DATASET, copied into KEY.
static bool
s_first_key(s_plant_t *plant, shoal_cf_t cf, const char *dataset, shoal_key_t *key)
{
    shoal_key_t prefix;
    shoal_key_init(&prefix);
    shoal_key_add_str(&prefix, dataset);
    shoal_iter_t *iter = shoal_iter_prefix(plant->store, cf, &prefix);
    bool found = iter && shoal_iter_first(iter);
    if (found) {
        size_t size;
        const uint8_t *bytes = shoal_iter_key(iter, &size);
        shoal_key_init(key);
        memcpy(key->bytes, bytes, size);
        key->size = size;
    }
    shoal_iter_destroy(&iter);
    return found;
}

//  Writes CLAIM's lock state (READERS readers) and, when HOLDER, one
//  record of it.
static int
s_plant_lock(s_plant_t *plant, const char *claim, uint64_t readers, const char *holder, const char *holder_node,
             uint64_t lease)
{
    shoal_msg_locks_t state = { .claim_id = (char *) claim, .readers = readers, .writer = "", .waiter = "" };
    shoal_msg_lock_record_t record = {
        .claim_id = (char *) claim, .holder = (char *) holder, .holder_node = (char *) holder_node,
        .mode = SHOAL_LOCK_READ, .lease = lease, .time_ms = 1,
    };
    return shoal_key_space_lock_write(plant->space, &state, holder ? &record : NULL, NULL, 0);
}

static int
s_mkdir_with_file(const char *dir)
{
    if (zsys_dir_create("%s", dir))
        return -1;
    char *file = zsys_sprintf("%s/image", dir);
    FILE *handle = fopen(file, "w");
    free(file);
    if (!handle)
        return -1;
    fputs("left behind", handle);
    fclose(handle);
    return 0;
}

//  Every inconsistency of the test, planted. Returns 0 or -1.
static int
s_plant_all(s_plant_t *plant, const s_node_t *node)
{
    int rc = 0;
    //  oplog: an index key lost, a head gone back, an entry and a
    //  materialised key that do not decode.
    shoal_key_t key;
    if (!s_first_key(plant, SHOAL_CF_OPLOG_BY_HLC, "app", &key))
        return -1;
    rc |= shoal_store_delete(plant->store, SHOAL_CF_OPLOG_BY_HLC, &key, true);
    if (!s_first_key(plant, SHOAL_CF_OPLOG_NODE_HEAD, "app", &key))
        return -1;
    shoal_head_record_t head = { .wall_ms = 1, .logic = 0 };
    memset(head.hash, 0x11, sizeof head.hash);
    uint8_t *bytes;
    size_t size;
    char error[256];
    rc |= shoal_head_codec.encode(&head, &bytes, &size, error, sizeof error);
    rc |= shoal_store_put(plant->store, SHOAL_CF_OPLOG_NODE_HEAD, &key, bytes, size, true);
    free(bytes);
    if (!s_first_key(plant, SHOAL_CF_OPLOG_BY_NODE_HLC, "junk", &key))
        return -1;
    rc |= shoal_store_put(plant->store, SHOAL_CF_OPLOG_BY_NODE_HLC, &key, "\xff\xfe not an entry", 15, true);
    shoal_key_init(&key);
    shoal_key_add_str(&key, "app");
    shoal_key_add_str(&key, "zz");
    rc |= shoal_store_put(plant->store, SHOAL_CF_KV, &key, "\xff\xff", 2, true);
    //  oplog: a dataset's counts that are no pair of counts (the repair
    //  recounts the dataset, a slice at a time).
    shoal_key_init(&key);
    shoal_key_add_str(&key, "count");
    shoal_key_add_str(&key, "tally");
    rc |= shoal_store_put(plant->store, SHOAL_CF_OPLOG_META, &key, "junk", 4, true);
    //  counters: the tenant's say more than its claims (every start recounts).
    shoal_counter_record_t counters = { 42, 42, 42 };
    shoal_key_init(&key);
    shoal_key_add_str(&key, "tenant");
    shoal_key_add_str(&key, S_TENANT);
    shoal_batch_t *batch = shoal_batch_new(plant->store);
    rc |= shoal_batch_put_record(batch, SHOAL_CF_COUNTERS, &key, &shoal_counter_codec, &counters);
    rc |= shoal_store_write(plant->store, batch, true);
    shoal_batch_destroy(&batch);
    //  locks: a count that says 3 readers for two records, one of them held
    //  from a node nobody knows; a record whose lease is gone. The records
    //  held from this node (w1's reader r1, w2's "leased") were taken under
    //  its earlier run: the node rolls them back as it starts (the locks'
    //  own sweep), so the sweep finds 2 readers counted for w1's one record
    //  left, and nothing of "leased".
    rc |= s_plant_lock(plant, "w1", 3, "ghost", "nowhere", 0);
    rc |= s_plant_lock(plant, "w2", 1, "leased", node->name, 424242);
    //  moves: a finished move's source record of a claim never held here.
    shoal_move_t move = {
        .move_id = "m-ghost", .claim_id = "ghost-claim", .from = (char *) node->name, .to = "n9",
        .state = SHOAL_MOVE_ABORTED, .role = SHOAL_MOVE_SOURCE, .epoch = 1, .tenant = S_TENANT,
        .memory_bytes = S_MB, .driver = "proc",
    };
    rc |= shoal_claim_store_change(plant->claims, NULL, NULL, &move, true);
    //  values: a claim's key that does not decode.
    shoal_key_init(&key);
    shoal_key_add_str(&key, "key");
    shoal_key_add_str(&key, "w1");
    shoal_key_add_str(&key, "zz");
    rc |= shoal_store_put(plant->store, SHOAL_CF_CLAIM_KEYS, &key, "\xff\x01", 2, true);
    //  files: a guest directory and round files of nothing.
    char *guest = zsys_sprintf("%s/guests/orphan-1", node->data_dir);
    char *rounds = zsys_sprintf("%s/moves/m-orphan-files", node->data_dir);
    rc |= s_mkdir_with_file(guest);
    rc |= s_mkdir_with_file(rounds);
    free(guest);
    free(rounds);
    //  objects: a file under DATA/objects that no instance names.
    char *stray = zsys_sprintf("%s/objects/zz-stray", node->data_dir);
    rc |= s_mkdir_with_file(stray);
    free(stray);
    return rc ? -1 : 0;
}

//  What the test planted: where, a piece of the key, a piece of the
//  problem, and whether the repair may mend it.
static const struct {
    const char *where;
    const char *key;
    const char *problem;
    bool repairable;
} s_planted[] = {
    { "oplog_by_hlc", "\"app\"", "missing", true },
    { "oplog_node_head", "\"app\"", "older than the chain's latest entry", true },
    { "oplog_by_node_hlc", "\"junk\"", "does not decode", false },
    { "kv", "\"zz\"", "does not decode", false },
    { "oplog_meta", "\"tally\"", "is not a tuple", true },
    { "locks", "\"w1\"", "counts 2 reader(s)", true },
    { "locks", "\"ghost\"", "node 'nowhere', which this node does not know", false },
    { "moves", "\"ghost-claim\"", "which this node does not hold", true },
    { "claim_keys", "\"zz\"", "does not decode", false },
    { "files", "guests/orphan-1", "a guest directory of no claim", true },
    { "files", "moves/m-orphan-files", "no record is left", true },
    { "objects", "zz-stray/image", "no instance of this node names", true },
};
#define S_PLANTED (sizeof s_planted / sizeof s_planted[0])

static void
test_planted_found_repaired(void)
{
    s_node_t node;
    shoal_node_fixture_init(&node, "n1", 0);
    CHECK(s_node_start(&node));
    shoal_client_t *client = s_client(&node);
    CHECK_INT(s_create(client, "w1"), 200);
    CHECK_INT(s_create(client, "w2"), 200);
    shoal_lock_state_t lock;
    CHECK_INT(shoal_client_lock_acquire(client, "w1", "r1", "read", false, 0, &lock), 200);
    shoal_lock_state_clear(&lock);
    CHECK_INT(s_put(client, "app", "a", "1"), 200);
    CHECK_INT(s_put(client, "app", "b", "2"), 200);
    CHECK_INT(s_put(client, "junk", "x", "1"), 200);
    CHECK_INT(s_put(client, "tally", "a", "1"), 200);
    CHECK_INT(s_put(client, "tally", "b", "2"), 200);
    CHECK_INT(s_put(client, "tally", "a", "3"), 200);
    //  Healthy to begin with.
    shoal_fsck_report_t report;
    CHECK_INT(shoal_client_fsck(client, false, S_POLL_MS, NULL, NULL, &report), 200);
    CHECK(report.done);
    CHECK_INT(report.finding_count, 0);
    s_report_print(&report);
    shoal_fsck_report_clear(&report);
    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);

    //  Planted by hand while the node is down.
    s_plant_t plant;
    CHECK(s_plant_open(&plant, &node));
    CHECK_INT(s_plant_all(&plant, &node), 0);
    s_plant_close(&plant);

    CHECK(s_node_start(&node));
    client = s_client(&node);
    CHECK_INT(shoal_client_fsck(client, false, S_POLL_MS, NULL, NULL, &report), 200);
    s_report_print(&report);
    CHECK(report.done);
    CHECK_STR(report.error, "");
    for (size_t i = 0; i < S_PLANTED; i++) {
        const shoal_fsck_finding_t *finding = s_finding(&report, s_planted[i].where, s_planted[i].key,
                                                        s_planted[i].problem);
        CHECK_MSG(finding, "not found: %s %s: %s", s_planted[i].where, s_planted[i].key, s_planted[i].problem);
        if (finding)
            CHECK_MSG(finding->repairable == s_planted[i].repairable && !*finding->repaired,
                      "%s %s: repairable %d, repaired '%s'", finding->where, finding->key, finding->repairable,
                      finding->repaired);
    }
    //  Only what was planted, and without a repair nothing changed.
    CHECK_INT(report.finding_count, S_PLANTED);
    CHECK_INT(report.remaining, S_PLANTED);
    shoal_fsck_report_clear(&report);

    //  The counters were recounted by the start, and said so.
    char *log = shoal_test_slurp(node.log_path);
    CHECK(shoal_test_contains(log, "counters of tenant acme/web were 42/42/42"));
    free(log);

    //  --repair mends the safe ones and says what it did.
    CHECK_INT(shoal_client_fsck(client, true, S_POLL_MS, NULL, NULL, &report), 200);
    s_report_print(&report);
    CHECK(report.done && report.repair);
    CHECK_STR(report.error, "");
    size_t unsafe = 0;
    for (size_t i = 0; i < S_PLANTED; i++) {
        const shoal_fsck_finding_t *finding = s_finding(&report, s_planted[i].where, s_planted[i].key,
                                                        s_planted[i].problem);
        CHECK_MSG(finding, "not found again: %s %s", s_planted[i].where, s_planted[i].key);
        if (finding)
            CHECK_MSG(!*finding->repaired == !s_planted[i].repairable, "%s %s: repaired '%s'", finding->where,
                      finding->key, finding->repaired);
        unsafe += !s_planted[i].repairable;
    }
    CHECK_INT(report.remaining, unsafe);
    shoal_fsck_report_clear(&report);
    char *guest = zsys_sprintf("%s/guests/orphan-1", node.data_dir);
    char *rounds = zsys_sprintf("%s/moves/m-orphan-files", node.data_dir);
    CHECK(access(guest, F_OK) != 0);
    CHECK(access(rounds, F_OK) != 0);
    free(guest);
    free(rounds);
    log = shoal_test_slurp(node.log_path);
    CHECK(shoal_test_contains(log, "counts of \"tally\" recounted: 3 entries and 2 live keys"));
    free(log);

    //  A second look finds the unsafe ones alone, still named.
    CHECK_INT(shoal_client_fsck(client, false, S_POLL_MS, NULL, NULL, &report), 200);
    s_report_print(&report);
    CHECK_INT(report.finding_count, unsafe);
    for (size_t i = 0; i < S_PLANTED; i++)
        CHECK_MSG(!s_finding(&report, s_planted[i].where, s_planted[i].key, s_planted[i].problem)
                  == s_planted[i].repairable, "%s %s after the repair", s_planted[i].where, s_planted[i].key);
    shoal_fsck_report_clear(&report);
    //  The lock counts what its records say now, and the claims still work.
    CHECK_INT(shoal_client_lock_list(client, "w1", &lock), 200);
    CHECK_INT(lock.readers, 1);
    shoal_lock_state_clear(&lock);
    CHECK_INT(s_put(client, "app", "c", "3"), 200);

    //  shoalctl: findings left, exit code 3, each named.
    char *output = NULL;
    char *argv[] = { (char *) shoal_test_program("shoalctl"), "-e", node.endpoint, "-c", node.admin_cert,
                     "-k", node.cluster_cert, "fsck", NULL };
    CHECK_INT(shoal_test_capture(argv, NULL, S_CALL_TIMEOUT_MS, &output), 3);
    CHECK(shoal_test_contains(output, "left for an operator"));
    CHECK(shoal_test_contains(output, "which this node does not know"));
    free(output);
    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    shoal_node_fixture_guests_kill(&node);
}

// ---------------------------------------------------------------------------
//  The guests' memory directories (guest/memory_dir), planted by hand in a
//  stopped node's files: a memory directory of this node that no guest
//  directory links to is named and removed; one of another node sharing
//  the memory directory, and one shoal did not make, are left alone; a
//  guest directory whose image link dangles is named and left.

//  The directory GUEST's image links to, into TARGET. Returns 0 or -1.
static int
s_memory_of(const char *guest, char *target, size_t size)
{
    char *link = zsys_sprintf("%s/image", guest);
    ssize_t length = readlink(link, target, size - 1);
    free(link);
    if (length <= 0)
        return -1;
    target[length] = 0;
    *strrchr(target, '/') = 0;
    return 0;
}

//  Removes DIR's files (links are not followed) and DIR.
static int
s_remove_flat(const char *dir)
{
    DIR *handle = opendir(dir);
    if (!handle)
        return -1;
    struct dirent *entry;
    while ((entry = readdir(handle)))
        if (!streq(entry->d_name, ".") && !streq(entry->d_name, "..")) {
            char *path = zsys_sprintf("%s/%s", dir, entry->d_name);
            unlink(path);
            free(path);
        }
    closedir(handle);
    return rmdir(dir);
}

static void
test_memory_dirs_found_repaired(void)
{
    s_node_t node;
    shoal_node_fixture_init(&node, "n1", 0);
    char *memory = zsys_sprintf("%s/memory", shoal_test_dir);
    char *setting = zsys_sprintf("SHOAL_GUEST_MEMORY_DIR=%s", memory);
    char *env[] = { "SHOAL_GUEST_STOP_TIMEOUT_MS=2000", setting, NULL };
    CHECK(shoal_node_fixture_start(&node, env));
    shoal_client_t *client = s_client(&node);
    CHECK_INT(s_create(client, "m1"), 200);
    CHECK_INT(s_create(client, "m2"), 200);
    //  Guests whose memory is linked are healthy.
    shoal_fsck_report_t report;
    CHECK_INT(shoal_client_fsck(client, false, S_POLL_MS, NULL, NULL, &report), 200);
    s_report_print(&report);
    CHECK(report.done);
    CHECK_INT(report.finding_count, 0);
    shoal_fsck_report_clear(&report);
    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    shoal_node_fixture_guests_kill(&node);

    //  Planted: memory of a guest whose directory went, another node's
    //  memory of a guest of the same name as one here, a directory shoal
    //  did not make, and m2's memory gone from under its links.
    char orphan[1024], other[1024], m1[1024], m2[1024];
    char *guests = zsys_sprintf("%s/guests", node.data_dir);
    char *lost = zsys_sprintf("%s/lost-1", guests);
    char *twin = zsys_sprintf("%s/other/guests/m1", shoal_test_dir);
    char *foreign = zsys_sprintf("%s/lost+found", memory);
    char *m2_dir = zsys_sprintf("%s/m2", guests);
    char *m1_dir = zsys_sprintf("%s/m1", guests);
    char *error = NULL;
    CHECK_MSG(shoal_image_create_in(lost, memory, S_MB, 0, 0, &error) == 0, "%s", error);
    CHECK_INT(s_memory_of(lost, orphan, sizeof orphan), 0);
    CHECK_INT(s_remove_flat(lost), 0);
    CHECK_INT(zsys_dir_create("%s/other/guests", shoal_test_dir), 0);
    CHECK_MSG(shoal_image_create_in(twin, memory, S_MB, 0, 0, &error) == 0, "%s", error);
    CHECK_INT(s_memory_of(twin, other, sizeof other), 0);
    CHECK_INT(mkdir(foreign, 0755), 0);
    CHECK_INT(s_memory_of(m1_dir, m1, sizeof m1), 0);
    CHECK_INT(s_memory_of(m2_dir, m2, sizeof m2), 0);
    CHECK_INT(s_remove_flat(m2), 0);
    const char *orphan_name = strrchr(orphan, '/') + 1;

    CHECK(shoal_node_fixture_start(&node, env));
    client = s_client(&node);
    CHECK_INT(shoal_client_fsck(client, false, S_POLL_MS, NULL, NULL, &report), 200);
    s_report_print(&report);
    CHECK(report.done);
    CHECK_STR(report.error, "");
    const shoal_fsck_finding_t *finding = s_finding(&report, "files", orphan_name, "a memory directory of no guest");
    CHECK_MSG(finding && finding->repairable && !*finding->repaired, "the orphan memory directory %s", orphan);
    finding = s_finding(&report, "files", "guests/m2", "image link dangles");
    CHECK_MSG(finding && !finding->repairable, "m2's dangling link");
    CHECK_INT(report.finding_count, 2);
    shoal_fsck_report_clear(&report);

    //  --repair removes the orphan alone.
    CHECK_INT(shoal_client_fsck(client, true, S_POLL_MS, NULL, NULL, &report), 200);
    s_report_print(&report);
    CHECK(report.done && report.repair);
    CHECK_STR(report.error, "");
    finding = s_finding(&report, "files", orphan_name, "a memory directory of no guest");
    CHECK_MSG(finding && shoal_test_contains(finding->repaired, "removed"), "the orphan's repair");
    CHECK_INT(report.remaining, 1);
    shoal_fsck_report_clear(&report);
    CHECK(access(orphan, F_OK) != 0);
    CHECK(access(other, F_OK) == 0);
    CHECK(access(foreign, F_OK) == 0);
    CHECK(access(m1, F_OK) == 0);

    //  A second look finds the dangling link alone, still named.
    CHECK_INT(shoal_client_fsck(client, false, S_POLL_MS, NULL, NULL, &report), 200);
    s_report_print(&report);
    CHECK_INT(report.finding_count, 1);
    CHECK(s_finding(&report, "files", "guests/m2", "image link dangles"));
    shoal_fsck_report_clear(&report);
    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    shoal_node_fixture_guests_kill(&node);
    free(guests);
    free(lost);
    free(twin);
    free(foreign);
    free(m1_dir);
    free(m2_dir);
    free(setting);
    free(memory);
}

// ---------------------------------------------------------------------------
//  A healthy node kept busy

typedef struct {
    s_node_t *node;
    atomic_bool stop;
    atomic_int writes;
    atomic_int failures;
} s_busy_t;

static void *
s_busy_run(void *arg)
{
    s_busy_t *busy = (s_busy_t *) arg;
    shoal_client_t *client = s_client(busy->node);
    int i = 0;
    while (!atomic_load(&busy->stop)) {
        char key[32], value[32];
        snprintf(key, sizeof key, "k%d", i % 200);
        snprintf(value, sizeof value, "v%d", i);
        int rc = s_put(client, "busy", key, value);
        shoal_lock_state_t lock;
        const char *holder = i % 2 ? "reader-a" : "reader-b";
        if (rc == 200)
            rc = shoal_client_lock_acquire(client, "b1", holder, "read", false, 0, &lock);
        if (rc == 200) {
            shoal_lock_state_clear(&lock);
            rc = i % 3 ? shoal_client_lock_release(client, "b1", holder, &lock) : 200;
            if (rc == 200 && i % 3)
                shoal_lock_state_clear(&lock);
            if (rc == 404)
                rc = 200;       //  released by the last round already
        }
        if (rc != 200)
            atomic_fetch_add(&busy->failures, 1);
        atomic_fetch_add(&busy->writes, 1);
        i++;
    }
    shoal_client_destroy(&client);
    return NULL;
}

static void
test_busy_node_clean(void)
{
    s_node_t node;
    shoal_node_fixture_init(&node, "n1", 0);
    CHECK(s_node_start(&node));
    shoal_client_t *client = s_client(&node);
    CHECK_INT(s_create(client, "b1"), 200);
    CHECK_INT(s_create(client, "b2"), 200);
    s_busy_t busy = { .node = &node };
    atomic_init(&busy.stop, false);
    atomic_init(&busy.writes, 0);
    atomic_init(&busy.failures, 0);
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, s_busy_run, &busy) == 0);
    uint64_t findings = 0;
    for (int run = 0; run < S_BUSY_RUNS; run++) {
        //  A claim comes and goes while the sweeps run too.
        char id[16];
        snprintf(id, sizeof id, "t%d", run);
        CHECK_INT(s_create(client, id), 200);
        shoal_fsck_report_t report;
        CHECK_INT(shoal_client_fsck(client, run == S_BUSY_RUNS - 1, S_POLL_MS, NULL, NULL, &report), 200);
        s_report_print(&report);
        CHECK(report.done);
        CHECK_STR(report.error, "");
        CHECK(report.keys > 0);
        findings += report.finding_count;
        shoal_fsck_report_clear(&report);
        shoal_claim_info_t info;
        CHECK_INT(shoal_client_claim_release(client, id, &info), 200);
        shoal_claim_info_clear(&info);
    }
    atomic_store(&busy.stop, true);
    pthread_join(thread, NULL);
    CHECK_INT(findings, 0);
    CHECK(atomic_load(&busy.writes) > 0);
    CHECK_INT(atomic_load(&busy.failures), 0);
    //  shoalctl on a clean node: exit 0, and JSON that says so.
    char *output = NULL;
    char *argv[] = { (char *) shoal_test_program("shoalctl"), "-e", node.endpoint, "-c", node.admin_cert,
                     "-k", node.cluster_cert, "--json", "fsck", NULL };
    CHECK_INT(shoal_test_capture(argv, NULL, S_CALL_TIMEOUT_MS, &output), 0);
    CHECK(shoal_test_contains(output, "\"finding_count\":0"));
    free(output);
    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    shoal_node_fixture_guests_kill(&node);
}

// ---------------------------------------------------------------------------
//  The periodic sweep: in slices of one key, across many ticks, report-only

static void
test_periodic_in_slices(void)
{
    s_node_t node;
    shoal_node_fixture_init(&node, "n1", 0);
    char *env[] = { "SHOAL_FSCK_INTERVAL_S=1", "SHOAL_FSCK_SLICE_KEYS=1", NULL };
    CHECK(shoal_node_fixture_start(&node, env));
    shoal_client_t *client = s_client(&node);
    for (int i = 0; i < 50; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        CHECK_INT(s_put(client, "app", key, "v"), 200);
    }
    //  Periodic runs start a second apart; one slice per tick of one key
    //  each takes many ticks. The run looked at is the first to start once
    //  the writes are all in (on a loaded machine they can take longer than
    //  the first interval, and an earlier run's snapshot lacks some).
    shoal_fsck_report_t report = { 0 };
    CHECK_INT(shoal_client_fsck_status(client, &report), 200);
    uint64_t before = report.run;
    shoal_fsck_report_clear(&report);
    int64_t deadline = shoal_test_now_ms() + S_CALL_TIMEOUT_MS;
    bool seen_running = false, done = false;
    while (!done && shoal_test_now_ms() < deadline) {
        CHECK_INT(shoal_client_fsck_status(client, &report), 200);
        seen_running = seen_running || (report.run > before && !report.done && report.keys > 0);
        done = report.run > before && report.done;
        if (!done) {
            shoal_fsck_report_clear(&report);
            zclock_sleep(5);
        }
    }
    CHECK(done);
    CHECK_STR(report.trigger, "periodic");
    CHECK(!report.repair);
    CHECK(report.keys >= 150);  //  50 entries, each in three families
    CHECK_INT(report.finding_count, 0);
    CHECK(seen_running);
    shoal_fsck_report_clear(&report);
    //  The node served meanwhile.
    CHECK_INT(s_put(client, "app", "after", "v"), 200);
    //  An operator's repair takes the place of the next periodic run.
    uint64_t periodic = 0;
    deadline = shoal_test_now_ms() + S_CALL_TIMEOUT_MS;
    while (!periodic && shoal_test_now_ms() < deadline) {
        CHECK_INT(shoal_client_fsck_status(client, &report), 200);
        if (!report.done && streq(report.trigger, "periodic"))
            periodic = report.run;
        shoal_fsck_report_clear(&report);
        if (!periodic)
            zclock_sleep(5);
    }
    CHECK(periodic > 0);
    CHECK_INT(shoal_client_fsck(client, true, S_POLL_MS, NULL, NULL, &report), 200);
    CHECK(report.run > periodic && report.repair && report.done);
    CHECK_STR(report.trigger, "operator");
    CHECK_INT(report.finding_count, 0);
    shoal_fsck_report_clear(&report);
    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    char *log = shoal_test_slurp(node.log_path);
    CHECK(shoal_test_contains(log, "(periodic) looked at"));
    free(log);
}

// ---------------------------------------------------------------------------
//  The counters, which a start recounts, planted where the sweep reads a
//  store with no node: found, repaired, clean again.

static void
test_counters_without_node(void)
{
    char *db = zsys_sprintf("%s/db", shoal_test_dir);
    shoal_store_options_t options;
    shoal_store_options_default(&options);
    options.sync = false;
    shoal_store_t *store = shoal_store_new(db, &options, NULL);
    free(db);
    CHECK(store);
    shoal_oplog_options_t oplog_options;
    shoal_oplog_options_default(&oplog_options);
    oplog_options.node = "n1";
    oplog_options.sync = false;
    shoal_oplog_t *oplog = shoal_oplog_new(store, &oplog_options);
    shoal_claim_store_t *claims = shoal_claim_store_new(store, false);
    shoal_key_space_t *space = shoal_key_space_new(store, false);
    shoal_claim_record_t record = { .id = "c1", .tenant = S_TENANT, .state = SHOAL_CLAIM_RUNNING,
                                    .memory_bytes = S_MB, .driver = "proc", .epoch = 1 };
    CHECK_INT(shoal_claim_store_put(claims, NULL, &record), 0);
    //  The node's counters say two claims.
    shoal_counter_record_t wrong = { 2, 1, S_MB };
    shoal_key_t key;
    shoal_key_init(&key);
    shoal_key_add_str(&key, "node");
    shoal_batch_t *batch = shoal_batch_new(store);
    CHECK_INT(shoal_batch_put_record(batch, SHOAL_CF_COUNTERS, &key, &shoal_counter_codec, &wrong), 0);
    CHECK_INT(shoal_store_write(store, batch, false), 0);
    shoal_batch_destroy(&batch);

    char *guests = zsys_sprintf("%s/guests", shoal_test_dir);
    shoal_fsck_node_t node = { .node_id = "n1", .data_dir = shoal_test_dir, .guest_dir = guests, .oplog = oplog,
                               .claims = claims, .space = space, .moves = NULL };
    shoal_fsck_t *fsck = shoal_fsck_new(NULL, "n1", store);
    shoal_fsck_checks_register(fsck, &node);
    shoal_msg_fsck_report_t report;
    CHECK_INT(shoal_fsck_run(fsck, false, &report), 0);
    CHECK_INT(report.finding_count, 1);
    CHECK(report.count == 1 && streq(report.findings[0].where, "counters")
          && shoal_test_contains(report.findings[0].problem, "the node counts 2 claims")
          && report.findings[0].repairable);
    shoal_msg_fsck_report_codec.clear(&report);
    CHECK_INT(shoal_fsck_run(fsck, true, &report), 0);
    CHECK(report.count == 1 && shoal_test_contains(report.findings[0].repaired, "recount"));
    CHECK_INT(report.remaining, 0);
    shoal_msg_fsck_report_codec.clear(&report);
    CHECK_INT(shoal_fsck_run(fsck, false, &report), 0);
    CHECK_INT(report.finding_count, 0);
    shoal_msg_fsck_report_codec.clear(&report);
    shoal_counter_record_t counted;
    CHECK_INT(shoal_claim_store_counters(claims, NULL, &counted), 0);
    CHECK_INT(counted.claims, 1);
    shoal_fsck_destroy(&fsck);
    free(guests);
    shoal_key_space_destroy(&space);
    shoal_claim_store_destroy(&claims);
    shoal_oplog_destroy(&oplog);
    shoal_store_destroy(&store);
}

int
main(void)
{
    SHOAL_TEST(test_counters_without_node);
    SHOAL_TEST(test_planted_found_repaired);
    SHOAL_TEST(test_memory_dirs_found_repaired);
    SHOAL_TEST(test_busy_node_clean);
    SHOAL_TEST(test_periodic_in_slices);
    return shoal_test_finish();
}
