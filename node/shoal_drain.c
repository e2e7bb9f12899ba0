/*  shoal_drain: a node's hot drain (see shoal_drain.h).

    DESIGN

    1. The mark. A drain marks the node draining in its record (synced)
       and in its admission, before anything moves: from then on a new
       claim or an incoming move is refused with 503 naming the drain, so
       the node only empties. The mark outlives a restart; undrain removes
       it.
    2. The list. The drain lists the claims that hold a guest here (running
       and paused ones), each an entry of the record, pending. A paused
       claim moves as a running one does (its rounds find nothing dirty)
       and stays paused on its target.
    3. Slots. The drain runs up to --parallel moves at once, within this
       node's free move slots. Whenever it has a slot free and a claim
       pending (at its start, and as soon as one of its moves ends) it asks
       every alive peer for its capacity (MSG_CAPACITY: its limits, its
       counts with the reservations of incoming moves, its move/concurrency
       and moves in flight, and whether it drains itself); a peer that does
       not answer within DRAIN_CAPACITY_MS is left out of that choice. Then
       it gives pending claims, in order, to the peer with the most free
       memory that has room in every limit and a free move slot, counting
       what this choice gave it already, and the drain's moves that were
       still being admitted when it asked (the peer's answer may not count
       their reservations yet; a move admitted before the ask is in the
       answer). The moves run (shoal_moves_begin); a slot that frees is
       filled from fresh figures, so a long move does not hold back the
       others. The targets' admission is what keeps every limit: the choice
       only avoids asking a full peer.
    4. An end. A move done: the claim moved. An abort: one attempt more;
       the second leaves the claim here, running, "stayed" with the reason.
       A refusal by the target's admission (429, 503, 507) before anything
       paused is no attempt: that target is not asked for that claim again.
       A claim no peer has room for, with none of the drain's moves in
       flight (an abort could free room), stays with each peer's reason.
    5. The record. Every change is written (synced) as it happens. A node
       that restarts with a drain running resumes it: an entry that was
       moving is settled once the moves' own recovery has ended its move
       (the claim gone from here: moved; here again: pending, no attempt
       counted, the crash was not the claim's), then the moves go on. The
       record's note says that it resumed.
    6. Undrain. The mark goes; a running drain starts no new move, and
       ends "stopped" once the moves in flight ended.
*/
#include "shoal_drain.h"
#include "shoal_drain_store.h"
#include "shoal_alloc.h"

#include <inttypes.h>

//  How long a choice of targets waits for a peer's capacity.
#define DRAIN_CAPACITY_MS 2000
//  How long after a choice the next one may ask, unless a move ends first.
#define DRAIN_RETRY_MS 500
//  Aborted moves of one claim before it stays.
#define DRAIN_ATTEMPTS_MAX 2
#define DRAIN_MESSAGE_MAX 1024

struct _shoal_drain_t {
    const shoal_settings_t *settings;   //  live settings (borrowed)
    shoal_store_t *store;               //  keeps the record (borrowed)
    shoal_claims_t *claims;             //  the claims, their store and admission (borrowed)
    shoal_moves_t *moves;               //  moves the claims (borrowed)
    shoal_mesh_t *mesh;                 //  the peers (borrowed)
    shoal_msg_drain_t record;           //  the mark and the last drain, as stored
    zhashx_t *capacities;               //  peer -> shoal_msg_capacity_t of this ask
    uint64_t ask_seq;                   //  the ask under way (answers of others are dropped)
    size_t asking;                      //  capacity requests of this ask unanswered
    bool asked;                         //  this ask's requests went out
    zlistx_t *admitting;                //  claim ids of the drain's moves being admitted when it asked
    size_t moving;                      //  drain moves in flight
    zhashx_t *refused;                  //  "claim peer" -> why that peer's admission refused that claim
    bool resuming;                      //  a restart found the drain running: entries moving to settle
    bool stopping;                      //  the node stops: nothing more is recorded
    int64_t started;                    //  monotonic ms this run of the drain began
    int64_t next_ask;                   //  monotonic ms the next ask may go from (0: at once)
};

//  A capacity request's context.
typedef struct {
    shoal_drain_t *self;
    uint64_t seq;                       //  the ask it belongs to
} s_ask_t;

static void
s_capacity_free(void **item_p)
{
    shoal_msg_capacity_t *capacity = (shoal_msg_capacity_t *) *item_p;
    if (capacity) {
        shoal_msg_capacity_codec.clear(capacity);
        free(capacity);
        *item_p = NULL;
    }
}

static void
s_text_set(char **field, const char *text)
{
    free(*field);
    *field = shoal_strdup(text ? text : "");
}

static int64_t
s_wall(void)
{
    return zclock_time();
}

static bool
s_running(shoal_drain_t *self)
{
    return self->record.phase && streq(self->record.phase, "running");
}

//  Writes the record, synced. Returns 0 or -1 (logged).
static int
s_save(shoal_drain_t *self)
{
    self->record.updated_ms = (uint64_t) s_wall();
    if (shoal_drain_store_put(self->store, &self->record)) {
        zsys_error("drain: cannot write the drain record: %s", shoal_store_error(self->store));
        return -1;
    }
    return 0;
}

//  The admission follows the mark.
static void
s_mark_apply(shoal_drain_t *self)
{
    shoal_admission_t *admission = shoal_claims_admission(self->claims);
    if (self->record.draining) {
        char reason[DRAIN_MESSAGE_MAX];
        snprintf(reason, sizeof reason, "node %s is draining: it takes no new claim and no incoming move "
                 "(shoalctl undrain %s ends that)", self->settings->node_id, self->settings->node_id);
        shoal_admission_set_draining(admission, reason);
    }
    else
        shoal_admission_set_draining(admission, NULL);
}

shoal_drain_t *
shoal_drain_new(const shoal_settings_t *settings, shoal_store_t *store, shoal_claims_t *claims,
                shoal_moves_t *moves, shoal_mesh_t *mesh, char **error_p)
{
    shoal_drain_t *self = (shoal_drain_t *) zmalloc(sizeof *self);
    self->settings = settings;
    self->store = store;
    self->claims = claims;
    self->moves = moves;
    self->mesh = mesh;
    self->capacities = zhashx_new();
    zhashx_set_destructor(self->capacities, s_capacity_free);
    self->refused = zhashx_new();
    zhashx_set_destructor(self->refused, (zhashx_destructor_fn *) zstr_free);
    self->admitting = zlistx_new();
    zlistx_set_destructor(self->admitting, (zlistx_destructor_fn *) zstr_free);
    zlistx_set_duplicator(self->admitting, (zlistx_duplicator_fn *) shoal_strdup);
    bool found = false;
    if (shoal_drain_store_get(store, &self->record, &found)) {
        *error_p = zsys_sprintf("cannot read the drain record: %s", shoal_store_error(store));
        shoal_drain_destroy(&self);
        return NULL;
    }
    if (!found) {
        self->record.node_id = shoal_strdup(settings->node_id);
        self->record.phase = shoal_strdup("none");
    }
    s_mark_apply(self);
    if (self->record.draining)
        zsys_info("drain: %s is marked draining: new claims and incoming moves are refused", settings->node_id);
    if (s_running(self)) {
        //  A drain a restart interrupted: its entries moving are settled
        //  once the moves' recovery has ended their moves (DESIGN 5).
        self->resuming = true;
        self->started = zclock_mono();
        size_t moving = 0;
        for (size_t i = 0; i < self->record.count; i++)
            moving += streq(self->record.claims[i].state, "moving");
        char note[DRAIN_MESSAGE_MAX];
        snprintf(note, sizeof note, "resumed after a restart at %" PRId64 " (wall ms), %zu claim(s) were moving",
                 s_wall(), moving);
        s_text_set(&self->record.note, note);
        zsys_info("drain: the drain of %s %s", settings->node_id, note);
    }
    return self;
}

void
shoal_drain_destroy(shoal_drain_t **self_p)
{
    if (*self_p) {
        shoal_drain_t *self = *self_p;
        shoal_msg_drain_codec.clear(&self->record);
        zhashx_destroy(&self->capacities);
        zhashx_destroy(&self->refused);
        zlistx_destroy(&self->admitting);
        free(self);
        *self_p = NULL;
    }
}

void
shoal_drain_stop(shoal_drain_t *self)
{
    self->stopping = true;
}

static shoal_msg_drain_claim_t *
s_entry(shoal_drain_t *self, const char *claim_id)
{
    for (size_t i = 0; i < self->record.count; i++)
        if (streq(self->record.claims[i].claim_id, claim_id))
            return &self->record.claims[i];
    return NULL;
}

static void
s_refused_key(char *key, size_t size, const char *claim_id, const char *peer)
{
    snprintf(key, size, "%s %s", claim_id, peer);
}

//  The end of a drain move (shoal_moves_ended_fn): DESIGN 4.
static void
s_moved(void *arg, const char *claim_id, uint32_t status, const char *message, const shoal_move_t *move)
{
    shoal_drain_t *self = (shoal_drain_t *) arg;
    if (self->stopping)
        return;
    shoal_msg_drain_claim_t *entry = s_entry(self, claim_id);
    if (!entry || !streq(entry->state, "moving"))
        return;
    if (self->moving)
        self->moving--;
    //  A slot is free: the next tick fills it from fresh figures.
    self->next_ask = 0;
    s_text_set(&entry->phase, "");
    entry->bytes_sent = move ? move->bytes_sent : 0;
    bool done = status == SHOAL_STATUS_OK && move && move->phase && streq(move->phase, "done");
    if (done) {
        s_text_set(&entry->state, "moved");
        s_text_set(&entry->reason, "");
        entry->total_ms = move->total_ms;
        entry->node_downtime_ms = move->node_downtime_ms;
        zsys_info("drain: %s moved to %s (%" PRIu64 " ms, downtime %" PRIu64 " ms)", claim_id, entry->to,
                  move->total_ms, move->node_downtime_ms);
    }
    else
    if (!move && status == SHOAL_STATUS_TOO_MANY) {
        //  This node's own move/concurrency: a later choice tries again.
        s_text_set(&entry->state, "pending");
    }
    else
    if (!move) {
        //  The claim cannot move from here at all (not running, its driver).
        s_text_set(&entry->state, "stayed");
        s_text_set(&entry->reason, message);
        zsys_warning("drain: %s stays on %s: %s", claim_id, self->settings->node_id, message);
    }
    else
    if (move->round == 0 && (status == SHOAL_STATUS_TOO_MANY || status == SHOAL_STATUS_NO_SPACE
                             || status == SHOAL_STATUS_UNAVAILABLE)) {
        //  The target's admission said no before anything was sent.
        char key[SHOAL_KV_KEY_MAX + 128];
        s_refused_key(key, sizeof key, claim_id, entry->to);
        zhashx_update(self->refused, key, shoal_strdup(message));
        s_text_set(&entry->state, "pending");
        s_text_set(&entry->reason, message);
    }
    else {
        entry->attempts++;
        s_text_set(&entry->reason, message);
        if (entry->attempts >= DRAIN_ATTEMPTS_MAX) {
            char reason[DRAIN_MESSAGE_MAX];
            snprintf(reason, sizeof reason, "its move aborted %u times, the last to %s: %s", entry->attempts,
                     entry->to, message);
            s_text_set(&entry->state, "stayed");
            s_text_set(&entry->reason, reason);
            zsys_warning("drain: %s stays on %s: %s", claim_id, self->settings->node_id, reason);
        }
        else
            s_text_set(&entry->state, "pending");
    }
    s_save(self);
}

static void
s_capacity_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    s_ask_t *ask = (s_ask_t *) arg;
    shoal_drain_t *self = ask->self;
    uint64_t seq = ask->seq;
    free(ask);
    if (self->stopping || seq != self->ask_seq)
        return;
    if (self->asking)
        self->asking--;
    if (!reply || reply->status != SHOAL_STATUS_OK || !reply->body) {
        zsys_warning("drain: %s did not tell its capacity (%s): this choice leaves it out", node_id,
                     reply ? reply->message : "no answer");
        return;
    }
    shoal_msg_capacity_t *capacity = (shoal_msg_capacity_t *) zmalloc(sizeof *capacity);
    char error[DRAIN_MESSAGE_MAX];
    uint8_t *bytes = NULL;
    size_t size = 0;
    //  A copy through the codec: the reply is borrowed.
    if (shoal_msg_capacity_codec.encode(reply->body, &bytes, &size, error, sizeof error) == 0
    &&  shoal_msg_capacity_codec.decode(bytes, size, capacity, error, sizeof error) == 0)
        zhashx_update(self->capacities, node_id, capacity);
    else {
        zsys_warning("drain: %s told a capacity that does not decode: %s", node_id, error);
        shoal_msg_capacity_codec.clear(capacity);
        free(capacity);
    }
    free(bytes);
}

//  Asks every alive peer for its capacity (DESIGN 3).
static void
s_targets_ask(shoal_drain_t *self)
{
    self->ask_seq++;
    self->asked = true;
    self->asking = 0;
    zhashx_purge(self->capacities);
    //  The drain's moves whose reservation a peer may not count yet.
    zlistx_purge(self->admitting);
    for (size_t i = 0; i < self->record.count; i++) {
        const shoal_msg_drain_claim_t *entry = &self->record.claims[i];
        uint64_t sent;
        const char *phase;
        if (streq(entry->state, "moving")
        &&  (!shoal_moves_progress(self->moves, entry->claim_id, &sent, &phase) || streq(phase, "admitting")))
            zlistx_add_end(self->admitting, entry->claim_id);
    }
    zlistx_t *alive = shoal_mesh_alive(self->mesh);
    for (const char *peer = (const char *) zlistx_first(alive); peer; peer = (const char *) zlistx_next(alive)) {
        shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_CAPACITY, 0);
        s_ask_t *ask = (s_ask_t *) zmalloc(sizeof *ask);
        ask->self = self;
        ask->seq = self->ask_seq;
        if (shoal_mesh_send(self->mesh, peer, &request, DRAIN_CAPACITY_MS, s_capacity_done, ask) == 0)
            self->asking++;
        else {
            shoal_envelope_destroy(&request);
            free(ask);
        }
    }
    zlistx_destroy(&alive);
}

//  Why CAPACITY has no room for ENTRY (into WHY), or true when it has.
static bool
s_room(const shoal_msg_capacity_t *capacity, const shoal_msg_drain_claim_t *entry, char *why, size_t why_size)
{
    if (capacity->draining)
        snprintf(why, why_size, "%s drains itself", capacity->node_id);
    else
    if (capacity->claims + 1 > capacity->max_claims)
        snprintf(why, why_size, "%s holds %" PRIu64 " of %" PRIu64 " claims (limits/max_claims)", capacity->node_id,
                 capacity->claims, capacity->max_claims);
    else
    if (capacity->running + 1 > capacity->max_running)
        snprintf(why, why_size, "%s runs %" PRIu64 " of %" PRIu64 " (limits/max_running)", capacity->node_id,
                 capacity->running, capacity->max_running);
    else
    if (capacity->memory_bytes + entry->memory_bytes > capacity->memory_limit_bytes)
        snprintf(why, why_size, "%s has %" PRIu64 " of %" PRIu64 " bytes of memory free, the claim needs %" PRIu64
                 " (limits/memory_mb)", capacity->node_id,
                 capacity->memory_limit_bytes > capacity->memory_bytes
                     ? capacity->memory_limit_bytes - capacity->memory_bytes : 0,
                 capacity->memory_limit_bytes, entry->memory_bytes);
    else
        return true;
    return false;
}

//  How many more moves the drain may start now: --parallel less its moves
//  in flight, within this node's free move slots.
static size_t
s_free_slots(shoal_drain_t *self)
{
    int64_t concurrency = self->settings->move_concurrency;
    size_t active = shoal_moves_active(self->moves);
    size_t slots = concurrency > 0 && (size_t) concurrency > active ? (size_t) concurrency - active : 0;
    size_t parallel = self->record.parallel ? self->record.parallel : 1;
    size_t own = parallel > self->moving ? parallel - self->moving : 0;
    return own < slots ? own : slots;
}

//  Adds ENTRY's claim, given to peer NODE_ID, to GIVEN.
static void
s_give(zhashx_t *given, const char *node_id, const shoal_msg_drain_claim_t *entry)
{
    shoal_msg_capacity_t *planned = (shoal_msg_capacity_t *) zhashx_lookup(given, node_id);
    if (!planned) {
        planned = (shoal_msg_capacity_t *) zmalloc(sizeof *planned);
        zhashx_insert(given, node_id, planned);
    }
    planned->claims++;
    planned->running++;
    planned->memory_bytes += entry->memory_bytes;
    planned->moves_in_flight++;
}

//  Starts moves from the capacities told (DESIGN 3).
static void
s_targets_choose(shoal_drain_t *self)
{
    self->asked = false;
    size_t budget = s_free_slots(self);
    //  What this choice gives each peer, beside what it told: the drain's
    //  moves being admitted when it asked (that still went on), then
    //  what it starts now.
    zhashx_t *given = zhashx_new();
    zhashx_set_destructor(given, s_capacity_free);
    for (const char *id = (const char *) zlistx_first(self->admitting); id;
         id = (const char *) zlistx_next(self->admitting)) {
        const shoal_msg_drain_claim_t *entry = s_entry(self, id);
        if (entry && (streq(entry->state, "moving") || streq(entry->state, "moved")) && *entry->to)
            s_give(given, entry->to, entry);
    }
    size_t started = 0;
    for (size_t i = 0; i < self->record.count && started < budget; i++) {
        shoal_msg_drain_claim_t *entry = &self->record.claims[i];
        if (!streq(entry->state, "pending"))
            continue;
        shoal_msg_capacity_t *best = NULL;
        bool later = false;
        char reasons[DRAIN_MESSAGE_MAX] = "";
        for (shoal_msg_capacity_t *capacity = (shoal_msg_capacity_t *) zhashx_first(self->capacities); capacity;
             capacity = (shoal_msg_capacity_t *) zhashx_next(self->capacities)) {
            char why[DRAIN_MESSAGE_MAX / 2];
            char key[SHOAL_KV_KEY_MAX + 128];
            s_refused_key(key, sizeof key, entry->claim_id, capacity->node_id);
            const char *refusal = (const char *) zhashx_lookup(self->refused, key);
            shoal_msg_capacity_t *planned = (shoal_msg_capacity_t *) zhashx_lookup(given, capacity->node_id);
            shoal_msg_capacity_t now = *capacity;
            if (planned) {
                now.claims += planned->claims;
                now.running += planned->running;
                now.memory_bytes += planned->memory_bytes;
                now.moves_in_flight += planned->moves_in_flight;
            }
            bool room = false;
            if (refusal)
                snprintf(why, sizeof why, "%s refused it: %s", capacity->node_id, refusal);
            else
            if (s_room(&now, entry, why, sizeof why)) {
                if (now.moves_in_flight + 1 > now.move_concurrency) {
                    //  A slot frees when a move ends: a later choice.
                    snprintf(why, sizeof why, "%s has no free move slot", capacity->node_id);
                    later = true;
                }
                else
                    room = true;
            }
            else
            if (planned && s_room(capacity, entry, why, sizeof why))
                later = true;
            if (room) {
                uint64_t free_now = now.memory_limit_bytes - now.memory_bytes;
                uint64_t free_best = 0;
                if (best) {
                    shoal_msg_capacity_t *best_planned = (shoal_msg_capacity_t *) zhashx_lookup(given, best->node_id);
                    uint64_t used = best->memory_bytes + (best_planned ? best_planned->memory_bytes : 0);
                    free_best = best->memory_limit_bytes - used;
                }
                if (!best || free_now > free_best)
                    best = capacity;
            }
            else {
                size_t length = strlen(reasons);
                snprintf(reasons + length, sizeof reasons - length, "%s%s", length ? "; " : "", why);
            }
        }
        if (best) {
            s_give(given, best->node_id, entry);
            s_text_set(&entry->state, "moving");
            s_text_set(&entry->to, best->node_id);
            s_text_set(&entry->phase, "admitting");
            self->moving++;
            started++;
            zsys_info("drain: %s to %s", entry->claim_id, best->node_id);
            s_save(self);
            //  Its end may be told from within (a refusal at once).
            shoal_moves_begin(self->moves, entry->claim_id, best->node_id, self->record.max_downtime_ms, s_moved,
                              self);
        }
        else
        if (!later && self->moving == 0) {
            //  Room for the prefix and every peer's reason whole.
            char reason[DRAIN_MESSAGE_MAX + 64];
            snprintf(reason, sizeof reason, "no peer has room for it: %s",
                     *reasons ? reasons : "no peer is alive to take it");
            s_text_set(&entry->state, "stayed");
            s_text_set(&entry->reason, reason);
            zsys_warning("drain: %s stays on %s: %s", entry->claim_id, self->settings->node_id, reason);
            s_save(self);
        }
    }
    zhashx_destroy(&given);
    //  The next choice comes when a move ends, or after a while (a peer's
    //  slot may free meanwhile).
    self->next_ask = zclock_mono() + DRAIN_RETRY_MS;
}

//  A drain that a restart interrupted: its entries moving are settled once
//  no move of theirs runs here (DESIGN 5). True when all are.
static bool
s_settle(shoal_drain_t *self)
{
    shoal_claim_store_t *store = shoal_claims_store(self->claims);
    bool settled = true;
    for (size_t i = 0; i < self->record.count; i++) {
        shoal_msg_drain_claim_t *entry = &self->record.claims[i];
        if (!streq(entry->state, "moving"))
            continue;
        uint64_t bytes;
        const char *phase;
        if (shoal_moves_progress(self->moves, entry->claim_id, &bytes, &phase)) {
            settled = false;
            continue;
        }
        shoal_claim_record_t claim;
        bool found = false;
        if (shoal_claim_store_get(store, entry->claim_id, &claim, &found)) {
            settled = false;
            continue;
        }
        if (!found || claim.state == SHOAL_CLAIM_RELEASED) {
            s_text_set(&entry->state, "moved");
            s_text_set(&entry->reason, "its move ended across a restart of this node");
        }
        else
        if (claim.state == SHOAL_CLAIM_RUNNING || claim.state == SHOAL_CLAIM_PAUSED)
            s_text_set(&entry->state, "pending");
        else
            settled = false;
        if (found)
            shoal_claim_codec.clear(&claim);
    }
    return settled;
}

//  The drain ended (PHASE done or stopped).
static void
s_end(shoal_drain_t *self, const char *phase)
{
    s_text_set(&self->record.phase, phase);
    self->record.total_ms = self->started ? (uint64_t) (zclock_mono() - self->started) : 0;
    size_t moved = 0, stayed = 0;
    for (size_t i = 0; i < self->record.count; i++) {
        moved += streq(self->record.claims[i].state, "moved");
        stayed += streq(self->record.claims[i].state, "stayed");
    }
    zsys_info("drain: the drain of %s %s after %" PRIu64 " ms: %zu moved, %zu stayed", self->settings->node_id,
              phase, self->record.total_ms, moved, stayed);
    s_save(self);
}

void
shoal_drain_tick(shoal_drain_t *self)
{
    if (self->stopping || !s_running(self))
        return;
    if (self->resuming) {
        if (!s_settle(self))
            return;
        self->resuming = false;
        s_save(self);
    }
    if (!self->record.draining) {
        if (self->moving == 0)
            s_end(self, "stopped");
        return;
    }
    size_t pending = 0;
    for (size_t i = 0; i < self->record.count; i++)
        pending += streq(self->record.claims[i].state, "pending");
    if (pending == 0) {
        if (self->moving == 0)
            s_end(self, "done");
        return;
    }
    if (!self->asked) {
        if (zclock_mono() >= self->next_ask && s_free_slots(self) > 0)
            s_targets_ask(self);
    }
    else
    if (self->asking == 0)
        s_targets_choose(self);
}

//  DRAIN: marks this node draining and starts moving its claims.
static shoal_envelope_t *
s_drain(shoal_drain_t *self, const shoal_envelope_t *request)
{
    const shoal_msg_drain_request_t *body = (const shoal_msg_drain_request_t *) request->body;
    if (s_running(self))
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "a drain of %s is under way "
                                    "(shoalctl drain %s --status shows it)", self->settings->node_id,
                                    self->settings->node_id);
    shoal_claim_records_t claims = { 0 };
    if (shoal_claim_store_list(shoal_claims_store(self->claims), &claims))
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "cannot list the claims: %s",
                                    shoal_claim_store_error(shoal_claims_store(self->claims)));
    shoal_msg_drain_codec.clear(&self->record);
    self->record.node_id = shoal_strdup(self->settings->node_id);
    self->record.draining = true;
    self->record.phase = shoal_strdup("running");
    self->record.max_downtime_ms = body ? body->max_downtime_ms : 0;
    self->record.parallel = body && body->parallel ? body->parallel : 1;
    self->record.started_ms = (uint64_t) s_wall();
    self->record.note = shoal_strdup("");
    self->record.claims = (shoal_msg_drain_claim_t *) zmalloc(sizeof(shoal_msg_drain_claim_t) * (claims.count + 1));
    for (size_t i = 0; i < claims.count; i++) {
        const shoal_claim_record_t *claim = &claims.items[i];
        if (claim->state != SHOAL_CLAIM_RUNNING && claim->state != SHOAL_CLAIM_PAUSED)
            continue;
        shoal_msg_drain_claim_t *entry = &self->record.claims[self->record.count++];
        entry->claim_id = shoal_strdup(claim->id);
        entry->state = shoal_strdup("pending");
        entry->to = shoal_strdup("");
        entry->reason = shoal_strdup("");
        entry->phase = shoal_strdup("");
        entry->memory_bytes = claim->memory_bytes;
    }
    shoal_claim_records_clear(&claims);
    zhashx_purge(self->refused);
    self->asked = false;
    self->resuming = false;
    self->started = zclock_mono();
    s_mark_apply(self);
    if (s_save(self))
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "cannot write the drain record: %s",
                                    shoal_store_error(self->store));
    zsys_info("drain: %s drains: %zu claim(s) to move, %u at a time", self->settings->node_id, self->record.count,
              self->record.parallel);
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s drains", self->settings->node_id);
    return reply;
}

//  A reply of REQUEST with the record, the moves' progress filled in.
static shoal_envelope_t *
s_status(shoal_drain_t *self, const shoal_envelope_t *request, shoal_envelope_t *reply)
{
    if (!reply)
        reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", self->record.phase);
    shoal_msg_drain_t *body = (shoal_msg_drain_t *) shoal_envelope_new_body(reply);
    char error[DRAIN_MESSAGE_MAX];
    uint8_t *bytes = NULL;
    size_t size = 0;
    if (shoal_msg_drain_codec.encode(&self->record, &bytes, &size, error, sizeof error)
    ||  shoal_msg_drain_codec.decode(bytes, size, body, error, sizeof error)) {
        free(bytes);
        shoal_envelope_destroy(&reply);
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "the drain record does not encode: %s", error);
    }
    free(bytes);
    for (size_t i = 0; i < body->count; i++) {
        shoal_msg_drain_claim_t *entry = &body->claims[i];
        uint64_t sent;
        const char *phase;
        if (streq(entry->state, "moving") && shoal_moves_progress(self->moves, entry->claim_id, &sent, &phase)) {
            entry->bytes_sent = sent;
            s_text_set(&entry->phase, phase);
        }
    }
    if (s_running(self) && self->started)
        body->total_ms = (uint64_t) (zclock_mono() - self->started);
    return reply;
}

//  UNDRAIN: the mark goes; a drain under way starts no new move.
static shoal_envelope_t *
s_undrain(shoal_drain_t *self, const shoal_envelope_t *request)
{
    bool was = self->record.draining;
    self->record.draining = false;
    s_mark_apply(self);
    if (s_save(self))
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "cannot write the drain record: %s",
                                    shoal_store_error(self->store));
    if (was)
        zsys_info("drain: %s takes claims and incoming moves again%s", self->settings->node_id,
                  s_running(self) ? "; the drain starts no new move" : "");
    return shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", was ? "undrained" : "it was not draining");
}

//  CAPACITY: this node's limits and counts, for a drain choosing targets.
static shoal_envelope_t *
s_capacity(shoal_drain_t *self, const shoal_envelope_t *request)
{
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "capacity");
    shoal_msg_capacity_t *body = (shoal_msg_capacity_t *) shoal_envelope_new_body(reply);
    if (shoal_admission_capacity(shoal_claims_admission(self->claims), body)) {
        shoal_envelope_destroy(&reply);
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "cannot read the counters: %s",
                                    shoal_claim_store_error(shoal_claims_store(self->claims)));
    }
    body->node_id = shoal_strdup(self->settings->node_id);
    body->move_concurrency = self->settings->move_concurrency > 0 ? (uint64_t) self->settings->move_concurrency : 0;
    body->moves_in_flight = shoal_moves_active(self->moves);
    return reply;
}

bool
shoal_drain_handles(shoal_msg_type_t type)
{
    return type == SHOAL_MSG_DRAIN || type == SHOAL_MSG_UNDRAIN || type == SHOAL_MSG_DRAIN_STATUS
        || type == SHOAL_MSG_CAPACITY;
}

shoal_envelope_t *
shoal_drain_handle(shoal_drain_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    bool node = streq(caller->role, SHOAL_ROLE_NODE);
    bool admin = streq(caller->role, SHOAL_ROLE_ADMIN);
    if (!node && !admin)
        return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN, "drains are for operators (role %s)",
                                    caller->role);
    if (request->type == SHOAL_MSG_CAPACITY)
        return s_capacity(self, request);
    const shoal_msg_drain_request_t *body = (const shoal_msg_drain_request_t *) request->body;
    const char *asked = body && body->node_id ? body->node_id : "";
    if (*asked && !streq(asked, self->settings->node_id))
        return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "this is node %s, not %s: a drain is "
                                    "asked of the node to drain", self->settings->node_id, asked);
    switch (request->type) {
        case SHOAL_MSG_DRAIN: {
            shoal_envelope_t *reply = s_drain(self, request);
            return reply->status == SHOAL_STATUS_OK ? s_status(self, request, reply) : reply;
        }
        case SHOAL_MSG_UNDRAIN: {
            shoal_envelope_t *reply = s_undrain(self, request);
            return reply->status == SHOAL_STATUS_OK ? s_status(self, request, reply) : reply;
        }
        default:
            return s_status(self, request, NULL);
    }
}
