/*  test_cluster_objects: storage objects across real shoald nodes: ids
    that never repeat across two nodes allocating at once, restarts and a
    kill -9; an object replicated to two more nodes over the transfer
    streams, checksummed on arrival, and a corrupt instance that open skips
    and a second replicate replaces. */
#include "shoal_test.h"
#include "shoal_cluster.h"

#include <czmq.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#define S_TENANT "acme/web"
#define S_CALL_TIMEOUT_MS 15000
//  Ids: each node gives this many, in batches, with its restarts between.
#define S_IDS_PER_NODE 100000
#define S_IDS_BATCH 10000
#define S_OBJECT_SIZE (2 * 1024 * 1024 + 4321)

//  One node's share of the ids test: its ids and what went wrong.
typedef struct {
    shoal_cluster_t *cluster;
    int index;
    uint64_t *ids[2];           //  storage ids, instance ids, in the order given
    size_t count[2];
    char failure[512];
} s_allocator_t;

//  Allocates S_IDS_PER_NODE ids of each kind from node INDEX, half of them
//  before the node is stopped (node 1 with kill -9 while a batch may be in
//  flight, node 2 with SIGTERM) and the rest after its restart.
static void *
s_allocate(void *arg)
{
    s_allocator_t *self = (s_allocator_t *) arg;
    shoal_client_t *client = shoal_cluster_client_new(self->cluster, self->index);
    for (int kind = 0; kind < 2; kind++)
        self->ids[kind] = (uint64_t *) calloc(S_IDS_PER_NODE, sizeof *self->ids[kind]);
    for (int batch = 0; batch < 2 * S_IDS_PER_NODE / S_IDS_BATCH && !*self->failure; batch++) {
        if (batch == S_IDS_PER_NODE / S_IDS_BATCH) {
            shoal_client_destroy(&client);
            int code = shoal_cluster_node_kill(self->cluster, self->index, self->index == 1 ? SIGKILL : SIGTERM);
            if (code < 0 || shoal_cluster_node_start(self->cluster, self->index)) {
                snprintf(self->failure, sizeof self->failure, "node %d did not restart: %s", self->index,
                         shoal_cluster_error(self->cluster));
                break;
            }
            client = shoal_cluster_client_new(self->cluster, self->index);
        }
        int kind = batch % 2;
        int rc = shoal_client_object_ids(client, kind ? "instance" : "storage", S_IDS_BATCH,
                                         self->ids[kind] + self->count[kind]);
        if (rc != 200)
            snprintf(self->failure, sizeof self->failure, "node %d, batch %d: %d %s", self->index, batch, rc,
                     shoal_client_error(client));
        else
            self->count[kind] += S_IDS_BATCH;
    }
    shoal_client_destroy(&client);
    return NULL;
}

static int
s_compare(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y ? -1 : x > y;
}

static void
test_ids_never_repeat(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(2, NULL);
    CHECK(cluster);
    CHECK_INT(shoal_cluster_start(cluster), 0);
    CHECK_MSG(shoal_cluster_wait_all_alive(cluster, 20000) == 0, "%s", shoal_cluster_error(cluster));
    s_allocator_t allocators[2] = { { .cluster = cluster, .index = 1 }, { .cluster = cluster, .index = 2 } };
    pthread_t threads[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&threads[i], NULL, s_allocate, &allocators[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], NULL);
    for (int i = 0; i < 2; i++)
        CHECK_MSG(!*allocators[i].failure, "%s", allocators[i].failure);
    //  Storage ids and instance ids are namespaces of their own: in each,
    //  no id repeats across the two nodes and their restarts.
    for (int kind = 0; kind < 2; kind++) {
        size_t total = allocators[0].count[kind] + allocators[1].count[kind];
        CHECK_INT(total, 2 * S_IDS_PER_NODE);
        uint64_t *all = (uint64_t *) malloc(total * sizeof *all);
        memcpy(all, allocators[0].ids[kind], allocators[0].count[kind] * sizeof *all);
        memcpy(all + allocators[0].count[kind], allocators[1].ids[kind], allocators[1].count[kind] * sizeof *all);
        qsort(all, total, sizeof *all, s_compare);
        size_t repeats = 0, outside = 0;
        for (size_t i = 0; i < total; i++) {
            repeats += i && all[i] == all[i - 1];
            outside += all[i] == 0 || all[i] > INT64_MAX;
        }
        free(all);
        CHECK_INT(repeats, 0);
        CHECK_INT(outside, 0);
        //  Each node's ids grow across its restart: what it gave before is
        //  below what it gives after, kill -9 or not.
        for (int i = 0; i < 2; i++) {
            uint64_t before = 0, after = UINT64_MAX;
            for (size_t j = 0; j < allocators[i].count[kind]; j++)
                if (j < allocators[i].count[kind] / 2)
                    before = allocators[i].ids[kind][j] > before ? allocators[i].ids[kind][j] : before;
                else
                    after = allocators[i].ids[kind][j] < after ? allocators[i].ids[kind][j] : after;
            CHECK_MSG(before < after, "node %d: %" PRIu64 " before its restart, %" PRIu64 " after", i + 1, before,
                      after);
        }
    }
    for (int i = 0; i < 2; i++)
        for (int kind = 0; kind < 2; kind++)
            free(allocators[i].ids[kind]);
    shoal_cluster_destroy(&cluster);
}

static void
s_fill(uint8_t *bytes, size_t size)
{
    for (size_t i = 0; i < size; i++)
        bytes[i] = (uint8_t) ((i * 2654435761u) >> 13);
}

static int
s_source(void *buffer, size_t size, uint64_t offset, void *arg)
{
    memcpy(buffer, (const uint8_t *) arg + offset, size);
    return 0;
}

typedef struct {
    const char *name;
    size_t complete;            //  complete instances every node must see
    size_t corrupt;             //  corrupt ones
} s_seen_t;

//  Every node's catalog shows the object with that many complete and
//  corrupt instances.
static bool
s_catalog_shows(shoal_cluster_t *cluster, void *arg, char *why, size_t why_size)
{
    s_seen_t *seen = (s_seen_t *) arg;
    for (int index = 1; index <= shoal_cluster_size(cluster); index++) {
        shoal_object_t object;
        int rc = shoal_client_object_get(shoal_cluster_client(cluster, index), S_TENANT, seen->name, &object);
        if (rc != 200) {
            snprintf(why, why_size, "n%d: get %d", index, rc);
            return false;
        }
        size_t complete = 0, corrupt = 0;
        for (size_t i = 0; i < object.count; i++) {
            complete += streq(object.instances[i].state, "complete");
            corrupt += streq(object.instances[i].state, "corrupt");
        }
        shoal_object_clear(&object);
        if (complete != seen->complete || corrupt != seen->corrupt) {
            snprintf(why, why_size, "n%d sees %zu complete and %zu corrupt instance(s)", index, complete, corrupt);
            return false;
        }
    }
    return true;
}

//  Replicates "image" to COPIES nodes from node INDEX, as the status the
//  node answered; *HELD_P the copies it reports. A replicate counts only
//  the peers its node sees alive, and on a machine loaded enough a peer may
//  be suspected for a moment: that refusal (409, naming too few alive) is
//  waited out, bounded, once every node sees every other alive again. Any
//  other answer is returned as it came, its reason printed.
static int
s_replicate(shoal_cluster_t *cluster, int index, uint32_t copies, uint32_t *held_p)
{
    shoal_client_t *client = shoal_cluster_client(cluster, index);
    int rc = 0;
    for (int attempt = 0; attempt < 5; attempt++) {
        rc = shoal_client_object_replicate(client, S_TENANT, "image", copies, held_p);
        const char *why = shoal_client_error(client);
        if (rc != 409 || !strstr(why, "alive to take it"))
            break;
        fprintf(stderr, "replicate from n%d: %s: waiting for every node to be seen alive\n", index, why);
        if (shoal_cluster_wait_all_alive(cluster, 20000))
            break;
    }
    if (rc != 200)
        fprintf(stderr, "replicate from n%d answered %d: %s\n", index, rc, shoal_client_error(client));
    return rc;
}

//  No node knows the object, and no node keeps a file of it.
static bool
s_gone(shoal_cluster_t *cluster, void *arg, char *why, size_t why_size)
{
    for (int index = 1; index <= shoal_cluster_size(cluster); index++) {
        shoal_object_t object;
        int rc = shoal_client_object_get(shoal_cluster_client(cluster, index), S_TENANT, "image", &object);
        if (rc == 200)
            shoal_object_clear(&object);
        char *command = zsys_sprintf("find %s/objects -type f | grep -q .", shoal_cluster_data_dir(cluster, index));
        bool files = system(command) == 0;
        free(command);
        if (rc != 404 || files) {
            snprintf(why, why_size, "n%d: get %d, %s", index, rc, files ? "files left" : "no file");
            return false;
        }
    }
    return true;
}

//  Opens NAME at node INDEX and reads it whole: 0 when it matches BYTES,
//  with the node that served it in NODE.
static int
s_open_read(shoal_cluster_t *cluster, int index, const uint8_t *bytes, char *node, size_t node_size)
{
    shoal_client_t *client = shoal_cluster_client(cluster, index);
    shoal_object_open_t open;
    int rc = shoal_client_object_open(client, S_TENANT, "image", NULL, false, &open);
    if (rc != 200) {
        fprintf(stderr, "open at n%d: %d %s\n", index, rc, shoal_client_error(client));
        return rc;
    }
    snprintf(node, node_size, "%s", open.node);
    uint8_t *read = (uint8_t *) malloc(open.size + 1);
    size_t got = 0;
    rc = shoal_client_object_read(client, &open, 0, read, open.size, &got);
    int result = rc == 200 && got == S_OBJECT_SIZE && memcmp(read, bytes, S_OBJECT_SIZE) == 0 ? 0 : -1;
    free(read);
    if (shoal_client_object_close(client, &open) != 200)
        result = -1;
    shoal_object_open_clear(&open);
    return result;
}

static void
test_replicate_and_corrupt(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(3, NULL);
    CHECK(cluster);
    CHECK_INT(shoal_cluster_start(cluster), 0);
    CHECK_MSG(shoal_cluster_wait_all_alive(cluster, 20000) == 0, "%s", shoal_cluster_error(cluster));
    uint8_t *bytes = (uint8_t *) malloc(S_OBJECT_SIZE);
    s_fill(bytes, S_OBJECT_SIZE);
    shoal_client_t *first = shoal_cluster_client(cluster, 1);
    shoal_client_set_timeout(first, S_CALL_TIMEOUT_MS);
    shoal_object_t object;
    CHECK_INT(shoal_client_object_add(first, S_TENANT, "image", S_OBJECT_SIZE, s_source, bytes, false, NULL, &object),
              200);
    shoal_object_clear(&object);
    //  A node without an instance cannot be the source.
    s_seen_t one = { "image", 1, 0 };
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_catalog_shows, &one, 20000, "the object in every catalog") == 0,
              "%s", shoal_cluster_error(cluster));
    uint32_t held = 0;
    CHECK_INT(s_replicate(cluster, 2, 3, &held), 409);
    //  To the two other nodes, each checksummed on arrival.
    CHECK_INT(s_replicate(cluster, 1, 3, &held), 200);
    CHECK_INT(held, 3);
    s_seen_t three = { "image", 3, 0 };
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_catalog_shows, &three, 20000, "three complete instances") == 0,
              "%s", shoal_cluster_error(cluster));
    //  Asked again, it has nothing to do.
    CHECK_INT(s_replicate(cluster, 1, 3, &held), 200);
    CHECK_INT(held, 3);
    //  Each node opens its own instance.
    char node[64];
    for (int index = 1; index <= 3; index++) {
        CHECK_INT(s_open_read(cluster, index, bytes, node, sizeof node), 0);
        CHECK_STR(node, shoal_cluster_node_id(cluster, index));
    }
    //  n2's bytes go bad behind the node's back.
    CHECK_INT(shoal_client_object_get(first, S_TENANT, "image", &object), 200);
    char *path = NULL;
    for (size_t i = 0; i < object.count; i++)
        if (streq(object.instances[i].node, "n2"))
            path = zsys_sprintf("%s/%s", shoal_cluster_data_dir(cluster, 2), object.instances[i].uri + strlen("file:"));
    shoal_object_clear(&object);
    CHECK(path);
    FILE *file = fopen(path, "r+b");
    CHECK(file);
    fseek(file, S_OBJECT_SIZE / 2, SEEK_SET);
    fputc(bytes[S_OBJECT_SIZE / 2] ^ 0x5a, file);
    fclose(file);
    free(path);
    //  An open at n2 skips its corrupt instance, marks it, and is served by
    //  a node with a good one: the bytes read are the object's.
    CHECK_INT(s_open_read(cluster, 2, bytes, node, sizeof node), 0);
    CHECK(!streq(node, "n2"));
    s_seen_t marked = { "image", 2, 1 };
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_catalog_shows, &marked, 20000, "n2's instance marked corrupt") == 0,
              "%s", shoal_cluster_error(cluster));
    //  A second replicate gives n2 a good instance; the corrupt one goes.
    CHECK_INT(s_replicate(cluster, 1, 3, &held), 200);
    CHECK_INT(held, 3);
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_catalog_shows, &three, 20000, "n2's instance replaced") == 0,
              "%s", shoal_cluster_error(cluster));
    CHECK_INT(s_open_read(cluster, 2, bytes, node, sizeof node), 0);
    CHECK_STR(node, "n2");
    //  rm at n1 drops every node's instance and, last, the object.
    CHECK_INT(shoal_client_object_remove(first, S_TENANT, "image"), 200);
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_gone, NULL, 20000, "the object gone from every node") == 0, "%s",
              shoal_cluster_error(cluster));
    free(bytes);
    shoal_cluster_destroy(&cluster);
}

int
main(void)
{
    SHOAL_TEST(test_ids_never_repeat);
    SHOAL_TEST(test_replicate_and_corrupt);
    shoal_cluster_destroy_all();
    return shoal_test_finish();
}
