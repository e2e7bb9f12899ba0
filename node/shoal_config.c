/*  shoal_config: shoald's settings table, loading and validation.

    The table below is the one place a key is declared. Loading applies the
    defaults, then the file, then the environment, and validates each value
    as it is applied so that the error names where the bad value came from.
    A name the table does not know is an error too, in the file and in the
    environment alike (a SHOAL_ variable that is no setting, and not one of
    the few other programs of shoal read, is a typo that would otherwise be
    silently ignored).
*/
#include "shoal_config.h"
#include "shoal_names.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum {
    S_STRING,       //  any non-empty text
    S_NAME,         //  a node id: letters, digits, '.', '_', '-'
    S_ENDPOINT,     //  tcp://host:port
    S_ENDPOINTS,    //  endpoints separated by commas, or empty
    S_BOOL,         //  0/1, true/false, yes/no
    S_INT,          //  an integer inside [min, max]
    S_WORD,         //  one of the words s_words lists for the key
} s_kind_t;

typedef struct {
    const char *key;            //  ZPL path
    s_kind_t kind;              //  how the value is checked
    const char *fallback;       //  default; "" means derived after loading
    int64_t min, max;           //  range, for S_INT
    bool reloadable;            //  a running node may change it on reload
    size_t offset;              //  where it lives in shoal_settings_t
} s_row_t;

#define S_FIELD(name) offsetof(shoal_settings_t, name)
#define S_HOST_MAX 255

static const s_row_t s_table[] = {
    { "node/id", S_NAME, "", 0, 0, false, S_FIELD(node_id) },
    { "node/data_dir", S_STRING, "./shoal-data", 0, 0, false, S_FIELD(data_dir) },
    { "node/bind", S_ENDPOINT, "tcp://127.0.0.1:7400", 0, 0, false, S_FIELD(bind) },
    { "node/advertise", S_ENDPOINT, "", 0, 0, false, S_FIELD(advertise) },
    { "security/cluster_cert", S_STRING, "", 0, 0, false, S_FIELD(cluster_cert) },
    { "security/clients_dir", S_STRING, "", 0, 0, false, S_FIELD(clients_dir) },
    { "security/generate_keys", S_BOOL, "1", 0, 0, false, S_FIELD(generate_keys) },
    { "store/sync", S_BOOL, "1", 0, 0, false, S_FIELD(store_sync) },
    { "store/cache_mb", S_INT, "64", 1, 65536, false, S_FIELD(cache_mb) },
    { "store/reserve_mb", S_INT, "64", 0, 1048576, false, S_FIELD(reserve_mb) },
    { "store/salvage", S_BOOL, "0", 0, 0, false, S_FIELD(salvage) },
    { "limits/max_message_mb", S_INT, "64", 1, 2048, false, S_FIELD(max_message_mb) },
    { "oplog/max_clock_ahead_ms", S_INT, "60000", 1, 86400000, false, S_FIELD(max_clock_ahead_ms) },
    { "oplog/retention_ms", S_INT, "0", 0, INT64_MAX, true, S_FIELD(retention_ms) },
    { "oplog/reconcile_always", S_BOOL, "0", 0, 0, false, S_FIELD(reconcile_always) },
    { "mesh/join", S_ENDPOINTS, "", 0, 0, false, S_FIELD(join) },
    { "mesh/probe_interval_ms", S_INT, "1000", 10, 600000, true, S_FIELD(probe_interval_ms) },
    { "mesh/probe_timeout_ms", S_INT, "500", 5, 600000, true, S_FIELD(probe_timeout_ms) },
    { "mesh/suspect_timeout_ms", S_INT, "5000", 10, 3600000, true, S_FIELD(suspect_timeout_ms) },
    { "mesh/sync_interval_ms", S_INT, "2000", 10, 600000, true, S_FIELD(sync_interval_ms) },
    { "mesh/sync_bulk_min", S_INT, "1000", 0, 1000000000, true, S_FIELD(sync_bulk_min) },
    { "log/verbose", S_BOOL, "0", 0, 0, true, S_FIELD(verbose) },
    { "limits/max_claims", S_INT, "100", 0, 1000000, true, S_FIELD(max_claims) },
    { "limits/tenant_max_claims", S_INT, "50", 0, 1000000, true, S_FIELD(tenant_max_claims) },
    { "limits/max_running", S_INT, "100", 0, 1000000, true, S_FIELD(max_running) },
    { "limits/memory_mb", S_INT, "16384", 0, INT64_MAX / (1024 * 1024), true, S_FIELD(memory_mb) },
    { "limits/disk_mb", S_INT, "262144", 0, INT64_MAX / (1024 * 1024), true, S_FIELD(disk_mb) },
    { "limits/guest_rate_mb", S_INT, "256", 0, 1048576, true, S_FIELD(guest_rate_mb) },
    { "guest/program", S_STRING, "", 0, 0, false, S_FIELD(guest_program) },
    { "guest/dir", S_STRING, "", 0, 0, false, S_FIELD(guest_dir) },
    { "guest/memory_dir", S_STRING, "", 0, 0, false, S_FIELD(guest_memory_dir) },
    { "guest/stop_timeout_ms", S_INT, "5000", 1, 600000, true, S_FIELD(guest_stop_ms) },
    { "guest/watch_interval_ms", S_INT, "1000", 0, 3600000, true, S_FIELD(guest_watch_ms) },
    { "guest/restart_at_start", S_BOOL, "0", 0, 0, false, S_FIELD(guest_restart) },
    { "drivers/exec_manager", S_STRING, "", 0, 0, false, S_FIELD(exec_manager) },
    { "drivers/exec_timeout_ms", S_INT, "10000", 100, 600000, true, S_FIELD(exec_timeout_ms) },
    { "drivers/exec_migrate_timeout_ms", S_INT, "60000", 100, 3600000, true, S_FIELD(exec_migrate_timeout_ms) },
    { "drivers/exec_nice", S_INT, "10", 0, 19, true, S_FIELD(exec_nice) },
    { "drivers/exec_sched", S_WORD, SHOAL_EXEC_SCHED_NORMAL, 0, 0, true, S_FIELD(exec_sched) },
    { "move/bind", S_STRING, "", 0, 0, false, S_FIELD(move_bind) },
    { "move/concurrency", S_INT, "2", 0, 1000, true, S_FIELD(move_concurrency) },
    { "move/max_downtime_ms", S_INT, "100", 1, 600000, true, S_FIELD(move_downtime_ms) },
    { "move/step_timeout_ms", S_INT, "10000", 100, 3600000, true, S_FIELD(move_step_ms) },
    { "move/final_timeout_ms", S_INT, "1000", 50, 600000, true, S_FIELD(move_final_ms) },
    { "move/record_ttl_ms", S_INT, "3600000", 1000, INT64_MAX, true, S_FIELD(move_record_ttl_ms) },
    { "security/handshake_timeout_ms", S_INT, "10000", 100, 600000, false, S_FIELD(handshake_timeout_ms) },
    { "security/max_handshakes", S_INT, "256", 1, 65536, false, S_FIELD(max_handshakes) },
    { "security/max_handshakes_per_address", S_INT, "64", 1, 65536, false,
      S_FIELD(max_handshakes_per_address) },
    { "log/throttle_ms", S_INT, "10000", 0, 3600000, false, S_FIELD(throttle_ms) },
    { "metrics/bind", S_STRING, "", 0, 0, false, S_FIELD(metrics_bind) },
    { "events/kept", S_INT, "4096", 16, 1048576, false, S_FIELD(events_kept) },
    { "fsck/interval_s", S_INT, "3600", 0, 31536000, true, S_FIELD(fsck_interval_s) },
    { "fsck/slice_keys", S_INT, "1000", 1, 1000000, true, S_FIELD(fsck_slice_keys) },
};
#define S_ROWS (sizeof s_table / sizeof s_table[0])

//  The words an S_WORD key takes, the first its default.
#define S_WORDS_MAX 4
static const struct {
    const char *key;
    const char *words[S_WORDS_MAX];
} s_words[] = {
    { "drivers/exec_sched", { SHOAL_EXEC_SCHED_NORMAL, SHOAL_EXEC_SCHED_IDLE } },
};
#define S_WORD_KEYS (sizeof s_words / sizeof s_words[0])

//  Whether TEXT is one of KEY's words; *LIST_P tells them, for an error.
static bool
s_word_valid(const char *key, const char *text, char *list, size_t list_size)
{
    *list = 0;
    for (size_t i = 0; i < S_WORD_KEYS; i++) {
        if (!streq(s_words[i].key, key))
            continue;
        bool valid = false;
        for (size_t j = 0; j < S_WORDS_MAX && s_words[i].words[j]; j++) {
            valid = valid || streq(s_words[i].words[j], text);
            size_t used = strlen(list);
            snprintf(list + used, list_size - used, "%s%s", j ? " or " : "", s_words[i].words[j]);
        }
        return valid;
    }
    return false;
}

//  SHOAL_ variables that are no setting of shoald but that shoal's other
//  programs read (shoald's own options, shoalctl, the scripts, the tests):
//  exported for those, they are no typo here.
static const char *s_other_variables[] = {
    "SHOAL_CONFIG", "SHOAL_FAULT",                          //  shoald
    "SHOAL_ENDPOINT", "SHOAL_CERT", "SHOAL_CLUSTER_KEY",     //  shoalctl
    "SHOAL_SANITIZE", "SHOAL_BUILD_DIR", "SHOAL_FUZZ_BUILD_DIR",    //  scripts/
    "SHOAL_BIN_DIR", "SHOAL_SOURCE_DIR", "SHOAL_TEST_ONLY", "SHOAL_TEST_SEED",  //  tests/
    "SHOAL_FUZZ_SEEDS",
    "SHOAL_GUEST_IGNORE_TERM",                              //  shoal-guest
    "SHOAL_DOCKER_DATA", "SHOAL_DOCKER_KEYS", "SHOAL_IMAGE",   //  docker/
};
#define S_OTHER_VARIABLES (sizeof s_other_variables / sizeof s_other_variables[0])
//  A name this few edits from a setting's is offered as what was meant.
#define S_SUGGEST_DISTANCE 3
//  Room for an environment variable's name.
#define S_ENV_NAME_MAX 128

static void *
s_field(shoal_settings_t *settings, const s_row_t *row)
{
    return (char *) settings + row->offset;
}

static const void *
s_field_const(const shoal_settings_t *settings, const s_row_t *row)
{
    return (const char *) settings + row->offset;
}

static const s_row_t *
s_row_find(const char *key)
{
    for (size_t i = 0; i < S_ROWS; i++)
        if (streq(s_table[i].key, key))
            return &s_table[i];
    return NULL;
}

//  Parses a boolean the way people write them in config files.
static int
s_parse_bool(const char *text, bool *value)
{
    if (streq(text, "1") || streq(text, "true") || streq(text, "yes") || streq(text, "on"))
        *value = true;
    else
    if (streq(text, "0") || streq(text, "false") || streq(text, "no") || streq(text, "off"))
        *value = false;
    else
        return -1;
    return 0;
}

static int
s_parse_int(const char *text, int64_t *value)
{
    if (!*text)
        return -1;
    errno = 0;
    char *end;
    long long parsed = strtoll(text, &end, 10);
    if (errno || *end)
        return -1;
    *value = parsed;
    return 0;
}

//  Accepts tcp://HOST:PORT with a port from 1 to 65535. HOST may be '*' (for
//  binds) or a name or address without spaces.
static bool
s_valid_endpoint(const char *text)
{
    if (strncmp(text, "tcp://", 6) != 0)
        return false;
    const char *host = text + 6;
    const char *colon = strrchr(host, ':');
    if (!colon || colon == host || colon - host > S_HOST_MAX)
        return false;
    for (const char *c = host; c < colon; c++)
        if (isspace((unsigned char) *c) || *c == '/')
            return false;
    int64_t port;
    return s_parse_int(colon + 1, &port) == 0 && port >= 1 && port <= 65535;
}

//  Checks TEXT against ROW and stores it. SOURCE says where it came from, for
//  the error message.
static int
s_apply(shoal_settings_t *settings, const s_row_t *row, const char *text, const char *source,
        char *error, size_t error_size)
{
    switch (row->kind) {
        case S_BOOL: {
            bool value;
            if (s_parse_bool(text, &value)) {
                snprintf(error, error_size, "%s = '%s' (%s): expected 1 or 0 (true/false, yes/no)",
                         row->key, text, source);
                return -1;
            }
            *(bool *) s_field(settings, row) = value;
            return 0;
        }
        case S_INT: {
            int64_t value;
            if (s_parse_int(text, &value) || value < row->min || value > row->max) {
                snprintf(error, error_size,
                         "%s = '%s' (%s): expected an integer from %" PRId64 " to %" PRId64,
                         row->key, text, source, row->min, row->max);
                return -1;
            }
            *(int64_t *) s_field(settings, row) = value;
            return 0;
        }
        case S_NAME:
            if (*text && !shoal_name_valid(text)) {
                snprintf(error, error_size,
                         "%s = '%s' (%s): expected 1 to %d letters, digits, '.', '_' or '-'",
                         row->key, text, source, SHOAL_NAME_MAX);
                return -1;
            }
            break;
        case S_ENDPOINT:
            if (*text && !s_valid_endpoint(text)) {
                snprintf(error, error_size,
                         "%s = '%s' (%s): expected an endpoint tcp://HOST:PORT with a port from 1 to 65535",
                         row->key, text, source);
                return -1;
            }
            break;
        case S_ENDPOINTS: {
            char *copy = shoal_strdup(text);
            char *rest = copy;
            bool valid = true;
            for (char *item = strsep(&rest, ","); item && valid; item = strsep(&rest, ","))
                valid = *text == 0 || s_valid_endpoint(item);
            free(copy);
            if (!valid) {
                snprintf(error, error_size,
                         "%s = '%s' (%s): expected endpoints tcp://HOST:PORT separated by commas",
                         row->key, text, source);
                return -1;
            }
            break;
        }
        case S_WORD: {
            char list[S_HOST_MAX];
            if (!s_word_valid(row->key, text, list, sizeof list)) {
                snprintf(error, error_size, "%s = '%s' (%s): expected %s", row->key, text, source, list);
                return -1;
            }
            break;
        }
        case S_STRING:
            if (!*text && *row->fallback) {
                snprintf(error, error_size, "%s (%s): must not be empty", row->key, source);
                return -1;
            }
            break;
    }
    char **field = (char **) s_field(settings, row);
    free(*field);
    *field = shoal_strdup(text);
    return 0;
}

//  Walks every leaf of the ZPL tree and refuses keys the table does not know,
//  so that a typo is an error instead of a silently ignored setting.
static int
s_check_known(zconfig_t *node, const char *prefix, const char *path, char *error, size_t error_size)
{
    for (zconfig_t *child = zconfig_child(node); child; child = zconfig_next(child)) {
        char key[256];
        snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "/" : "", zconfig_name(child));
        if (zconfig_child(child)) {
            if (s_check_known(child, key, path, error, error_size))
                return -1;
        }
        else
        if (!s_row_find(key)) {
            snprintf(error, error_size, "%s: unknown key '%s'", path, key);
            return -1;
        }
    }
    return 0;
}

//  The environment variable that overrides KEY: SHOAL_ and the key in upper
//  case with '/' as '_'.
static void
s_env_name(const char *key, char *name, size_t name_size)
{
    size_t used = (size_t) snprintf(name, name_size, "SHOAL_");
    for (const char *c = key; *c && used + 1 < name_size; c++)
        name[used++] = *c == '/' ? '_' : (char) toupper((unsigned char) *c);
    name[used] = 0;
}

//  The edit distance between A and B (insertions, deletions, changes and
//  swaps of two neighbours each count one), for names: both are shorter
//  than S_ENV_NAME_MAX.
static size_t
s_distance(const char *a, const char *b)
{
    size_t a_size = strlen(a), b_size = strlen(b);
    if (a_size > S_ENV_NAME_MAX || b_size > S_ENV_NAME_MAX)
        return SIZE_MAX;
    //  Three rows of the distance matrix: two before this one, for swaps.
    size_t rows[3][S_ENV_NAME_MAX + 1];
    for (size_t j = 0; j <= b_size; j++)
        rows[0][j] = j;
    for (size_t i = 1; i <= a_size; i++) {
        size_t *row = rows[i % 3], *above = rows[(i - 1) % 3], *above2 = rows[(i + 1) % 3];
        row[0] = i;
        for (size_t j = 1; j <= b_size; j++) {
            size_t best = above[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
            if (above[j] + 1 < best)
                best = above[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && above2[j - 2] + 1 < best)
                best = above2[j - 2] + 1;
            row[j] = best;
        }
    }
    return rows[a_size % 3][b_size];
}

//  Refuses a SHOAL_ variable of the environment that is neither a setting
//  nor read by another program of shoal, suggesting the nearest setting.
static int
s_check_environment(char *error, size_t error_size)
{
    for (char **entry = environ; entry && *entry; entry++) {
        if (strncmp(*entry, "SHOAL_", 6) != 0)
            continue;
        char name[S_ENV_NAME_MAX];
        size_t length = strcspn(*entry, "=");
        if (length >= sizeof name)
            length = sizeof name - 1;
        memcpy(name, *entry, length);
        name[length] = 0;
        bool known = false;
        for (size_t i = 0; i < S_OTHER_VARIABLES && !known; i++)
            known = streq(name, s_other_variables[i]);
        const char *nearest = NULL;
        size_t nearest_distance = S_SUGGEST_DISTANCE + 1;
        char setting[S_ENV_NAME_MAX], suggestion[S_ENV_NAME_MAX] = "";
        for (size_t i = 0; i < S_ROWS && !known; i++) {
            s_env_name(s_table[i].key, setting, sizeof setting);
            known = streq(name, setting);
            size_t distance = s_distance(name, setting);
            if (distance < nearest_distance) {
                nearest_distance = distance;
                snprintf(suggestion, sizeof suggestion, "%s", setting);
                nearest = suggestion;
            }
        }
        if (known)
            continue;
        if (nearest)
            snprintf(error, error_size, "environment: unknown setting %s (did you mean %s?)", name, nearest);
        else
            snprintf(error, error_size, "environment: unknown setting %s: no key of shoald is named so "
                     "(shoald --print-config lists them)", name);
        return -1;
    }
    return 0;
}

//  Fills the values whose default depends on others.
static void
s_derive(shoal_settings_t *settings)
{
    if (!*settings->node_id) {
        char host[S_HOST_MAX + 1] = "";
        gethostname(host, sizeof host);
        //  A host name may hold characters a node id does not; keep the valid ones.
        char id[SHOAL_NAME_MAX + 1];
        size_t used = 0;
        for (const char *c = host; *c && used < SHOAL_NAME_MAX; c++)
            if (isalnum((unsigned char) *c) || *c == '.' || *c == '_' || *c == '-')
                id[used++] = *c;
        id[used] = 0;
        free(settings->node_id);
        settings->node_id = shoal_strdup(used ? id : "node");
    }
    if (!*settings->cluster_cert) {
        free(settings->cluster_cert);
        settings->cluster_cert = zsys_sprintf("%s/keys/cluster.cert", settings->data_dir);
    }
    if (!*settings->clients_dir) {
        free(settings->clients_dir);
        settings->clients_dir = zsys_sprintf("%s/clients", settings->data_dir);
    }
    if (!*settings->guest_dir) {
        free(settings->guest_dir);
        settings->guest_dir = zsys_sprintf("%s/guests", settings->data_dir);
    }
    if (!*settings->advertise) {
        //  A wildcard bind is advertised under the host name.
        free(settings->advertise);
        if (strncmp(settings->bind, "tcp://*:", 8) == 0 || strncmp(settings->bind, "tcp://0.0.0.0:", 14) == 0) {
            char host[S_HOST_MAX + 1] = "localhost";
            gethostname(host, sizeof host);
            settings->advertise = zsys_sprintf("tcp://%s:%s", host, strrchr(settings->bind, ':') + 1);
        }
        else
            settings->advertise = shoal_strdup(settings->bind);
    }
}

int
shoal_config_load(const char *path, shoal_settings_t *settings, char *error, size_t error_size)
{
    memset(settings, 0, sizeof *settings);
    zconfig_t *root = NULL;
    int rc = -1;
    for (size_t i = 0; i < S_ROWS; i++)
        if (s_apply(settings, &s_table[i], s_table[i].fallback, "default", error, error_size))
            goto cleanup;

    if (path) {
        if (access(path, R_OK) != 0) {
            snprintf(error, error_size, "config file %s: %s", path, strerror(errno));
            goto cleanup;
        }
        root = zconfig_load(path);
        if (!root) {
            snprintf(error, error_size, "config file %s: not valid ZPL", path);
            goto cleanup;
        }
        if (s_check_known(root, "", path, error, error_size))
            goto cleanup;
        for (size_t i = 0; i < S_ROWS; i++) {
            zconfig_t *item = zconfig_locate(root, s_table[i].key);
            if (item && zconfig_value(item)
            &&  s_apply(settings, &s_table[i], zconfig_value(item), path, error, error_size))
                goto cleanup;
        }
    }
    if (s_check_environment(error, error_size))
        goto cleanup;
    for (size_t i = 0; i < S_ROWS; i++) {
        char name[S_ENV_NAME_MAX];
        s_env_name(s_table[i].key, name, sizeof name);
        const char *value = getenv(name);
        if (value && s_apply(settings, &s_table[i], value, name, error, error_size))
            goto cleanup;
    }
    s_derive(settings);
    rc = 0;
cleanup:
    zconfig_destroy(&root);
    if (rc)
        shoal_settings_clear(settings);
    return rc;
}

void
shoal_settings_clear(shoal_settings_t *settings)
{
    for (size_t i = 0; i < S_ROWS; i++) {
        s_kind_t kind = s_table[i].kind;
        if (kind != S_BOOL && kind != S_INT) {
            char **field = (char **) s_field(settings, &s_table[i]);
            free(*field);
        }
    }
    memset(settings, 0, sizeof *settings);
}

//  Renders ROW's value in SETTINGS as text into BUFFER.
static const char *
s_render(const shoal_settings_t *settings, const s_row_t *row, char *buffer, size_t size)
{
    const void *field = s_field_const(settings, row);
    if (row->kind == S_BOOL)
        snprintf(buffer, size, "%d", *(const bool *) field ? 1 : 0);
    else
    if (row->kind == S_INT)
        snprintf(buffer, size, "%" PRId64, *(const int64_t *) field);
    else {
        const char *text = *(char *const *) field;
        snprintf(buffer, size, "%s", text ? text : "");
    }
    return buffer;
}

int
shoal_config_apply_reload(shoal_settings_t *live, const shoal_settings_t *fresh)
{
    int changed = 0;
    for (size_t i = 0; i < S_ROWS; i++) {
        const s_row_t *row = &s_table[i];
        char was[512], now[512];
        s_render(live, row, was, sizeof was);
        s_render(fresh, row, now, sizeof now);
        if (streq(was, now))
            continue;
        if (!row->reloadable) {
            zsys_warning("config: %s changed from '%s' to '%s'; it takes effect at the next start",
                         row->key, was, now);
            continue;
        }
        char error[256];
        if (s_apply(live, row, now, "reload", error, sizeof error) == 0) {
            zsys_info("config: %s changed from '%s' to '%s'", row->key, was, now);
            changed++;
        }
    }
    return changed;
}

char *
shoal_config_describe(const shoal_settings_t *settings)
{
    char *text = shoal_strdup("");
    for (size_t i = 0; i < S_ROWS && text; i++) {
        char value[512];
        char *grown = zsys_sprintf("%s%s = %s\n", text, s_table[i].key,
                                   s_render(settings, &s_table[i], value, sizeof value));
        free(text);
        text = grown;
    }
    return text;
}
