/*  test_guest_proc: the proc driver with real shoal-guest processes whose
    parent is not the driver's process, as after a restart of the node: the
    guest's parent here is a process that never reaps its children (as a
    container's first process that is no init), so a guest that ends stays
    a zombie. The driver must see it gone, and a stop must succeed. */
#include "shoal_test.h"
#include "shoal_driver_proc.h"

#include <czmq.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define TEST_GUEST_ID "g1"
#define TEST_MEMORY (8ULL << 20)
//  The stop timeout of the test's driver (SIGTERM to SIGKILL).
#define TEST_STOP_TIMEOUT_MS 300
#define TEST_WAIT_MS 10000
#define TEST_POLL_US 10000

static int64_t s_stop_timeout_ms = TEST_STOP_TIMEOUT_MS;

//  A new driver over the test directory's guests.
static shoal_driver_t *
s_driver(void)
{
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/guests", shoal_test_dir);
    char *error = NULL;
    shoal_driver_t *driver = shoal_driver_proc_new(dir, NULL, shoal_test_program("shoal-guest"), &s_stop_timeout_ms,
                                                   &error);
    if (!driver) {
        fprintf(stderr, "proc driver: %s\n", error);
        free(error);
    }
    return driver;
}

//  The state letter of /proc/PID/stat, 0 when PID does not exist.
static char
s_state(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
    char *text = shoal_test_slurp(path);
    const char *close = text ? strrchr(text, ')') : NULL;
    char state = close && close[1] == ' ' ? close[2] : 0;
    free(text);
    return state;
}

//  Forks a parent that starts guest ID through its own driver and then
//  never reaps a child. Returns that parent's pid, and the guest's.
static pid_t
s_negligent_parent(const char *id, pid_t *guest)
{
    int ready[2];
    if (pipe(ready) != 0)
        return -1;
    pid_t parent = fork();
    if (parent == 0) {
        close(ready[0]);
        shoal_driver_t *driver = s_driver();
        char *error = NULL;
        pid_t pid = -1;
        if (driver && driver->ops->start(driver, id, &error) == 0) {
            char *dir = driver->ops->image_dir(driver, id);
            char path[4500];
            snprintf(path, sizeof path, "%s/pid", dir);
            char *text = shoal_test_slurp(path);
            pid = text ? atoi(text) : -1;
            free(text);
            free(dir);
        }
        else
            fprintf(stderr, "start: %s\n", error ? error : "no driver");
        if (write(ready[1], &pid, sizeof pid) != sizeof pid)
            _exit(1);
        //  Never reaps: the guest, once it ends, stays a zombie.
        while (true)
            pause();
    }
    close(ready[1]);
    *guest = -1;
    if (parent > 0 && read(ready[0], guest, sizeof *guest) != sizeof *guest)
        *guest = -1;
    close(ready[0]);
    return parent;
}

static void
s_parent_end(pid_t parent)
{
    if (parent > 0) {
        kill(parent, SIGKILL);
        waitpid(parent, NULL, 0);
    }
}

//  A guest stopped by a node that did not start it ends as its parent's
//  unreaped zombie: the stop succeeds and the guest reads as gone.
static void
test_stop_guest_left_a_zombie(void)
{
    shoal_driver_t *driver = s_driver();
    CHECK(driver);
    shoal_guest_spec_t spec = { TEST_MEMORY, 0, 0 };
    char *error = NULL;
    CHECK_MSG(driver->ops->create(driver, TEST_GUEST_ID, &spec, &error) == 0, "%s", error);
    pid_t guest = -1;
    pid_t parent = s_negligent_parent(TEST_GUEST_ID, &guest);
    CHECK(parent > 0);
    if (guest <= 0)
        s_parent_end(parent);
    CHECK_MSG(guest > 0, "the parent could not start the guest");
    CHECK(driver->ops->alive(driver, TEST_GUEST_ID, NULL));

    int rc = driver->ops->stop(driver, TEST_GUEST_ID, &error);
    char state = s_state(guest);
    if (rc)
        s_parent_end(parent);
    CHECK_MSG(rc == 0, "stop: %s", error);
    //  The guest did end: it is its parent's zombie, not reaped by us.
    CHECK_MSG(state == 'Z', "guest %d is in state '%c'", (int) guest, state ? state : '-');
    char *why = NULL;
    bool alive = driver->ops->alive(driver, TEST_GUEST_ID, &why);
    free(why);
    s_parent_end(parent);
    CHECK(!alive);
    CHECK_MSG(driver->ops->destroy(driver, TEST_GUEST_ID, &error) == 0, "destroy: %s", error);
    shoal_driver_destroy(&driver);
}

//  A guest that died on its own while its parent does not reap it reads as
//  gone at once (so the node's death watch sees it), and starts again.
static void
test_zombie_guest_is_gone_and_starts_again(void)
{
    shoal_driver_t *driver = s_driver();
    CHECK(driver);
    shoal_guest_spec_t spec = { TEST_MEMORY, 0, 0 };
    char *error = NULL;
    CHECK_MSG(driver->ops->create(driver, TEST_GUEST_ID, &spec, &error) == 0, "%s", error);
    pid_t guest = -1;
    pid_t parent = s_negligent_parent(TEST_GUEST_ID, &guest);
    CHECK(parent > 0);
    if (guest <= 0)
        s_parent_end(parent);
    CHECK_MSG(guest > 0, "the parent could not start the guest");
    kill(guest, SIGKILL);
    int64_t deadline = shoal_test_now_ms() + TEST_WAIT_MS;
    while (s_state(guest) != 'Z' && shoal_test_now_ms() < deadline)
        usleep(TEST_POLL_US);
    char state = s_state(guest);
    bool alive = driver->ops->alive(driver, TEST_GUEST_ID, NULL);
    if (state != 'Z' || alive)
        s_parent_end(parent);
    CHECK_MSG(state == 'Z', "guest %d is in state '%c'", (int) guest, state ? state : '-');
    CHECK(!alive);
    int started = driver->ops->start(driver, TEST_GUEST_ID, &error);
    s_parent_end(parent);
    CHECK_MSG(started == 0, "start: %s", error);
    CHECK(driver->ops->alive(driver, TEST_GUEST_ID, NULL));
    CHECK_MSG(driver->ops->destroy(driver, TEST_GUEST_ID, &error) == 0, "destroy: %s", error);
    CHECK(!driver->ops->alive(driver, TEST_GUEST_ID, NULL));
    shoal_driver_destroy(&driver);
}

int
main(void)
{
    SHOAL_TEST(test_stop_guest_left_a_zombie);
    SHOAL_TEST(test_zombie_guest_is_gone_and_starts_again);
    return shoal_test_finish();
}
