/*  shoal_driver_exec: the exec driver, a VM manager run once per operation.

    The guest actor's workers call these (shoal_guests), never the node's
    reactor: each runs the manager through shoal_command, which bounds the
    wait by the configured limit, so a stuck manager holds one worker that
    long and the operation fails with the reason.
*/
#include "shoal_driver_exec.h"
#include "shoal_command.h"
#include "shoal_names.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <errno.h>
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

//  Most words after the manager's path in one call.
#define EXEC_ARGS_MAX 12
//  Most bytes of the manager's stderr a reply quotes.
#define EXEC_QUOTE_MAX 1024
//  The states "vm inspect" names for a VM that is alive.
#define EXEC_STATE_RUNNING "running"
#define EXEC_STATE_PAUSED "paused"

typedef struct {
    shoal_driver_t base;                //  the operations, first so the node can call them
    char *manager;                      //  the manager to run
    const int64_t *timeout_ms;          //  a lifecycle call's limit (a cell the guest actor keeps up with the live setting)
    const int64_t *migrate_timeout_ms;  //  a capture's or receive's limit (likewise)
    const int64_t *nice;                //  the niceness the manager runs at (likewise)
    const int64_t *idle;                //  1: it runs under SCHED_IDLE (likewise)
} s_exec_t;

//  Runs the manager with "vm" and ARGS (NULL-terminated) within TIMEOUT_MS.
//  Returns 0 when it exited 0, with *OUT_P (may be NULL; the caller frees)
//  its stdout; or -1 with *ERROR_P saying which call failed and how, with
//  what the manager said on stderr. *ANSWERED_P (may be NULL) tells whether
//  the manager ended by itself, whatever its exit code.
static int
s_manager(s_exec_t *self, int64_t timeout_ms, char **out_p, char **error_p, const char *const args[],
          bool *answered_p)
{
    char *argv[EXEC_ARGS_MAX + 3] = { self->manager, (char *) "vm" };
    size_t count = 2;
    char *call = shoal_strdup("vm");
    for (size_t i = 0; args[i]; i++) {
        assert(i < EXEC_ARGS_MAX);
        argv[count++] = (char *) args[i];
        char *longer = zsys_sprintf("%s %s", call, args[i]);
        free(call);
        call = longer;
    }
    argv[count] = NULL;
    shoal_command_result_t result;
    char *failure = NULL;
    int rc = -1;
    shoal_command_priority_t priority = {
        .nice = (int) __atomic_load_n(self->nice, __ATOMIC_RELAXED),
        .idle = __atomic_load_n(self->idle, __ATOMIC_RELAXED) != 0,
    };
    bool answered = shoal_command_run(argv, timeout_ms, priority, &result, &failure) == 0;
    if (answered_p)
        *answered_p = answered;
    if (!answered) {
        *error_p = zsys_sprintf("exec manager, %s: %s", call, failure);
        free(failure);
    }
    else
    if (result.exit_code != 0) {
        char *quote = shoal_command_excerpt(result.err, EXEC_QUOTE_MAX);
        *error_p = *quote ? zsys_sprintf("exec manager, %s: exited with %d: %s", call, result.exit_code, quote)
                          : zsys_sprintf("exec manager, %s: exited with %d and wrote nothing on stderr", call,
                                         result.exit_code);
        free(quote);
    }
    else {
        if (out_p) {
            *out_p = result.out;
            result.out = NULL;
        }
        rc = 0;
    }
    shoal_command_result_clear(&result);
    free(call);
    return rc;
}

//  The manager names a VM after its claim, with one file-name-safe word:
//  a tenant's claim id holds slashes, which become '+' (shoal_names.h).

static int
s_exec_create(shoal_driver_t *base, const char *id, const shoal_guest_spec_t *spec, char **error_p)
{
    char memory[32], disk[32];
    snprintf(memory, sizeof memory, "%" PRIu64, spec->memory_bytes);
    snprintf(disk, sizeof disk, "%" PRIu64, spec->disk_bytes);
    s_exec_t *self = (s_exec_t *) base;
    char *vm = shoal_claim_id_file_name(id);
    const char *args[] = { "create", vm, "--memory", memory, "--disk", disk, NULL };
    int rc = s_manager(self, __atomic_load_n(self->timeout_ms, __ATOMIC_RELAXED), NULL, error_p, args, NULL);
    free(vm);
    return rc;
}

//  One lifecycle VERB of guest ID.
static int
s_exec_verb(shoal_driver_t *base, const char *verb, const char *id, char **error_p)
{
    s_exec_t *self = (s_exec_t *) base;
    char *vm = shoal_claim_id_file_name(id);
    const char *args[] = { verb, vm, NULL };
    int rc = s_manager(self, __atomic_load_n(self->timeout_ms, __ATOMIC_RELAXED), NULL, error_p, args, NULL);
    free(vm);
    return rc;
}

static int
s_exec_start(shoal_driver_t *base, const char *id, char **error_p)
{
    return s_exec_verb(base, "start", id, error_p);
}

static int
s_exec_pause(shoal_driver_t *base, const char *id, char **error_p)
{
    return s_exec_verb(base, "pause", id, error_p);
}

static int
s_exec_resume(shoal_driver_t *base, const char *id, char **error_p)
{
    return s_exec_verb(base, "resume", id, error_p);
}

static int
s_exec_stop(shoal_driver_t *base, const char *id, char **error_p)
{
    return s_exec_verb(base, "stop", id, error_p);
}

static int
s_exec_destroy(shoal_driver_t *base, const char *id, char **error_p)
{
    s_exec_t *self = (s_exec_t *) base;
    char *vm = shoal_claim_id_file_name(id);
    const char *args[] = { "rm", "--force", vm, NULL };
    int rc = s_manager(self, __atomic_load_n(self->timeout_ms, __ATOMIC_RELAXED), NULL, error_p, args, NULL);
    free(vm);
    return rc;
}

static shoal_guest_liveness_t
s_exec_probe(shoal_driver_t *base, const char *id, char **why_p)
{
    s_exec_t *self = (s_exec_t *) base;
    char *vm = shoal_claim_id_file_name(id);
    const char *args[] = { "inspect", vm, "--output", "json", NULL };
    char *out = NULL;
    char *why = NULL;
    bool answered = false;
    shoal_guest_liveness_t liveness = SHOAL_GUEST_GONE;
    if (s_manager(self, __atomic_load_n(self->timeout_ms, __ATOMIC_RELAXED), &out, &why, args, &answered) == 0) {
        json_error_t parse_error;
        json_t *root = json_loads(out, 0, &parse_error);
        const char *state = json_string_value(json_object_get(root, "state"));
        liveness = SHOAL_GUEST_UNKNOWN;
        if (!root)
            why = zsys_sprintf("exec manager, vm inspect %s: the output is not JSON: %s", id, parse_error.text);
        else
        if (!state)
            why = zsys_sprintf("exec manager, vm inspect %s: the output has no \"state\" string", id);
        else
        if (streq(state, EXEC_STATE_RUNNING) || streq(state, EXEC_STATE_PAUSED))
            liveness = SHOAL_GUEST_RUNS;
        else {
            why = zsys_sprintf("the exec manager says vm %s is %s", id, state);
            liveness = SHOAL_GUEST_GONE;
        }
        json_decref(root);
    }
    else
    if (!answered)
        //  A manager that did not end in time says nothing about the VM.
        liveness = SHOAL_GUEST_UNKNOWN;
    free(out);
    free(vm);
    if (why_p)
        *why_p = why;
    else
        free(why);
    return liveness;
}

static bool
s_exec_alive(shoal_driver_t *base, const char *id, char **why_p)
{
    return s_exec_probe(base, id, why_p) == SHOAL_GUEST_RUNS;
}

//  True when PATH names something under a directory: relative, with no
//  empty, "." or ".." part.
static bool
s_path_inside(const char *path)
{
    if (!*path || *path == '/')
        return false;
    for (const char *part = path; part; ) {
        const char *slash = strchr(part, '/');
        size_t length = slash ? (size_t) (slash - part) : strlen(part);
        if (length == 0 || (length == 1 && part[0] == '.') || (length == 2 && part[0] == '.' && part[1] == '.'))
            return false;
        part = slash ? slash + 1 : NULL;
    }
    return true;
}

//  Checks file INDEX of a list (PATH, with the SIZE listed when HAS_SIZE)
//  against DIR, and gives its size on disk in *BYTES. Returns 0 or -1.
static int
s_file_check(const char *dir, size_t index, const char *path, bool has_size, uint64_t size, uint64_t *bytes,
             char **error_p)
{
    char *full = zsys_sprintf("%s/%s", dir, path);
    struct stat info;
    int rc = -1;
    if (stat(full, &info) != 0)
        *error_p = zsys_sprintf("files[%zu]: %s: %s", index, full, strerror(errno));
    else
    if (!S_ISREG(info.st_mode))
        *error_p = zsys_sprintf("files[%zu]: %s is not a regular file", index, full);
    else
    if (has_size && (uint64_t) info.st_size != size)
        *error_p = zsys_sprintf("files[%zu]: %s holds %" PRIu64 " bytes, the list says %" PRIu64, index, full,
                                (uint64_t) info.st_size, size);
    else {
        *bytes = (uint64_t) info.st_size;
        rc = 0;
    }
    free(full);
    return rc;
}

int
shoal_driver_exec_files_parse(const char *text, const char *dir, shoal_driver_files_t *files, char **error_p)
{
    memset(files, 0, sizeof *files);
    json_error_t parse_error;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &parse_error);
    if (!root) {
        *error_p = zsys_sprintf("the file list is not JSON: %s (line %d, column %d)", parse_error.text,
                                parse_error.line, parse_error.column);
        return -1;
    }
    json_t *list = json_is_array(root) ? root : json_object_get(root, "files");
    if (!json_is_array(list)) {
        *error_p = shoal_strdup("the file list is neither {\"files\": [...]} nor an array");
        json_decref(root);
        return -1;
    }
    size_t count = json_array_size(list);
    files->items = (shoal_driver_file_t *) zmalloc(sizeof(shoal_driver_file_t) * (count + 1));
    int rc = 0;
    for (size_t index = 0; index < count && rc == 0; index++) {
        json_t *item = json_array_get(list, index);
        json_t *path_value = json_is_object(item) ? json_object_get(item, "path") : item;
        json_t *size_value = json_is_object(item) ? json_object_get(item, "size") : NULL;
        const char *path = json_string_value(path_value);
        rc = -1;
        if (!path || strlen(path) != json_string_length(path_value))
            *error_p = zsys_sprintf("files[%zu] is neither a path nor an object with a \"path\" string", index);
        else
        if (size_value && (!json_is_integer(size_value) || json_integer_value(size_value) < 0))
            *error_p = zsys_sprintf("files[%zu] (%s): \"size\" is not a count of bytes", index, path);
        else
        if (!s_path_inside(path))
            *error_p = zsys_sprintf("files[%zu]: '%s' is not a relative path inside the round's directory",
                                    index, path);
        else
            rc = 0;
        for (size_t earlier = 0; earlier < files->count && rc == 0; earlier++)
            if (streq(files->items[earlier].path, path)) {
                *error_p = zsys_sprintf("files[%zu]: '%s' is listed twice", index, path);
                rc = -1;
            }
        uint64_t size = size_value ? (uint64_t) json_integer_value(size_value) : 0;
        if (rc == 0 && dir)
            rc = s_file_check(dir, index, path, size_value != NULL, size, &size, error_p);
        if (rc == 0) {
            files->items[files->count].path = shoal_strdup(path);
            files->items[files->count].size = size;
            files->count++;
        }
    }
    json_decref(root);
    if (rc)
        shoal_driver_files_clear(files);
    return rc;
}

//  Runs ARGS, a capture or receive into or from DIR, and reads its list of
//  files (checked against DIR when CHECK_FILES).
static int
s_migrate_files(s_exec_t *self, const char *const args[], const char *dir, bool check_files,
                shoal_driver_files_t *files, char **error_p)
{
    memset(files, 0, sizeof *files);
    char *out = NULL;
    if (s_manager(self, __atomic_load_n(self->migrate_timeout_ms, __ATOMIC_RELAXED), &out, error_p, args, NULL))
        return -1;
    char *why = NULL;
    int rc = shoal_driver_exec_files_parse(out, check_files ? dir : NULL, files, &why);
    if (rc) {
        *error_p = zsys_sprintf("exec manager, vm migrate %s %s: %s", args[1], args[2], why);
        free(why);
    }
    free(out);
    return rc;
}

static int
s_exec_migrate_capture(shoal_driver_t *base, const char *id, const char *dir, uint32_t round, bool final,
                       shoal_driver_files_t *files, char **error_p)
{
    char number[16];
    snprintf(number, sizeof number, "%" PRIu32, round);
    char *vm = shoal_claim_id_file_name(id);
    const char *args[] = { "migrate", "capture", vm, "--dir", dir, "--round", number, "--output", "json",
                           final ? "--final" : NULL, NULL };
    int rc = s_migrate_files((s_exec_t *) base, args, dir, true, files, error_p);
    free(vm);
    return rc;
}

static int
s_exec_migrate_receive(shoal_driver_t *base, const char *id, const char *dir, shoal_driver_files_t *files,
                       char **error_p)
{
    //  The manager may take the files it read away: only their names are checked.
    char *vm = shoal_claim_id_file_name(id);
    const char *args[] = { "migrate", "receive", vm, "--dir", dir, "--output", "json", NULL };
    int rc = s_migrate_files((s_exec_t *) base, args, dir, false, files, error_p);
    free(vm);
    return rc;
}

static int
s_exec_migrate_abort(shoal_driver_t *base, const char *id, char **error_p)
{
    s_exec_t *self = (s_exec_t *) base;
    char *vm = shoal_claim_id_file_name(id);
    const char *args[] = { "migrate", "abort", vm, NULL };
    int rc = s_manager(self, __atomic_load_n(self->timeout_ms, __ATOMIC_RELAXED), NULL, error_p, args, NULL);
    free(vm);
    return rc;
}

static void
s_exec_free(shoal_driver_t *base)
{
    s_exec_t *self = (s_exec_t *) base;
    free(self->manager);
    free(self);
}

static const shoal_driver_ops_t s_exec_ops = {
    .name = "exec",
    .create = s_exec_create,
    .start = s_exec_start,
    .pause = s_exec_pause,
    .resume = s_exec_resume,
    .stop = s_exec_stop,
    .destroy = s_exec_destroy,
    .alive = s_exec_alive,
    .probe = s_exec_probe,
    .migrate_capture = s_exec_migrate_capture,
    .migrate_receive = s_exec_migrate_receive,
    .migrate_abort = s_exec_migrate_abort,
    .free = s_exec_free,
};

shoal_driver_t *
shoal_driver_exec_new(const char *manager, const int64_t *timeout_ms, const int64_t *migrate_timeout_ms,
                      const int64_t *nice, const int64_t *idle, char **error_p)
{
    if (access(manager, X_OK) != 0) {
        *error_p = zsys_sprintf("exec manager %s: %s (set drivers/exec_manager)", manager, strerror(errno));
        return NULL;
    }
    s_exec_t *self = (s_exec_t *) zmalloc(sizeof *self);
    self->base.ops = &s_exec_ops;
    self->manager = shoal_strdup(manager);
    self->timeout_ms = timeout_ms;
    self->migrate_timeout_ms = migrate_timeout_ms;
    self->nice = nice;
    self->idle = idle;
    return &self->base;
}
