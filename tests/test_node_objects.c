/*  test_node_objects: storage objects through a real shoald: add, get, ls,
    rm and the tenants' walls; an update's name moving while a reader holds
    the old instance; add, open, update and remove racing from several
    clients, every read whole and of one version; shoalctl object. */
#include "shoal_checksum.h"
#include "shoal_test.h"
#include "shoal_node_fixture.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#define S_TENANT "acme/web"
#define S_OTHER_TENANT "beta/api"
#define S_CALL_TIMEOUT_MS 15000
//  The race: writers updating, one remover, readers; it runs until each
//  kind of step happened this often (a bound for a hung node, not a timing).
#define S_RACE_WRITERS 2
#define S_RACE_READERS 3
#define S_RACE_EACH 10
#define S_RACE_BOUND_MS 300000
//  Objects of the race span several chunks, so that a reader's reads are
//  many requests apart.
#define S_RACE_SIZE (3 * 512 * 1024 + 777)

typedef shoal_node_fixture_t s_node_t;

static bool
s_node_start(s_node_t *node)
{
    shoal_node_fixture_init(node, "n1", 0);
    return shoal_node_fixture_start(node, NULL);
}

static shoal_client_t *
s_client(s_node_t *node, const char *cert)
{
    return shoal_node_fixture_client(node, cert, S_CALL_TIMEOUT_MS);
}

//  Version VERSION of an object: its first 8 bytes say the version, every
//  other byte follows from the version and its offset, so a reader can
//  tell whether what it read is one version whole.
static void
s_fill(uint8_t *bytes, size_t size, uint64_t version)
{
    for (size_t i = 0; i < size; i++)
        bytes[i] = i < 8 ? (uint8_t) (version >> (8 * i)) : (uint8_t) ((i * 131 + version * 7) >> 3);
}

//  0 when BYTES are one version whole (its number in *VERSION_P), else the
//  offset of the first byte that is not, plus one.
static size_t
s_check(const uint8_t *bytes, size_t size, uint64_t *version_p)
{
    uint64_t version = 0;
    for (int i = 0; i < 8; i++)
        version |= (uint64_t) bytes[i] << (8 * i);
    *version_p = version;
    for (size_t i = 8; i < size; i++)
        if (bytes[i] != (uint8_t) ((i * 131 + version * 7) >> 3))
            return i + 1;
    return 0;
}

typedef struct {
    const uint8_t *bytes;
} s_memory_t;

static int
s_memory_source(void *buffer, size_t size, uint64_t offset, void *arg)
{
    s_memory_t *memory = (s_memory_t *) arg;
    memcpy(buffer, memory->bytes + offset, size);
    return 0;
}

static int
s_add(shoal_client_t *client, const char *tenant, const char *name, uint64_t version, size_t size, bool update,
      shoal_object_t *object)
{
    uint8_t *bytes = (uint8_t *) malloc(size);
    s_fill(bytes, size, version);
    s_memory_t memory = { bytes };
    int rc = shoal_client_object_add(client, tenant, name, size, s_memory_source, &memory, update, NULL, object);
    free(bytes);
    return rc;
}

//  Reads OPEN whole into a new buffer. Returns the status.
static int
s_read_all(shoal_client_t *client, const shoal_object_open_t *open, uint8_t **bytes_p)
{
    *bytes_p = (uint8_t *) malloc(open->size + 1);
    size_t got = 0;
    int rc = shoal_client_object_read(client, open, 0, *bytes_p, open->size, &got);
    if (rc == 200 && got != open->size)
        rc = -100;
    return rc;
}

//  The files under NODE's objects directory.
static int
s_files(s_node_t *node)
{
    char *root = zsys_sprintf("%s/objects", node->data_dir);
    int count = 0;
    DIR *dir = opendir(root);
    for (struct dirent *entry = dir ? readdir(dir) : NULL; entry; entry = readdir(dir)) {
        if (entry->d_name[0] == '.')
            continue;
        char *sub = zsys_sprintf("%s/%s", root, entry->d_name);
        DIR *inner = opendir(sub);
        for (struct dirent *file = inner ? readdir(inner) : NULL; file; file = readdir(inner))
            count += file->d_name[0] != '.';
        if (inner)
            closedir(inner);
        free(sub);
    }
    if (dir)
        closedir(dir);
    free(root);
    return count;
}

//  The files NODE's objects directory holds aside, removed but not yet
//  unlinked (DATA/objects/.discard).
static int
s_discarded(s_node_t *node)
{
    char *root = zsys_sprintf("%s/objects/.discard", node->data_dir);
    int count = 0;
    DIR *dir = opendir(root);
    for (struct dirent *entry = dir ? readdir(dir) : NULL; entry; entry = readdir(dir))
        count += entry->d_name[0] != '.';
    if (dir)
        closedir(dir);
    free(root);
    return count;
}

//  Waits until nothing is held aside in NODE's objects directory.
static bool
s_discard_emptied(s_node_t *node)
{
    int64_t deadline = shoal_test_now_ms() + S_CALL_TIMEOUT_MS;
    while (s_discarded(node) > 0 && shoal_test_now_ms() < deadline)
        usleep(10000);
    return s_discarded(node) == 0;
}

static void
test_add_get_ls_rm(void)
{
    s_node_t node;
    CHECK(s_node_start(&node));
    shoal_client_t *admin = s_client(&node, node.admin_cert);
    char *key = shoal_node_fixture_tenant_key(&node, "web", S_TENANT);
    CHECK(key);
    shoal_client_t *tenant = s_client(&node, key);
    CHECK(tenant);

    //  An add binds the name once its bytes are complete; get shows one
    //  complete instance on this node with the checksum of the bytes.
    shoal_object_t object;
    CHECK_INT(s_add(tenant, NULL, "images/base", 1, 100000, false, &object), 200);
    //  libshoal checksums with XXH3-128, and the checksum names it.
    uint8_t bytes[100000];
    s_fill(bytes, sizeof bytes, 1);
    shoal_checksum_t digest;
    shoal_checksum_of(SHOAL_CHECKSUM_XXH3, bytes, sizeof bytes, &digest);
    char hex[SHOAL_CHECKSUM_TEXT_MAX];
    shoal_checksum_text(digest.bytes, digest.size, hex);
    CHECK(strncmp(hex, "xxh3-128:", 9) == 0 && strlen(hex) == 9 + 32);
    CHECK_STR(object.checksum, hex);
    CHECK_INT(object.count, 1);
    CHECK_STR(object.instances[0].state, "complete");
    CHECK_STR(object.instances[0].node, "n1");
    CHECK_STR(object.instances[0].checksum, hex);
    CHECK(object.storage_id > 0 && object.storage_id <= INT64_MAX);
    CHECK(object.instances[0].instance_id > 0 && object.instances[0].instance_id <= INT64_MAX);
    shoal_object_clear(&object);
    //  A second add of the same name is refused; an update is not.
    CHECK_INT(s_add(tenant, NULL, "images/base", 2, 10, false, NULL), 409);
    CHECK_INT(s_add(admin, S_OTHER_TENANT, "images/base", 3, 10, false, NULL), 200);
    CHECK_INT(s_add(admin, S_OTHER_TENANT, "secret", 4, 10, false, NULL), 200);
    //  The tenants' walls: each sees its own objects only.
    shoal_object_t *objects = NULL;
    size_t count = 0;
    CHECK_INT(shoal_client_object_list(tenant, NULL, &objects, &count), 200);
    CHECK_INT(count, 1);
    CHECK_STR(objects[0].name, "images/base");
    CHECK_STR(objects[0].tenant, S_TENANT);
    shoal_objects_clear(&objects, count);
    CHECK_INT(shoal_client_object_list(admin, NULL, &objects, &count), 200);
    CHECK_INT(count, 3);
    shoal_objects_clear(&objects, count);
    CHECK_INT(shoal_client_object_get(tenant, NULL, "secret", &object), 404);
    CHECK_INT(shoal_client_object_get(tenant, S_OTHER_TENANT, "secret", &object), 404);
    CHECK_INT(shoal_client_object_remove(tenant, S_OTHER_TENANT, "secret"), 404);
    shoal_object_open_t open;
    CHECK_INT(shoal_client_object_open(tenant, S_OTHER_TENANT, "secret", NULL, false, &open), 404);
    //  An admin names the tenant.
    CHECK_INT(shoal_client_object_get(admin, NULL, "secret", &object), 400);
    CHECK_INT(shoal_client_object_get(admin, S_OTHER_TENANT, "secret", &object), 200);
    shoal_object_clear(&object);
    CHECK_INT(shoal_client_object_get(tenant, NULL, "images/base", &object), 200);
    uint64_t base_sid = object.storage_id;
    shoal_object_clear(&object);

    //  Reading through open, read and close.
    CHECK_INT(shoal_client_object_open(tenant, NULL, "images/base", NULL, true, &open), 200);
    CHECK(open.storage_id == base_sid);
    uint8_t *read = NULL;
    CHECK_INT(s_read_all(tenant, &open, &read), 200);
    CHECK(memcmp(read, bytes, sizeof bytes) == 0);
    free(read);
    CHECK_INT(shoal_client_object_get(tenant, NULL, "images/base", &object), 200);
    CHECK(object.instances[0].readers == 1);
    shoal_object_clear(&object);
    uint64_t opened = open.instance_id;
    char *holder = shoal_strdup(open.holder);
    CHECK_INT(shoal_client_object_close(tenant, &open), 200);
    //  A second close of the same holder finds nothing to close.
    CHECK_INT(shoal_client_object_close_instance(tenant, NULL, opened, holder), 404);
    free(holder);

    //  rm: the bytes, the instance and the object go; the name is free.
    CHECK_INT(s_files(&node), 3);
    CHECK_INT(shoal_client_object_remove(tenant, NULL, "images/base"), 200);
    CHECK_INT(shoal_client_object_get(tenant, NULL, "images/base", &object), 404);
    CHECK_INT(s_files(&node), 2);
    //  The bytes went aside at once, and the worker unlinks them there.
    CHECK(s_discard_emptied(&node));
    CHECK_INT(s_add(tenant, NULL, "images/base", 5, 10, false, NULL), 200);

    //  shoalctl object, human and --json.
    char *file = zsys_sprintf("%s/upload.bin", shoal_test_dir);
    FILE *out = fopen(file, "wb");
    CHECK(out && fwrite(bytes, 1, sizeof bytes, out) == sizeof bytes);
    fclose(out);
    char *back = zsys_sprintf("%s/download.bin", shoal_test_dir);
    const char *ctl = shoal_test_program("shoalctl");
    char *argv_add[] = { (char *) ctl, "-e", node.endpoint, "-c", node.admin_cert, "-k", node.cluster_cert,
                         "object", "add", "disk", file, "--tenant", S_TENANT, NULL };
    char *output = NULL;
    CHECK_INT(shoal_test_capture(argv_add, NULL, S_CALL_TIMEOUT_MS, &output), 0);
    CHECK_MSG(shoal_test_contains(output, "checksum:  ") && shoal_test_contains(output, hex), "%s", output);
    free(output);
    char *argv_get[] = { (char *) ctl, "-e", node.endpoint, "-c", node.admin_cert, "-k", node.cluster_cert,
                         "object", "get", "disk", "-o", back, "--tenant", S_TENANT, NULL };
    CHECK_INT(shoal_test_capture(argv_get, NULL, S_CALL_TIMEOUT_MS, &output), 0);
    free(output);
    char *copy = shoal_test_slurp(back);
    CHECK(copy && memcmp(copy, bytes, sizeof bytes) == 0);
    free(copy);
    char *argv_ls[] = { (char *) ctl, "-e", node.endpoint, "-c", node.admin_cert, "-k", node.cluster_cert,
                        "object", "ls", "--json", "--tenant", S_TENANT, NULL };
    CHECK_INT(shoal_test_capture(argv_ls, NULL, S_CALL_TIMEOUT_MS, &output), 0);
    CHECK_MSG(shoal_test_contains(output, "\"ok\":true") && shoal_test_contains(output, "\"name\":\"disk\"")
              && !shoal_test_contains(output, "secret"), "%s", output);
    free(output);
    char *argv_rm[] = { (char *) ctl, "-e", node.endpoint, "-c", node.admin_cert, "-k", node.cluster_cert,
                        "object", "rm", "nothing-here", "--tenant", S_TENANT, NULL };
    CHECK_INT(shoal_test_capture(argv_rm, NULL, S_CALL_TIMEOUT_MS, &output), 1);
    CHECK_MSG(shoal_test_contains(output, "no object 'nothing-here'"), "%s", output);
    free(output);
    free(file);
    free(back);
    shoal_client_destroy(&tenant);
    shoal_client_destroy(&admin);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);

    //  What a crash left aside goes at the next start.
    char *aside = zsys_sprintf("%s/objects/.discard/left-by-a-crash", node.data_dir);
    out = fopen(aside, "wb");
    CHECK(out && fwrite(bytes, 1, sizeof bytes, out) == sizeof bytes);
    fclose(out);
    CHECK_INT(s_discarded(&node), 1);
    free(aside);
    CHECK(shoal_node_fixture_start(&node, NULL));
    CHECK(s_discard_emptied(&node));
    admin = s_client(&node, node.admin_cert);
    tenant = s_client(&node, key);
    CHECK_INT(shoal_client_object_get(tenant, NULL, "images/base", &object), 200);
    shoal_object_clear(&object);
    free(key);
    shoal_client_destroy(&tenant);
    shoal_client_destroy(&admin);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
}

static void
test_update_while_read(void)
{
    s_node_t node;
    CHECK(s_node_start(&node));
    shoal_client_t *reader = s_client(&node, node.admin_cert);
    shoal_client_t *writer = s_client(&node, node.admin_cert);
    CHECK_INT(s_add(writer, S_TENANT, "vm", 1, S_RACE_SIZE, false, NULL), 200);
    shoal_object_open_t old;
    CHECK_INT(shoal_client_object_open(reader, S_TENANT, "vm", NULL, false, &old), 200);
    //  A first chunk of version 1, then the update commits...
    uint8_t *bytes = (uint8_t *) malloc(S_RACE_SIZE);
    size_t got = 0;
    CHECK_INT(shoal_client_object_read(reader, &old, 0, bytes, 1000, &got), 200);
    shoal_object_t object;
    CHECK_INT(s_add(writer, S_TENANT, "vm", 2, S_RACE_SIZE, true, &object), 200);
    CHECK(object.storage_id != old.storage_id);
    shoal_object_clear(&object);
    //  ... the name resolves to version 2 at once...
    shoal_object_open_t now;
    CHECK_INT(shoal_client_object_open(writer, S_TENANT, "vm", NULL, false, &now), 200);
    uint8_t *fresh = NULL;
    uint64_t version = 0;
    CHECK_INT(s_read_all(writer, &now, &fresh), 200);
    CHECK(s_check(fresh, now.size, &version) == 0 && version == 2);
    free(fresh);
    CHECK_INT(shoal_client_object_close(writer, &now), 200);
    //  ... and the reader of version 1 reads the rest of it whole.
    size_t rest = 0;
    CHECK_INT(shoal_client_object_read(reader, &old, 1000, bytes + 1000, S_RACE_SIZE - 1000, &rest), 200);
    CHECK(got + rest == S_RACE_SIZE);
    CHECK(s_check(bytes, S_RACE_SIZE, &version) == 0 && version == 1);
    free(bytes);
    //  Its instance waits for it: two objects' files until it closes.
    CHECK_INT(s_files(&node), 2);
    CHECK_INT(shoal_client_object_close(reader, &old), 200);
    CHECK_INT(s_files(&node), 1);
    shoal_client_destroy(&reader);
    shoal_client_destroy(&writer);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
}

typedef struct {
    s_node_t *node;
    int index;
    volatile bool *stop;
    int reads;                  //  whole reads of one version
    int torn;                   //  reads that were not (must stay 0)
    int missing;                //  opens that found no object (the remover's gaps)
    int writes;                 //  updates and adds committed
    int removes;
    int failures;               //  any other answer
    char failure[512];
} s_racer_t;

static void *
s_reader(void *arg)
{
    s_racer_t *racer = (s_racer_t *) arg;
    shoal_client_t *client = s_client(racer->node, racer->node->admin_cert);
    while (!*racer->stop) {
        shoal_object_open_t open;
        int rc = shoal_client_object_open(client, S_TENANT, "raced", NULL, false, &open);
        if (rc == 404) {
            racer->missing++;
            continue;
        }
        if (rc != 200) {
            racer->failures++;
            snprintf(racer->failure, sizeof racer->failure, "open %d: %s", rc, shoal_client_error(client));
            continue;
        }
        uint8_t *bytes = NULL;
        rc = s_read_all(client, &open, &bytes);
        uint64_t version = 0;
        if (rc != 200 || open.size != S_RACE_SIZE || s_check(bytes, open.size, &version) != 0) {
            racer->torn++;
            snprintf(racer->failure, sizeof racer->failure, "read %d of %" PRIu64 " bytes, not one version whole",
                     rc, open.size);
        }
        else
            racer->reads++;
        free(bytes);
        if (shoal_client_object_close(client, &open) != 200) {
            racer->failures++;
            snprintf(racer->failure, sizeof racer->failure, "close: %s", shoal_client_error(client));
            shoal_object_open_clear(&open);
        }
    }
    shoal_client_destroy(&client);
    return NULL;
}

static void *
s_writer(void *arg)
{
    s_racer_t *racer = (s_racer_t *) arg;
    shoal_client_t *client = s_client(racer->node, racer->node->admin_cert);
    uint64_t version = (uint64_t) racer->index * 1000000;
    while (!*racer->stop) {
        int rc = s_add(client, S_TENANT, "raced", ++version, S_RACE_SIZE, true, NULL);
        if (rc == 200)
            racer->writes++;
        else
        if (rc != 409) {
            racer->failures++;
            snprintf(racer->failure, sizeof racer->failure, "update %d: %s", rc, shoal_client_error(client));
        }
        //  Now and then the object goes, and comes back.
        if (racer->index == 0 && version % 3 == 0) {
            rc = shoal_client_object_remove(client, S_TENANT, "raced");
            racer->removes += rc == 200;
            if (rc != 200 && rc != 404) {
                racer->failures++;
                snprintf(racer->failure, sizeof racer->failure, "rm %d: %s", rc, shoal_client_error(client));
            }
        }
    }
    shoal_client_destroy(&client);
    return NULL;
}

static void
test_racing_clients(void)
{
    s_node_t node;
    CHECK(s_node_start(&node));
    shoal_client_t *admin = s_client(&node, node.admin_cert);
    CHECK_INT(s_add(admin, S_TENANT, "raced", 1, S_RACE_SIZE, false, NULL), 200);
    volatile bool stop = false;
    s_racer_t racers[S_RACE_WRITERS + S_RACE_READERS];
    pthread_t threads[S_RACE_WRITERS + S_RACE_READERS];
    for (int i = 0; i < S_RACE_WRITERS + S_RACE_READERS; i++) {
        racers[i] = (s_racer_t) { .node = &node, .index = i, .stop = &stop };
        pthread_create(&threads[i], NULL, i < S_RACE_WRITERS ? s_writer : s_reader, &racers[i]);
    }
    //  Until every kind of step happened often enough, on a machine as slow
    //  as it may be.
    int64_t bound = shoal_test_now_ms() + S_RACE_BOUND_MS;
    while (shoal_test_now_ms() < bound) {
        int seen_reads = 0, seen_writes = 0;
        for (int i = 0; i < S_RACE_WRITERS + S_RACE_READERS; i++) {
            seen_reads += racers[i].reads;
            seen_writes += racers[i].writes;
        }
        if (seen_reads >= S_RACE_EACH && seen_writes >= S_RACE_EACH && racers[0].removes >= S_RACE_EACH / 2)
            break;
        usleep(100000);
    }
    stop = true;
    int reads = 0, writes = 0, removes = 0;
    for (int i = 0; i < S_RACE_WRITERS + S_RACE_READERS; i++) {
        pthread_join(threads[i], NULL);
        CHECK_MSG(racers[i].torn == 0 && racers[i].failures == 0, "racer %d: %d torn, %d failures: %s", i,
                  racers[i].torn, racers[i].failures, racers[i].failure);
        reads += racers[i].reads;
        writes += racers[i].writes;
        removes += racers[i].removes;
    }
    fprintf(stderr, "  %d whole reads, %d updates, %d removals\n", reads, writes, removes);
    CHECK(reads >= S_RACE_EACH && writes >= S_RACE_EACH && removes >= S_RACE_EACH / 2);
    //  Once everyone closed, only the object the name is bound to keeps
    //  its bytes (and none when the last step was a removal).
    shoal_object_t object;
    int rc = shoal_client_object_get(admin, S_TENANT, "raced", &object);
    CHECK(rc == 200 || rc == 404);
    CHECK_INT(s_files(&node), rc == 200 ? 1 : 0);
    if (rc == 200)
        shoal_object_clear(&object);
    shoal_client_destroy(&admin);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
}

//  Counts FINDINGS whose key holds KEY_PART and whose text holds WHAT_PART.
static size_t
s_findings(const shoal_object_finding_t *findings, size_t count, const char *key_part, const char *what_part)
{
    size_t matched = 0;
    for (size_t i = 0; i < count; i++)
        matched += strstr(findings[i].key, key_part) && strstr(findings[i].what, what_part);
    return matched;
}

//  A source that kills its node (SIGKILL) once the first chunk went.
static int
s_kill_source(void *buffer, size_t size, uint64_t offset, void *arg)
{
    s_node_t *node = (s_node_t *) arg;
    if (offset > 0) {
        kill(node->pid, SIGKILL);
        return -1;
    }
    memset(buffer, 7, size);
    return 0;
}

//  Starts NODE (n1) with its objects' file work held while the file HOLD
//  names exists (SHOAL_FAULT objects:io:hold); HOLD (SIZE bytes) gets the
//  path, not yet made.
static bool
s_node_start_held(s_node_t *node, char *hold, size_t size)
{
    shoal_node_fixture_init(node, "n1", 0);
    snprintf(hold, size, "%s.io-hold", node->log_path);
    char fault[SHOAL_FIXTURE_DIR_MAX + 64];
    snprintf(fault, sizeof fault, "SHOAL_FAULT=objects:io:hold=%s", hold);
    char *extra[] = { fault, NULL };
    return shoal_node_fixture_start(node, extra);
}

//  While file work is held, the reactor answers status and a get of NAME,
//  three times over.
static void
s_reactor_answers(shoal_client_t *admin, const char *name)
{
    for (int round = 0; round < 3; round++) {
        shoal_status_t status;
        CHECK_INT(shoal_client_status(admin, &status), 200);
        shoal_status_clear(&status);
        shoal_object_t object;
        CHECK_INT(shoal_client_object_get(admin, S_TENANT, name, &object), 200);
        CHECK_STR(object.instances[0].state, "complete");
        shoal_object_clear(&object);
    }
}

//  The path of the file of NAME's first instance on NODE (the caller frees
//  it), or NULL when the node answers no such object.
static char *
s_instance_file(s_node_t *node, shoal_client_t *admin, const char *name)
{
    shoal_object_t object;
    if (shoal_client_object_get(admin, S_TENANT, name, &object) != 200)
        return NULL;
    char *path = object.count ? zsys_sprintf("%s/%s", node->data_dir, object.instances[0].uri + strlen("file:")) : NULL;
    shoal_object_clear(&object);
    return path;
}

//  A held piece of file work, and the thread that asked for it.
typedef struct {
    shoal_client_t *client;
    const shoal_object_open_t *open;    //  a read (else an add)
    int rc;
    int done;                           //  set (atomically) once the call returned
} s_held_t;

static void *
s_held_call(void *arg)
{
    s_held_t *held = (s_held_t *) arg;
    if (held->open) {
        uint8_t *bytes = NULL;
        held->rc = s_read_all(held->client, held->open, &bytes);
        uint64_t version = 0;
        if (held->rc == 200 && s_check(bytes, held->open->size, &version) != 0)
            held->rc = -200;
        free(bytes);
    }
    else
        held->rc = s_add(held->client, S_TENANT, "held/add", 2, S_RACE_SIZE, false, NULL);
    __atomic_store_n(&held->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

//  Waits up to TIMEOUT_MS for NODE's log to hold TEXT COUNT times.
static bool
s_log_has(const s_node_t *node, const char *text, int count, int timeout_ms)
{
    int64_t until = shoal_test_now_ms() + timeout_ms;
    while (true) {
        char *log = shoal_test_slurp(node->log_path);
        int seen = 0;
        for (const char *at = log ? strstr(log, text) : NULL; at; at = strstr(at + 1, text))
            seen++;
        free(log);
        if (seen >= count)
            return true;
        if (shoal_test_now_ms() > until)
            return false;
        zclock_sleep(50);
    }
}

//  An add's chunks and a read run on the objects' worker, not the reactor:
//  while the worker is held (SHOAL_FAULT objects:io:hold, a file), the add
//  and the read wait, and the node answers status and a get meanwhile;
//  once the hold ends, both finish whole.
static void
test_io_beside_the_reactor(void)
{
    s_node_t node;
    char hold[SHOAL_FIXTURE_DIR_MAX + 16];
    CHECK(s_node_start_held(&node, hold, sizeof hold));
    shoal_client_t *admin = s_client(&node, node.admin_cert);
    CHECK_INT(s_add(admin, S_TENANT, "held/read", 1, S_RACE_SIZE, false, NULL), 200);
    shoal_object_open_t open;
    CHECK_INT(shoal_client_object_open(admin, S_TENANT, "held/read", NULL, false, &open), 200);

    //  The calls held wait longer than the hold could last.
    s_held_t held[2] = {
        { .client = shoal_node_fixture_client(&node, node.admin_cert, S_RACE_BOUND_MS) },
        { .client = shoal_node_fixture_client(&node, node.admin_cert, S_RACE_BOUND_MS), .open = &open },
    };
    FILE *file = fopen(hold, "w");
    CHECK(file);
    fclose(file);
    pthread_t threads[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&threads[i], NULL, s_held_call, &held[i]);
    CHECK(s_log_has(&node, "fault: hold at objects:io holds", 1, S_RACE_BOUND_MS));

    //  The worker holds the add's first chunk; the reactor answers.
    s_reactor_answers(admin, "held/read");
    CHECK(!__atomic_load_n(&held[0].done, __ATOMIC_ACQUIRE));
    CHECK(!__atomic_load_n(&held[1].done, __ATOMIC_ACQUIRE));

    unlink(hold);
    for (int i = 0; i < 2; i++) {
        pthread_join(threads[i], NULL);
        shoal_client_destroy(&held[i].client);
    }
    CHECK(s_log_has(&node, "fault: hold at objects:io ends", 1, 0));
    CHECK_INT(held[0].rc, 200);
    CHECK_INT(held[1].rc, 200);
    shoal_object_t object;
    CHECK_INT(shoal_client_object_get(admin, S_TENANT, "held/add", &object), 200);
    CHECK_INT(object.size, S_RACE_SIZE);
    CHECK_STR(object.instances[0].state, "complete");
    shoal_object_clear(&object);
    CHECK_INT(shoal_client_object_close(admin, &open), 200);
    shoal_object_open_clear(&open);
    shoal_client_destroy(&admin);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
}

//  An open held on the way, and the thread that asked for it.
typedef struct {
    shoal_client_t *client;
    const char *name;
    shoal_object_open_t open;
    int rc;
    int done;                           //  set (atomically) once the call returned
} s_opener_t;

static void *
s_opener_call(void *arg)
{
    s_opener_t *opener = (s_opener_t *) arg;
    opener->rc = shoal_client_object_open(opener->client, S_TENANT, opener->name, NULL, false, &opener->open);
    __atomic_store_n(&opener->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

//  Open's check of the instance it takes (a small one is hashed at every
//  open) runs beside the reactor: while the objects' file work is held
//  (SHOAL_FAULT objects:io:hold), an open of a good object and one of an
//  object whose bytes were changed wait, and the node answers status and a
//  get meanwhile; once the hold ends, the first is granted and reads whole,
//  the second finds no good instance and its instance is marked corrupt.
static void
test_verify_beside_the_reactor(void)
{
    s_node_t node;
    char hold[SHOAL_FIXTURE_DIR_MAX + 16];
    CHECK(s_node_start_held(&node, hold, sizeof hold));
    shoal_client_t *admin = s_client(&node, node.admin_cert);
    CHECK_INT(s_add(admin, S_TENANT, "held/good", 1, S_RACE_SIZE, false, NULL), 200);
    CHECK_INT(s_add(admin, S_TENANT, "held/bad", 2, S_RACE_SIZE, false, NULL), 200);
    char *path = s_instance_file(&node, admin, "held/bad");
    CHECK(path);
    FILE *file = fopen(path, "r+b");
    CHECK(file);
    fseek(file, 1000, SEEK_SET);
    fputc('!', file);
    fclose(file);
    free(path);

    //  The opens held wait longer than the hold could last.
    s_opener_t openers[2] = {
        { .client = shoal_node_fixture_client(&node, node.admin_cert, S_RACE_BOUND_MS), .name = "held/good" },
        { .client = shoal_node_fixture_client(&node, node.admin_cert, S_RACE_BOUND_MS), .name = "held/bad" },
    };
    file = fopen(hold, "w");
    CHECK(file);
    fclose(file);
    pthread_t threads[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&threads[i], NULL, s_opener_call, &openers[i]);
    CHECK(s_log_has(&node, "fault: hold at objects:io holds", 1, S_RACE_BOUND_MS));

    //  The verifier holds the first open's hash; the reactor answers.
    s_reactor_answers(admin, "held/good");
    CHECK(!__atomic_load_n(&openers[0].done, __ATOMIC_ACQUIRE));
    CHECK(!__atomic_load_n(&openers[1].done, __ATOMIC_ACQUIRE));

    unlink(hold);
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], NULL);
    CHECK(s_log_has(&node, "fault: hold at objects:io ends", 1, 0));
    CHECK_INT(openers[0].rc, 200);
    uint8_t *bytes = NULL;
    CHECK_INT(s_read_all(openers[0].client, &openers[0].open, &bytes), 200);
    uint64_t version = 0;
    CHECK_INT(s_check(bytes, S_RACE_SIZE, &version), 0);
    CHECK_INT(version, 1);
    free(bytes);
    CHECK_INT(shoal_client_object_close(openers[0].client, &openers[0].open), 200);
    shoal_object_open_clear(&openers[0].open);
    CHECK_INT(openers[1].rc, 404);
    shoal_object_t object;
    CHECK_INT(shoal_client_object_get(admin, S_TENANT, "held/bad", &object), 200);
    CHECK_STR(object.instances[0].state, "corrupt");
    shoal_object_clear(&object);
    for (int i = 0; i < 2; i++)
        shoal_client_destroy(&openers[i].client);
    shoal_client_destroy(&admin);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
}

static void
test_check_and_repair(void)
{
    s_node_t node;
    CHECK(s_node_start(&node));
    shoal_client_t *admin = s_client(&node, node.admin_cert);
    shoal_object_finding_t *findings = NULL;
    size_t count = 0;
    CHECK_INT(s_add(admin, S_TENANT, "good", 1, 5000, false, NULL), 200);
    CHECK_INT(s_add(admin, S_TENANT, "bad", 2, 5000, false, NULL), 200);
    CHECK_INT(shoal_client_object_check(admin, false, &findings, &count), 200);
    CHECK_INT(count, 0);
    shoal_object_findings_clear(&findings, count);
    //  Planted by hand: a corrupt instance, a stray file, and (through a
    //  kill -9 in the middle of an add) an instance written by nobody.
    char *path = s_instance_file(&node, admin, "bad");
    CHECK(path);
    FILE *file = fopen(path, "r+b");
    CHECK(file);
    fputc('!', file);
    fclose(file);
    free(path);
    char *stray = zsys_sprintf("%s/objects/0000000000000001", node.data_dir);
    CHECK_INT(zsys_dir_create("%s", stray), 0);
    char *stray_file = zsys_sprintf("%s/00000000000000ff", stray);
    file = fopen(stray_file, "wb");
    CHECK(file);
    fclose(file);
    //  An add whose node is killed -9 after its first chunk: its
    //  instance stays, being written by nobody.
    shoal_object_t partial;
    CHECK(shoal_client_object_add(admin, S_TENANT, "partial", 2 * 512 * 1024, s_kill_source, &node, false, NULL,
                                  &partial) != 200);
    CHECK(shoal_test_wait(node.pid, 10000) >= 0);
    CHECK(shoal_node_fixture_start(&node, NULL));
    shoal_client_destroy(&admin);
    admin = s_client(&node, node.admin_cert);
    CHECK_INT(shoal_client_object_check(admin, false, &findings, &count), 200);
    CHECK_MSG(s_findings(findings, count, "instance/", "do not match its checksum") == 1
              && s_findings(findings, count, "00000000000000ff", "no instance of this node names") == 1
              && s_findings(findings, count, "instance/", "no add or transfer writes it") == 1,
              "%zu findings, first: %s: %s", count, count ? findings[0].key : "", count ? findings[0].what : "");
    CHECK_INT(count, 3);
    shoal_object_findings_clear(&findings, count);
    //  Repair: the stray file and the abandoned instance go; the corrupt
    //  instance is marked (no other node has a good copy to replace it
    //  from) and open skips it.
    CHECK_INT(shoal_client_object_check(admin, true, &findings, &count), 200);
    CHECK_INT(count, 3);
    CHECK_INT(s_findings(findings, count, "00000000000000ff", "removed"), 1);
    CHECK_INT(s_findings(findings, count, "instance/", "removed, bytes, lock and key"), 1);
    shoal_object_findings_clear(&findings, count);
    CHECK(access(stray_file, F_OK) != 0);
    shoal_object_open_t open;
    CHECK_INT(shoal_client_object_open(admin, S_TENANT, "bad", NULL, false, &open), 404);
    CHECK_INT(shoal_client_object_open(admin, S_TENANT, "good", NULL, true, &open), 200);
    //  An open instance's lock and record agree: no finding.
    CHECK_INT(shoal_client_object_check(admin, false, &findings, &count), 200);
    CHECK_INT(count, 1);
    CHECK_INT(s_findings(findings, count, "instance/", "marked corrupt"), 1);
    shoal_object_findings_clear(&findings, count);
    CHECK_INT(shoal_client_object_close(admin, &open), 200);
    //  Once the object is removed, the check is clean.
    CHECK_INT(shoal_client_object_remove(admin, S_TENANT, "bad"), 200);
    CHECK_INT(shoal_client_object_check(admin, false, &findings, &count), 200);
    CHECK_INT(count, 0);
    shoal_object_findings_clear(&findings, count);
    free(stray);
    free(stray_file);
    shoal_client_destroy(&admin);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
}

//  Open's look at the file of the instance it takes (a stat, which may
//  wait on a busy disk) runs beside the reactor too: while the objects'
//  file work is held, an open of an object whose file is gone waits, and
//  the node answers status and a get meanwhile; once the hold ends, the
//  open finds no good instance and the instance is marked corrupt, its
//  file named missing.
static void
test_look_beside_the_reactor(void)
{
    s_node_t node;
    char hold[SHOAL_FIXTURE_DIR_MAX + 16];
    CHECK(s_node_start_held(&node, hold, sizeof hold));
    shoal_client_t *admin = s_client(&node, node.admin_cert);
    CHECK_INT(s_add(admin, S_TENANT, "held/good", 1, S_RACE_SIZE, false, NULL), 200);
    CHECK_INT(s_add(admin, S_TENANT, "held/gone", 2, S_RACE_SIZE, false, NULL), 200);
    char *path = s_instance_file(&node, admin, "held/gone");
    CHECK(path);
    CHECK_INT(unlink(path), 0);
    free(path);

    s_opener_t opener = {
        .client = shoal_node_fixture_client(&node, node.admin_cert, S_RACE_BOUND_MS), .name = "held/gone"
    };
    FILE *file = fopen(hold, "w");
    CHECK(file);
    fclose(file);
    pthread_t thread;
    pthread_create(&thread, NULL, s_opener_call, &opener);
    CHECK(s_log_has(&node, "fault: hold at objects:io holds", 1, S_RACE_BOUND_MS));

    //  The verifier holds the open's look; the reactor answers.
    s_reactor_answers(admin, "held/good");
    CHECK(!__atomic_load_n(&opener.done, __ATOMIC_ACQUIRE));

    unlink(hold);
    pthread_join(thread, NULL);
    CHECK(s_log_has(&node, "fault: hold at objects:io ends", 1, 0));
    CHECK_INT(opener.rc, 404);
    shoal_object_t object;
    CHECK_INT(shoal_client_object_get(admin, S_TENANT, "held/gone", &object), 200);
    CHECK_STR(object.instances[0].state, "corrupt");
    shoal_object_clear(&object);
    CHECK(s_log_has(&node, "is missing", 1, 0));
    shoal_client_destroy(&opener.client);
    shoal_client_destroy(&admin);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
}

int
main(void)
{
    SHOAL_TEST(test_add_get_ls_rm);
    SHOAL_TEST(test_update_while_read);
    SHOAL_TEST(test_racing_clients);
    SHOAL_TEST(test_check_and_repair);
    SHOAL_TEST(test_io_beside_the_reactor);
    SHOAL_TEST(test_verify_beside_the_reactor);
    SHOAL_TEST(test_look_beside_the_reactor);
    return shoal_test_finish();
}
