/*  shoal_claims: claim requests, the guest driver behind them, and the
    reconciliation at start. See shoal_claims.h for states and rules.

    A create writes the claim as creating (counted, so a crash between this
    and the guest's start leaves counts a recount agrees with), appends it
    to the registry, creates and starts the guest, and writes it running.
    A guest that fails to come up leaves the claim in error with the reason.
*/
#include "shoal_claims.h"
#include "shoal_driver_exec.h"
#include "shoal_driver_proc.h"
#include "shoal_names.h"

#include <czmq.h>
#include <ctype.h>

#define CLAIMS_DEFAULT_DRIVER "proc"
#define CLAIMS_EXEC_DRIVER "exec"
//  Generated ids: this prefix and hex digits of a new UUID.
#define CLAIMS_ID_PREFIX "c-"
#define CLAIMS_ID_HEX 16
#define CLAIMS_MESSAGE_MAX 512
//  The first epoch of a claim; every move raises it.
#define CLAIMS_FIRST_EPOCH 1
//  The death watch looks at no more claims than this in one tick, and
//  stops earlier once it spent this long (an exec guest's check runs its
//  manager); the next tick goes on where it stopped.
#define CLAIMS_WATCH_BATCH 16
#define CLAIMS_WATCH_BUDGET_MS 5
//  A step that took longer than this (a manager slow to answer, or killed
//  at its time limit) makes the watch rest this many times as long before
//  its next step, so that a stuck manager holds the reactor a small share
//  of the time instead of at every tick.
#define CLAIMS_WATCH_SLOW_MS 100
#define CLAIMS_WATCH_BACKOFF 20

struct _shoal_claims_t {
    const shoal_settings_t *settings;   //  the node's live settings (borrowed)
    char *endpoint;                     //  where this node serves, for the registry
    shoal_oplog_t *oplog;               //  the registry lives here (borrowed)
    shoal_claim_store_t *store;         //  claims and counters
    shoal_admission_t *admission;       //  limits and reservations
    shoal_driver_t *proc;               //  the proc driver, or NULL when it cannot run
    char *proc_failure;                 //  why there is no proc driver
    shoal_driver_t *exec;               //  the exec driver, or NULL when none is configured or it cannot run
    char *exec_failure;                 //  why there is no exec driver
    shoal_data_written_fn *written;     //  told of registry entries written
    void *written_arg;                  //  its argument
    shoal_claims_paused_fn *paused;     //  whether a moving claim's guest is paused
    void *paused_arg;                   //  its argument
    char *watch_after;                  //  the death watch goes on after this claim id ("": from the first)
    int64_t watch_next_ms;              //  when it looks again (monotonic)
};

//  Legal moves, by state: s_legal[from][to].
static const bool s_legal[SHOAL_CLAIM_RELEASED + 1][SHOAL_CLAIM_RELEASED + 1] = {
    [SHOAL_CLAIM_CREATING] = { [SHOAL_CLAIM_RUNNING] = true, [SHOAL_CLAIM_ERROR] = true,
                               [SHOAL_CLAIM_RELEASED] = true },
    [SHOAL_CLAIM_RUNNING] = { [SHOAL_CLAIM_PAUSED] = true, [SHOAL_CLAIM_STOPPED] = true,
                              [SHOAL_CLAIM_MOVING] = true, [SHOAL_CLAIM_ERROR] = true,
                              [SHOAL_CLAIM_RELEASED] = true },
    [SHOAL_CLAIM_PAUSED] = { [SHOAL_CLAIM_RUNNING] = true, [SHOAL_CLAIM_STOPPED] = true,
                             [SHOAL_CLAIM_MOVING] = true, [SHOAL_CLAIM_ERROR] = true,
                             [SHOAL_CLAIM_RELEASED] = true },
    //  A moving claim's other operations wait for the move: it ends running
    //  here (aborted), or gone from this node (moved).
    [SHOAL_CLAIM_MOVING] = { [SHOAL_CLAIM_RUNNING] = true, [SHOAL_CLAIM_ERROR] = true },
    [SHOAL_CLAIM_STOPPED] = { [SHOAL_CLAIM_RUNNING] = true, [SHOAL_CLAIM_ERROR] = true,
                              [SHOAL_CLAIM_RELEASED] = true },
    [SHOAL_CLAIM_ERROR] = { [SHOAL_CLAIM_RUNNING] = true, [SHOAL_CLAIM_STOPPED] = true,
                            [SHOAL_CLAIM_RELEASED] = true },
};

static bool
s_transition_legal(shoal_claim_state_t from, shoal_claim_state_t to)
{
    return shoal_claim_state_name(from) && shoal_claim_state_name(to) && s_legal[from][to];
}

//  The driver a claim names, or NULL with *ERROR_P when this node has none.
static shoal_driver_t *
s_driver(shoal_claims_t *self, const char *name, char **error_p)
{
    if (streq(name, CLAIMS_DEFAULT_DRIVER) && self->proc)
        return self->proc;
    if (streq(name, CLAIMS_EXEC_DRIVER) && self->exec)
        return self->exec;
    *error_p = streq(name, CLAIMS_DEFAULT_DRIVER)
             ? zsys_sprintf("the proc driver cannot run here: %s", self->proc_failure)
             : streq(name, CLAIMS_EXEC_DRIVER)
             ? zsys_sprintf("the exec driver cannot run here: %s", self->exec_failure)
             : zsys_sprintf("driver '%s' is not available on this node", name);
    return NULL;
}

//  Writes RECORD in state TO (with REASON for error, else none), from the
//  state it had. Returns 0 or -1 (the record keeps its old state).
static int
s_set_state(shoal_claims_t *self, shoal_claim_record_t *record, shoal_claim_state_t to, const char *reason)
{
    shoal_claim_record_t previous = *record;
    shoal_claim_record_t next = *record;
    next.state = to;
    next.error = to == SHOAL_CLAIM_ERROR ? (char *) reason : NULL;
    if (shoal_claim_store_put(self->store, &previous, &next)) {
        zsys_error("claims: cannot write %s as %s: %s", record->id, shoal_claim_state_name(to),
                   shoal_claim_store_error(self->store));
        return -1;
    }
    record->state = to;
    free(record->error);
    record->error = to == SHOAL_CLAIM_ERROR && reason ? strdup(reason) : NULL;
    return 0;
}

//  Appends RECORD's owner (this node) and epoch to the registry; a released
//  claim is registered as such, at its epoch, so that lookups anywhere say
//  so instead of naming a node that no longer holds it.
int
shoal_claims_register(shoal_claims_t *self, const shoal_claim_record_t *record)
{
    shoal_registry_record_t value = {
        .claim_id = record->id, .owner = self->settings->node_id,
        .endpoint = self->endpoint, .epoch = record->epoch, .tenant = record->tenant,
        .released = record->state == SHOAL_CLAIM_RELEASED,
    };
    uint8_t *bytes = NULL;
    size_t size = 0;
    char error[CLAIMS_MESSAGE_MAX];
    if (shoal_msg_registry_record_codec.encode(&value, &bytes, &size, error, sizeof error)) {
        zsys_error("claims: registry value of %s: %s", record->id, error);
        return -1;
    }
    shoal_oplog_entry_t entry = { 0 };
    int rc = shoal_oplog_write(self->oplog, SHOAL_REGISTRY_DATASET, record->id, SHOAL_OPLOG_PUT,
                               bytes, size, &entry);
    free(bytes);
    if (rc) {
        zsys_error("claims: cannot register %s: %s", record->id, shoal_oplog_error(self->oplog));
        return -1;
    }
    if (self->written)
        self->written(&entry, self->written_arg);
    shoal_oplog_entry_codec.clear(&entry);
    return 0;
}

//  Starts the guest of RECORD again from its image, paused again when the
//  claim was paused; the claim is then running or paused. Alive has put in
//  *WHY_P why the guest was not running; a failure replaces it with its own
//  reason. Returns 0 or -1.
static int
s_restart_one(shoal_claims_t *self, shoal_driver_t *driver, shoal_claim_record_t *record, char **why_p)
{
    char *error = NULL;
    if (driver->ops->start(driver, record->id, &error) == 0
    &&  (record->state != SHOAL_CLAIM_PAUSED || driver->ops->pause(driver, record->id, &error) == 0)) {
        if (record->state == SHOAL_CLAIM_CREATING)
            s_set_state(self, record, SHOAL_CLAIM_RUNNING, NULL);
        return 0;
    }
    free(*why_p);
    *why_p = zsys_sprintf("restarting it failed: %s", error ? error : "no reason given");
    free(error);
    return -1;
}

//  Brings one claim in line with its guest after a start.
static void
s_reconcile_one(shoal_claims_t *self, shoal_claim_record_t *record)
{
    //  A moving claim is its move's to settle (shoal_moves reads its record
    //  next): a target that adopted it may not have started its guest yet.
    if (!shoal_claim_holds_guest(record->state) || record->state == SHOAL_CLAIM_MOVING)
        return;
    char *why = NULL;
    shoal_driver_t *driver = s_driver(self, record->driver, &why);
    bool alive = driver && driver->ops->alive(driver, record->id, &why);
    if (alive) {
        zsys_info("claims: %s adopted: its guest still runs", record->id);
        if (record->state == SHOAL_CLAIM_CREATING)
            s_set_state(self, record, SHOAL_CLAIM_RUNNING, NULL);
    }
    else
    if (driver && self->settings->guest_restart && s_restart_one(self, driver, record, &why) == 0)
        zsys_info("claims: %s restarted: its guest had ended (%s)", record->id, why ? why : "gone");
    else {
        char *reason = zsys_sprintf("the guest was not running when the node started (%s)",
                                    why ? why : "no reason given");
        zsys_warning("claims: %s was %s: %s", record->id, shoal_claim_state_name(record->state), reason);
        s_set_state(self, record, SHOAL_CLAIM_ERROR, reason);
        free(reason);
    }
    free(why);
}

static int
s_reconcile(shoal_claims_t *self, char **error_p)
{
    shoal_claim_records_t list = { 0 };
    if (shoal_claim_store_list(self->store, &list)) {
        *error_p = zsys_sprintf("cannot read the claims: %s", shoal_claim_store_error(self->store));
        return -1;
    }
    for (size_t i = 0; i < list.count; i++)
        s_reconcile_one(self, &list.items[i]);
    shoal_claim_records_clear(&list);
    size_t fixed = 0;
    if (shoal_claim_store_repair(self->store, &fixed)) {
        *error_p = zsys_sprintf("cannot recount the claims: %s", shoal_claim_store_error(self->store));
        return -1;
    }
    return 0;
}

shoal_claims_t *
shoal_claims_new(const shoal_settings_t *settings, const char *endpoint, shoal_store_t *store,
                 shoal_oplog_t *oplog, shoal_data_written_fn *written, void *arg, char **error_p)
{
    shoal_claims_t *self = (shoal_claims_t *) zmalloc(sizeof *self);
    self->settings = settings;
    self->endpoint = strdup(endpoint);
    self->oplog = oplog;
    self->store = shoal_claim_store_new(store, settings->store_sync);
    self->admission = shoal_admission_new(settings, self->store);
    self->written = written;
    self->written_arg = arg;
    self->watch_after = strdup("");
    char *program = *settings->guest_program ? strdup(settings->guest_program)
                                             : shoal_driver_proc_default_program();
    char *guests = strdup(settings->guest_dir);
    //  A node without a guest program still serves everything else; its
    //  claims answer with the reason.
    self->proc = shoal_driver_proc_new(guests, program, &settings->guest_stop_ms, &self->proc_failure);
    if (!self->proc)
        zsys_warning("claims: no proc driver: %s", self->proc_failure);
    free(program);
    free(guests);
    if (*settings->exec_manager) {
        self->exec = shoal_driver_exec_new(settings->exec_manager, &settings->exec_timeout_ms,
                                           &settings->exec_migrate_timeout_ms, &self->exec_failure);
        if (!self->exec)
            zsys_warning("claims: no exec driver: %s", self->exec_failure);
    }
    else
        self->exec_failure = strdup("no VM manager is configured (set drivers/exec_manager)");
    if (s_reconcile(self, error_p))
        shoal_claims_destroy(&self);
    return self;
}

void
shoal_claims_destroy(shoal_claims_t **self_p)
{
    if (*self_p) {
        shoal_claims_t *self = *self_p;
        shoal_driver_destroy(&self->proc);
        shoal_driver_destroy(&self->exec);
        shoal_admission_destroy(&self->admission);
        shoal_claim_store_destroy(&self->store);
        free(self->proc_failure);
        free(self->exec_failure);
        free(self->watch_after);
        free(self->endpoint);
        free(self);
        *self_p = NULL;
    }
}

shoal_admission_t *
shoal_claims_admission(shoal_claims_t *self)
{
    return self->admission;
}

shoal_claim_store_t *
shoal_claims_store(shoal_claims_t *self)
{
    return self->store;
}

shoal_driver_t *
shoal_claims_driver(shoal_claims_t *self, const char *name, char **error_p)
{
    return s_driver(self, name, error_p);
}

void
shoal_claims_set_paused(shoal_claims_t *self, shoal_claims_paused_fn *fn, void *arg)
{
    self->paused = fn;
    self->paused_arg = arg;
}

int64_t
shoal_claims_count(shoal_claims_t *self, const char *tenant)
{
    shoal_counter_record_t counters;
    if (shoal_claim_store_counters(self->store, tenant, &counters))
        return -1;
    return (int64_t) counters.claims;
}

//  Marks RECORD in error when it is running or paused and its guest is gone.
static void
s_watch_one(shoal_claims_t *self, shoal_claim_record_t *record)
{
    if (record->state != SHOAL_CLAIM_RUNNING && record->state != SHOAL_CLAIM_PAUSED)
        return;
    char *why = NULL;
    shoal_driver_t *driver = s_driver(self, record->driver, &why);
    //  A claim whose driver is missing was put in error at the start.
    shoal_guest_liveness_t liveness = driver ? shoal_driver_probe(driver, record->id, &why) : SHOAL_GUEST_RUNS;
    if (liveness == SHOAL_GUEST_UNKNOWN)
        zsys_warning("claims: cannot tell whether the guest of %s runs: %s", record->id,
                     why ? why : "no reason given");
    if (liveness != SHOAL_GUEST_GONE) {
        free(why);
        return;
    }
    char *reason = zsys_sprintf("the guest died while the node ran (%s)", why ? why : "no reason given");
    zsys_warning("claims: %s was %s: %s", record->id, shoal_claim_state_name(record->state), reason);
    s_set_state(self, record, SHOAL_CLAIM_ERROR, reason);
    free(reason);
    free(why);
}

void
shoal_claims_tick(shoal_claims_t *self)
{
    int64_t now = zclock_mono();
    int64_t interval = self->settings->guest_watch_ms;
    if (interval == 0 || now < self->watch_next_ms)
        return;
    shoal_claim_records_t page = { 0 };
    if (shoal_claim_store_list_after(self->store, self->watch_after, CLAIMS_WATCH_BATCH, &page)) {
        zsys_error("claims: the death watch cannot read the claims: %s", shoal_claim_store_error(self->store));
        self->watch_next_ms = now + interval;
        return;
    }
    //  The tick runs in the reactor, between requests: the claims read here
    //  are as they are, nothing changes them meanwhile.
    size_t looked = 0;
    while (looked < page.count && (looked == 0 || zclock_mono() - now < CLAIMS_WATCH_BUDGET_MS))
        s_watch_one(self, &page.items[looked++]);
    if (looked) {
        free(self->watch_after);
        self->watch_after = strdup(page.items[looked - 1].id);
    }
    if (looked == page.count && page.count < CLAIMS_WATCH_BATCH) {
        //  The walk passed the last claim: rest, then start from the first.
        free(self->watch_after);
        self->watch_after = strdup("");
        self->watch_next_ms = now + interval;
    }
    int64_t took = zclock_mono() - now;
    if (took > CLAIMS_WATCH_SLOW_MS) {
        int64_t rest = took * CLAIMS_WATCH_BACKOFF > interval ? took * CLAIMS_WATCH_BACKOFF : interval;
        zsys_warning("claims: the death watch took %" PRId64 " ms for %zu guest(s): it rests %" PRId64 " ms",
                     took, looked, rest);
        self->watch_next_ms = now + rest;
    }
    shoal_claim_records_clear(&page);
}

bool
shoal_claims_handles(shoal_msg_type_t type)
{
    return (type >= SHOAL_MSG_CLAIM_CREATE && type <= SHOAL_MSG_LOOKUP) || type == SHOAL_MSG_COUNTERS;
}

static void
s_info_fill(shoal_claims_t *self, shoal_msg_claim_info_t *info, const shoal_claim_record_t *record)
{
    info->id = strdup(record->id);
    info->tenant = strdup(record->tenant);
    info->state = (int) record->state;
    info->memory_bytes = record->memory_bytes;
    info->driver = strdup(record->driver);
    info->epoch = record->epoch;
    info->created_ms = record->created_ms;
    info->error = strdup(record->error ? record->error : "");
    info->owner = strdup(self->settings->node_id);
}

static shoal_envelope_t *
s_info_reply(shoal_claims_t *self, const shoal_envelope_t *request, const shoal_claim_record_t *record)
{
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    s_info_fill(self, (shoal_msg_claim_info_t *) shoal_envelope_new_body(reply), record);
    return reply;
}

static bool
s_may_see(const shoal_caller_t *caller, const char *tenant)
{
    return !shoal_caller_is_tenant(caller) || streq(caller->tenant, tenant);
}

//  A tenant's claim ids are its own: "org/project/name", so that no tenant
//  can hold, or find out about, an id another tenant chose. A tenant names
//  its claims by their whole id or by the name alone; an operator's claims
//  made for it keep their bare ids. Returns the id CALLER's ID stands for
//  first (the caller frees it), or NULL when ID stands only for itself.
static char *
s_scoped_id(const shoal_caller_t *caller, const char *id)
{
    if (!shoal_caller_is_tenant(caller) || !*id || shoal_claim_id_scoped(id))
        return NULL;
    return zsys_sprintf("%s/%s", caller->tenant, id);
}

//  Reads claim ID for CALLER into RECORD. Returns NULL, or the reply to send
//  instead: 404 when this node does not hold it or the caller may not see it.
static shoal_envelope_t *
s_find(shoal_claims_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller,
       const char *id, shoal_claim_record_t *record)
{
    bool found = false;
    char *scoped = s_scoped_id(caller, id);
    int rc = scoped ? shoal_claim_store_get(self->store, scoped, record, &found) : 0;
    free(scoped);
    if (rc == 0 && !found)
        rc = shoal_claim_store_get(self->store, id, record, &found);
    if (rc)
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_claim_store_error(self->store));
    if (found && s_may_see(caller, record->tenant))
        return NULL;
    if (found)
        shoal_claim_codec.clear(record);
    return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "claim '%s' is not on node %s", id,
                                self->settings->node_id);
}

shoal_envelope_t *
shoal_claims_find(shoal_claims_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller,
                  const char *id, shoal_claim_record_t *record)
{
    return s_find(self, request, caller, id, record);
}

//  Whether scoped claim ID begins with TENANT and a slash.
static bool
s_id_in_tenant(const char *id, const char *tenant)
{
    size_t size = strlen(tenant);
    return strncmp(id, tenant, size) == 0 && id[size] == '/';
}

static shoal_envelope_t *
s_conflict(const shoal_envelope_t *request, const shoal_claim_record_t *record, const char *verb)
{
    return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "claim '%s' is %s: it cannot be %s",
                                record->id, shoal_claim_state_name(record->state), verb);
}

//  A new id no claim of this node ever had.
static char *
s_id_new(shoal_claims_t *self)
{
    while (true) {
        zuuid_t *uuid = zuuid_new();
        char *id = zsys_sprintf("%s%.*s", CLAIMS_ID_PREFIX, CLAIMS_ID_HEX, zuuid_str(uuid));
        zuuid_destroy(&uuid);
        for (char *c = id; *c; c++)
            *c = (char) tolower((unsigned char) *c);
        shoal_claim_record_t record;
        bool found = false;
        if (shoal_claim_store_get(self->store, id, &record, &found) == 0 && !found)
            return id;
        if (found)
            shoal_claim_codec.clear(&record);
        free(id);
    }
}

//  Starts RECORD's guest and writes it running; on failure writes it in
//  error with the reason. Returns the reply.
static shoal_envelope_t *
s_guest_start(shoal_claims_t *self, const shoal_envelope_t *request, shoal_claim_record_t *record,
              shoal_driver_t *driver)
{
    char *error = NULL;
    if (driver->ops->start(driver, record->id, &error)) {
        zsys_error("claims: %s: cannot start its guest: %s", record->id, error);
        s_set_state(self, record, SHOAL_CLAIM_ERROR, error);
        shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL,
                                                       "claim '%s' failed to start: %s", record->id, error);
        free(error);
        return reply;
    }
    if (s_set_state(self, record, SHOAL_CLAIM_RUNNING, NULL))
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_claim_store_error(self->store));
    return s_info_reply(self, request, record);
}

static shoal_envelope_t *
s_create(shoal_claims_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_claim_create_t *body = (const shoal_msg_claim_create_t *) request->body;
    if (shoal_caller_is_tenant(caller) && !streq(caller->tenant, body->tenant))
        return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN,
                                    "tenant %s cannot create claims for %s", caller->tenant, body->tenant);
    const char *driver_name = *body->driver ? body->driver : CLAIMS_DEFAULT_DRIVER;
    char *error = NULL;
    shoal_driver_t *driver = s_driver(self, driver_name, &error);
    if (!driver) {
        shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_UNAVAILABLE, "%s", error);
        free(error);
        return reply;
    }
    //  A scoped id names its tenant; a tenant's bare name is scoped to it,
    //  so that the id it asks for can only be taken by its own claims.
    if (shoal_claim_id_scoped(body->id) && !s_id_in_tenant(body->id, body->tenant))
        return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST,
                                    "claim id '%s' is scoped to another tenant than %s", body->id, body->tenant);
    char *scoped = s_scoped_id(caller, body->id);
    const char *id = scoped ? scoped : body->id;
    shoal_claim_record_t record = { 0 };
    bool taken = false;
    if (*id && shoal_claim_store_get(self->store, id, &record, &taken)) {
        free(scoped);
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_claim_store_error(self->store));
    }
    if (taken) {
        shoal_claim_codec.clear(&record);
        //  A released id stays taken: ids are never given out twice.
        shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "claim id '%s' is taken", id);
        free(scoped);
        return reply;
    }
    char message[CLAIMS_MESSAGE_MAX];
    uint32_t status = shoal_admission_check_guest(self->admission, self->settings->guest_dir, body->disk_bytes,
                                                  body->rate, message, sizeof message);
    if (status == SHOAL_STATUS_OK)
        status = shoal_admission_check(self->admission, body->tenant, body->memory_bytes, true,
                                       message, sizeof message);
    if (status != SHOAL_STATUS_OK) {
        free(scoped);
        return shoal_envelope_reply(request, status, "%s", message);
    }

    record.id = *id ? strdup(id) : s_id_new(self);
    free(scoped);
    record.tenant = strdup(body->tenant);
    record.state = SHOAL_CLAIM_CREATING;
    record.memory_bytes = body->memory_bytes;
    record.driver = strdup(driver_name);
    record.epoch = CLAIMS_FIRST_EPOCH;
    record.created_ms = (uint64_t) zclock_time();
    shoal_envelope_t *reply = NULL;
    if (shoal_claim_store_put(self->store, NULL, &record))
        reply = shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_claim_store_error(self->store));
    else
    if (shoal_claims_register(self, &record))
        reply = shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "cannot register claim '%s': %s",
                                     record.id, shoal_oplog_error(self->oplog));
    if (reply) {
        shoal_claim_codec.clear(&record);
        return reply;
    }
    shoal_guest_spec_t spec = { body->memory_bytes, body->disk_bytes, body->rate };
    if (driver->ops->create(driver, record.id, &spec, &error)) {
        zsys_error("claims: %s: cannot create its guest: %s", record.id, error);
        s_set_state(self, &record, SHOAL_CLAIM_ERROR, error);
        reply = shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "claim '%s' failed to create: %s",
                                     record.id, error);
        free(error);
    }
    else
        reply = s_guest_start(self, request, &record, driver);
    if (reply->status == SHOAL_STATUS_OK)
        zsys_info("claims: %s created for %s (%" PRIu64 " bytes, %s)", record.id, record.tenant,
                  record.memory_bytes, record.driver);
    shoal_claim_codec.clear(&record);
    return reply;
}

static shoal_envelope_t *
s_list(shoal_claims_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    shoal_claim_records_t list = { 0 };
    if (shoal_claim_store_list(self->store, &list))
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_claim_store_error(self->store));
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    shoal_msg_claim_list_t *body = (shoal_msg_claim_list_t *) shoal_envelope_new_body(reply);
    body->claims = (shoal_msg_claim_info_t *) zmalloc(sizeof(shoal_msg_claim_info_t) * (list.count + 1));
    for (size_t i = 0; i < list.count && body->count < SHOAL_CLAIM_LIST_MAX; i++) {
        const shoal_claim_record_t *record = &list.items[i];
        if (record->state != SHOAL_CLAIM_RELEASED && s_may_see(caller, record->tenant))
            s_info_fill(self, &body->claims[body->count++], record);
    }
    shoal_claim_records_clear(&list);
    return reply;
}

//  Stop, start, pause, resume and release: one state change each, with
//  what the guest must do for it.
static shoal_envelope_t *
s_change(shoal_claims_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_claim_ref_t *body = (const shoal_msg_claim_ref_t *) request->body;
    shoal_claim_record_t record;
    shoal_envelope_t *reply = s_find(self, request, caller, body->id, &record);
    if (reply)
        return reply;
    if (request->type == SHOAL_MSG_CLAIM_SHOW) {
        reply = s_info_reply(self, request, &record);
        shoal_claim_codec.clear(&record);
        return reply;
    }
    shoal_claim_state_t to = request->type == SHOAL_MSG_CLAIM_STOP ? SHOAL_CLAIM_STOPPED
                           : request->type == SHOAL_MSG_CLAIM_PAUSE ? SHOAL_CLAIM_PAUSED
                           : request->type == SHOAL_MSG_CLAIM_RELEASE ? SHOAL_CLAIM_RELEASED
                           : SHOAL_CLAIM_RUNNING;
    const char *verb = request->type == SHOAL_MSG_CLAIM_STOP ? "stopped"
                     : request->type == SHOAL_MSG_CLAIM_PAUSE ? "paused"
                     : request->type == SHOAL_MSG_CLAIM_RELEASE ? "released"
                     : request->type == SHOAL_MSG_CLAIM_RESUME ? "resumed" : "started";
    //  Resume thaws a paused guest; start runs a stopped one. Each is legal
    //  only from its own state, though both end in running.
    bool from_ok = request->type == SHOAL_MSG_CLAIM_RESUME ? record.state == SHOAL_CLAIM_PAUSED
                 : request->type == SHOAL_MSG_CLAIM_START ? record.state != SHOAL_CLAIM_PAUSED
                 : true;
    if (!from_ok || !s_transition_legal(record.state, to)) {
        reply = s_conflict(request, &record, verb);
        shoal_claim_codec.clear(&record);
        return reply;
    }
    char *error = NULL;
    shoal_driver_t *driver = s_driver(self, record.driver, &error);
    int rc = driver ? 0 : -1;
    if (driver && request->type == SHOAL_MSG_CLAIM_START) {
        char message[CLAIMS_MESSAGE_MAX];
        uint32_t status = shoal_admission_check(self->admission, record.tenant, record.memory_bytes, false,
                                                message, sizeof message);
        if (status != SHOAL_STATUS_OK)
            reply = shoal_envelope_reply(request, status, "%s", message);
        else
            reply = s_guest_start(self, request, &record, driver);
        shoal_claim_codec.clear(&record);
        return reply;
    }
    if (driver) {
        switch (request->type) {
            case SHOAL_MSG_CLAIM_STOP: rc = driver->ops->stop(driver, record.id, &error); break;
            case SHOAL_MSG_CLAIM_PAUSE: rc = driver->ops->pause(driver, record.id, &error); break;
            case SHOAL_MSG_CLAIM_RESUME: rc = driver->ops->resume(driver, record.id, &error); break;
            default: rc = driver->ops->destroy(driver, record.id, &error); break;
        }
    }
    if (rc) {
        //  A guest that cannot be paused or resumed is gone or broken: the
        //  claim says so rather than pretend.
        zsys_error("claims: %s cannot be %s: %s", record.id, verb, error);
        if (driver && to != SHOAL_CLAIM_RELEASED && s_transition_legal(record.state, SHOAL_CLAIM_ERROR))
            s_set_state(self, &record, SHOAL_CLAIM_ERROR, error);
        reply = shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "claim '%s' cannot be %s: %s",
                                     record.id, verb, error);
    }
    else
    if (s_set_state(self, &record, to, NULL))
        reply = shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_claim_store_error(self->store));
    else
    if (to == SHOAL_CLAIM_RELEASED && shoal_claims_register(self, &record))
        reply = shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "claim '%s' released, but the registry "
                                     "could not be told", record.id);
    else {
        zsys_info("claims: %s %s", record.id, verb);
        reply = s_info_reply(self, request, &record);
    }
    free(error);
    shoal_claim_codec.clear(&record);
    return reply;
}

static shoal_envelope_t *
s_call(shoal_claims_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_claim_call_t *body = (const shoal_msg_claim_call_t *) request->body;
    shoal_claim_record_t record;
    shoal_envelope_t *reply = s_find(self, request, caller, body->id, &record);
    if (reply)
        return reply;
    //  A moving claim's guest runs, and answers, until the final round
    //  pauses it.
    bool moving_paused = record.state == SHOAL_CLAIM_MOVING
                      && (!self->paused || self->paused(record.id, self->paused_arg));
    if (record.state == SHOAL_CLAIM_PAUSED || moving_paused) {
        reply = shoal_envelope_reply(request, SHOAL_STATUS_UNAVAILABLE, "claim '%s' is %s: retry",
                                     record.id, shoal_claim_state_name(record.state));
        reply->retry_after_ms = SHOAL_CLAIMS_RETRY_AFTER_MS;
        shoal_claim_codec.clear(&record);
        return reply;
    }
    if (record.state != SHOAL_CLAIM_RUNNING && record.state != SHOAL_CLAIM_MOVING) {
        reply = s_conflict(request, &record, "called");
        shoal_claim_codec.clear(&record);
        return reply;
    }
    char *error = NULL;
    shoal_driver_t *driver = s_driver(self, record.driver, &error);
    if (driver && !driver->ops->kv_put) {
        reply = shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "claim '%s' runs on driver %s, whose "
                                     "guests take no calls", record.id, record.driver);
        shoal_claim_codec.clear(&record);
        return reply;
    }
    uint8_t value[SHOAL_CALL_VALUE_MAX];
    size_t size = 0;
    bool found = false;
    int rc = !driver ? -1
           : streq(body->op, "put")
           ? driver->ops->kv_put(driver, record.id, body->key, body->value, body->value_size, &error)
           : driver->ops->kv_get(driver, record.id, body->key, value, sizeof value, &size, &found, &error);
    if (rc)
        reply = shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "claim '%s': %s %s: %s", record.id,
                                     body->op, body->key, error ? error : "failed");
    else
    if (streq(body->op, "get") && !found)
        reply = shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "claim '%s' has no key '%s'",
                                     record.id, body->key);
    else {
        reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
        shoal_msg_claim_call_reply_t *answer = (shoal_msg_claim_call_reply_t *) shoal_envelope_new_body(reply);
        answer->found = found;
        if (found && size) {
            answer->value = (uint8_t *) zmalloc(size);
            memcpy(answer->value, value, size);
            answer->value_size = size;
        }
    }
    free(error);
    shoal_claim_codec.clear(&record);
    return reply;
}

static shoal_envelope_t *
s_lookup(shoal_claims_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_claim_ref_t *body = (const shoal_msg_claim_ref_t *) request->body;
    shoal_kv_record_t kv = { 0 };
    bool found = false;
    char *scoped = s_scoped_id(caller, body->id);
    int rc = scoped ? shoal_oplog_kv_get(self->oplog, SHOAL_REGISTRY_DATASET, scoped, &kv, &found) : 0;
    free(scoped);
    if (rc == 0 && (!found || kv.deleted)) {
        shoal_kv_codec.clear(&kv);
        rc = shoal_oplog_kv_get(self->oplog, SHOAL_REGISTRY_DATASET, body->id, &kv, &found);
    }
    if (rc)
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_oplog_error(self->oplog));
    shoal_registry_record_t record = { 0 };
    char error[CLAIMS_MESSAGE_MAX];
    bool decoded = found && !kv.deleted
                && shoal_msg_registry_record_codec.decode(kv.value, kv.value_size, &record,
                                                          error, sizeof error) == 0;
    if (found && !kv.deleted && !decoded)
        zsys_error("claims: registry value of %s: %s", body->id, error);
    shoal_kv_codec.clear(&kv);
    if (!decoded || !s_may_see(caller, record.tenant ? record.tenant : "")) {
        shoal_msg_registry_record_codec.clear(&record);
        return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "no claim '%s' in the registry of %s",
                                    body->id, self->settings->node_id);
    }
    if (record.released) {
        shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND,
                                                       "claim '%s' was released (by %s, its last owner)",
                                                       body->id, record.owner);
        shoal_msg_registry_record_codec.clear(&record);
        return reply;
    }
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    shoal_registry_record_t *answer = (shoal_registry_record_t *) shoal_envelope_new_body(reply);
    *answer = record;
    return reply;
}

//  Fills SCOPE with the counters of TENANT (NULL: of the node). Returns 0 or -1.
static int
s_scope_fill(shoal_claims_t *self, shoal_msg_counter_scope_t *scope, const char *tenant)
{
    scope->tenant = strdup(tenant ? tenant : "");
    scope->reserved = shoal_admission_reserved(self->admission, tenant);
    return shoal_claim_store_counters(self->store, tenant, &scope->used);
}

static bool
s_scope_empty(const shoal_msg_counter_scope_t *scope)
{
    return !scope->used.claims && !scope->used.running && !scope->used.memory_bytes
        && !scope->reserved.claims && !scope->reserved.running && !scope->reserved.memory_bytes;
}

//  Every tenant with stored counters or reservations, in name order (a new
//  list), or NULL when the store cannot be read.
static zlistx_t *
s_counted_tenants(shoal_claims_t *self)
{
    zlistx_t *tenants = shoal_claim_store_tenants(self->store);
    if (!tenants)
        return NULL;
    zlistx_t *reserved = shoal_admission_reserved_tenants(self->admission);
    zlistx_set_comparator(tenants, (zlistx_comparator_fn *) strcmp);
    for (const char *tenant = (const char *) zlistx_first(reserved); tenant;
         tenant = (const char *) zlistx_next(reserved))
        if (!zlistx_find(tenants, (void *) tenant))
            zlistx_add_end(tenants, (void *) tenant);
    zlistx_destroy(&reserved);
    zlistx_sort(tenants);
    return tenants;
}

//  The admission counters: of one tenant, or of the node and every tenant
//  counting something. A tenant reads its own and nothing else.
static shoal_envelope_t *
s_counters(shoal_claims_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_counters_request_t *body = (const shoal_msg_counters_request_t *) request->body;
    const char *asked = *body->tenant ? body->tenant : NULL;
    if (shoal_caller_is_tenant(caller)) {
        if (asked && !streq(asked, caller->tenant))
            return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN,
                                        "tenant %s cannot read the counters of %s", caller->tenant, asked);
        asked = caller->tenant;
    }
    zlistx_t *tenants = asked ? NULL : s_counted_tenants(self);
    if (!asked && !tenants)
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_claim_store_error(self->store));
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    shoal_msg_counters_t *answer = (shoal_msg_counters_t *) shoal_envelope_new_body(reply);
    size_t room = asked ? 1 : zlistx_size(tenants) + 1;
    if (room > SHOAL_COUNTER_SCOPES_MAX)
        room = SHOAL_COUNTER_SCOPES_MAX;
    answer->scopes = (shoal_msg_counter_scope_t *) zmalloc(sizeof(shoal_msg_counter_scope_t) * room);
    int rc = s_scope_fill(self, &answer->scopes[answer->count++], asked);
    for (const char *tenant = tenants ? (const char *) zlistx_first(tenants) : NULL; tenant && rc == 0;
         tenant = (const char *) zlistx_next(tenants)) {
        if (answer->count == room) {
            answer->more = true;
            break;
        }
        shoal_msg_counter_scope_t *scope = &answer->scopes[answer->count];
        rc = s_scope_fill(self, scope, tenant);
        //  A tenant whose claims were all released counts nothing: left out.
        if (rc == 0 && s_scope_empty(scope)) {
            free(scope->tenant);
            memset(scope, 0, sizeof *scope);
        }
        else
            answer->count++;
    }
    zlistx_destroy(&tenants);
    if (rc) {
        shoal_envelope_destroy(&reply);
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_claim_store_error(self->store));
    }
    return reply;
}

shoal_envelope_t *
shoal_claims_handle(shoal_claims_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    switch (request->type) {
        case SHOAL_MSG_CLAIM_CREATE:
            return s_create(self, request, caller);
        case SHOAL_MSG_CLAIM_LIST:
            return s_list(self, request, caller);
        case SHOAL_MSG_CLAIM_SHOW:
        case SHOAL_MSG_CLAIM_STOP:
        case SHOAL_MSG_CLAIM_START:
        case SHOAL_MSG_CLAIM_PAUSE:
        case SHOAL_MSG_CLAIM_RESUME:
        case SHOAL_MSG_CLAIM_RELEASE:
            return s_change(self, request, caller);
        case SHOAL_MSG_CLAIM_CALL:
            return s_call(self, request, caller);
        case SHOAL_MSG_LOOKUP:
            return s_lookup(self, request, caller);
        case SHOAL_MSG_COUNTERS:
            return s_counters(self, request, caller);
        default:
            return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "%s is not a claim request",
                                        shoal_msg_type_name(request->type));
    }
}
