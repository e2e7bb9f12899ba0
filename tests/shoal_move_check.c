/*  shoal_move_check: the invariants a move leaves behind. */
#include "shoal_move_check.h"
#include "shoal_image.h"

#include <czmq.h>
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

//  How long a prefill's stop and start may take.
#define S_PREFILL_CALL_MS 60000

static char s_error[2048];

const char *
shoal_move_check_error(void)
{
    return s_error;
}

int
shoal_move_check_move(shoal_cluster_t *cluster, int from, const char *id, int to, int budget_ms, int timeout_ms)
{
    shoal_client_t *mover = shoal_cluster_client_new(cluster, from);
    if (!mover) {
        snprintf(s_error, sizeof s_error, "cannot reach n%d to move %s", from, id);
        return -1;
    }
    shoal_client_set_timeout(mover, 10000);
    char target[32];
    snprintf(target, sizeof target, "n%d", to);
    shoal_move_info_t info = { 0 };
    int rc = shoal_client_move(mover, id, target, budget_ms, &info);
    int64_t deadline = shoal_test_now_ms() + timeout_ms;
    while (rc == 200 && !info.done && shoal_test_now_ms() < deadline) {
        usleep(20000);
        shoal_move_info_clear(&info);
        rc = shoal_client_move_status(mover, id, &info);
    }
    int result = -1;
    if (rc != 200)
        snprintf(s_error, sizeof s_error, "the move of %s from n%d to %s: %d %s", id, from, target, rc,
                 shoal_client_error(mover));
    else
    if (!info.done)
        snprintf(s_error, sizeof s_error, "the move of %s from n%d to %s did not end within %d ms (phase %s)", id,
                 from, target, timeout_ms, info.phase ? info.phase : "?");
    else
    if (!info.phase || !streq(info.phase, "done"))
        snprintf(s_error, sizeof s_error, "the move of %s from n%d to %s ended %s: %s", id, from, target,
                 info.phase ? info.phase : "?", info.error ? info.error : "");
    else
        result = 0;
    if (rc == 200)
        shoal_move_info_clear(&info);
    shoal_client_destroy(&mover);
    return result;
}

//  The guest directory of ID on node INDEX.
static void
s_guest_dir(shoal_cluster_t *cluster, int index, const char *id, char *dir, size_t size)
{
    snprintf(dir, size, "%s/guests/%s", shoal_cluster_data_dir(cluster, index), id);
}

//  The image of claim ID on node INDEX, or NULL with s_error saying why
//  (WHY, " to do this" or "", said after the directory).
static shoal_image_t *
s_image_open(shoal_cluster_t *cluster, int index, const char *id, const char *why)
{
    char dir[4096];
    s_guest_dir(cluster, index, id, dir, sizeof dir);
    char *error = NULL;
    shoal_image_t *image = shoal_image_open(dir, &error);
    if (!image)
        snprintf(s_error, sizeof s_error, "cannot open %.600s%s: %.1000s", dir, why, error ? error : "?");
    free(error);
    return image;
}

//  Whether process PID is stopped (SIGSTOP), from /proc/PID/stat.
static bool
s_stopped(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *file = fopen(path, "r");
    if (!file)
        return false;
    char line[1024] = "";
    bool read = fgets(line, sizeof line, file) != NULL;
    fclose(file);
    const char *after = read ? strrchr(line, ')') : NULL;
    return after && (after[2] == 'T' || after[2] == 't');
}

//  Checks once that ID is held in STATE. Returns the owner's index, or 0
//  with WHY.
static int
s_settled_once(shoal_cluster_t *cluster, const char *id, int owner, const char *state, char *why, size_t why_size)
{
    int nodes = shoal_cluster_size(cluster);
    int holder = 0;
    *why = '\0';
    for (int index = 1; index <= nodes; index++) {
        if (!shoal_cluster_node_running(cluster, index))
            continue;
        shoal_client_t *client = shoal_cluster_client(cluster, index);
        shoal_claim_list_t list;
        int rc = shoal_client_claim_list(client, &list);
        if (rc != 200) {
            snprintf(why, why_size, "n%d does not list its claims: %d %s", index, rc, shoal_client_error(client));
            return 0;
        }
        bool listed = false;
        for (size_t i = 0; i < list.count; i++)
            if (streq(list.claims[i].id, id)) {
                listed = true;
                if (!streq(list.claims[i].state, state)) {
                    snprintf(why, why_size, "n%d holds %s %s", index, id, list.claims[i].state);
                    shoal_claim_list_clear(&list);
                    return 0;
                }
            }
        size_t count = list.count;
        shoal_claim_list_clear(&list);
        shoal_status_t status;
        if (shoal_client_status(client, &status) == 200) {
            bool equal = status.claims == count;
            uint64_t counted = status.claims;
            shoal_status_clear(&status);
            if (!equal) {
                snprintf(why, why_size, "n%d counts %" PRIu64 " claims and lists %zu", index, counted, count);
                return 0;
            }
        }
        shoal_move_list_t moves;
        if (shoal_client_move_list(client, &moves) == 200) {
            size_t records = moves.count;
            char first[256] = "";
            if (records)
                snprintf(first, sizeof first, "%s %s", moves.moves[0].claim_id, moves.moves[0].state);
            shoal_move_list_clear(&moves);
            if (records) {
                snprintf(why, why_size, "n%d holds %zu move record(s) (%s)", index, records, first);
                return 0;
            }
        }
        char dir[4096];
        s_guest_dir(cluster, index, id, dir, sizeof dir);
        struct stat st;
        bool files = stat(dir, &st) == 0;
        if (listed) {
            if (holder) {
                snprintf(why, why_size, "n%d and n%d both hold %s", holder, index, id);
                return 0;
            }
            holder = index;
            int pid = shoal_image_running(dir);
            if (pid <= 0) {
                snprintf(why, why_size, "n%d holds %s but no guest runs on %.600s", index, id, dir);
                return 0;
            }
            if (s_stopped(pid) != streq(state, "paused")) {
                snprintf(why, why_size, "n%d holds %s %s but its guest (pid %d) is %s", index, id, state, pid,
                         s_stopped(pid) ? "stopped" : "not stopped");
                return 0;
            }
        }
        else
        if (files) {
            snprintf(why, why_size, "n%d does not hold %s but %.600s is there", index, id, dir);
            return 0;
        }
    }
    if (!holder) {
        snprintf(why, why_size, "no node holds %s", id);
        return 0;
    }
    if (owner && holder != owner) {
        snprintf(why, why_size, "n%d holds %s, not n%d", holder, id, owner);
        return 0;
    }
    for (int index = 1; index <= nodes; index++) {
        if (!shoal_cluster_node_running(cluster, index))
            continue;
        shoal_lookup_t lookup;
        int rc = shoal_client_lookup(shoal_cluster_client(cluster, index), id, &lookup);
        bool right = rc == 200 && streq(lookup.owner, shoal_cluster_node_id(cluster, holder));
        if (rc == 200) {
            if (!right)
                snprintf(why, why_size, "n%d's registry names %s (epoch %" PRIu64 ") as the owner of %s", index,
                         lookup.owner, lookup.epoch, id);
            shoal_lookup_clear(&lookup);
        }
        else
            snprintf(why, why_size, "n%d's registry lookup of %s answered %d", index, id, rc);
        if (!right)
            return 0;
    }
    return holder;
}

static int
s_settled(shoal_cluster_t *cluster, const char *id, const char *state, int timeout_ms, int *owner_p)
{
    int64_t deadline = shoal_test_now_ms() + timeout_ms;
    char why[1024] = "";
    while (true) {
        int holder = s_settled_once(cluster, id, owner_p && *owner_p ? *owner_p : 0, state, why, sizeof why);
        if (holder) {
            if (owner_p)
                *owner_p = holder;
            return 0;
        }
        if (shoal_test_now_ms() > deadline)
            break;
        usleep(100000);
    }
    snprintf(s_error, sizeof s_error, "claim %s not settled within %d ms: %s", id, timeout_ms, why);
    return -1;
}

int
shoal_move_check_settled_any(shoal_cluster_t *cluster, const char *id, int timeout_ms, int *owner_p)
{
    return s_settled(cluster, id, "running", timeout_ms, owner_p);
}

int
shoal_move_check_settled(shoal_cluster_t *cluster, const char *id, int owner, int timeout_ms)
{
    int holder = owner;
    return s_settled(cluster, id, "running", timeout_ms, &holder);
}

int
shoal_move_check_settled_paused(shoal_cluster_t *cluster, const char *id, int owner, int timeout_ms)
{
    int holder = owner;
    return s_settled(cluster, id, "paused", timeout_ms, &holder);
}

int
shoal_move_check_verify(shoal_cluster_t *cluster, int index, const char *id)
{
    char dir[4096];
    s_guest_dir(cluster, index, id, dir, sizeof dir);
    char program[4096];
    snprintf(program, sizeof program, "%s", shoal_test_program("shoal-guest"));
    char *argv[] = { program, "verify", dir, NULL };
    char *output = NULL;
    int rc = shoal_test_capture(argv, NULL, 60000, &output);
    if (rc != 0)
        snprintf(s_error, sizeof s_error, "shoal-guest verify %.600s exited %d: %.1000s", dir, rc, output ? output : "");
    free(output);
    return rc == 0 ? 0 : -1;
}

int
shoal_move_check_throttle(shoal_cluster_t *cluster, int index, const char *id, uint32_t *percent)
{
    shoal_image_t *image = s_image_open(cluster, index, id, "");
    if (!image)
        return -1;
    *percent = shoal_image_throttle(image);
    shoal_image_destroy(&image);
    return 0;
}

int
shoal_move_check_guest_clock(shoal_cluster_t *cluster, int index, const char *id, uint64_t *writes, uint64_t *tick_ms)
{
    shoal_image_t *image = s_image_open(cluster, index, id, "");
    if (!image)
        return -1;
    *writes = shoal_image_writes(image);
    *tick_ms = shoal_image_tick_ms(image);
    shoal_image_destroy(&image);
    return 0;
}

int
shoal_move_check_guest_advances(shoal_cluster_t *cluster, int index, const char *id, uint64_t writes,
                                uint64_t tick_ms, int timeout_ms)
{
    int64_t deadline = shoal_test_now_ms() + timeout_ms;
    uint64_t now_writes = 0, now_tick = 0;
    while (true) {
        if (shoal_move_check_guest_clock(cluster, index, id, &now_writes, &now_tick))
            return -1;
        if (now_writes > writes && now_tick > tick_ms)
            return 0;
        if (shoal_test_now_ms() > deadline)
            break;
        usleep(10000);
    }
    snprintf(s_error, sizeof s_error, "the guest of %s on n%d did not run within %d ms: %" PRIu64 " writes, "
             "tick %" PRIu64 " (from %" PRIu64 ", %" PRIu64 ")", id, index, timeout_ms, now_writes, now_tick, writes,
             tick_ms);
    return -1;
}

int
shoal_move_check_prefill(shoal_cluster_t *cluster, int index, const char *id)
{
    //  Stopping and starting a big guest takes its time on a busy machine.
    shoal_client_t *client = shoal_cluster_client_new(cluster, index);
    if (!client) {
        snprintf(s_error, sizeof s_error, "cannot reach n%d to prefill %s", index, id);
        return -1;
    }
    shoal_client_set_timeout(client, S_PREFILL_CALL_MS);
    int rc = shoal_client_claim_stop(client, id, NULL);
    if (rc != 200) {
        snprintf(s_error, sizeof s_error, "stop %s on n%d to prefill it: %d %s", id, index, rc,
                 shoal_client_error(client));
        shoal_client_destroy(&client);
        return -1;
    }
    shoal_image_t *image = s_image_open(cluster, index, id, " to prefill it");
    if (!image) {
        shoal_client_destroy(&client);
        return -1;
    }
    size_t first = shoal_image_load_first(image);
    size_t pages = shoal_image_pages(image, SHOAL_IMAGE_MEMORY);
    uint64_t seq = shoal_image_reserve(image, pages - first);
    for (size_t page = first; page < pages; page++)
        shoal_image_write(image, SHOAL_IMAGE_MEMORY, page, seq++);
    shoal_image_add_writes(image, pages - first, 0);
    shoal_image_destroy(&image);
    rc = shoal_client_claim_start(client, id, NULL);
    if (rc != 200)
        snprintf(s_error, sizeof s_error, "start %s on n%d after the prefill: %d %s", id, index, rc,
                 shoal_client_error(client));
    shoal_client_destroy(&client);
    return rc == 200 ? 0 : -1;
}

//  Process PID's command line, its words separated by spaces, into TEXT
//  ("" when it cannot be read).
static void
s_cmdline(int pid, char *text, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
    FILE *file = fopen(path, "r");
    size_t got = file ? fread(text, 1, size - 1, file) : 0;
    if (file)
        fclose(file);
    text[got] = 0;
    for (size_t i = 0; i < got; i++)
        if (text[i] == '\0')
            text[i] = ' ';
}

//  Ends the guest running on DIR, if one does.
static void
s_guest_end(const char *dir)
{
    int pid = shoal_image_running(dir);
    if (pid <= 0)
        return;
    char cmdline[8192];
    s_cmdline(pid, cmdline, sizeof cmdline);
    if (strstr(cmdline, "shoal-guest") && strstr(cmdline, dir)) {
        kill(pid, SIGKILL);
        kill(pid, SIGCONT);
    }
}

//  Walks DIR for guest directories (a directory holding an image file).
static void
s_walk(const char *dir, int depth)
{
    if (depth > 6)
        return;
    DIR *handle = opendir(dir);
    if (!handle)
        return;
    for (struct dirent *entry = readdir(handle); entry; entry = readdir(handle)) {
        if (entry->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
        struct stat st;
        if (lstat(path, &st) || !S_ISDIR(st.st_mode))
            continue;
        char image[4200];
        snprintf(image, sizeof image, "%s/image", path);
        if (access(image, F_OK) == 0)
            s_guest_end(path);
        else
            s_walk(path, depth + 1);
    }
    closedir(handle);
}

//  Ends every shoal-guest process whose command line names a directory
//  under the test's: one that lost its pid file is found too.
static void
s_guests_end_by_cmdline(void)
{
    DIR *proc = opendir("/proc");
    if (!proc)
        return;
    for (struct dirent *entry = readdir(proc); entry; entry = readdir(proc)) {
        int pid = atoi(entry->d_name);
        if (pid <= 0 || pid == getpid())
            continue;
        char cmdline[8192];
        s_cmdline(pid, cmdline, sizeof cmdline);
        if (strstr(cmdline, "shoal-guest run ") && strstr(cmdline, shoal_test_dir)) {
            kill(pid, SIGKILL);
            kill(pid, SIGCONT);
        }
    }
    closedir(proc);
}

void
shoal_move_check_cleanup(void)
{
    s_walk(shoal_test_dir, 0);
    s_guests_end_by_cmdline();
}
