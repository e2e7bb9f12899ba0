/*  test_cluster_move_checkpoint: a cold move through storage objects. A
    guest paused while its load writes is checkpointed into an object on
    one node and made again from it on another, which holds no instance
    and copies it first: every stamp of its memory and disk verifies, and
    its key/value area is as it was. Bad requests answer with what was
    wrong: an unknown object, one that holds no guest image, a running
    guest, a name already bound; bytes gone bad are refused and their
    instance marked corrupt. */
#include "shoal_test.h"
#include "shoal_cluster.h"
#include "shoal_move_check.h"

#include <czmq.h>
#include <unistd.h>

#define S_MB (1024ull * 1024)
#define S_TENANT "acme/web"
#define S_WAIT_MS 30000
//  A bound for a busy machine, not a figure: a checkpoint and a restore
//  each write the guest's whole image.
#define S_CALL_TIMEOUT_MS 120000
//  The guest's load: it writes while it runs, so that the pause catches it
//  mid-work.
#define S_RATE (8 * 1000 * 1000)

//  Every node's catalog knows object NAME.
static bool
s_known(shoal_cluster_t *cluster, void *arg, char *why, size_t why_size)
{
    for (int index = 1; index <= shoal_cluster_size(cluster); index++) {
        shoal_object_t object;
        int rc = shoal_client_object_get(shoal_cluster_client(cluster, index), S_TENANT, (const char *) arg, &object);
        if (rc != 200) {
            snprintf(why, why_size, "n%d answers %d for '%s'", index, rc, (const char *) arg);
            return false;
        }
        shoal_object_clear(&object);
    }
    return true;
}

//  Whether node INDEX holds a complete instance of NAME, by its catalog.
static bool
s_holds(shoal_cluster_t *cluster, int index, const char *name)
{
    shoal_object_t object;
    if (shoal_client_object_get(shoal_cluster_client(cluster, index), S_TENANT, name, &object) != 200)
        return false;
    bool holds = false;
    for (size_t i = 0; i < object.count; i++)
        holds |= streq(object.instances[i].node, shoal_cluster_node_id(cluster, index))
              && streq(object.instances[i].state, "complete");
    shoal_object_clear(&object);
    return holds;
}

static void
test_checkpoint_and_restore_elsewhere(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(2, NULL);
    CHECK(cluster);
    //  n2 keeps its guests' memory apart (guest/memory_dir): a restore
    //  there makes it in that directory.
    char memory[512];
    snprintf(memory, sizeof memory, "%s/memory-n2", shoal_test_dir);
    shoal_cluster_node_setenv(cluster, 2, "SHOAL_GUEST_MEMORY_DIR", memory);
    CHECK_MSG(shoal_cluster_up(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    shoal_client_t *n1 = shoal_cluster_client(cluster, 1);
    shoal_client_t *n2 = shoal_cluster_client(cluster, 2);
    shoal_client_set_timeout(n1, S_CALL_TIMEOUT_MS);
    shoal_client_set_timeout(n2, S_CALL_TIMEOUT_MS);
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = 64 * S_MB, .disk_bytes = 4 * S_MB,
                                .rate = S_RATE, .id = "saved" };
    CHECK_INT(shoal_client_claim_create(n1, &spec, NULL), 200);
    CHECK_INT(shoal_client_claim_put(n1, "saved", "stamp", "before-the-checkpoint", 21), 200);
    //  Its load writes a while, then the guest is paused mid-work.
    usleep(300 * 1000);

    //  A running guest is refused, and nothing is made.
    shoal_object_t object;
    CHECK_INT(shoal_client_claim_checkpoint(n1, "saved", "saved-1", NULL, &object), 409);
    CHECK(strstr(shoal_client_error(n1), "running"));
    CHECK_INT(shoal_client_object_get(n1, S_TENANT, "saved-1", &object), 404);

    CHECK_INT(shoal_client_claim_pause(n1, "saved", NULL), 200);
    CHECK_INT(shoal_client_claim_checkpoint(n1, "saved", "saved-1", "paused under load", &object), 200);
    CHECK_INT(object.memory_bytes, 64 * S_MB);
    CHECK_INT(object.disk_bytes, 4 * S_MB);
    CHECK_INT(object.count, 1);
    CHECK_STR(object.instances[0].node, "n1");
    CHECK_STR(object.instances[0].state, "complete");
    shoal_object_clear(&object);
    //  The name is taken now; the guest is still paused, and checkpoints again.
    CHECK_INT(shoal_client_claim_checkpoint(n1, "saved", "saved-1", NULL, NULL), 409);
    CHECK(strstr(shoal_client_error(n1), "exists"));
    shoal_claim_info_t info;
    CHECK_INT(shoal_client_claim_show(n1, "saved", &info), 200);
    CHECK_STR(info.state, "paused");
    shoal_claim_info_clear(&info);

    //  n2 holds no instance: the create copies it there from n1 first.
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_known, "saved-1", S_WAIT_MS, "the checkpoint in every catalog") == 0,
              "%s", shoal_cluster_error(cluster));
    CHECK(!s_holds(cluster, 2, "saved-1"));
    shoal_claim_spec_t restore = { .tenant = S_TENANT, .id = "restored", .from_object = "saved-1" };
    int rc = shoal_client_claim_create(n2, &restore, &info);
    CHECK_MSG(rc == 200, "restore on n2: %d %s", rc, shoal_client_error(n2));
    CHECK_STR(info.state, "running");
    CHECK_STR(info.owner, "n2");
    CHECK_INT(info.memory_bytes, 64 * S_MB);
    shoal_claim_info_clear(&info);
    CHECK(s_holds(cluster, 2, "saved-1"));
    char path[1024], target[1024];
    snprintf(path, sizeof path, "%s/guests/restored/image", shoal_cluster_data_dir(cluster, 2));
    ssize_t linked = readlink(path, target, sizeof target - 1);
    CHECK_MSG(linked > 0, "%s is no link", path);
    target[linked > 0 ? linked : 0] = 0;
    CHECK_MSG(strncmp(target, memory, strlen(memory)) == 0, "%s links to %s", path, target);
    //  Its memory is the checkpoint's: the key written before it is there.
    uint8_t *value = NULL;
    size_t size = 0;
    CHECK_INT(shoal_client_claim_get(n2, "restored", "stamp", &value, &size), 200);
    CHECK(size == 21 && memcmp(value, "before-the-checkpoint", 21) == 0);
    free(value);
    //  It runs its load on; stopped, every stamp verifies.
    usleep(200 * 1000);
    CHECK_INT(shoal_client_claim_stop(n2, "restored", NULL), 200);
    CHECK_MSG(shoal_move_check_verify(cluster, 2, "restored") == 0, "%s", shoal_move_check_error());
    //  A stopped guest checkpoints too, and a second restore on n1 reads
    //  the instance there (nothing to copy).
    CHECK_INT(shoal_client_claim_checkpoint(n2, "restored", "saved-2", NULL, NULL), 200);
    CHECK_INT(shoal_client_claim_release(n1, "saved", NULL), 200);
    shoal_claim_spec_t again = { .tenant = S_TENANT, .id = "again", .from_object = "saved-1" };
    CHECK_INT(shoal_client_claim_create(n1, &again, NULL), 200);
    CHECK_INT(shoal_client_claim_stop(n1, "again", NULL), 200);
    CHECK_MSG(shoal_move_check_verify(cluster, 1, "again") == 0, "%s", shoal_move_check_error());
    CHECK_INT(shoal_client_claim_release(n1, "again", NULL), 200);
    CHECK_INT(shoal_client_claim_release(n2, "restored", NULL), 200);
    shoal_cluster_destroy(&cluster);
}

static void
test_refusals(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(1, NULL);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_start(cluster) == 0, "%s", shoal_cluster_error(cluster));
    shoal_client_t *n1 = shoal_cluster_client(cluster, 1);
    shoal_client_set_timeout(n1, S_CALL_TIMEOUT_MS);
    shoal_claim_info_t info;
    //  No such object.
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .id = "from-nothing", .from_object = "nothing" };
    CHECK_INT(shoal_client_claim_create(n1, &spec, &info), 404);
    CHECK(strstr(shoal_client_error(n1), "nothing"));
    //  Bytes that are no guest image.
    char bytes[] = "these bytes are not a guest's memory";
    FILE *file = fopen("plain.bin", "wb");
    CHECK(file);
    fwrite(bytes, 1, sizeof bytes, file);
    fclose(file);
    CHECK_INT(shoal_client_object_add_file(n1, S_TENANT, "plain", "plain.bin", false, NULL, NULL), 200);
    spec.from_object = "plain";
    CHECK_INT(shoal_client_claim_create(n1, &spec, &info), 400);
    CHECK(strstr(shoal_client_error(n1), "not a guest image"));
    //  Neither made a claim.
    CHECK_INT(shoal_client_claim_show(n1, "from-nothing", &info), 404);
    //  A checkpoint of a claim that does not exist, and of a running one.
    CHECK_INT(shoal_client_claim_checkpoint(n1, "ghost", "ghost-1", NULL, NULL), 404);
    shoal_claim_spec_t live = { .tenant = S_TENANT, .id = "live", .memory_bytes = 16 * S_MB };
    CHECK_INT(shoal_client_claim_create(n1, &live, NULL), 200);
    CHECK_INT(shoal_client_claim_checkpoint(n1, "live", "live-1", NULL, NULL), 409);
    CHECK(strstr(shoal_client_error(n1), "pause or stop it first"));
    //  A memory size that is not the image's.
    CHECK_INT(shoal_client_claim_stop(n1, "live", NULL), 200);
    CHECK_INT(shoal_client_claim_checkpoint(n1, "live", "live-1", NULL, NULL), 200);
    shoal_claim_spec_t wrong = { .tenant = S_TENANT, .id = "wrong", .from_object = "live-1",
                                 .memory_bytes = 32 * S_MB };
    CHECK_INT(shoal_client_claim_create(n1, &wrong, NULL), 400);
    CHECK(strstr(shoal_client_error(n1), "memory"));
    //  Bytes that went bad behind the node's back: the guest is not made
    //  from them (its claim says why), and the instance is marked corrupt.
    shoal_object_t object;
    CHECK_INT(shoal_client_object_get(n1, S_TENANT, "live-1", &object), 200);
    CHECK_INT(object.count, 1);
    char *path = zsys_sprintf("%s/%s", shoal_cluster_data_dir(cluster, 1), object.instances[0].uri + strlen("file:"));
    shoal_object_clear(&object);
    file = fopen(path, "r+b");
    CHECK(file);
    fseek(file, 4096 + 100, SEEK_SET);
    fputc(0x5a, file);
    fclose(file);
    free(path);
    shoal_claim_spec_t bad = { .tenant = S_TENANT, .id = "bad", .from_object = "live-1" };
    CHECK_INT(shoal_client_claim_create(n1, &bad, NULL), 500);
    CHECK(strstr(shoal_client_error(n1), "do not match"));
    CHECK_INT(shoal_client_claim_show(n1, "bad", &info), 200);
    CHECK_STR(info.state, "error");
    shoal_claim_info_clear(&info);
    CHECK_INT(shoal_client_object_get(n1, S_TENANT, "live-1", &object), 200);
    CHECK_STR(object.instances[0].state, "corrupt");
    shoal_object_clear(&object);
    CHECK_INT(shoal_client_claim_release(n1, "bad", NULL), 200);
    CHECK_INT(shoal_client_claim_release(n1, "live", NULL), 200);
    shoal_cluster_destroy(&cluster);
}

#define S_TEST(fn) do { SHOAL_TEST(fn); shoal_cluster_destroy_all(); shoal_move_check_cleanup(); } while (0)

int
main(void)
{
    S_TEST(test_refusals);
    S_TEST(test_checkpoint_and_restore_elsewhere);
    return shoal_test_finish();
}
