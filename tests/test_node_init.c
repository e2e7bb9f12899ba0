/*  test_node_init: shoald as the first process of a PID namespace, as in a
    container started with shoald as its command. Every orphan of the
    namespace becomes its child: it must reap them all, and still stop
    cleanly on SIGTERM. Needs root and unshare(1); skipped otherwise. */
#include "shoal_test.h"
#include "shoal.h"

#include <czmq.h>
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#define TEST_PATH_MAX 4400
#define TEST_START_MS 15000
#define TEST_WAIT_MS 10000
#define TEST_POLL_US 20000
#define TEST_CALL_TIMEOUT_MS 2000
#define TEST_MEMORY (8ULL << 20)
#define TEST_UNSHARE "/usr/bin/unshare"

//  The first child of PID (its /proc children list), 0 when none.
static pid_t
s_first_child(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int) pid, (int) pid);
    char *text = shoal_test_slurp(path);
    pid_t child = text ? (pid_t) atoi(text) : 0;
    free(text);
    return child;
}

//  How many zombies have PARENT as their parent.
static int
s_zombies_of(pid_t parent)
{
    int count = 0;
    DIR *proc = opendir("/proc");
    struct dirent *entry;
    while (proc && (entry = readdir(proc))) {
        if (entry->d_name[0] < '1' || entry->d_name[0] > '9')
            continue;
        char path[300];
        snprintf(path, sizeof path, "/proc/%s/stat", entry->d_name);
        char *text = shoal_test_slurp(path);
        const char *close = text ? strrchr(text, ')') : NULL;
        char state = 0;
        int ppid = 0;
        if (close && sscanf(close + 1, " %c %d", &state, &ppid) == 2 && ppid == parent && state == 'Z')
            count++;
        free(text);
    }
    if (proc)
        closedir(proc);
    return count;
}

//  The guest program: a real shoal-guest, which first leaves an orphan
//  behind (a double fork) that ends a moment later, as any process of a
//  container may.
static void
s_write_guest_wrapper(const char *path, const char *done)
{
    FILE *file = fopen(path, "w");
    if (!file)
        return;
    fprintf(file, "#!/bin/sh\n( (sleep 0.2; touch '%s') & )\nexec '%s' \"$@\"\n", done,
            shoal_test_program("shoal-guest"));
    fclose(file);
    chmod(path, 0755);
}

static void
test_first_process_reaps_orphans_and_stops(void)
{
    if (geteuid() != 0 || access(TEST_UNSHARE, X_OK) != 0) {
        printf("  skipped: needs root and %s\n", TEST_UNSHARE);
        return;
    }
    char data_dir[TEST_PATH_MAX], log_path[TEST_PATH_MAX], wrapper[TEST_PATH_MAX], done[TEST_PATH_MAX];
    snprintf(data_dir, sizeof data_dir, "%s/data", shoal_test_dir);
    snprintf(log_path, sizeof log_path, "%s/shoald.log", shoal_test_dir);
    snprintf(wrapper, sizeof wrapper, "%s/guest-wrapper", shoal_test_dir);
    snprintf(done, sizeof done, "%s/orphan-ended", shoal_test_dir);
    s_write_guest_wrapper(wrapper, done);
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "tcp://127.0.0.1:%d", shoal_test_free_port());
    char env_bind[128], env_data[TEST_PATH_MAX + 32], env_program[TEST_PATH_MAX + 32];
    snprintf(env_bind, sizeof env_bind, "SHOAL_NODE_BIND=%s", endpoint);
    snprintf(env_data, sizeof env_data, "SHOAL_NODE_DATA_DIR=%s", data_dir);
    snprintf(env_program, sizeof env_program, "SHOAL_GUEST_PROGRAM=%s", wrapper);
    char *env[] = { env_bind, env_data, env_program, "SHOAL_NODE_ID=init", NULL };
    char *argv[] = { TEST_UNSHARE, "--pid", "--fork", "--mount-proc", (char *) shoal_test_program("shoald"), NULL };
    pid_t unshare = shoal_test_spawn(argv, env, log_path);
    CHECK(unshare > 0);

    char admin[TEST_PATH_MAX + 32], cluster[TEST_PATH_MAX + 32];
    snprintf(admin, sizeof admin, "%s/keys/admin-init.cert", data_dir);
    snprintf(cluster, sizeof cluster, "%s/keys/cluster.cert", data_dir);
    shoal_client_t *client = NULL;
    int64_t deadline = shoal_test_now_ms() + TEST_START_MS;
    while (!client && shoal_test_now_ms() < deadline && shoal_test_wait(unshare, 0) == -1) {
        shoal_client_t *candidate = access(admin, R_OK) == 0 ? shoal_client_new(endpoint, admin, cluster, NULL) : NULL;
        shoal_status_t status;
        if (candidate) {
            shoal_client_set_timeout(candidate, TEST_CALL_TIMEOUT_MS);
            if (shoal_client_status(candidate, &status) == 200) {
                shoal_status_clear(&status);
                client = candidate;
                continue;
            }
        }
        shoal_client_destroy(&candidate);
        usleep(TEST_POLL_US);
    }
    if (!client)
        shoal_test_stop(unshare, SIGKILL);
    CHECK_MSG(client, "shoald as process 1 did not answer (see %s)", log_path);
    //  Process 1 of the namespace, as this namespace numbers it.
    pid_t init = s_first_child(unshare);

    shoal_claim_spec_t spec = { .tenant = "acme/web", .memory_bytes = TEST_MEMORY };
    shoal_claim_info_t info;
    int rc = shoal_client_claim_create(client, &spec, &info);
    if (rc == 200)
        shoal_claim_info_clear(&info);
    deadline = shoal_test_now_ms() + TEST_WAIT_MS;
    while (access(done, F_OK) != 0 && shoal_test_now_ms() < deadline)
        usleep(TEST_POLL_US);
    bool orphan_ended = access(done, F_OK) == 0;
    //  The orphan's shell ends just after it touched the file.
    int zombies = 1;
    while (orphan_ended && (zombies = s_zombies_of(init)) > 0 && shoal_test_now_ms() < deadline)
        usleep(TEST_POLL_US);
    shoal_client_destroy(&client);
    //  unshare forwards no signal: process 1 is told directly, and unshare
    //  exits with its exit code. A clean stop is 0.
    if (init > 0)
        kill(init, SIGTERM);
    int code = shoal_test_wait(unshare, TEST_WAIT_MS);
    if (code == -1)
        shoal_test_stop(unshare, SIGKILL);
    CHECK(init > 0);
    CHECK_INT(rc, 200);
    CHECK_MSG(orphan_ended, "the guest's orphan never ended");
    CHECK_MSG(zombies == 0, "%d zombie(s) left unreaped under process 1 (pid %d here)", zombies, (int) init);
    CHECK_MSG(code == 0, "shoald as process 1 exited with %d on SIGTERM (see %s)", code, log_path);
}

int
main(void)
{
    SHOAL_TEST(test_first_process_reaps_orphans_and_stops);
    return shoal_test_finish();
}
