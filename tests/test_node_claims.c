/*  test_node_claims: claims, admission and guests through a real shoald. */
#include "shoal_test.h"
#include "shoal_node_fixture.h"
#include "shoal_admission.h"
#include "shoal_claim_store.h"
#include "shoal_claims.h"
#include "shoal_config.h"

#include "shoal_image.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define S_MB (1024 * 1024)
#define S_TENANT "acme/web"
#define S_OTHER_TENANT "rival/app"
#define S_CALL_TIMEOUT_MS 10000

typedef shoal_node_fixture_t s_node_t;

static shoal_client_t *
s_client(s_node_t *node, const char *cert)
{
    return shoal_node_fixture_client(node, cert, S_CALL_TIMEOUT_MS);
}

//  Starts (or restarts, same port and directory) shoald for NODE, with the
//  config file NODE->config_path when it exists.
static bool
s_node_run(s_node_t *node)
{
    char *env[] = { "SHOAL_GUEST_STOP_TIMEOUT_MS=2000", NULL };
    return shoal_node_fixture_start(node, env);
}

//  Starts node n1 with CONFIG (ZPL text, or NULL for none) as its config file.
static bool
s_node_start(s_node_t *node, const char *config)
{
    shoal_node_fixture_init(node, "n1", 0);
    if (config) {
        FILE *file = fopen(node->config_path, "w");
        if (!file)
            return false;
        fputs(config, file);
        fclose(file);
    }
    return s_node_run(node);
}

//  True when PID has ended: gone, or a zombie its parent (not the node, for
//  an adopted guest) has not reaped yet.
static bool
s_process_gone(int pid)
{
    if (kill(pid, 0) != 0)
        return true;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    char *text = shoal_test_slurp(path);
    const char *close = text ? strrchr(text, ')') : NULL;
    bool zombie = !text || (close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X'));
    free(text);
    return zombie;
}

static int
s_create(shoal_client_t *client, const char *tenant, const char *id, uint64_t memory, shoal_claim_info_t *info)
{
    shoal_claim_spec_t spec = { .tenant = tenant, .memory_bytes = memory, .id = id };
    return shoal_client_claim_create(client, &spec, info);
}

//  The guest pid of claim ID, from its pid file (0: none).
static int
s_guest_pid(s_node_t *node, const char *id)
{
    char *path = zsys_sprintf("%s/guests/%s/pid", node->data_dir, id);
    char *text = shoal_test_slurp(path);
    int pid = text ? atoi(text) : 0;
    free(text);
    free(path);
    return pid;
}

//  How long a node has to restart a guest its start found ended: a bound
//  for a loaded machine (a sanitized node), not a figure.
#define S_RESTART_WAIT_MS 30000

//  Waits up to S_RESTART_WAIT_MS for a guest of claim ID to run that is
//  neither OLD nor OTHER: one that holds the pid file and lives. The node
//  restarts an ended guest from its reconcile, which runs after it serves,
//  so the file names the ended guest's pid (or is held by none) until then.
//  Returns that guest's pid, or 0 with *SEEN_P the pid the file last named
//  (0: the file was missing or empty) and *HELD_P whether a guest held it.
static int
s_guest_restarted(s_node_t *node, const char *id, int old, int other, int *seen_p, bool *held_p)
{
    char *dir = zsys_sprintf("%s/guests/%s", node->data_dir, id);
    int pid = 0;
    int64_t deadline = shoal_test_now_ms() + S_RESTART_WAIT_MS;
    while (true) {
        int held = shoal_image_running(dir);
        *held_p = held > 0;
        *seen_p = held > 0 ? held : s_guest_pid(node, id);
        if (held > 0 && held != old && held != other && !s_process_gone(held)) {
            pid = held;
            break;
        }
        if (shoal_test_now_ms() >= deadline)
            break;
        zclock_sleep(10);
    }
    free(dir);
    return pid;
}

static void
test_lifecycle_and_transitions(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, NULL));
    shoal_client_t *client = s_client(&node, node.admin_cert);
    shoal_claim_info_t info;
    int created = s_create(client, S_TENANT, "c1", S_MB, &info);
    bool running = created == 200 && streq(info.state, "running") && info.epoch == 1 && streq(info.owner, "n1");
    shoal_claim_info_clear(&info);
    int generated = s_create(client, S_TENANT, NULL, S_MB, &info);
    bool has_id = generated == 200 && strlen(info.id) > 2;
    char generated_id[128] = "";
    snprintf(generated_id, sizeof generated_id, "%s", info.id ? info.id : "");
    shoal_claim_info_clear(&info);
    int put = shoal_client_claim_put(client, "c1", "color", "blue", 4);
    uint8_t *value = NULL;
    size_t size = 0;
    int get = shoal_client_claim_get(client, "c1", "color", &value, &size);
    bool read_back = get == 200 && size == 4 && memcmp(value, "blue", 4) == 0;
    free(value);
    //  Illegal moves answer 409 and name the state.
    int start_running = shoal_client_claim_start(client, "c1", NULL);
    bool names_state = shoal_test_contains(shoal_client_error(client), "is running");
    int resume_running = shoal_client_claim_resume(client, "c1", NULL);
    //  A paused guest answers calls with 503 and a retry time.
    int paused = shoal_client_claim_pause(client, "c1", NULL);
    int call_paused = shoal_client_claim_get(client, "c1", "color", NULL, NULL);
    uint32_t retry_after = shoal_client_retry_after_ms(client);
    int resumed = shoal_client_claim_resume(client, "c1", NULL);
    int stopped = shoal_client_claim_stop(client, "c1", NULL);
    int call_stopped = shoal_client_claim_get(client, "c1", "color", NULL, NULL);
    int pause_stopped = shoal_client_claim_pause(client, "c1", NULL);
    int started = shoal_client_claim_start(client, "c1", NULL);
    uint8_t *kept = NULL;
    int get_again = shoal_client_claim_get(client, "c1", "color", &kept, &size);
    bool state_kept = get_again == 200 && size == 4 && memcmp(kept, "blue", 4) == 0;
    free(kept);
    shoal_lookup_t owner;
    int lookup_held = shoal_client_lookup(client, "c1", &owner);
    if (lookup_held == 200)
        shoal_lookup_clear(&owner);
    int released = shoal_client_claim_release(client, "c1", NULL);
    //  A released claim has no owner: the registry says so.
    int lookup_released = shoal_client_lookup(client, "c1", &owner);
    bool says_released = shoal_test_contains(shoal_client_error(client), "was released");
    if (lookup_released == 200)
        shoal_lookup_clear(&owner);
    int release_again = shoal_client_claim_release(client, "c1", NULL);
    int reuse = s_create(client, S_TENANT, "c1", S_MB, NULL);
    shoal_claim_list_t list;
    int listed = shoal_client_claim_list(client, &list);
    size_t count = list.count;
    shoal_claim_list_clear(&list);
    char *guest_dir = zsys_sprintf("%s/guests/c1", node.data_dir);
    bool files_gone = access(guest_dir, F_OK) != 0;
    free(guest_dir);
    int missing = shoal_client_claim_show(client, "nope", NULL);
    shoal_client_destroy(&client);
    int exit_code = shoal_test_stop(node.pid, SIGTERM);
    shoal_node_fixture_guests_kill(&node);
    CHECK_INT(created, 200);
    CHECK(running);
    CHECK_INT(generated, 200);
    CHECK(has_id);
    CHECK_INT(put, 200);
    CHECK(read_back);
    CHECK_INT(start_running, 409);
    CHECK(names_state);
    CHECK_INT(resume_running, 409);
    CHECK_INT(paused, 200);
    CHECK_INT(call_paused, 503);
    CHECK(retry_after > 0);
    CHECK_INT(resumed, 200);
    CHECK_INT(stopped, 200);
    CHECK_INT(call_stopped, 409);
    CHECK_INT(pause_stopped, 409);
    CHECK_INT(started, 200);
    CHECK(state_kept);
    CHECK_INT(lookup_held, 200);
    CHECK_INT(released, 200);
    CHECK_INT(lookup_released, 404);
    CHECK(says_released);
    CHECK_INT(release_again, 409);
    CHECK_INT(reuse, 409);
    CHECK_INT(listed, 200);
    CHECK_INT(count, 1);
    CHECK(files_gone);
    CHECK_INT(missing, 404);
    CHECK_INT(exit_code, 0);
}

static void
test_admission_limits_and_reload(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, "limits\n    max_claims = 3\n    tenant_max_claims = 2\n"
                              "    max_running = 2\n    memory_mb = 4\n"));
    shoal_client_t *client = s_client(&node, node.admin_cert);
    int a = s_create(client, S_TENANT, "a", S_MB, NULL);
    int b = s_create(client, S_TENANT, "b", S_MB, NULL);
    //  The tenant holds two of two.
    int tenant_full = s_create(client, S_TENANT, "c", S_MB, NULL);
    bool names_tenant = shoal_test_contains(shoal_client_error(client), "limits/tenant_max_claims");
    //  Two of two run.
    int running_full = s_create(client, S_OTHER_TENANT, "d", S_MB, NULL);
    bool names_running = shoal_test_contains(shoal_client_error(client), "limits/max_running");
    int stop_b = shoal_client_claim_stop(client, "b", NULL);
    //  3 MB more would pass 4 MB with 1 MB in use.
    int memory_full = s_create(client, S_OTHER_TENANT, "d", 4 * S_MB, NULL);
    bool names_memory = shoal_test_contains(shoal_client_error(client), "limits/memory_mb");
    int d = s_create(client, S_OTHER_TENANT, "d", S_MB, NULL);
    //  Three of three on the node.
    int node_full = s_create(client, S_OTHER_TENANT, "e", S_MB, NULL);
    bool names_node = shoal_test_contains(shoal_client_error(client), "limits/max_claims");

    //  Lowering a limit refuses new claims and stops none.
    FILE *file = fopen(node.config_path, "w");
    fputs("limits\n    max_claims = 1\n    tenant_max_claims = 2\n    max_running = 1\n    memory_mb = 4\n", file);
    fclose(file);
    kill(node.pid, SIGHUP);
    usleep(500000);
    int start_b = shoal_client_claim_start(client, "b", NULL);
    shoal_claim_info_t info;
    int show_a = shoal_client_claim_show(client, "a", &info);
    bool a_runs = show_a == 200 && streq(info.state, "running");
    shoal_claim_info_clear(&info);
    shoal_client_destroy(&client);
    int exit_code = shoal_test_stop(node.pid, SIGTERM);
    shoal_node_fixture_guests_kill(&node);
    CHECK_INT(a, 200);
    CHECK_INT(b, 200);
    CHECK_INT(tenant_full, 429);
    CHECK(names_tenant);
    CHECK_INT(running_full, 429);
    CHECK(names_running);
    CHECK_INT(stop_b, 200);
    CHECK_INT(memory_full, 507);
    CHECK(names_memory);
    CHECK_INT(d, 200);
    CHECK_INT(node_full, 429);
    CHECK(names_node);
    CHECK_INT(start_b, 429);
    CHECK(a_runs);
    CHECK_INT(exit_code, 0);
}

//  Reservations count in every limit and never show as claims.
static void
test_reservation_counted(void)
{
    char *db = zsys_sprintf("%s/db", shoal_test_dir);
    shoal_store_options_t options;
    shoal_store_options_default(&options);
    shoal_store_t *store = shoal_store_new(db, &options, NULL);
    free(db);
    CHECK(store);
    shoal_claim_store_t *claims = shoal_claim_store_new(store, false);
    shoal_settings_t settings = { 0 };
    settings.max_claims = 2;
    settings.tenant_max_claims = 2;
    settings.max_running = 2;
    settings.memory_mb = 2;
    shoal_admission_t *admission = shoal_admission_new(&settings, claims);
    char message[256];
    shoal_claim_record_t record = { .id = (char *) "r1", .tenant = (char *) S_TENANT,
                                    .state = SHOAL_CLAIM_RUNNING, .memory_bytes = S_MB,
                                    .driver = (char *) "proc", .epoch = 1 };
    int put = shoal_claim_store_put(claims, NULL, &record);
    uint32_t held = shoal_admission_reserve(admission, S_TENANT, S_MB, message, sizeof message);
    uint32_t full = shoal_admission_check(admission, S_OTHER_TENANT, 1, true, message, sizeof message);
    bool names_node = shoal_test_contains(message, "limits/max_claims");
    shoal_claim_records_t list = { 0 };
    shoal_claim_store_list(claims, &list);
    size_t listed = list.count;
    shoal_claim_records_clear(&list);
    shoal_admission_unreserve(admission, S_TENANT, S_MB);
    uint32_t after = shoal_admission_check(admission, S_OTHER_TENANT, S_MB, true, message, sizeof message);
    settings.max_claims = 3;
    uint32_t memory = shoal_admission_reserve(admission, S_TENANT, S_MB + 1, message, sizeof message);
    shoal_admission_destroy(&admission);
    shoal_claim_store_destroy(&claims);
    shoal_store_destroy(&store);
    CHECK_INT(put, 0);
    CHECK_INT(held, 200);
    CHECK_INT(full, 429);
    CHECK(names_node);
    CHECK_INT(listed, 1);
    CHECK_INT(after, 200);
    CHECK_INT(memory, 507);
}

static void
test_tenant_isolation(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, NULL));
    char *mine = shoal_node_fixture_tenant_key(&node, "web", S_TENANT);
    CHECK(mine);
    shoal_client_t *admin = s_client(&node, node.admin_cert);
    shoal_client_t *tenant = s_client(&node, mine);
    int theirs = s_create(admin, S_OTHER_TENANT, "theirs", S_MB, NULL);
    int own = s_create(tenant, S_TENANT, "own", S_MB, NULL);
    int for_other = s_create(tenant, S_OTHER_TENANT, "sneaky", S_MB, NULL);
    int show_theirs = shoal_client_claim_show(tenant, "theirs", NULL);
    int call_theirs = shoal_client_claim_get(tenant, "theirs", "k", NULL, NULL);
    int stop_theirs = shoal_client_claim_stop(tenant, "theirs", NULL);
    shoal_lookup_t lookup;
    int lookup_theirs = shoal_client_lookup(tenant, "theirs", &lookup);
    shoal_claim_list_t list;
    int listed = shoal_client_claim_list(tenant, &list);
    //  A tenant's claim ids are scoped to it.
    bool only_own = listed == 200 && list.count == 1 && streq(list.claims[0].id, S_TENANT "/own");
    shoal_claim_list_clear(&list);
    int admin_listed = shoal_client_claim_list(admin, &list);
    size_t admin_count = list.count;
    shoal_claim_list_clear(&list);
    shoal_client_destroy(&tenant);
    shoal_client_destroy(&admin);
    free(mine);
    int exit_code = shoal_test_stop(node.pid, SIGTERM);
    shoal_node_fixture_guests_kill(&node);
    CHECK_INT(theirs, 200);
    CHECK_INT(own, 200);
    CHECK_INT(for_other, 403);
    CHECK_INT(show_theirs, 404);
    CHECK_INT(call_theirs, 404);
    CHECK_INT(stop_theirs, 404);
    CHECK_INT(lookup_theirs, 404);
    CHECK(only_own);
    CHECK_INT(admin_listed, 200);
    CHECK_INT(admin_count, 2);
    CHECK_INT(exit_code, 0);
}

//  A guest outlives its node and is adopted again; one killed while the
//  node was down is marked error with the reason.
static void
test_restart_adopts_and_marks_dead(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, NULL));
    shoal_client_t *client = s_client(&node, node.admin_cert);
    int survivor = s_create(client, S_TENANT, "survivor", S_MB, NULL);
    int victim = s_create(client, S_TENANT, "victim", S_MB, NULL);
    shoal_client_claim_put(client, "survivor", "k", "v", 1);
    shoal_client_destroy(&client);
    int survivor_pid = s_guest_pid(&node, "survivor");
    int victim_pid = s_guest_pid(&node, "victim");
    int killed = shoal_test_stop(node.pid, SIGKILL);
    bool survived = survivor_pid > 0 && kill(survivor_pid, 0) == 0;
    if (victim_pid > 0)
        kill(victim_pid, SIGKILL);
    usleep(200000);
    bool restarted = s_node_run(&node);
    client = s_client(&node, node.admin_cert);
    shoal_claim_info_t info;
    int show_survivor = shoal_client_claim_show(client, "survivor", &info);
    bool adopted = show_survivor == 200 && streq(info.state, "running");
    shoal_claim_info_clear(&info);
    uint8_t *value = NULL;
    int call = shoal_client_claim_get(client, "survivor", "k", &value, NULL);
    free(value);
    int show_victim = shoal_client_claim_show(client, "victim", &info);
    bool marked = show_victim == 200 && streq(info.state, "error") && shoal_test_contains(info.error, "not running");
    shoal_claim_info_clear(&info);
    //  Stop reaches the adopted guest, which is not the node's child.
    int stop = shoal_client_claim_stop(client, "survivor", NULL);
    bool gone = s_process_gone(survivor_pid);
    shoal_client_destroy(&client);
    int exit_code = shoal_test_stop(node.pid, SIGTERM);
    shoal_node_fixture_guests_kill(&node);
    CHECK_INT(survivor, 200);
    CHECK_INT(victim, 200);
    CHECK_INT(killed, 128 + SIGKILL);
    CHECK(survived);
    CHECK(restarted);
    CHECK(adopted);
    CHECK_INT(call, 200);
    CHECK(marked);
    CHECK_INT(stop, 200);
    CHECK(gone);
    CHECK_INT(exit_code, 0);
}

//  With guest/restart_at_start, a node that starts and finds a claim's
//  guest gone (a container restart ends both) starts it again from its
//  image, with what its memory held. The pid file left behind names a pid
//  that another process has now (pids restart with a container): that
//  process is not taken for the guest, and is left alone.
static void
test_restart_at_start_restarts_guests(void)
{
    s_node_t node;
    shoal_node_fixture_init(&node, "n1", 0);
    char *env[] = { "SHOAL_GUEST_STOP_TIMEOUT_MS=2000", "SHOAL_GUEST_RESTART_AT_START=1", NULL };
    CHECK(shoal_node_fixture_start(&node, env));
    shoal_client_t *client = s_client(&node, node.admin_cert);
    int created = s_create(client, S_TENANT, "phoenix", S_MB, NULL);
    int paused_created = s_create(client, S_TENANT, "sleeper", S_MB, NULL);
    int put = shoal_client_claim_put(client, "phoenix", "k", "v", 1);
    int paused = shoal_client_claim_pause(client, "sleeper", NULL);
    shoal_client_destroy(&client);
    int old_pid = s_guest_pid(&node, "phoenix");
    int sleeper_pid = s_guest_pid(&node, "sleeper");
    shoal_test_stop(node.pid, SIGKILL);
    if (old_pid > 0) {
        kill(old_pid, SIGKILL);
        waitpid(old_pid, NULL, 0);
    }
    if (sleeper_pid > 0) {
        kill(sleeper_pid, SIGKILL);
        waitpid(sleeper_pid, NULL, 0);
    }
    //  An unrelated live process now has the pid the file names.
    pid_t other = fork();
    if (other == 0) {
        pause();
        _exit(0);
    }
    char *pid_path = zsys_sprintf("%s/guests/phoenix/pid", node.data_dir);
    FILE *file = fopen(pid_path, "w");
    if (file) {
        fprintf(file, "%d\n", (int) other);
        fclose(file);
    }
    free(pid_path);
    bool restarted = shoal_node_fixture_start(&node, env);
    client = s_client(&node, node.admin_cert);
    shoal_claim_info_t info;
    int show = shoal_client_claim_show(client, "phoenix", &info);
    bool running = show == 200 && streq(info.state, "running");
    shoal_claim_info_clear(&info);
    int show_paused = shoal_client_claim_show(client, "sleeper", &info);
    bool still_paused = show_paused == 200 && streq(info.state, "paused");
    shoal_claim_info_clear(&info);
    int seen_pid = 0;
    bool seen_held = false;
    int new_pid = s_guest_restarted(&node, "phoenix", old_pid, (int) other, &seen_pid, &seen_held);
    uint8_t *value = NULL;
    size_t size = 0;
    int get = shoal_client_claim_get(client, "phoenix", "k", &value, &size);
    bool kept = get == 200 && size == 1 && value && value[0] == 'v';
    free(value);
    bool other_alive = waitpid(other, NULL, WNOHANG) == 0 && kill(other, 0) == 0;
    kill(other, SIGKILL);
    waitpid(other, NULL, 0);
    shoal_client_destroy(&client);
    int exit_code = shoal_test_stop(node.pid, SIGTERM);
    shoal_node_fixture_guests_kill(&node);
    CHECK_INT(created, 200);
    CHECK_INT(paused_created, 200);
    CHECK_INT(put, 200);
    CHECK_INT(paused, 200);
    CHECK(restarted);
    CHECK(running);
    CHECK(still_paused);
    CHECK_MSG(new_pid > 0, "no new guest held the pid file within %d ms: it last named pid %d, %s (the ended "
              "guest was %d, the unrelated process %d)", S_RESTART_WAIT_MS, seen_pid,
              seen_held ? "held by it" : "held by no guest", old_pid, (int) other);
    CHECK(kept);
    CHECK(other_alive);
    CHECK_INT(exit_code, 0);
}

//  A guest has started once it holds its pid file, not once the file names
//  its pid: after a container restart, the file a guest left may name the
//  very pid its successor gets. The program here writes its own pid into
//  the file, unlocked, a while before it becomes the guest.
static void
test_start_waits_for_the_guest_lock(void)
{
    char *wrapper_dir = zsys_sprintf("%s/wrapper", shoal_test_dir);
    zsys_dir_create(wrapper_dir);
    char *wrapper = zsys_sprintf("%s/shoal-guest", wrapper_dir);
    FILE *file = fopen(wrapper, "w");
    if (file) {
        fprintf(file, "#!/bin/sh\necho $$ > \"$2/pid\"\nsleep 1\nexec %s \"$@\"\n",
                shoal_test_program("shoal-guest"));
        fclose(file);
    }
    chmod(wrapper, 0755);
    char *program = zsys_sprintf("SHOAL_GUEST_PROGRAM=%s", wrapper);
    s_node_t node;
    shoal_node_fixture_init(&node, "n1", 0);
    char *env[] = { "SHOAL_GUEST_STOP_TIMEOUT_MS=2000", program, NULL };
    CHECK(shoal_node_fixture_start(&node, env));
    shoal_client_t *client = s_client(&node, node.admin_cert);
    int created = s_create(client, S_TENANT, "late", S_MB, NULL);
    int paused = shoal_client_claim_pause(client, "late", NULL);
    shoal_claim_info_t info;
    int show = shoal_client_claim_show(client, "late", &info);
    bool is_paused = show == 200 && streq(info.state, "paused");
    shoal_claim_info_clear(&info);
    shoal_client_destroy(&client);
    int exit_code = shoal_test_stop(node.pid, SIGTERM);
    shoal_node_fixture_guests_kill(&node);
    free(program);
    free(wrapper);
    free(wrapper_dir);
    CHECK_INT(created, 200);
    CHECK_INT(paused, 200);
    CHECK(is_paused);
    CHECK_INT(exit_code, 0);
}

//  kill -9 in the middle of a stream of creates: after a restart the
//  counters equal a recount of the claims.
#define S_KILL_AFTER_CREATES 20
#define S_KILL_WAIT_MS 60000

//  Creates claims k0, k1, ... one after another until told to stop, counting
//  those that succeeded. It runs as a thread of the test, with a client of
//  its own: a forked writer would inherit a ZeroMQ context whose threads
//  stayed in the parent.
typedef struct {
    s_node_t *node;
    atomic_int created;
    atomic_bool stop;
} s_writer_t;

static void *
s_writer_run(void *arg)
{
    s_writer_t *self = arg;
    shoal_client_t *client = s_client(self->node, self->node->admin_cert);
    for (int i = 0; i < 1000 && !atomic_load(&self->stop); i++) {
        char id[32];
        snprintf(id, sizeof id, "k%d", i);
        if (s_create(client, i % 2 ? S_TENANT : S_OTHER_TENANT, id, S_MB / 4, NULL) == 200)
            atomic_fetch_add(&self->created, 1);
    }
    shoal_client_destroy(&client);
    return NULL;
}

static void
test_counters_survive_kill(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, NULL));
    //  The kill comes in the middle of the stream of creates, however slow
    //  the machine: after the writer saw S_KILL_AFTER_CREATES of them succeed.
    s_writer_t writer = { .node = &node };
    atomic_init(&writer.created, 0);
    atomic_init(&writer.stop, false);
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, s_writer_run, &writer) == 0);
    int64_t deadline = shoal_test_now_ms() + S_KILL_WAIT_MS;
    while (atomic_load(&writer.created) < S_KILL_AFTER_CREATES && shoal_test_now_ms() < deadline)
        zclock_sleep(5);
    int killed = shoal_test_stop(node.pid, SIGKILL);
    //  The writer's call in flight times out (S_CALL_TIMEOUT_MS) and it stops.
    atomic_store(&writer.stop, true);
    pthread_join(thread, NULL);
    bool restarted = s_node_run(&node);
    int exit_code = shoal_test_stop(node.pid, SIGTERM);
    shoal_node_fixture_guests_kill(&node);
    //  The start's recount found nothing to repair: each claim and its
    //  counters were written together.
    char *log = shoal_test_slurp(node.log_path);
    bool repaired = shoal_test_contains(log, "repaired");
    free(log);
    //  The node is down: the store is ours to read.
    char *db = zsys_sprintf("%s/db", node.data_dir);
    shoal_store_options_t options;
    shoal_store_options_default(&options);
    shoal_store_t *store = shoal_store_new(db, &options, NULL);
    free(db);
    CHECK(store);
    shoal_claim_store_t *claims = shoal_claim_store_new(store, false);
    bool equal = true;
    const char *scopes[] = { NULL, S_TENANT, S_OTHER_TENANT };
    uint64_t total = 0;
    for (size_t i = 0; i < 3; i++) {
        shoal_counter_record_t stored, counted;
        shoal_claim_store_counters(claims, scopes[i], &stored);
        shoal_claim_store_recount(claims, scopes[i], &counted);
        equal = equal && memcmp(&stored, &counted, sizeof stored) == 0;
        if (!scopes[i])
            total = counted.claims;
    }
    shoal_claim_store_destroy(&claims);
    shoal_store_destroy(&store);
    CHECK_INT(killed, 128 + SIGKILL);
    CHECK(restarted);
    CHECK_INT(exit_code, 0);
    CHECK_MSG(total > 0, "no claim was created before the kill");
    CHECK(equal);
    CHECK(!repaired);
}

//  Opens a fresh store under the test directory (NULL on failure).
static shoal_store_t *
s_store_open(void)
{
    char *db = zsys_sprintf("%s/db", shoal_test_dir);
    shoal_store_options_t options;
    shoal_store_options_default(&options);
    options.sync = false;
    shoal_store_t *store = shoal_store_new(db, &options, NULL);
    free(db);
    return store;
}

//  Writes a claim ID of S_TENANT in STATE, driver proc, with no guest.
static int
s_record_put(shoal_claim_store_t *claims, const char *id, shoal_claim_state_t state)
{
    shoal_claim_record_t record = { .id = (char *) id, .tenant = (char *) S_TENANT, .state = state,
                                    .memory_bytes = S_MB, .driver = (char *) "proc", .epoch = 1 };
    return shoal_claim_store_put(claims, NULL, &record);
}

//  A walk over the claims a page at a time sees each once, in id order.
static void
test_claim_pages(void)
{
    shoal_store_t *store = s_store_open();
    CHECK(store);
    shoal_claim_store_t *claims = shoal_claim_store_new(store, false);
    const char *ids[] = { "d", "b-1", "a", "c", "b" };
    int put = 0;
    for (size_t i = 0; i < 5; i++)
        put |= s_record_put(claims, ids[i], SHOAL_CLAIM_RUNNING);
    char walked[64] = "";
    char after[32] = "";
    int pages = 0, rc = 0;
    shoal_claim_records_t page = { 0 };
    while ((rc = shoal_claim_store_list_after(claims, after, 2, &page)) == 0 && page.count) {
        pages++;
        for (size_t i = 0; i < page.count; i++) {
            strcat(walked, page.items[i].id);
            strcat(walked, " ");
        }
        snprintf(after, sizeof after, "%s", page.items[page.count - 1].id);
        shoal_claim_records_clear(&page);
    }
    //  An id that is no claim's starts after where it would be.
    int between = shoal_claim_store_list_after(claims, "bb", 10, &page);
    bool from_c = page.count == 2 && streq(page.items[0].id, "c") && streq(page.items[1].id, "d");
    shoal_claim_records_clear(&page);
    shoal_claim_store_destroy(&claims);
    shoal_store_destroy(&store);
    CHECK_INT(put, 0);
    CHECK_INT(rc, 0);
    CHECK_STR(walked, "a b b-1 c d ");
    CHECK_INT(pages, 3);
    CHECK_INT(between, 0);
    CHECK(from_c);
}

//  What a node's claims module runs on, for tests that drive it in-process.
typedef struct {
    shoal_store_t *store;
    shoal_oplog_t *oplog;
    shoal_settings_t settings;
    shoal_guests_t *guests;     //  the guest actor the claims reach guests through
    zloop_t *loop;              //  reads its answers while s_claims_run runs
} s_claims_in_process_t;

static int
s_loop_end(zloop_t *loop, int timer_id, void *arg)
{
    return -1;
}

//  Lets NODE's reactor read the guest actor's answers for MS milliseconds.
static void
s_claims_run(s_claims_in_process_t *node, int ms)
{
    zloop_timer(node->loop, (size_t) ms, 1, s_loop_end, NULL);
    zloop_start(node->loop);
}

//  Claims of node n1 over a fresh store, with a death watch that rests a
//  minute between walks; NULL on failure (reported).
static shoal_claims_t *
s_claims_open(s_claims_in_process_t *node)
{
    memset(node, 0, sizeof *node);
    node->store = s_store_open();
    shoal_oplog_options_t oplog_options;
    shoal_oplog_options_default(&oplog_options);
    oplog_options.node = "n1";
    oplog_options.sync = false;
    node->oplog = node->store ? shoal_oplog_new(node->store, &oplog_options) : NULL;
    char message[512] = "";
    setenv("SHOAL_NODE_DATA_DIR", shoal_test_dir, 1);
    setenv("SHOAL_STORE_SYNC", "0", 1);
    setenv("SHOAL_GUEST_WATCH_INTERVAL_MS", "60000", 1);
    int loaded = shoal_config_load(NULL, &node->settings, message, sizeof message);
    unsetenv("SHOAL_NODE_DATA_DIR");
    unsetenv("SHOAL_STORE_SYNC");
    unsetenv("SHOAL_GUEST_WATCH_INTERVAL_MS");
    char *error = NULL;
    if (loaded == 0) {
        node->guests = shoal_guests_new(&node->settings);
        node->loop = zloop_new();
        shoal_guests_start(node->guests, node->loop);
    }
    shoal_claims_t *claims = node->oplog && loaded == 0
                           ? shoal_claims_new(&node->settings, "tcp://127.0.0.1:1", node->store, node->oplog,
                                              node->guests, NULL, NULL, &error)
                           : NULL;
    if (!claims)
        fprintf(stderr, "cannot open claims in-process: %s%s\n", message, error ? error : "");
    free(error);
    return claims;
}

static void
s_claims_close(s_claims_in_process_t *node)
{
    shoal_guests_destroy(&node->guests);
    zloop_destroy(&node->loop);
    shoal_settings_clear(&node->settings);
    shoal_oplog_destroy(&node->oplog);
    shoal_store_destroy(&node->store);
}

//  The death watch in-process: running claims whose guest is gone turn
//  error a page at a time, counters with them; moving claims stay as they are.
static void
test_death_watch_pages_and_skips_moving(void)
{
    s_claims_in_process_t node;
    shoal_claims_t *claims = s_claims_open(&node);
    CHECK(claims);
    //  Written after the start's reconcile: the watch is the one to find them.
    shoal_claim_store_t *records = shoal_claims_store(claims);
    int put = 0;
    size_t dead = 40;
    for (size_t i = 0; i < dead; i++) {
        char id[16];
        snprintf(id, sizeof id, "r%02zu", i);
        put |= s_record_put(records, id, i % 2 ? SHOAL_CLAIM_RUNNING : SHOAL_CLAIM_PAUSED);
    }
    put |= s_record_put(records, "mover", SHOAL_CLAIM_MOVING);
    put |= s_record_put(records, "halted", SHOAL_CLAIM_STOPPED);
    shoal_claims_tick(claims);
    shoal_counter_record_t after_one;
    shoal_claim_store_counters(records, NULL, &after_one);
    //  One tick looks at one guest at most; the walk goes on tick by tick,
    //  each look answered by the guest actor.
    bool bounded = after_one.running > 1;
    int64_t deadline = zclock_mono() + 60000;
    shoal_counter_record_t now = after_one;
    while (now.running > 1 && zclock_mono() < deadline) {
        shoal_claims_tick(claims);
        s_claims_run(&node, 5);
        shoal_claim_store_counters(records, NULL, &now);
    }
    shoal_claim_records_t list = { 0 };
    shoal_claim_store_list(records, &list);
    size_t errors = 0;
    bool reasons = true, mover_moving = false, halted_stopped = false;
    for (size_t i = 0; i < list.count; i++) {
        shoal_claim_record_t *record = &list.items[i];
        if (record->state == SHOAL_CLAIM_ERROR) {
            errors++;
            reasons = reasons && shoal_test_contains(record->error, "the guest died while the node ran");
        }
        if (streq(record->id, "mover"))
            mover_moving = record->state == SHOAL_CLAIM_MOVING;
        if (streq(record->id, "halted"))
            halted_stopped = record->state == SHOAL_CLAIM_STOPPED;
    }
    shoal_claim_records_clear(&list);
    shoal_counter_record_t stored, counted;
    shoal_claim_store_counters(records, NULL, &stored);
    shoal_claim_store_recount(records, NULL, &counted);
    //  The guest actor goes first: its answers go to the claims.
    shoal_guests_destroy(&node.guests);
    shoal_claims_destroy(&claims);
    s_claims_close(&node);
    CHECK_INT(put, 0);
    CHECK_MSG(bounded, "one tick looked at every claim");
    CHECK_INT(errors, dead);
    CHECK(reasons);
    CHECK(mover_moving);
    CHECK(halted_stopped);
    CHECK(memcmp(&stored, &counted, sizeof stored) == 0);
    //  Only the moving claim still holds a guest.
    CHECK_INT(stored.running, 1);
    CHECK_INT(stored.claims, dead + 2);
}

//  kill -9 of a running claim's guest while the node runs: the claim turns
//  error with the reason within a few seconds, and its counters follow.
static void
test_dead_guest_marked_error(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, NULL));
    shoal_client_t *client = s_client(&node, node.admin_cert);
    int steady = s_create(client, S_TENANT, "steady", S_MB, NULL);
    int victim = s_create(client, S_TENANT, "victim", S_MB, NULL);
    int frozen = s_create(client, S_OTHER_TENANT, "frozen", S_MB, NULL);
    int paused = shoal_client_claim_pause(client, "frozen", NULL);
    int victim_pid = s_guest_pid(&node, "victim");
    int frozen_pid = s_guest_pid(&node, "frozen");
    bool killed = victim_pid > 0 && frozen_pid > 0 && kill(victim_pid, SIGKILL) == 0 && kill(frozen_pid, SIGKILL) == 0;
    int64_t killed_at = shoal_test_now_ms();
    bool victim_marked = false, frozen_marked = false;
    shoal_claim_info_t info;
    while (!(victim_marked && frozen_marked) && shoal_test_now_ms() - killed_at < 10000) {
        usleep(100000);
        if (shoal_client_claim_show(client, "victim", &info) == 200) {
            victim_marked = streq(info.state, "error") && shoal_test_contains(info.error, "died while the node ran");
            shoal_claim_info_clear(&info);
        }
        if (shoal_client_claim_show(client, "frozen", &info) == 200) {
            frozen_marked = streq(info.state, "error") && shoal_test_contains(info.error, "died while the node ran");
            shoal_claim_info_clear(&info);
        }
    }
    int64_t noticed_ms = shoal_test_now_ms() - killed_at;
    //  Over the protocol too, the dead guests no longer count as running.
    shoal_counters_t counters;
    int read = shoal_client_counters(client, NULL, &counters);
    bool counted_live = read == 200 && counters.count == 3 && counters.scopes[0].claims == 3
                && counters.scopes[0].running == 1 && counters.scopes[0].memory_bytes == S_MB;
    shoal_counters_clear(&counters);
    int show_steady = shoal_client_claim_show(client, "steady", &info);
    bool steady_runs = show_steady == 200 && streq(info.state, "running");
    if (show_steady == 200)
        shoal_claim_info_clear(&info);
    //  A claim in error starts again.
    int restarted = shoal_client_claim_start(client, "victim", NULL);
    shoal_client_destroy(&client);
    int exit_code = shoal_test_stop(node.pid, SIGTERM);
    shoal_node_fixture_guests_kill(&node);
    //  The node is down: the store is ours to read.
    char *db = zsys_sprintf("%s/db", node.data_dir);
    shoal_store_options_t options;
    shoal_store_options_default(&options);
    shoal_store_t *store = shoal_store_new(db, &options, NULL);
    free(db);
    CHECK(store);
    shoal_claim_store_t *claims = shoal_claim_store_new(store, false);
    bool equal = true;
    const char *scopes[] = { NULL, S_TENANT, S_OTHER_TENANT };
    shoal_counter_record_t node_counted = { 0 };
    for (size_t i = 0; i < 3; i++) {
        shoal_counter_record_t stored, counted;
        shoal_claim_store_counters(claims, scopes[i], &stored);
        shoal_claim_store_recount(claims, scopes[i], &counted);
        equal = equal && memcmp(&stored, &counted, sizeof stored) == 0;
        if (!scopes[i])
            node_counted = counted;
    }
    shoal_claim_store_destroy(&claims);
    shoal_store_destroy(&store);
    CHECK_INT(steady, 200);
    CHECK_INT(victim, 200);
    CHECK_INT(frozen, 200);
    CHECK_INT(paused, 200);
    CHECK(killed);
    CHECK_MSG(victim_marked && frozen_marked, "not marked within %" PRId64 " ms", noticed_ms);
    CHECK(counted_live);
    CHECK(steady_runs);
    CHECK_INT(restarted, 200);
    CHECK_INT(exit_code, 0);
    CHECK(equal);
    //  steady and victim (started again) hold guests; frozen does not.
    CHECK_INT(node_counted.claims, 3);
    CHECK_INT(node_counted.running, 2);
}

//  Asks CLAIMS (in-process) for the counters of TENANT ("": all) as CALLER.
static shoal_envelope_t *
s_counters_handle(shoal_claims_t *claims, const char *tenant, const shoal_caller_t *caller)
{
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_COUNTERS, 1);
    shoal_msg_counters_request_t *body = (shoal_msg_counters_request_t *) shoal_envelope_new_body(request);
    body->tenant = shoal_strdup(tenant);
    shoal_envelope_t *reply = shoal_claims_handle(claims, request, caller, NULL);
    shoal_envelope_destroy(&request);
    return reply;
}

//  Reservations of incoming moves show in the counters, of the node and of
//  their tenant, even one with no claim here yet.
static void
test_counters_show_reservations(void)
{
    s_claims_in_process_t node;
    shoal_claims_t *claims = s_claims_open(&node);
    CHECK(claims);
    int put = s_record_put(shoal_claims_store(claims), "here", SHOAL_CLAIM_STOPPED);
    shoal_admission_hold(shoal_claims_admission(claims), "move/in", 2 * S_MB);
    shoal_caller_t admin = { "admin", "", "admin" };
    shoal_caller_t incoming = { "tenant", "move/in", "in" };
    shoal_envelope_t *all = s_counters_handle(claims, "", &admin);
    shoal_envelope_t *own = s_counters_handle(claims, "", &incoming);
    shoal_envelope_t *other = s_counters_handle(claims, S_TENANT, &incoming);
    shoal_admission_unreserve(shoal_claims_admission(claims), "move/in", 2 * S_MB);
    shoal_envelope_t *after = s_counters_handle(claims, "", &admin);
    //  The guest actor goes first: its answers go to the claims.
    shoal_guests_destroy(&node.guests);
    shoal_claims_destroy(&claims);
    s_claims_close(&node);

    CHECK_INT(put, 0);
    CHECK_INT(all->status, 200);
    const shoal_msg_counters_t *scopes = all->body;
    CHECK_INT(scopes->count, 3);
    CHECK_STR(scopes->scopes[0].tenant, "");
    CHECK_INT(scopes->scopes[0].used.claims, 1);
    CHECK_INT(scopes->scopes[0].used.running, 0);
    CHECK_INT(scopes->scopes[0].reserved.claims, 1);
    CHECK_INT(scopes->scopes[0].reserved.memory_bytes, 2 * S_MB);
    CHECK_STR(scopes->scopes[1].tenant, S_TENANT);
    CHECK_INT(scopes->scopes[1].used.claims, 1);
    CHECK_STR(scopes->scopes[2].tenant, "move/in");
    CHECK_INT(scopes->scopes[2].used.claims, 0);
    CHECK_INT(scopes->scopes[2].reserved.running, 1);
    CHECK_INT(own->status, 200);
    scopes = own->body;
    CHECK_INT(scopes->count, 1);
    CHECK_STR(scopes->scopes[0].tenant, "move/in");
    CHECK_INT(scopes->scopes[0].reserved.claims, 1);
    CHECK_INT(other->status, 403);
    CHECK(shoal_test_contains(other->message, "tenant move/in cannot read the counters of acme/web"));
    //  Given back, the reservation leaves no scope behind.
    scopes = after->body;
    CHECK_INT(scopes->count, 2);
    CHECK_INT(scopes->scopes[0].reserved.claims, 0);
    shoal_envelope_destroy(&all);
    shoal_envelope_destroy(&own);
    shoal_envelope_destroy(&other);
    shoal_envelope_destroy(&after);
}

//  Counts of a scope made from a listing of claims, as the store counts them.
static void
s_recount(const shoal_claim_list_t *list, const char *tenant, shoal_counter_scope_t *scope)
{
    memset(scope, 0, sizeof *scope);
    for (size_t i = 0; i < list->count; i++) {
        const shoal_claim_info_t *claim = &list->claims[i];
        if (tenant && !streq(claim->tenant, tenant))
            continue;
        scope->claims++;
        if (streq(claim->state, "creating") || streq(claim->state, "running") || streq(claim->state, "paused")
        ||  streq(claim->state, "moving")) {
            scope->running++;
            scope->memory_bytes += claim->memory_bytes;
        }
    }
}

static bool
s_scope_equal(const shoal_counter_scope_t *a, const shoal_counter_scope_t *b)
{
    return a->claims == b->claims && a->running == b->running && a->memory_bytes == b->memory_bytes
        && a->reserved_claims == b->reserved_claims && a->reserved_running == b->reserved_running
        && a->reserved_memory_bytes == b->reserved_memory_bytes;
}

//  The counters over the protocol, libshoal and shoalctl, after creates,
//  stops and releases, equal a recount of the claims; a tenant key reads
//  its own tenant's and nothing else.
static void
test_counters_over_protocol(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, NULL));
    char *mine = shoal_node_fixture_tenant_key(&node, "web", S_TENANT);
    CHECK(mine);
    shoal_client_t *admin = s_client(&node, node.admin_cert);
    shoal_client_t *tenant = s_client(&node, mine);
    int made = 0;
    made += s_create(admin, S_TENANT, "a1", S_MB, NULL) == 200;
    made += s_create(admin, S_TENANT, "a2", 2 * S_MB, NULL) == 200;
    made += s_create(tenant, S_TENANT, "a3", 3 * S_MB, NULL) == 200;
    made += s_create(admin, S_OTHER_TENANT, "b1", S_MB, NULL) == 200;
    made += s_create(admin, S_OTHER_TENANT, "b2", S_MB, NULL) == 200;
    made += s_create(admin, "gone/app", "g1", S_MB, NULL) == 200;
    made += shoal_client_claim_release(admin, "a2", NULL) == 200;
    made += shoal_client_claim_stop(tenant, "a3", NULL) == 200;
    made += shoal_client_claim_release(admin, "b2", NULL) == 200;
    made += shoal_client_claim_release(admin, "g1", NULL) == 200;

    shoal_claim_list_t list;
    int listed = shoal_client_claim_list(admin, &list);
    shoal_counters_t all;
    int read_all = shoal_client_counters(admin, NULL, &all);
    //  The node first, then each tenant counting something, by name.
    bool shape = read_all == 200 && all.count == 3 && streq(all.scopes[0].tenant, "")
              && streq(all.scopes[1].tenant, S_TENANT) && streq(all.scopes[2].tenant, S_OTHER_TENANT) && !all.more;
    bool recounted = shape;
    for (size_t i = 0; shape && i < all.count; i++) {
        shoal_counter_scope_t counted;
        s_recount(&list, *all.scopes[i].tenant ? all.scopes[i].tenant : NULL, &counted);
        recounted = recounted && s_scope_equal(&counted, &all.scopes[i]);
    }
    bool expected = shape && all.scopes[0].claims == 3 && all.scopes[0].running == 2
                 && all.scopes[0].memory_bytes == 2 * S_MB && all.scopes[1].claims == 2
                 && all.scopes[1].running == 1;
    shoal_counters_t one;
    int read_one = shoal_client_counters(admin, S_TENANT, &one);
    bool one_same = read_one == 200 && one.count == 1 && shape && s_scope_equal(&one.scopes[0], &all.scopes[1]);
    shoal_counters_clear(&one);
    int read_gone = shoal_client_counters(admin, "gone/app", &one);
    bool gone_zero = read_gone == 200 && one.count == 1 && one.scopes[0].claims == 0 && one.scopes[0].running == 0;
    shoal_counters_clear(&one);
    //  A tenant key: its own counters, by default or by name; no other scope.
    int tenant_default = shoal_client_counters(tenant, NULL, &one);
    bool tenant_own = tenant_default == 200 && one.count == 1 && streq(one.scopes[0].tenant, S_TENANT)
                   && shape && s_scope_equal(&one.scopes[0], &all.scopes[1]);
    shoal_counters_clear(&one);
    int tenant_named = shoal_client_counters(tenant, S_TENANT, &one);
    shoal_counters_clear(&one);
    int tenant_other = shoal_client_counters(tenant, S_OTHER_TENANT, &one);
    bool other_says = shoal_test_contains(shoal_client_error(tenant), "cannot read the counters of rival/app");
    int bad_name = shoal_client_counters(admin, "nonsense", &one);
    bool bad_says = shoal_test_contains(shoal_client_error(admin), "tenant 'nonsense' is not org/project");
    shoal_counters_clear(&all);
    shoal_claim_list_clear(&list);
    shoal_client_destroy(&tenant);
    shoal_client_destroy(&admin);

    //  shoalctl, as an operator and as the tenant.
    const char *ctl = shoal_test_program("shoalctl");
    char *argv_admin[] = { (char *) ctl, "-e", node.endpoint, "-c", node.admin_cert, "-k", node.cluster_cert,
                           "--json", "counters", NULL };
    char *admin_out = NULL;
    int admin_exit = shoal_test_capture(argv_admin, NULL, 10000, &admin_out);
    char *argv_tenant[] = { (char *) ctl, "-e", node.endpoint, "-c", mine, "-k", node.cluster_cert,
                            "counters", "--tenant", S_OTHER_TENANT, NULL };
    char *tenant_out = NULL;
    int tenant_exit = shoal_test_capture(argv_tenant, NULL, 10000, &tenant_out);
    char *argv_human[] = { (char *) ctl, "-e", node.endpoint, "-c", mine, "-k", node.cluster_cert, "counters", NULL };
    char *human_out = NULL;
    int human_exit = shoal_test_capture(argv_human, NULL, 10000, &human_out);
    free(mine);
    int exit_code = shoal_test_stop(node.pid, SIGTERM);
    shoal_node_fixture_guests_kill(&node);

    CHECK_INT(made, 10);
    CHECK_INT(listed, 200);
    CHECK_INT(read_all, 200);
    CHECK(shape);
    CHECK(recounted);
    CHECK(expected);
    CHECK(one_same);
    CHECK(gone_zero);
    CHECK(tenant_own);
    CHECK_INT(tenant_named, 200);
    CHECK_INT(tenant_other, 403);
    CHECK(other_says);
    CHECK_INT(bad_name, SHOAL_E_INVALID);
    CHECK(bad_says);
    CHECK_INT(admin_exit, 0);
    CHECK_MSG(shoal_test_contains(admin_out, "{\"tenant\":\"acme/web\",\"claims\":2,\"running\":1,"
                                             "\"memory_bytes\":1048576,"), "%s", admin_out);
    CHECK_INT(tenant_exit, 1);
    CHECK_MSG(shoal_test_contains(tenant_out, "cannot read the counters of rival/app"), "%s", tenant_out);
    CHECK_INT(human_exit, 0);
    CHECK_MSG(shoal_test_contains(human_out, S_TENANT) && !shoal_test_contains(human_out, "(node)"), "%s", human_out);
    free(admin_out);
    free(tenant_out);
    free(human_out);
    CHECK_INT(exit_code, 0);
}

int
main(void)
{
    SHOAL_TEST(test_lifecycle_and_transitions);
    SHOAL_TEST(test_admission_limits_and_reload);
    SHOAL_TEST(test_reservation_counted);
    SHOAL_TEST(test_tenant_isolation);
    SHOAL_TEST(test_restart_adopts_and_marks_dead);
    SHOAL_TEST(test_restart_at_start_restarts_guests);
    SHOAL_TEST(test_start_waits_for_the_guest_lock);
    SHOAL_TEST(test_counters_survive_kill);
    SHOAL_TEST(test_claim_pages);
    SHOAL_TEST(test_death_watch_pages_and_skips_moving);
    SHOAL_TEST(test_dead_guest_marked_error);
    SHOAL_TEST(test_counters_show_reservations);
    SHOAL_TEST(test_counters_over_protocol);
    return shoal_test_finish();
}
