/*  shoal_claims: claim requests, the guests behind them (through the guest
    actor), and the reconciliation at start. See shoal_claims.h for states
    and rules.

    A create writes the claim as creating (counted, so a crash between this
    and the guest's start leaves counts a recount agrees with), appends it
    to the registry, asks the guest actor to create and start the guest,
    and when it answers writes it running. A guest that fails to come up
    leaves the claim in error with the reason.

    A request that waits on the guest actor keeps its caller (s_pending_t)
    and is answered from the actor's callback, which reads the claim again:
    its stored state is the truth, not the copy the request saw.
*/
#include "shoal_claims.h"
#include "shoal_names.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <ctype.h>

#define CLAIMS_DEFAULT_DRIVER "proc"
//  The death watch reads this many claims at a time to find the next one
//  to look at.
#define CLAIMS_WATCH_BATCH 16
//  Generated ids: this prefix and hex digits of a new UUID.
#define CLAIMS_ID_PREFIX "c-"
#define CLAIMS_ID_HEX 16
#define CLAIMS_MESSAGE_MAX 512
//  The first epoch of a claim; every move raises it.
#define CLAIMS_FIRST_EPOCH 1
struct _shoal_claims_t {
    const shoal_settings_t *settings;   //  the node's live settings (borrowed)
    char *endpoint;                     //  where this node serves, for the registry
    shoal_oplog_t *oplog;               //  the registry lives here (borrowed)
    shoal_claim_store_t *store;         //  claims and counters
    shoal_admission_t *admission;       //  limits and reservations
    shoal_guests_t *guests;             //  the guest actor (borrowed)
    zsock_t *router;                    //  answers requests that waited on a guest (borrowed)
    shoal_data_written_fn *written;     //  told of registry entries written
    void *written_arg;                  //  its argument
    shoal_claims_paused_fn *paused;     //  whether a moving claim's guest is paused
    void *paused_arg;                   //  its argument
    char *watch_after;                  //  the death watch goes on after this claim id ("": from the first)
    int64_t watch_next_ms;              //  when it looks again (monotonic)
    bool watching;                      //  the death watch's look is in flight
    shoal_objects_t *objects;           //  images guests start from and checkpoint into (borrowed; NULL until set)
    uint64_t restores;                  //  numbers the read locks creates from objects hold
};

//  A request that waits on the guest actor: whom to answer, and about what.
typedef struct {
    shoal_claims_t *self;
    zframe_t *client;                   //  the caller's routing id
    shoal_msg_type_t type;              //  the request's type
    uint64_t request_id;                //  and id
    shoal_claim_state_t to;             //  a state change's target state
    char *verb;                         //  what the change is called in replies ("stopped")
    //  A create from an object:
    shoal_objects_image_t image;        //  the object, and the instance here read-locked
    char *tenant;                       //  the object's tenant
    char *object;                       //  and name
    char *claim_id;                     //  the claim made from it
    char *driver;                       //  and its driver
    //  A checkpoint:
    uint64_t checkpoint_iid;            //  the instance the guest actor writes
} s_pending_t;

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
    //  here (aborted; paused, when it was paused before), or gone from this
    //  node (moved). On the target it arrives moving and becomes running
    //  (or paused) once its guest is there.
    [SHOAL_CLAIM_MOVING] = { [SHOAL_CLAIM_RUNNING] = true, [SHOAL_CLAIM_PAUSED] = true,
                             [SHOAL_CLAIM_ERROR] = true },
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

bool
shoal_claims_step_legal(shoal_claim_state_t from, shoal_claim_state_t to)
{
    return s_transition_legal(from, to);
}

static s_pending_t *
s_pending_new(shoal_claims_t *self, const shoal_envelope_t *request, zframe_t *routing_id)
{
    s_pending_t *pending = (s_pending_t *) zmalloc(sizeof *pending);
    pending->self = self;
    pending->client = zframe_dup(routing_id);
    pending->type = request->type;
    pending->request_id = request->request_id;
    return pending;
}

static void
s_pending_destroy(s_pending_t **pending_p)
{
    if (*pending_p) {
        s_pending_t *pending = *pending_p;
        zframe_destroy(&pending->client);
        free(pending->verb);
        if (pending->self->objects)
            shoal_objects_image_close(pending->self->objects, &pending->image, NULL);
        free(pending->tenant);
        free(pending->object);
        free(pending->claim_id);
        free(pending->driver);
        free(pending);
        *pending_p = NULL;
    }
}

//  Sends REPLY (taken) to PENDING's caller, and frees PENDING.
static void
s_answer(s_pending_t **pending_p, shoal_envelope_t **reply_p)
{
    s_pending_t *pending = *pending_p;
    char error[CLAIMS_MESSAGE_MAX];
    zmsg_t *msg = shoal_envelope_encode(*reply_p, error, sizeof error);
    if (!msg)
        zsys_error("claims: cannot encode a reply to %s: %s", shoal_msg_type_name(pending->type), error);
    else
    if (pending->self->router) {
        zframe_t *to = zframe_dup(pending->client);
        zmsg_prepend(msg, &to);
        zmsg_send(&msg, pending->self->router);
    }
    zmsg_destroy(&msg);
    shoal_envelope_destroy(reply_p);
    s_pending_destroy(pending_p);
}

//  A reply to PENDING's request, as shoal_envelope_reply makes one.
static shoal_envelope_t *
s_pending_reply(const s_pending_t *pending, uint32_t status, const char *format, ...) CHECK_PRINTF(3);

static shoal_envelope_t *
s_pending_reply(const s_pending_t *pending, uint32_t status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *text = zsys_vprintf(format, args);
    va_end(args);
    shoal_envelope_t *request = shoal_envelope_new(pending->type, pending->request_id);
    shoal_envelope_t *reply = shoal_envelope_reply(request, status, "%s", text ? text : "");
    shoal_envelope_destroy(&request);
    free(text);
    return reply;
}

//  409 for a claim whose guest has an operation in flight.
static shoal_envelope_t *
s_busy_reply(const shoal_envelope_t *request, const char *id, const char *operation)
{
    return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "claim '%s' is busy: its guest's %s is in "
                                "flight; retry when it is done", id, operation);
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
    record->error = to == SHOAL_CLAIM_ERROR && reason ? shoal_strdup(reason) : NULL;
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

//  Reads claim ID into RECORD. Returns 0 with *FOUND, or -1 (logged).
static int
s_claim_get(shoal_claims_t *self, const char *id, shoal_claim_record_t *record, bool *found)
{
    memset(record, 0, sizeof *record);
    if (shoal_claim_store_get(self->store, id, record, found)) {
        zsys_error("claims: cannot read claim %s: %s", id, shoal_claim_store_error(self->store));
        return -1;
    }
    return 0;
}

//  The guest actor looked at one claim's guest after a start.
static void
s_reconciled(const shoal_guest_request_t *request, const shoal_guest_answer_t *answer, void *arg)
{
    shoal_claims_t *self = (shoal_claims_t *) arg;
    shoal_claim_record_t record;
    bool found = false;
    if (answer->cancelled || s_claim_get(self, request->claim_id, &record, &found) || !found)
        return;
    //  Nothing else changes a claim while its reconcile is in flight, but
    //  a move may have adopted it meanwhile: its move settles it.
    if (!shoal_claim_holds_guest(record.state) || record.state == SHOAL_CLAIM_MOVING) {
        shoal_claim_codec.clear(&record);
        return;
    }
    if (answer->liveness == SHOAL_GUEST_RUNS) {
        zsys_info("claims: %s adopted: its guest still runs", record.id);
        if (record.state == SHOAL_CLAIM_CREATING)
            s_set_state(self, &record, SHOAL_CLAIM_RUNNING, NULL);
    }
    else
    if (answer->restarted) {
        zsys_info("claims: %s restarted: its guest had ended (%s)", record.id,
                  *answer->error ? answer->error : "gone");
        if (record.state == SHOAL_CLAIM_CREATING)
            s_set_state(self, &record, SHOAL_CLAIM_RUNNING, NULL);
    }
    else {
        char *reason = zsys_sprintf("the guest was not running when the node started (%s)",
                                    *answer->error ? answer->error : "no reason given");
        zsys_warning("claims: %s was %s: %s", record.id, shoal_claim_state_name(record.state), reason);
        s_set_state(self, &record, SHOAL_CLAIM_ERROR, reason);
        free(reason);
    }
    shoal_claim_codec.clear(&record);
}

//  Asks the guest actor about every claim's guest, and recounts.
static int
s_reconcile(shoal_claims_t *self, char **error_p)
{
    shoal_claim_records_t list = { 0 };
    if (shoal_claim_store_list(self->store, &list)) {
        *error_p = zsys_sprintf("cannot read the claims: %s", shoal_claim_store_error(self->store));
        return -1;
    }
    for (size_t i = 0; i < list.count; i++) {
        const shoal_claim_record_t *record = &list.items[i];
        //  A moving claim is its move's to settle (shoal_moves reads its
        //  record next): a target that adopted it may not have started its
        //  guest yet.
        if (!shoal_claim_holds_guest(record->state) || record->state == SHOAL_CLAIM_MOVING)
            continue;
        shoal_guest_request_t request = {
            .op = SHOAL_GUEST_RECONCILE, .claim_id = record->id, .driver = record->driver,
            .restart = self->settings->guest_restart, .paused = record->state == SHOAL_CLAIM_PAUSED,
        };
        //  Not exclusive: a request for the claim that comes meanwhile
        //  waits its turn behind the look instead of being refused, and
        //  finds the claim as the look left it.
        shoal_guests_submit(self->guests, &request, false, s_reconciled, self);
    }
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
                 shoal_oplog_t *oplog, shoal_guests_t *guests, shoal_data_written_fn *written, void *arg,
                 char **error_p)
{
    shoal_claims_t *self = (shoal_claims_t *) zmalloc(sizeof *self);
    self->settings = settings;
    self->endpoint = shoal_strdup(endpoint);
    self->oplog = oplog;
    self->store = shoal_claim_store_new(store, settings->store_sync);
    self->admission = shoal_admission_new(settings, self->store);
    self->guests = guests;
    self->written = written;
    self->written_arg = arg;
    self->watch_after = shoal_strdup("");
    if (s_reconcile(self, error_p))
        shoal_claims_destroy(&self);
    return self;
}

void
shoal_claims_destroy(shoal_claims_t **self_p)
{
    if (*self_p) {
        shoal_claims_t *self = *self_p;
        shoal_admission_destroy(&self->admission);
        shoal_claim_store_destroy(&self->store);
        free(self->watch_after);
        free(self->endpoint);
        free(self);
        *self_p = NULL;
    }
}

void
shoal_claims_start(shoal_claims_t *self, zsock_t *router)
{
    self->router = router;
}

void
shoal_claims_set_objects(shoal_claims_t *self, shoal_objects_t *objects)
{
    self->objects = objects;
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

//  The death watch's look at one guest came back: a guest that is gone
//  puts its claim in error, if the claim still says it runs.
static void
s_watched(const shoal_guest_request_t *request, const shoal_guest_answer_t *answer, void *arg)
{
    shoal_claims_t *self = (shoal_claims_t *) arg;
    if (answer->cancelled)
        return;
    self->watching = false;
    if (answer->liveness == SHOAL_GUEST_UNKNOWN)
        zsys_warning("claims: cannot tell whether the guest of %s runs: %s", request->claim_id,
                     *answer->error ? answer->error : "no reason given");
    if (answer->liveness != SHOAL_GUEST_GONE)
        return;
    shoal_claim_record_t record;
    bool found = false;
    if (s_claim_get(self, request->claim_id, &record, &found) || !found)
        return;
    //  A stop, pause or move that came after the look knows better.
    if ((record.state == SHOAL_CLAIM_RUNNING || record.state == SHOAL_CLAIM_PAUSED)
    &&  !shoal_guests_busy(self->guests, record.id)) {
        char *reason = zsys_sprintf("the guest died while the node ran (%s)",
                                    *answer->error ? answer->error : "no reason given");
        zsys_warning("claims: %s was %s: %s", record.id, shoal_claim_state_name(record.state), reason);
        s_set_state(self, &record, SHOAL_CLAIM_ERROR, reason);
        free(reason);
    }
    shoal_claim_codec.clear(&record);
}

void
shoal_claims_tick(shoal_claims_t *self)
{
    int64_t now = zclock_mono();
    int64_t interval = self->settings->guest_watch_ms;
    if (interval == 0 || self->watching || now < self->watch_next_ms)
        return;
    //  One look in flight at a time: a slow manager holds one worker of the
    //  guest actor, never the reactor, and never all the workers.
    shoal_claim_records_t page = { 0 };
    if (shoal_claim_store_list_after(self->store, self->watch_after, CLAIMS_WATCH_BATCH, &page)) {
        zsys_error("claims: the death watch cannot read the claims: %s", shoal_claim_store_error(self->store));
        self->watch_next_ms = now + interval;
        return;
    }
    const shoal_claim_record_t *next = NULL;
    size_t looked = 0;
    while (looked < page.count && !next) {
        const shoal_claim_record_t *record = &page.items[looked++];
        if ((record->state == SHOAL_CLAIM_RUNNING || record->state == SHOAL_CLAIM_PAUSED)
        &&  !shoal_guests_pending(self->guests, record->id))
            next = record;
    }
    if (looked) {
        free(self->watch_after);
        self->watch_after = shoal_strdup(page.items[looked - 1].id);
    }
    if (next) {
        shoal_guest_request_t request = { .op = SHOAL_GUEST_PROBE, .claim_id = next->id, .driver = next->driver };
        self->watching = true;
        shoal_guests_submit(self->guests, &request, false, s_watched, self);
    }
    else
    if (page.count < CLAIMS_WATCH_BATCH) {
        //  The walk passed the last claim: rest, then start from the first.
        free(self->watch_after);
        self->watch_after = shoal_strdup("");
        self->watch_next_ms = now + interval;
    }
    shoal_claim_records_clear(&page);
}

bool
shoal_claims_handles(shoal_msg_type_t type)
{
    return (type >= SHOAL_MSG_CLAIM_CREATE && type <= SHOAL_MSG_LOOKUP) || type == SHOAL_MSG_COUNTERS
        || type == SHOAL_MSG_CLAIM_CHECKPOINT;
}

static void
s_info_fill(shoal_claims_t *self, shoal_msg_claim_info_t *info, const shoal_claim_record_t *record)
{
    info->id = shoal_strdup(record->id);
    info->tenant = shoal_strdup(record->tenant);
    info->state = (int) record->state;
    info->memory_bytes = record->memory_bytes;
    info->driver = shoal_strdup(record->driver);
    info->epoch = record->epoch;
    info->created_ms = record->created_ms;
    info->error = shoal_strdup(record->error ? record->error : "");
    info->owner = shoal_strdup(self->settings->node_id);
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

//  A guest operation that brings a claim to running (create, start) came
//  back: the claim is written running, or in error with the reason.
static void
s_came_up(const shoal_guest_request_t *request, const shoal_guest_answer_t *answer, void *arg)
{
    s_pending_t *pending = (s_pending_t *) arg;
    shoal_claims_t *self = pending->self;
    shoal_claim_record_t record;
    bool found = false;
    if (answer->cancelled || s_claim_get(self, request->claim_id, &record, &found) || !found) {
        s_pending_destroy(&pending);
        return;
    }
    const char *verb = request->op == SHOAL_GUEST_CREATE ? "create"
                     : request->op == SHOAL_GUEST_RESTORE ? "start from its object" : "start";
    shoal_envelope_t *reply = NULL;
    if (answer->rc) {
        zsys_error("claims: %s: cannot %s its guest: %s", record.id, verb, answer->error);
        if (s_transition_legal(record.state, SHOAL_CLAIM_ERROR))
            s_set_state(self, &record, SHOAL_CLAIM_ERROR, answer->error);
        reply = s_pending_reply(pending, SHOAL_STATUS_INTERNAL, "claim '%s' failed to %s: %s", record.id, verb,
                                answer->error);
    }
    else
    if (!s_transition_legal(record.state, SHOAL_CLAIM_RUNNING) || s_set_state(self, &record, SHOAL_CLAIM_RUNNING, NULL))
        reply = s_pending_reply(pending, SHOAL_STATUS_INTERNAL, "claim '%s' started, but cannot be written "
                                "running: %s", record.id, shoal_claim_store_error(self->store));
    else {
        reply = s_pending_reply(pending, SHOAL_STATUS_OK, "%s", "OK");
        s_info_fill(self, (shoal_msg_claim_info_t *) shoal_envelope_new_body(reply), &record);
        if (request->op == SHOAL_GUEST_CREATE || request->op == SHOAL_GUEST_RESTORE)
            zsys_info("claims: %s created for %s (%" PRIu64 " bytes, %s%s%s)", record.id, record.tenant,
                      record.memory_bytes, record.driver, pending->object ? ", from object " : "",
                      pending->object ? pending->object : "");
        else
            zsys_info("claims: %s started", record.id);
    }
    shoal_claim_codec.clear(&record);
    s_answer(&pending, &reply);
}

// ---------------------------------------------------------------------------
//  Claims and storage objects: a guest made from an object's image, and a
//  guest saved as one (a checkpoint)

//  Opens object BODY->from_object for a create (the image's SPEC in place
//  of the request's). Returns NULL, or the reply that ends the request.
static shoal_envelope_t *
s_image_open(shoal_claims_t *self, const shoal_envelope_t *request, const shoal_msg_claim_create_t *body,
             shoal_objects_image_t *image, shoal_guest_spec_t *spec)
{
    if (!self->objects)
        return shoal_envelope_reply(request, SHOAL_STATUS_UNAVAILABLE, "storage objects are not ready on node %s",
                                    self->settings->node_id);
    if (body->disk_bytes || body->rate)
        return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "a guest made from object '%s' has its image's "
                                    "disk and load: leave disk_bytes and rate unset", body->from_object);
    char *holder = zsys_sprintf("shoal:restore#%" PRIu64, ++self->restores);
    shoal_envelope_t *reply = shoal_objects_image_open(self->objects, request, body->tenant, body->from_object,
                                                       holder, image);
    free(holder);
    if (!reply && body->memory_bytes && body->memory_bytes != image->memory_bytes) {
        reply = shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "object '%s' holds a guest of %" PRIu64
                                     " bytes of memory, not %" PRIu64 ": leave memory_bytes unset",
                                     body->from_object, image->memory_bytes, body->memory_bytes);
        shoal_objects_image_close(self->objects, image, NULL);
    }
    if (!reply) {
        spec->memory_bytes = image->memory_bytes;
        spec->disk_bytes = image->disk_bytes;
        spec->rate = 0;
    }
    return reply;
}

//  Ends a create from an object that failed before its guest actor's
//  restore ran: the claim goes to error with WHY, as a failed create does.
static void
s_restore_failed(s_pending_t *pending, const char *why)
{
    shoal_guest_request_t request = { .op = SHOAL_GUEST_RESTORE, .claim_id = pending->claim_id };
    shoal_guest_answer_t answer = { .rc = -1, .error = why };
    s_came_up(&request, &answer, pending);
}

//  The guest actor made PENDING's guest (or could not).
static void
s_restored(const shoal_guest_request_t *request, const shoal_guest_answer_t *answer, void *arg)
{
    s_pending_t *pending = (s_pending_t *) arg;
    if (!answer->cancelled)
        zsys_info("claims: %s: its guest from object '%s' (%" PRIu64 " bytes): %s", request->claim_id,
                  pending->object, pending->image.size, answer->rc ? answer->error : "made and started");
    //  Bytes that do not match: no one reads that instance again.
    if (!answer->cancelled && answer->mismatch)
        shoal_objects_image_close(pending->self->objects, &pending->image, answer->error);
    s_came_up(request, answer, pending);
}

static void s_fetched(int rc, const char *why, bool cancelled, void *arg);

//  Makes PENDING's guest from its image: read from the instance here, or
//  first copied here from another node.
static void
s_restore(s_pending_t *pending)
{
    shoal_claims_t *self = pending->self;
    if (!pending->image.instance_id) {
        char *error = NULL;
        if (shoal_objects_fetch(self->objects, pending->tenant, &pending->image, s_fetched, pending, &error)) {
            char *why = zsys_sprintf("object '%s' is not on this node and cannot be copied here: %s",
                                     pending->object, error);
            s_restore_failed(pending, why);
            free(why);
        }
        free(error);
        return;
    }
    shoal_guest_request_t guest = {
        .op = SHOAL_GUEST_RESTORE, .claim_id = pending->claim_id, .driver = pending->driver,
        .path = pending->image.path, .size = pending->image.size, .checksum = &pending->image.checksum,
    };
    shoal_guests_submit(self->guests, &guest, true, s_restored, pending);
}

//  PENDING's object was copied here (or could not be): it is opened again,
//  here now.
static void
s_fetched(int rc, const char *why, bool cancelled, void *arg)
{
    s_pending_t *pending = (s_pending_t *) arg;
    shoal_claims_t *self = pending->self;
    if (cancelled) {
        s_pending_destroy(&pending);
        return;
    }
    if (rc) {
        char *text = zsys_sprintf("object '%s' could not be copied here: %s", pending->object, why);
        s_restore_failed(pending, text);
        free(text);
        return;
    }
    shoal_envelope_t *request = shoal_envelope_new(pending->type, pending->request_id);
    char *holder = shoal_strdup(pending->image.holder);
    shoal_objects_image_close(self->objects, &pending->image, NULL);
    shoal_envelope_t *reply = shoal_objects_image_open(self->objects, request, pending->tenant, pending->object,
                                                       holder, &pending->image);
    free(holder);
    shoal_envelope_destroy(&request);
    if (reply || !pending->image.instance_id) {
        char *text = zsys_sprintf("object '%s' was copied here but cannot be read: %s", pending->object,
                                  reply ? reply->message : "no complete instance here");
        shoal_envelope_destroy(&reply);
        s_restore_failed(pending, text);
        free(text);
        return;
    }
    s_restore(pending);
}

//  The guest actor wrote a checkpoint (or could not): the object is
//  committed, or given up.
static void
s_checkpointed(const shoal_guest_request_t *request, const shoal_guest_answer_t *answer, void *arg)
{
    s_pending_t *pending = (s_pending_t *) arg;
    shoal_claims_t *self = pending->self;
    if (answer->cancelled) {
        //  The add in flight is given up with the node: the sweep removes it.
        s_pending_destroy(&pending);
        return;
    }
    shoal_envelope_t *reply = NULL;
    if (answer->rc) {
        shoal_objects_image_abort(self->objects, pending->checkpoint_iid);
        reply = s_pending_reply(pending, SHOAL_STATUS_INTERNAL, "claim '%s' cannot be checkpointed: %s",
                                request->claim_id, answer->error);
    }
    else {
        shoal_envelope_t *asked = shoal_envelope_new(pending->type, pending->request_id);
        reply = shoal_objects_image_commit(self->objects, asked, pending->checkpoint_iid, answer->bytes,
                                           answer->checksum, answer->memory_bytes, answer->disk_bytes);
        shoal_envelope_destroy(&asked);
        zsys_info("claims: %s checkpointed into object '%s' (%" PRIu64 " bytes): %s", request->claim_id,
                  pending->object, answer->bytes, reply->message);
    }
    s_answer(&pending, &reply);
}

//  Saves a stopped or paused claim's guest as a new object of its tenant.
static shoal_envelope_t *
s_checkpoint(shoal_claims_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller,
             zframe_t *routing_id)
{
    const shoal_msg_claim_checkpoint_t *body = (const shoal_msg_claim_checkpoint_t *) request->body;
    shoal_claim_record_t record;
    shoal_envelope_t *reply = s_find(self, request, caller, body->id, &record);
    if (reply)
        return reply;
    const char *busy = shoal_guests_busy(self->guests, record.id);
    char *dir = NULL;
    if (!self->objects)
        reply = shoal_envelope_reply(request, SHOAL_STATUS_UNAVAILABLE, "storage objects are not ready on node %s",
                                     self->settings->node_id);
    else
    if (record.state != SHOAL_CLAIM_STOPPED && record.state != SHOAL_CLAIM_PAUSED)
        reply = shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "claim '%s' is %s: a checkpoint saves a stopped "
                                     "or paused guest (pause or stop it first)", record.id,
                                     shoal_claim_state_name(record.state));
    else
    if (busy)
        reply = s_busy_reply(request, record.id, busy);
    else
    if (!(dir = shoal_guests_image_dir(self->guests, record.driver, record.id)))
        reply = shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "claim '%s' runs on driver %s, which keeps "
                                     "no guest image to save", record.id, record.driver);
    free(dir);
    uint64_t iid = 0;
    char *path = NULL;
    if (!reply)
        reply = shoal_objects_image_add(self->objects, request, record.tenant, body->name, body->comment, &iid,
                                        &path);
    if (reply) {
        shoal_claim_codec.clear(&record);
        return reply;
    }
    s_pending_t *pending = s_pending_new(self, request, routing_id);
    pending->checkpoint_iid = iid;
    pending->object = shoal_strdup(body->name);
    shoal_guest_request_t guest = {
        .op = SHOAL_GUEST_CHECKPOINT, .claim_id = record.id, .driver = record.driver, .path = path,
        .spec = { .memory_bytes = record.memory_bytes },
    };
    shoal_guests_submit(self->guests, &guest, true, s_checkpointed, pending);
    free(path);
    shoal_claim_codec.clear(&record);
    return NULL;
}

static shoal_envelope_t *
s_create(shoal_claims_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller, zframe_t *routing_id)
{
    const shoal_msg_claim_create_t *body = (const shoal_msg_claim_create_t *) request->body;
    if (shoal_caller_is_tenant(caller) && !streq(caller->tenant, body->tenant))
        return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN,
                                    "tenant %s cannot create claims for %s", caller->tenant, body->tenant);
    const char *driver_name = *body->driver ? body->driver : CLAIMS_DEFAULT_DRIVER;
    char *missing = shoal_guests_driver_missing(self->guests, driver_name);
    if (missing) {
        shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_UNAVAILABLE, "%s", missing);
        free(missing);
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
    //  A guest made from an object is what the object's image holds, read
    //  from an instance here held open until the guest actor has read it.
    shoal_objects_image_t image = { 0 };
    shoal_guest_spec_t spec = { body->memory_bytes, body->disk_bytes, body->rate };
    shoal_envelope_t *reply = NULL;
    if (*body->from_object)
        reply = s_image_open(self, request, body, &image, &spec);
    char message[CLAIMS_MESSAGE_MAX];
    uint32_t status = SHOAL_STATUS_OK;
    if (!reply)
        status = shoal_admission_check_guest(self->admission, self->settings->guest_dir, spec.disk_bytes, spec.rate,
                                             message, sizeof message);
    if (!reply && status == SHOAL_STATUS_OK)
        status = shoal_admission_check(self->admission, body->tenant, spec.memory_bytes, true, message,
                                       sizeof message);
    if (!reply && status != SHOAL_STATUS_OK)
        reply = shoal_envelope_reply(request, status, "%s", message);
    if (reply) {
        free(scoped);
        if (self->objects)
            shoal_objects_image_close(self->objects, &image, NULL);
        return reply;
    }

    record.id = *id ? shoal_strdup(id) : s_id_new(self);
    free(scoped);
    record.tenant = shoal_strdup(body->tenant);
    record.state = SHOAL_CLAIM_CREATING;
    record.memory_bytes = spec.memory_bytes;
    record.driver = shoal_strdup(driver_name);
    record.epoch = CLAIMS_FIRST_EPOCH;
    record.created_ms = (uint64_t) zclock_time();
    if (shoal_claim_store_put(self->store, NULL, &record))
        reply = shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_claim_store_error(self->store));
    else
    if (shoal_claims_register(self, &record))
        reply = shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "cannot register claim '%s': %s",
                                     record.id, shoal_oplog_error(self->oplog));
    if (reply) {
        if (self->objects)
            shoal_objects_image_close(self->objects, &image, NULL);
        shoal_claim_codec.clear(&record);
        return reply;
    }
    s_pending_t *pending = s_pending_new(self, request, routing_id);
    if (*body->from_object) {
        pending->image = image;
        pending->tenant = shoal_strdup(body->tenant);
        pending->object = shoal_strdup(body->from_object);
        pending->claim_id = shoal_strdup(record.id);
        pending->driver = shoal_strdup(record.driver);
        s_restore(pending);
    }
    else {
        shoal_guest_request_t guest = {
            .op = SHOAL_GUEST_CREATE, .claim_id = record.id, .driver = record.driver, .spec = spec,
        };
        shoal_guests_submit(self->guests, &guest, true, s_came_up, pending);
    }
    shoal_claim_codec.clear(&record);
    return NULL;
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

//  A stop, pause, resume or release came back from the guest actor.
static void
s_changed(const shoal_guest_request_t *request, const shoal_guest_answer_t *answer, void *arg)
{
    s_pending_t *pending = (s_pending_t *) arg;
    shoal_claims_t *self = pending->self;
    shoal_claim_record_t record;
    bool found = false;
    if (answer->cancelled || s_claim_get(self, request->claim_id, &record, &found) || !found) {
        s_pending_destroy(&pending);
        return;
    }
    shoal_claim_state_t to = pending->to;
    shoal_envelope_t *reply = NULL;
    if (answer->rc) {
        //  A guest that cannot be paused or resumed is gone or broken: the
        //  claim says so rather than pretend.
        zsys_error("claims: %s cannot be %s: %s", record.id, pending->verb, answer->error);
        if (to != SHOAL_CLAIM_RELEASED && s_transition_legal(record.state, SHOAL_CLAIM_ERROR))
            s_set_state(self, &record, SHOAL_CLAIM_ERROR, answer->error);
        reply = s_pending_reply(pending, SHOAL_STATUS_INTERNAL, "claim '%s' cannot be %s: %s", record.id,
                                pending->verb, answer->error);
    }
    else
    if (!s_transition_legal(record.state, to) || s_set_state(self, &record, to, NULL))
        reply = s_pending_reply(pending, SHOAL_STATUS_INTERNAL, "claim '%s' was %s, but cannot be written %s: %s",
                                record.id, pending->verb, shoal_claim_state_name(to),
                                shoal_claim_store_error(self->store));
    else
    if (to == SHOAL_CLAIM_RELEASED && shoal_claims_register(self, &record))
        reply = s_pending_reply(pending, SHOAL_STATUS_INTERNAL, "claim '%s' released, but the registry "
                                "could not be told", record.id);
    else {
        zsys_info("claims: %s %s", record.id, pending->verb);
        reply = s_pending_reply(pending, SHOAL_STATUS_OK, "%s", "OK");
        s_info_fill(self, (shoal_msg_claim_info_t *) shoal_envelope_new_body(reply), &record);
    }
    shoal_claim_codec.clear(&record);
    s_answer(&pending, &reply);
}

//  Stop, start, pause, resume and release: one state change each, with
//  what the guest must do for it, done by the guest actor.
static shoal_envelope_t *
s_change(shoal_claims_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller, zframe_t *routing_id)
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
    const char *busy = shoal_guests_busy(self->guests, record.id);
    char *missing = NULL;
    if (!from_ok || !s_transition_legal(record.state, to))
        reply = s_conflict(request, &record, verb);
    else
    if (busy)
        reply = s_busy_reply(request, record.id, busy);
    else
    if ((missing = shoal_guests_driver_missing(self->guests, record.driver)))
        reply = shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "claim '%s' cannot be %s: %s", record.id,
                                     verb, missing);
    else
    if (request->type == SHOAL_MSG_CLAIM_START) {
        char message[CLAIMS_MESSAGE_MAX];
        uint32_t status = shoal_admission_check(self->admission, record.tenant, record.memory_bytes, false,
                                                message, sizeof message);
        if (status != SHOAL_STATUS_OK)
            reply = shoal_envelope_reply(request, status, "%s", message);
    }
    free(missing);
    if (reply) {
        shoal_claim_codec.clear(&record);
        return reply;
    }
    shoal_guest_request_t guest = {
        .op = request->type == SHOAL_MSG_CLAIM_STOP ? SHOAL_GUEST_STOP
            : request->type == SHOAL_MSG_CLAIM_PAUSE ? SHOAL_GUEST_PAUSE
            : request->type == SHOAL_MSG_CLAIM_RESUME ? SHOAL_GUEST_RESUME
            : request->type == SHOAL_MSG_CLAIM_START ? SHOAL_GUEST_START
            : SHOAL_GUEST_DESTROY,
        .claim_id = record.id, .driver = record.driver,
    };
    s_pending_t *pending = s_pending_new(self, request, routing_id);
    pending->to = to;
    pending->verb = shoal_strdup(verb);
    shoal_guests_submit(self->guests, &guest, true,
                        request->type == SHOAL_MSG_CLAIM_START ? s_came_up : s_changed, pending);
    shoal_claim_codec.clear(&record);
    return NULL;
}

//  A guest call came back from the guest actor.
static void
s_called(const shoal_guest_request_t *request, const shoal_guest_answer_t *answer, void *arg)
{
    s_pending_t *pending = (s_pending_t *) arg;
    if (answer->cancelled) {
        s_pending_destroy(&pending);
        return;
    }
    const char *op = request->op == SHOAL_GUEST_KV_PUT ? "put" : "get";
    shoal_envelope_t *reply = NULL;
    if (answer->rc)
        reply = s_pending_reply(pending, SHOAL_STATUS_BAD_REQUEST, "claim '%s': %s %s: %s", request->claim_id,
                                op, request->key, answer->error);
    else
    if (request->op == SHOAL_GUEST_KV_GET && !answer->found)
        reply = s_pending_reply(pending, SHOAL_STATUS_NOT_FOUND, "claim '%s' has no key '%s'",
                                request->claim_id, request->key);
    else {
        reply = s_pending_reply(pending, SHOAL_STATUS_OK, "%s", "OK");
        shoal_msg_claim_call_reply_t *body = (shoal_msg_claim_call_reply_t *) shoal_envelope_new_body(reply);
        body->found = answer->found;
        if (answer->found && answer->value_size) {
            body->value = (uint8_t *) zmalloc(answer->value_size);
            memcpy(body->value, answer->value, answer->value_size);
            body->value_size = answer->value_size;
        }
    }
    s_answer(&pending, &reply);
}

static shoal_envelope_t *
s_call(shoal_claims_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller, zframe_t *routing_id)
{
    const shoal_msg_claim_call_t *body = (const shoal_msg_claim_call_t *) request->body;
    shoal_claim_record_t record;
    shoal_envelope_t *reply = s_find(self, request, caller, body->id, &record);
    if (reply)
        return reply;
    //  A moving claim's guest runs, and answers, until the final round
    //  pauses it; while the move's pause is in flight it answers as paused,
    //  so that no call lands after the last round was taken.
    const char *busy = shoal_guests_busy(self->guests, record.id);
    bool moving_paused = record.state == SHOAL_CLAIM_MOVING
                      && (busy || !self->paused || self->paused(record.id, self->paused_arg));
    if (record.state == SHOAL_CLAIM_PAUSED || moving_paused) {
        reply = shoal_envelope_reply(request, SHOAL_STATUS_UNAVAILABLE, "claim '%s' is %s: retry",
                                     record.id, shoal_claim_state_name(record.state));
        reply->retry_after_ms = SHOAL_CLAIMS_RETRY_AFTER_MS;
    }
    else
    if (record.state != SHOAL_CLAIM_RUNNING && record.state != SHOAL_CLAIM_MOVING)
        reply = s_conflict(request, &record, "called");
    else
    //  A guest call is no state change: while one is in flight (a stop, a
    //  pause, a move reading the guest's image before it begins), the call
    //  is to be retried, not refused.
    if (busy) {
        reply = shoal_envelope_reply(request, SHOAL_STATUS_UNAVAILABLE, "claim '%s' is busy: its guest's %s is "
                                     "in flight; retry", record.id, busy);
        reply->retry_after_ms = SHOAL_CLAIMS_RETRY_AFTER_MS;
    }
    else
    if (!shoal_guests_take_calls(self->guests, record.driver))
        reply = shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "claim '%s' runs on driver %s, whose "
                                     "guests take no calls", record.id, record.driver);
    if (reply) {
        shoal_claim_codec.clear(&record);
        return reply;
    }
    shoal_guest_request_t guest = {
        .op = streq(body->op, "put") ? SHOAL_GUEST_KV_PUT : SHOAL_GUEST_KV_GET,
        .claim_id = record.id, .driver = record.driver,
        .key = body->key, .value = body->value, .value_size = body->value_size,
    };
    shoal_guests_submit(self->guests, &guest, false, s_called, s_pending_new(self, request, routing_id));
    shoal_claim_codec.clear(&record);
    return NULL;
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
    scope->tenant = shoal_strdup(tenant ? tenant : "");
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
shoal_claims_handle(shoal_claims_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller,
                    zframe_t *routing_id)
{
    switch (request->type) {
        case SHOAL_MSG_CLAIM_CREATE:
            return s_create(self, request, caller, routing_id);
        case SHOAL_MSG_CLAIM_CHECKPOINT:
            return s_checkpoint(self, request, caller, routing_id);
        case SHOAL_MSG_CLAIM_LIST:
            return s_list(self, request, caller);
        case SHOAL_MSG_CLAIM_SHOW:
        case SHOAL_MSG_CLAIM_STOP:
        case SHOAL_MSG_CLAIM_START:
        case SHOAL_MSG_CLAIM_PAUSE:
        case SHOAL_MSG_CLAIM_RESUME:
        case SHOAL_MSG_CLAIM_RELEASE:
            return s_change(self, request, caller, routing_id);
        case SHOAL_MSG_CLAIM_CALL:
            return s_call(self, request, caller, routing_id);
        case SHOAL_MSG_LOOKUP:
            return s_lookup(self, request, caller);
        case SHOAL_MSG_COUNTERS:
            return s_counters(self, request, caller);
        default:
            return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "%s is not a claim request",
                                        shoal_msg_type_name(request->type));
    }
}
