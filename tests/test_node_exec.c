/*  test_node_exec: the exec driver, with tests/fake-vm-manager as its VM
    manager: claims of driver exec through a real shoald, a manager that
    fails or hangs, and the migrate calls with their lists of files.
*/
#include "shoal_test.h"
#include "shoal_node_fixture.h"
#include "shoal_driver_exec.h"
#include "shoal_driver_proc.h"
#include "shoal_command.h"

#include <czmq.h>
#include <errno.h>
#include <sched.h>
#include <sys/resource.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#define S_MB (1024 * 1024)
#define S_TENANT "acme/web"
#define S_CALL_TIMEOUT_MS 10000
//  The manager's time limit the tests' nodes run with.
#define S_EXEC_TIMEOUT_MS 1500
#define S_MIGRATE_TIMEOUT_MS 1000
//  A command under SCHED_IDLE gets next to no CPU while the machine is busy
//  with other work: it is given this long to end.
#define S_IDLE_CALL_TIMEOUT_MS 120000

typedef shoal_node_fixture_t s_node_t;

//  The fake manager in the source tree (static storage).
static const char *
s_manager_path(void)
{
    static char path[4096];
    const char *source = getenv("SHOAL_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/tests/fake-vm-manager", source ? source : "..");
    return path;
}

//  The fake manager's state directory of this test (a new string).
static char *
s_state_dir(void)
{
    return zsys_sprintf("%s/vm-state", shoal_test_dir);
}

//  Writes TEXT to the file NAME in the manager's state directory, which
//  steers the fake manager (fail-VERB, hang-VERB, output-VERB).
static void
s_steer(const char *name, const char *text)
{
    char *dir = s_state_dir();
    zsys_dir_create("%s", dir);
    char *path = zsys_sprintf("%s/%s", dir, name);
    FILE *file = fopen(path, "w");
    if (file) {
        fputs(text, file);
        fclose(file);
    }
    free(path);
    free(dir);
}

static void
s_unsteer(const char *name)
{
    char *dir = s_state_dir();
    char *path = zsys_sprintf("%s/%s", dir, name);
    unlink(path);
    free(path);
    free(dir);
}

//  A file of the manager's state directory (a new string, or NULL).
static char *
s_state_file(const char *name)
{
    char *dir = s_state_dir();
    char *path = zsys_sprintf("%s/%s", dir, name);
    char *text = shoal_test_slurp(path);
    free(path);
    free(dir);
    return text;
}

//  The state the fake manager keeps for VM ID ("running\n"...), or NULL.
static char *
s_vm_state(const char *id)
{
    char *name = zsys_sprintf("vms/%s/state", id);
    char *text = s_state_file(name);
    free(name);
    return text;
}

static bool
s_vm_state_is(const char *id, const char *state)
{
    char *text = s_vm_state(id);
    char *expect = zsys_sprintf("%s\n", state);
    bool is = text && streq(text, expect);
    free(expect);
    free(text);
    return is;
}

//  Starts node n1 with the exec driver (or without, when WITH_MANAGER is false).
static bool
s_node_start(s_node_t *node, bool with_manager)
{
    shoal_node_fixture_init(node, "n1", 0);
    char *dir = s_state_dir();
    char manager[4200], state[4200], timeout[64];
    snprintf(manager, sizeof manager, "SHOAL_DRIVERS_EXEC_MANAGER=%s", s_manager_path());
    snprintf(state, sizeof state, "FAKE_VM_DIR=%s", dir);
    snprintf(timeout, sizeof timeout, "SHOAL_DRIVERS_EXEC_TIMEOUT_MS=%d", S_EXEC_TIMEOUT_MS);
    free(dir);
    char *env[] = { state, timeout, with_manager ? manager : NULL, NULL };
    return shoal_node_fixture_start(node, env);
}

static shoal_client_t *
s_client(s_node_t *node)
{
    return shoal_node_fixture_client(node, node->admin_cert, S_CALL_TIMEOUT_MS);
}

static int
s_create(shoal_client_t *client, const char *id, shoal_claim_info_t *info)
{
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = S_MB, .driver = "exec", .id = id };
    return shoal_client_claim_create(client, &spec, info);
}

//  Claim ID's state and error, as its owner shows it.
static bool
s_claim_is(shoal_client_t *client, const char *id, const char *state, const char *error_part)
{
    shoal_claim_info_t info;
    if (shoal_client_claim_show(client, id, &info) != 200)
        return false;
    bool is = streq(info.state, state) && (!error_part || shoal_test_contains(info.error, error_part));
    shoal_claim_info_clear(&info);
    return is;
}

//  A claim of driver exec through its whole life, each step reaching the
//  manager with the contract's arguments; a restart adopts a VM the manager
//  still runs.
static void
test_exec_claim_lifecycle(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, true));
    shoal_client_t *client = s_client(&node);
    shoal_claim_info_t info;
    int created = s_create(client, "vm1", &info);
    bool running = created == 200 && streq(info.state, "running") && streq(info.driver, "exec");
    if (created == 200)
        shoal_claim_info_clear(&info);
    bool vm_runs = s_vm_state_is("vm1", "running");
    int paused = shoal_client_claim_pause(client, "vm1", NULL);
    bool vm_paused = s_vm_state_is("vm1", "paused");
    int resumed = shoal_client_claim_resume(client, "vm1", NULL);
    bool vm_resumed = s_vm_state_is("vm1", "running");
    int stopped = shoal_client_claim_stop(client, "vm1", NULL);
    bool vm_stopped = s_vm_state_is("vm1", "stopped");
    int started = shoal_client_claim_start(client, "vm1", NULL);
    bool vm_started = s_vm_state_is("vm1", "running");
    //  An exec guest has no key/value area.
    int call = shoal_client_claim_get(client, "vm1", "k", NULL, NULL);
    bool call_says = shoal_test_contains(shoal_client_error(client), "take no calls");
    shoal_client_destroy(&client);

    int exit_code = shoal_test_stop(node.pid, SIGTERM);
    bool restarted = s_node_start(&node, true);
    client = s_client(&node);
    bool adopted = s_claim_is(client, "vm1", "running", NULL);
    int released = shoal_client_claim_release(client, "vm1", NULL);
    char *gone = s_vm_state("vm1");
    char *calls = s_state_file("calls.log");
    shoal_client_destroy(&client);
    int exit_again = shoal_test_stop(node.pid, SIGTERM);

    CHECK_INT(created, 200);
    CHECK(running);
    CHECK(vm_runs);
    CHECK_INT(paused, 200);
    CHECK(vm_paused);
    CHECK_INT(resumed, 200);
    CHECK(vm_resumed);
    CHECK_INT(stopped, 200);
    CHECK(vm_stopped);
    CHECK_INT(started, 200);
    CHECK(vm_started);
    CHECK_INT(call, 400);
    CHECK(call_says);
    CHECK_INT(exit_code, 0);
    CHECK(restarted);
    CHECK(adopted);
    CHECK_INT(released, 200);
    CHECK(gone == NULL);
    CHECK_MSG(shoal_test_contains(calls, "vm create vm1 --memory 1048576 --disk 0\n"), "calls: %s", calls);
    CHECK(shoal_test_contains(calls, "vm start vm1\n"));
    CHECK(shoal_test_contains(calls, "vm pause vm1\n"));
    CHECK(shoal_test_contains(calls, "vm resume vm1\n"));
    CHECK(shoal_test_contains(calls, "vm stop vm1\n"));
    CHECK(shoal_test_contains(calls, "vm inspect vm1 --output json\n"));
    CHECK(shoal_test_contains(calls, "vm rm --force vm1\n"));
    free(calls);
    CHECK_INT(exit_again, 0);
}

//  Waits until process PID has ended (gone, or a zombie: a SIGKILL takes
//  effect when the process next runs, which a busy machine may delay);
//  false if it still runs after S_CALL_TIMEOUT_MS.
static bool
s_process_ends(int pid)
{
    int64_t deadline = shoal_test_now_ms() + S_CALL_TIMEOUT_MS;
    while (true) {
        char *stat_path = zsys_sprintf("/proc/%d/stat", pid);
        char *stat = shoal_test_slurp(stat_path);
        free(stat_path);
        const char *close = stat ? strrchr(stat, ')') : NULL;
        bool gone = !close || close[2] == 'Z';
        free(stat);
        if (gone)
            return true;
        if (shoal_test_now_ms() >= deadline)
            return false;
        zclock_sleep(10);
    }
}

//  A manager that fails is answered with 500 and its own words, and the
//  claim says the same; a manager that hangs is killed at the time limit
//  and the node goes on serving.
static void
test_exec_manager_fails_and_hangs(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, true));
    shoal_client_t *client = s_client(&node);
    s_steer("fail-start", "fake: no hugepages left for vm\n");
    int created = s_create(client, "vm2", NULL);
    const char *error = shoal_client_error(client);
    bool quotes = shoal_test_contains(error, "no hugepages left for vm")
               && shoal_test_contains(error, "exited with 3") && shoal_test_contains(error, "vm start vm2");
    bool marked = s_claim_is(client, "vm2", "error", "no hugepages left for vm");
    s_unsteer("fail-start");
    //  Once the manager works again the claim starts.
    int started = shoal_client_claim_start(client, "vm2", NULL);

    s_steer("hang-pause", "");
    int64_t before = shoal_test_now_ms();
    int paused = shoal_client_claim_pause(client, "vm2", NULL);
    int64_t took = shoal_test_now_ms() - before;
    bool says_timeout = shoal_test_contains(shoal_client_error(client), "did not end within 1500 ms");
    bool hang_marked = s_claim_is(client, "vm2", "error", "did not end within");
    //  The manager's own child was killed with it.
    char *sleeper_text = s_state_file("hang-pause.pid");
    int sleeper = sleeper_text ? atoi(sleeper_text) : 0;
    free(sleeper_text);
    bool sleeper_gone = sleeper > 0 && s_process_ends(sleeper);
    s_unsteer("hang-pause");
    shoal_status_t status;
    int serves = shoal_client_status(client, &status);
    if (serves == 200)
        shoal_status_clear(&status);
    int released = shoal_client_claim_release(client, "vm2", NULL);
    shoal_client_destroy(&client);
    int exit_code = shoal_test_stop(node.pid, SIGTERM);

    CHECK_INT(created, 500);
    CHECK_MSG(quotes, "error: %s", error);
    CHECK(marked);
    CHECK_INT(started, 200);
    CHECK_INT(paused, 500);
    //  Answered after the limit, and by the node, not by the client's own
    //  time limit (the hang itself never ends).
    CHECK_MSG(took >= S_EXEC_TIMEOUT_MS && took < S_CALL_TIMEOUT_MS, "took %" PRId64 " ms", took);
    CHECK(says_timeout);
    CHECK(hang_marked);
    CHECK_MSG(sleeper_gone, "the manager's child %d outlived it", sleeper);
    CHECK_INT(serves, 200);
    CHECK_INT(released, 200);
    CHECK_INT(exit_code, 0);
}

//  A VM that stops behind the node's back is noticed by the death watch,
//  through the manager's inspect.
static void
test_exec_vm_gone_marked_error(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, true));
    shoal_client_t *client = s_client(&node);
    int created = s_create(client, "vm4", NULL);
    s_steer("vms/vm4/state", "stopped\n");
    int64_t since = shoal_test_now_ms();
    bool marked = false;
    while (!marked && shoal_test_now_ms() - since < 10000) {
        usleep(100000);
        marked = s_claim_is(client, "vm4", "error", "the exec manager says vm vm4 is stopped");
    }
    int released = shoal_client_claim_release(client, "vm4", NULL);
    shoal_client_destroy(&client);
    int exit_code = shoal_test_stop(node.pid, SIGTERM);
    CHECK_INT(created, 200);
    CHECK(marked);
    CHECK_INT(released, 200);
    CHECK_INT(exit_code, 0);
}

//  A manager whose inspect hangs tells the death watch nothing: the claim
//  stays as it is, and the look runs in the guest actor, so the node
//  answers meanwhile.
static void
test_exec_watch_survives_hung_inspect(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, true));
    shoal_client_t *client = s_client(&node);
    int created = s_create(client, "vm5", NULL);
    s_steer("hang-inspect", "");
    char *log = NULL;
    int64_t since = shoal_test_now_ms();
    bool unknown = false;
    while (!unknown && shoal_test_now_ms() - since < 30000) {
        usleep(200000);
        free(log);
        log = shoal_test_slurp(node.log_path);
        unknown = shoal_test_contains(log, "cannot tell whether the guest of vm5 runs")
               && shoal_test_contains(log, "did not end within 1500 ms");
    }
    free(log);
    //  While the next look hangs, the node answers at once.
    int64_t before = shoal_test_now_ms();
    bool still_running = s_claim_is(client, "vm5", "running", NULL);
    int64_t took = shoal_test_now_ms() - before;
    s_unsteer("hang-inspect");
    int released = shoal_client_claim_release(client, "vm5", NULL);
    shoal_client_destroy(&client);
    int exit_code = shoal_test_stop(node.pid, SIGTERM);
    CHECK_INT(created, 200);
    CHECK(unknown);
    CHECK(still_running);
    CHECK_MSG(took < S_EXEC_TIMEOUT_MS / 2, "show took %" PRId64 " ms", took);
    CHECK_INT(released, 200);
    CHECK_INT(exit_code, 0);
}

//  A node without a manager refuses exec claims and says what to set.
static void
test_exec_not_configured(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, false));
    shoal_client_t *client = s_client(&node);
    int created = s_create(client, "vm3", NULL);
    bool names_key = shoal_test_contains(shoal_client_error(client), "drivers/exec_manager");
    shoal_client_destroy(&client);
    int exit_code = shoal_test_stop(node.pid, SIGTERM);
    CHECK_INT(created, 503);
    CHECK(names_key);
    CHECK_INT(exit_code, 0);
}

//  Capture and receive through the driver: the files each round lists, and
//  every way a list can be wrong.
static void
test_exec_migrate_files(void)
{
    char *state = s_state_dir();
    setenv("FAKE_VM_DIR", state, 1);
    free(state);
    int64_t timeout_ms = S_EXEC_TIMEOUT_MS;
    int64_t migrate_timeout_ms = S_MIGRATE_TIMEOUT_MS;
    int64_t nice = 0;
    int64_t idle = 0;
    char *error = NULL;
    shoal_driver_t *driver = shoal_driver_exec_new(s_manager_path(), &timeout_ms, &migrate_timeout_ms, &nice,
                                                   &idle, &error);
    CHECK_MSG(driver, "%s", error);
    const shoal_driver_ops_t *ops = driver->ops;
    char *rounds = zsys_sprintf("%s/rounds", shoal_test_dir);
    zsys_dir_create("%s", rounds);
    shoal_guest_spec_t spec = { S_MB, 0, 0 };
    int created = ops->create(driver, "src", &spec, &error);
    int started = ops->start(driver, "src", &error);
    shoal_driver_files_t files = { 0 };
    int baseline = ops->migrate_capture(driver, "src", rounds, 1, false, &files, &error);
    bool baseline_files = baseline == 0 && files.count == 2 && streq(files.items[0].path, "memory.1")
                       && files.items[0].size == 4096 && streq(files.items[1].path, "disk.1")
                       && files.items[1].size == strlen("disk of src, round 1\n");
    shoal_driver_files_clear(&files);
    //  The final round is taken paused; the fake refuses it otherwise.
    int early_final = ops->migrate_capture(driver, "src", rounds, 2, true, &files, &error);
    bool early_says = early_final == -1 && shoal_test_contains(error, "final capture of vm src, which is running");
    zstr_free(&error);
    int paused = ops->pause(driver, "src", &error);
    int final = ops->migrate_capture(driver, "src", rounds, 2, true, &files, &error);
    bool final_files = final == 0 && files.count == 2 && files.items[0].size == 2 * 4096;
    shoal_driver_files_clear(&files);
    int received = ops->migrate_receive(driver, "dst", rounds, &files, &error);
    bool received_all = received == 0 && files.count == 4 && streq(files.items[0].path, "disk.1")
                     && streq(files.items[3].path, "memory.2");
    shoal_driver_files_clear(&files);
    char *why = NULL;
    bool target_alive = ops->alive(driver, "dst", &why);
    bool target_paused = s_vm_state_is("dst", "paused");
    int aborted = ops->migrate_abort(driver, "src", &error);
    bool source_runs = s_vm_state_is("src", "running");

    //  Lists that must be refused, each with what was wrong.
    struct { const char *output, *expect; } bad[] = {
        { "captured!", "is not JSON" },
        { "{\"round\": 3}", "neither {\"files\": [...]} nor an array" },
        { "{\"files\": [{\"size\": 3}]}", "files[0] is neither a path nor an object" },
        { "{\"files\": [\"../../etc/passwd\"]}", "not a relative path inside" },
        { "{\"files\": [\"/etc/passwd\"]}", "not a relative path inside" },
        { "{\"files\": [\"memory.3\", \"./memory.3\"]}", "not a relative path inside" },
        { "{\"files\": [\"memory.3\", \"memory.3\"]}", "listed twice" },
        { "{\"files\": [\"missing.bin\"]}", "No such file" },
        { "{\"files\": [{\"path\": \"memory.3\", \"size\": 12}]}", "holds 12288 bytes, the list says 12" },
        { "{\"files\": [{\"path\": \"memory.3\", \"size\": -1}]}", "is not a count of bytes" },
    };
    size_t refused = 0;
    char *last_error = NULL;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s_steer("output-capture", bad[i].output);
        int rc = ops->migrate_capture(driver, "src", rounds, 3, false, &files, &error);
        if (rc == -1 && files.count == 0 && shoal_test_contains(error, bad[i].expect)
        &&  shoal_test_contains(error, "vm migrate capture src"))
            refused++;
        else
        if (!last_error)
            last_error = zsys_sprintf("case %zu (%s): rc %d, error '%s'", i, bad[i].output, rc,
                                      error ? error : "");
        zstr_free(&error);
        shoal_driver_files_clear(&files);
    }
    s_unsteer("output-capture");
    //  A capture that hangs is killed at the migrate limit.
    s_steer("hang-capture", "");
    int64_t before = shoal_test_now_ms();
    int hung = ops->migrate_capture(driver, "src", rounds, 4, false, &files, &error);
    int64_t took = shoal_test_now_ms() - before;
    bool says_timeout = shoal_test_contains(error, "did not end within 1000 ms");
    zstr_free(&error);
    s_unsteer("hang-capture");
    s_steer("fail-abort", "fake: the series of src is locked\n");
    int abort_failed = ops->migrate_abort(driver, "src", &error);
    bool abort_says = shoal_test_contains(error, "the series of src is locked");
    zstr_free(&error);
    int removed = ops->destroy(driver, "src", &error);
    int removed_again = ops->destroy(driver, "src", &error);
    shoal_driver_destroy(&driver);

    //  The proc driver has no manager to capture with.
    char *guests = zsys_sprintf("%s/guests", shoal_test_dir);
    int64_t stop_ms = 1000;
    shoal_driver_t *proc = shoal_driver_proc_new(guests, NULL, shoal_test_program("shoal-guest"), &stop_ms, &error);
    bool proc_has_none = proc && !proc->ops->migrate_capture && !proc->ops->migrate_receive
                      && !proc->ops->migrate_abort && proc->ops->image_dir;
    shoal_driver_destroy(&proc);
    free(guests);
    free(rounds);
    free(why);
    unsetenv("FAKE_VM_DIR");

    CHECK_INT(created, 0);
    CHECK_INT(started, 0);
    CHECK_INT(baseline, 0);
    CHECK(baseline_files);
    CHECK(early_says);
    CHECK_INT(paused, 0);
    CHECK_INT(final, 0);
    CHECK(final_files);
    CHECK_INT(received, 0);
    CHECK(received_all);
    CHECK(target_alive);
    CHECK(target_paused);
    CHECK_INT(aborted, 0);
    CHECK(source_runs);
    CHECK_MSG(refused == sizeof bad / sizeof bad[0], "%s", last_error ? last_error : "");
    CHECK_INT(hung, -1);
    //  Ended after the limit, by the limit (the hang itself never ends).
    CHECK_MSG(took >= S_MIGRATE_TIMEOUT_MS && took < S_CALL_TIMEOUT_MS, "took %" PRId64 " ms", took);
    CHECK(says_timeout);
    CHECK_INT(abort_failed, -1);
    CHECK(abort_says);
    CHECK_INT(removed, 0);
    CHECK_INT(removed_again, 0);
    CHECK(proc_has_none);
    free(last_error);
}

//  The list's two shapes, read without a directory to check against.
static void
test_exec_files_parse(void)
{
    shoal_driver_files_t files;
    char *error = NULL;
    int bare = shoal_driver_exec_files_parse("[\"a/b.bin\", {\"path\": \"c\", \"size\": 7}]", NULL, &files, &error);
    bool bare_read = bare == 0 && files.count == 2 && streq(files.items[0].path, "a/b.bin")
                  && files.items[0].size == 0 && files.items[1].size == 7;
    shoal_driver_files_clear(&files);
    int empty = shoal_driver_exec_files_parse("{\"files\": []}", NULL, &files, &error);
    size_t empty_count = files.count;
    shoal_driver_files_clear(&files);
    int duplicate_key = shoal_driver_exec_files_parse("{\"files\": [], \"files\": [\"x\"]}", NULL, &files, &error);
    bool duplicate_says = shoal_test_contains(error, "duplicate");
    zstr_free(&error);
    CHECK_INT(bare, 0);
    CHECK(bare_read);
    CHECK_INT(empty, 0);
    CHECK_INT(empty_count, 0);
    CHECK_INT(duplicate_key, -1);
    CHECK(duplicate_says);
}

//  A shell that waits (a bounded number of reads of its own /proc stat,
//  builtins only) until it runs at niceness %d (field 19), then runs THEN:
//  the niceness is set on the command's group just after it is started, so
//  a command that printed at once could be quicker than that on a busy
//  machine. One that never gets it ends its wait and prints its own.
#define S_NICE_SCRIPT(then) \
    "i=0; while [ $i -lt 100000 ]; do read -r s < /proc/$$/stat; set -- ${s##*) }; shift 16; " \
    "[ \"$1\" = %d ] && break; i=$((i + 1)); done; " then

//  A command runs NICE steps nicer than its caller, and so do the children it
//  starts; 0 keeps the caller's priority. /usr/bin/nice without arguments
//  prints the niceness it runs at.
static void
test_command_niceness(void)
{
    errno = 0;
    int own = getpriority(PRIO_PROCESS, 0);
    CHECK_INT(errno, 0);
    int lower = own + 7 < 19 ? own + 7 : 19;
    char *alone_script = zsys_sprintf(S_NICE_SCRIPT("/usr/bin/nice"), lower);
    char *child_script = zsys_sprintf(S_NICE_SCRIPT("/usr/bin/nice; /bin/sh -c /usr/bin/nice"), lower);
    char *capped_script = zsys_sprintf(S_NICE_SCRIPT("/usr/bin/nice"), 19);
    char *alone[] = { (char *) "/usr/bin/nice", NULL };
    char *waits[] = { (char *) "/bin/sh", (char *) "-c", alone_script, NULL };
    char *child[] = { (char *) "/bin/sh", (char *) "-c", child_script, NULL };
    char *capped_argv[] = { (char *) "/bin/sh", (char *) "-c", capped_script, NULL };
    shoal_command_result_t plain, lowered, children, capped;
    char *error = NULL;
    int plain_rc = shoal_command_run(alone, S_CALL_TIMEOUT_MS, (shoal_command_priority_t) { 0 }, &plain, &error);
    int lowered_rc = shoal_command_run(waits, S_CALL_TIMEOUT_MS, (shoal_command_priority_t) { .nice = 7 }, &lowered,
                                       &error);
    int children_rc = shoal_command_run(child, S_CALL_TIMEOUT_MS, (shoal_command_priority_t) { .nice = 7 },
                                        &children, &error);
    int capped_rc = shoal_command_run(capped_argv, S_CALL_TIMEOUT_MS, (shoal_command_priority_t) { .nice = 40 },
                                      &capped, &error);
    char *expect_plain = zsys_sprintf("%d\n", own);
    char *expect_lowered = zsys_sprintf("%d\n", lower);
    char *expect_children = zsys_sprintf("%s%s", expect_lowered, expect_lowered);
    CHECK_MSG(plain_rc == 0 && lowered_rc == 0 && children_rc == 0 && capped_rc == 0, "%s", error);
    CHECK_STR(plain.out, expect_plain);
    CHECK_STR(lowered.out, expect_lowered);
    CHECK_STR(children.out, expect_children);
    CHECK_STR(capped.out, "19\n");
    shoal_command_result_clear(&plain);
    shoal_command_result_clear(&lowered);
    shoal_command_result_clear(&children);
    shoal_command_result_clear(&capped);
    free(expect_plain);
    free(expect_lowered);
    free(expect_children);
    free(alone_script);
    free(child_script);
    free(capped_script);
    free(error);
}

//  A shell that waits (a bounded number of reads of its own /proc stat,
//  builtins only) until it runs under SCHED_IDLE, then prints the policy of
//  a child it starts (field 41 of the child's /proc/self/stat), or "never".
#define S_POLICY_SCRIPT \
    "i=0; while [ $i -lt 100000 ]; do read -r s < /proc/$$/stat; set -- ${s##*) }; shift 38; " \
    "[ \"$1\" = 5 ] && break; i=$((i + 1)); done; " \
    "[ \"$1\" = 5 ] || { echo never; exit 0; }; " \
    "set -- $(sed 's/^.*) //' /proc/self/stat); shift 38; echo $1"
//  SCHED_IDLE as /proc numbers it.
#define S_POLICY_IDLE "5"

//  An idle command comes to run under SCHED_IDLE, and the children it starts
//  then inherit it; without it, a command keeps its caller's policy.
static void
test_command_idle(void)
{
    char *idle_argv[] = { (char *) "/bin/sh", (char *) "-c", (char *) S_POLICY_SCRIPT, NULL };
    char *plain_argv[] = { (char *) "/bin/sh", (char *) "-c",
                           (char *) "set -- $(sed 's/^.*) //' /proc/self/stat); shift 38; echo $1", NULL };
    shoal_command_result_t plain, idle;
    char *error = NULL;
    int plain_rc = shoal_command_run(plain_argv, S_CALL_TIMEOUT_MS, (shoal_command_priority_t) { 0 }, &plain,
                                     &error);
    int idle_rc = shoal_command_run(idle_argv, S_IDLE_CALL_TIMEOUT_MS,
                                    (shoal_command_priority_t) { .nice = 3, .idle = true }, &idle, &error);
    CHECK_MSG(plain_rc == 0 && idle_rc == 0, "%s", error);
    char *own = zsys_sprintf("%d\n", sched_getscheduler(0));
    CHECK_STR(plain.out, own);
    CHECK_STR(idle.out, S_POLICY_IDLE "\n");
    free(own);
    shoal_command_result_clear(&plain);
    shoal_command_result_clear(&idle);
    free(error);
}

//  A tenant's claim id holds slashes (org/project/name): the manager names
//  its VM with them turned into '+', one word, and the claim lives its life.
static void
test_exec_tenant_claim(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, true));
    char *mine = shoal_node_fixture_tenant_key(&node, "web", S_TENANT);
    CHECK(mine);
    shoal_client_t *client = shoal_node_fixture_client(&node, mine, S_CALL_TIMEOUT_MS);
    free(mine);
    shoal_claim_info_t info;
    int created = s_create(client, "vm2", &info);
    bool scoped = created == 200 && streq(info.id, S_TENANT "/vm2");
    if (created == 200)
        shoal_claim_info_clear(&info);
    bool vm_runs = s_vm_state_is("acme+web+vm2", "running");
    int stopped = shoal_client_claim_stop(client, "vm2", NULL);
    bool vm_stopped = s_vm_state_is("acme+web+vm2", "stopped");
    int released = shoal_client_claim_release(client, "vm2", NULL);
    char *gone = s_vm_state("acme+web+vm2");
    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    CHECK_INT(created, 200);
    CHECK(scoped);
    CHECK(vm_runs);
    CHECK_INT(stopped, 200);
    CHECK(vm_stopped);
    CHECK_INT(released, 200);
    CHECK(gone == NULL);
    free(gone);
}

int
main(void)
{
    SHOAL_TEST(test_exec_claim_lifecycle);
    SHOAL_TEST(test_exec_tenant_claim);
    SHOAL_TEST(test_exec_manager_fails_and_hangs);
    SHOAL_TEST(test_exec_vm_gone_marked_error);
    SHOAL_TEST(test_exec_watch_survives_hung_inspect);
    SHOAL_TEST(test_exec_not_configured);
    SHOAL_TEST(test_exec_migrate_files);
    SHOAL_TEST(test_exec_files_parse);
    SHOAL_TEST(test_command_niceness);
    SHOAL_TEST(test_command_idle);
    return shoal_test_finish();
}
