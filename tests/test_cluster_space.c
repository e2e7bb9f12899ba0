/*  test_cluster_space: a node whose data directory fills up.

    The data directory is a small file system the test mounts (tmpfs with a
    size, so that no disk is touched), mostly taken by a ballast file. The
    node takes writes until the space runs out. What users rely on: a write
    that does not fit answers 507 naming the space (not 500), every write
    acknowledged before stays readable, reads go on while the disk is full,
    and once space returns (the ballast removed) writes are taken again by
    the same process, without a restart; after a restart every acknowledged
    write is still there.

    Mounting needs root; outside CI the test skips without it.
*/
#include <czmq.h>
#include <errno.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shoal_cluster.h"
#include "shoal_node_fixture.h"
#include "shoal_test.h"

#define S_MB (1024 * 1024)
//  The file system, how much of it the ballast takes and the reserve the
//  node keeps (store/reserve_mb): what is left runs out within a few hundred
//  writes.
#define S_FS_BYTES (48 * S_MB)
#define S_BALLAST_BYTES (32 * S_MB)
#define S_RESERVE_ENV "SHOAL_STORE_RESERVE_MB=4"
#define S_VALUE_BYTES (32 * 1024)
//  Far more writes than fit: the loop stops at the first refusal.
#define S_WRITES_MAX 4000
#define S_CALL_TIMEOUT_MS 10000
//  How long the node may take to notice that space returned.
#define S_RECOVER_MS 60000
#define S_TEXT_MAX 64

static void
s_value(uint8_t *value, int i)
{
    for (int b = 0; b < S_VALUE_BYTES; b++)
        value[b] = (uint8_t) (i * 31 + b * 7);
    snprintf((char *) value, S_TEXT_MAX, "value-%05d;", i);
}

static int
s_ballast(const char *path, size_t bytes)
{
    FILE *file = fopen(path, "wb");
    if (!file)
        return -1;
    static uint8_t block[S_MB];
    memset(block, 0x5a, sizeof block);
    size_t written = 0;
    while (written < bytes && fwrite(block, 1, sizeof block, file) == sizeof block)
        written += sizeof block;
    return fclose(file) == 0 && written >= bytes ? 0 : -1;
}

//  True when key I reads back with its value.
static bool
s_reads(shoal_client_t *client, int i)
{
    char key[S_TEXT_MAX];
    snprintf(key, sizeof key, "k%05d", i);
    uint8_t expected[S_VALUE_BYTES];
    s_value(expected, i);
    shoal_kv_value_t value;
    if (shoal_client_kv_get(client, "app", key, &value) != 200)
        return false;
    bool same = value.size == S_VALUE_BYTES && memcmp(value.value, expected, S_VALUE_BYTES) == 0;
    shoal_kv_value_clear(&value);
    return same;
}

static int
s_put(shoal_client_t *client, int i)
{
    char key[S_TEXT_MAX];
    snprintf(key, sizeof key, "k%05d", i);
    uint8_t value[S_VALUE_BYTES];
    s_value(value, i);
    return shoal_client_kv_put(client, "app", key, value, sizeof value, NULL);
}

static void
test_full_disk_refuses_then_recovers(void)
{
    if (geteuid() != 0) {
        CHECK_MSG(!shoal_cluster_in_ci(), "mounting a small file system needs root under CI");
        printf("skipped: mounting a small file system needs root\n");
        return;
    }
    shoal_node_fixture_t node;
    shoal_node_fixture_init(&node, "n1", 0);
    CHECK(mkdir(node.data_dir, 0755) == 0);
    char options[S_TEXT_MAX];
    snprintf(options, sizeof options, "size=%d", S_FS_BYTES);
    CHECK_MSG(mount("tmpfs", node.data_dir, "tmpfs", 0, options) == 0, "cannot mount tmpfs on %s: %s",
              node.data_dir, strerror(errno));
    char ballast[SHOAL_FIXTURE_PATH_MAX];
    snprintf(ballast, sizeof ballast, "%s/ballast", node.data_dir);
    char *env[] = { S_RESERVE_ENV, NULL };
    bool started = s_ballast(ballast, S_BALLAST_BYTES) == 0 && shoal_node_fixture_start(&node, env);
    shoal_client_t *client = started ? shoal_node_fixture_client(&node, node.admin_cert, S_CALL_TIMEOUT_MS) : NULL;

    int acked = 0, refused = 0;
    char refusal[512] = "";
    for (int i = 0; client && i < S_WRITES_MAX && !refused; i++) {
        int status = s_put(client, i);
        if (status == 200)
            acked = i + 1;
        else {
            refused = status;
            snprintf(refusal, sizeof refusal, "%s", shoal_client_error(client));
        }
    }
    //  Reads go on while the disk is full.
    int unreadable = -1;
    for (int i = 0; client && refused && i < acked && unreadable < 0; i++)
        if (!s_reads(client, i))
            unreadable = i;
    //  A second write while full is refused the same way.
    int again = client && refused ? s_put(client, acked) : 0;

    //  Space returns: the same process takes writes again.
    unlink(ballast);
    int recovered = 0;
    int64_t deadline = shoal_test_now_ms() + S_RECOVER_MS;
    while (client && refused && shoal_test_now_ms() < deadline && (recovered = s_put(client, acked)) != 200)
        usleep(200000);
    if (recovered == 200)
        acked++;
    bool same_process = started && shoal_test_wait(node.pid, 0) == -1;
    shoal_client_destroy(&client);
    int stopped = started ? shoal_test_stop(node.pid, SIGTERM) : -1;
    bool restarted = started && shoal_node_fixture_start(&node, env);
    client = restarted ? shoal_node_fixture_client(&node, node.admin_cert, S_CALL_TIMEOUT_MS) : NULL;
    int lost = -1;
    for (int i = 0; client && i < acked && lost < 0; i++)
        if (!s_reads(client, i))
            lost = i;
    shoal_client_destroy(&client);
    if (restarted)
        shoal_test_stop(node.pid, SIGTERM);
    umount2(node.data_dir, MNT_DETACH);

    printf("     %d writes acknowledged before the refusal: %d %s\n", acked, refused, refusal);
    CHECK(started);
    CHECK_MSG(refused, "the disk never filled");
    CHECK_INT(refused, 507);
    CHECK_MSG(shoal_test_contains(refusal, "space"), "the refusal does not name the space: %s", refusal);
    CHECK_MSG(unreadable < 0, "key %d does not read back while the disk is full", unreadable);
    CHECK_INT(again, 507);
    CHECK_MSG(recovered == 200, "writes are still refused (%d) %d s after space returned", recovered,
              S_RECOVER_MS / 1000);
    CHECK(same_process);
    CHECK_INT(stopped, 0);
    CHECK(restarted);
    CHECK_MSG(lost < 0, "acknowledged key %d is lost after the restart", lost);
}

int
main(void)
{
    SHOAL_TEST(test_full_disk_refuses_then_recovers);
    return shoal_test_finish();
}
