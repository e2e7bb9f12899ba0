/*  shoal_txn: transactions on a claim's keys, and the key space's part in a
    move. See shoal_txn.h for the rules and the move's steps.

    A transaction runs whole inside one request handler on the reactor, so
    nothing else reads or writes the claim's keys meanwhile: its compares,
    its branch and its batch see one state. The branch's operations are
    applied to an overlay (key -> what the transaction made of it) that
    later operations read through, and the overlay is the batch.
*/
#include "shoal_txn.h"
#include "shoal_locks.h"
#include "shoal_alloc.h"

#define TXN_MESSAGE_MAX 512
//  The sweep looks at no more key spaces than this per tick.
#define TXN_SWEEP_BATCH 16
//  How long the sweep rests after a walk through every key space.
#define TXN_SWEEP_REST_MS 1000
//  What a transaction on a frozen key space is told to wait before retrying.
#define TXN_RETRY_AFTER_MS 100

struct _shoal_txn_t {
    const shoal_settings_t *settings;   //  the node's live settings (borrowed)
    shoal_claims_t *claims;             //  whose claims the key spaces belong to (borrowed)
    shoal_mesh_t *mesh;                 //  move_keys go to targets through it (borrowed)
    shoal_key_space_t *space;           //  the key spaces in the store
    shoal_txn_lease_check_fn *lease_check;  //  whether a caller may attach to a lease (NULL: no leases)
    void *lease_check_arg;              //  its argument
    char *sweep_after;                  //  the sweep goes on after this claim id ("": from the first)
    int64_t sweep_next_ms;              //  when the sweep looks again (monotonic)
};

//  What a transaction made of one key.
typedef struct {
    bool deleted;                       //  removed (kv is then empty)
    bool existed;                       //  the store held it before the transaction
    uint64_t prior_lease;               //  the lease the store's key was attached to (0: none)
    shoal_msg_key_value_t kv;           //  the key as it is now
} s_pending_t;

//  One transaction under way.
typedef struct {
    shoal_txn_t *owner;
    const char *claim_id;               //  the claim's whole id (borrowed)
    shoal_msg_claim_keys_t meta;        //  the key space's record; its revision is the last one
    zhashx_t *pending;                  //  key -> s_pending_t
    uint64_t revision;                  //  the revision the writes take
    int64_t bytes;                      //  the space's size after the writes
    bool wrote;                         //  an operation changed something
    size_t reply_bytes;                 //  what the gets' keys add to the reply
} s_run_t;

static void
s_pending_free(void **item_p)
{
    if (*item_p) {
        s_pending_t *pending = (s_pending_t *) *item_p;
        shoal_msg_key_value_codec.clear(&pending->kv);
        free(pending);
        *item_p = NULL;
    }
}

static void
s_kv_copy(shoal_msg_key_value_t *copy, const shoal_msg_key_value_t *kv)
{
    *copy = *kv;
    copy->key = shoal_strdup(kv->key);
    copy->value = NULL;
    if (kv->value_size) {
        copy->value = (uint8_t *) zmalloc(kv->value_size);
        memcpy(copy->value, kv->value, kv->value_size);
    }
}

//  What KV counts against the key space's size.
static int64_t
s_kv_bytes(const shoal_msg_key_value_t *kv)
{
    return (int64_t) (strlen(kv->key) + kv->value_size + SHOAL_CLAIM_KEY_OVERHEAD);
}

shoal_txn_t *
shoal_txn_new(const shoal_settings_t *settings, shoal_store_t *store, shoal_claims_t *claims, shoal_mesh_t *mesh)
{
    shoal_txn_t *self = (shoal_txn_t *) zmalloc(sizeof *self);
    self->settings = settings;
    self->claims = claims;
    self->mesh = mesh;
    self->space = shoal_key_space_new(store, settings->store_sync);
    self->sweep_after = shoal_strdup("");
    return self;
}

void
shoal_txn_destroy(shoal_txn_t **self_p)
{
    if (*self_p) {
        shoal_txn_t *self = *self_p;
        shoal_key_space_destroy(&self->space);
        free(self->sweep_after);
        free(self);
        *self_p = NULL;
    }
}

bool
shoal_txn_handles(shoal_msg_type_t type)
{
    return type == SHOAL_MSG_CLAIM_TXN || type == SHOAL_MSG_MOVE_KEYS;
}

//  Reads KEY as the transaction sees it: through the overlay, else from the
//  store. Returns 0 with *FOUND set and KV a copy (the caller clears it), or -1.
static int
s_read(s_run_t *run, const char *key, shoal_msg_key_value_t *kv, bool *found)
{
    s_pending_t *pending = (s_pending_t *) zhashx_lookup(run->pending, key);
    if (pending) {
        *found = !pending->deleted;
        if (*found)
            s_kv_copy(kv, &pending->kv);
        return 0;
    }
    return shoal_key_space_get(run->owner->space, run->claim_id, key, kv, found);
}

static int
s_kv_compare(const void *a, const void *b)
{
    return strcmp(((const shoal_msg_key_value_t *) a)->key, ((const shoal_msg_key_value_t *) b)->key);
}

static bool
s_has_prefix(const char *key, const char *prefix)
{
    return strncmp(key, prefix, strlen(prefix)) == 0;
}

//  Every key starting with PREFIX as the transaction sees it, in key
//  order, into *KVS_P and *COUNT_P (freed with shoal_key_values_free).
//  Returns 0 or -1.
static int
s_range(s_run_t *run, const char *prefix, shoal_msg_key_value_t **kvs_p, size_t *count_p)
{
    *kvs_p = NULL;
    *count_p = 0;
    if (shoal_key_space_range(run->owner->space, run->claim_id, prefix, kvs_p, count_p))
        return -1;
    //  Keys the overlay changed replace or remove what the store holds;
    //  keys it made are added.
    size_t kept = 0;
    for (size_t i = 0; i < *count_p; i++) {
        shoal_msg_key_value_t *kv = &(*kvs_p)[i];
        s_pending_t *pending = (s_pending_t *) zhashx_lookup(run->pending, kv->key);
        if (pending) {
            shoal_msg_key_value_codec.clear(kv);
            if (pending->deleted)
                continue;
            s_kv_copy(kv, &pending->kv);
        }
        (*kvs_p)[kept++] = *kv;
    }
    *count_p = kept;
    for (s_pending_t *pending = (s_pending_t *) zhashx_first(run->pending); pending;
         pending = (s_pending_t *) zhashx_next(run->pending)) {
        if (pending->deleted || pending->existed || !s_has_prefix(pending->kv.key, prefix))
            continue;
        *kvs_p = (shoal_msg_key_value_t *) shoal_realloc(*kvs_p, (*count_p + 1) * sizeof **kvs_p);
        s_kv_copy(&(*kvs_p)[(*count_p)++], &pending->kv);
    }
    if (*count_p > 1)
        qsort(*kvs_p, *count_p, sizeof **kvs_p, s_kv_compare);
    return 0;
}

//  The overlay's entry of KEY, made from what the store holds when it has
//  none yet. Returns it, or NULL when the store cannot be read.
static s_pending_t *
s_pending_for(s_run_t *run, const char *key)
{
    s_pending_t *pending = (s_pending_t *) zhashx_lookup(run->pending, key);
    if (pending)
        return pending;
    pending = (s_pending_t *) zmalloc(sizeof *pending);
    bool found = false;
    if (shoal_key_space_get(run->owner->space, run->claim_id, key, &pending->kv, &found)) {
        free(pending);
        return NULL;
    }
    pending->existed = found;
    pending->deleted = !found;
    pending->prior_lease = found ? pending->kv.lease : 0;
    zhashx_insert(run->pending, key, pending);
    return pending;
}

//  Three-way comparison of the key's field against the compare's.
static int
s_order(uint64_t have, uint64_t want)
{
    return have < want ? -1 : have > want ? 1 : 0;
}

static int
s_order_bytes(const uint8_t *have, size_t have_size, const uint8_t *want, size_t want_size)
{
    size_t common = have_size < want_size ? have_size : want_size;
    int order = common ? memcmp(have, want, common) : 0;
    if (order == 0)
        order = s_order(have_size, want_size);
    return order < 0 ? -1 : order > 0 ? 1 : 0;
}

//  Whether COMPARE holds. Returns 1 or 0, or -1 when the key cannot be read.
static int
s_compare_holds(s_run_t *run, const shoal_msg_key_compare_t *compare)
{
    shoal_msg_key_value_t kv = { 0 };
    bool found = false;
    if (s_read(run, compare->key, &kv, &found))
        return -1;
    //  An absent key reads as version, revisions and lease 0, value empty.
    int order = 0;
    switch (compare->target) {
        case SHOAL_KEY_TARGET_VALUE:
            order = s_order_bytes(kv.value, found ? kv.value_size : 0, compare->value, compare->value_size);
            break;
        case SHOAL_KEY_TARGET_VERSION: order = s_order(kv.version, compare->number); break;
        case SHOAL_KEY_TARGET_CREATE: order = s_order(kv.create_revision, compare->number); break;
        case SHOAL_KEY_TARGET_MOD: order = s_order(kv.mod_revision, compare->number); break;
        case SHOAL_KEY_TARGET_LEASE: order = s_order(kv.lease, compare->number); break;
    }
    if (found)
        shoal_msg_key_value_codec.clear(&kv);
    switch (compare->result) {
        case SHOAL_KEY_EQUAL: return order == 0;
        case SHOAL_KEY_NOT_EQUAL: return order != 0;
        case SHOAL_KEY_GREATER: return order > 0;
        case SHOAL_KEY_LESS: return order < 0;
    }
    return 0;
}

//  Applies OP to the overlay, filling RESULT. Returns 0 or -1 (the store
//  cannot be read).
static int
s_apply(s_run_t *run, const shoal_msg_key_op_t *op, shoal_msg_key_result_t *result)
{
    result->type = op->type;
    if (op->type == SHOAL_KEY_GET) {
        if (op->prefix) {
            if (s_range(run, op->key, &result->kvs, &result->count))
                return -1;
        }
        else {
            shoal_msg_key_value_t kv = { 0 };
            bool found = false;
            if (s_read(run, op->key, &kv, &found))
                return -1;
            if (found) {
                result->kvs = (shoal_msg_key_value_t *) zmalloc(sizeof kv);
                result->kvs[0] = kv;
                result->count = 1;
            }
        }
        for (size_t i = 0; i < result->count; i++)
            run->reply_bytes += (size_t) s_kv_bytes(&result->kvs[i]);
        return 0;
    }
    if (op->type == SHOAL_KEY_DELETE) {
        shoal_msg_key_value_t *kvs = NULL;
        size_t count = 0;
        if (op->prefix) {
            if (s_range(run, op->key, &kvs, &count))
                return -1;
        }
        else {
            kvs = (shoal_msg_key_value_t *) zmalloc(sizeof *kvs);
            bool found = false;
            if (s_read(run, op->key, kvs, &found)) {
                free(kvs);
                return -1;
            }
            count = found ? 1 : 0;
        }
        for (size_t i = 0; i < count; i++) {
            s_pending_t *pending = s_pending_for(run, kvs[i].key);
            if (!pending) {
                shoal_key_values_free(&kvs, count);
                return -1;
            }
            run->bytes -= s_kv_bytes(&pending->kv);
            shoal_msg_key_value_codec.clear(&pending->kv);
            pending->deleted = true;
            result->deleted++;
        }
        if (count)
            run->wrote = true;
        shoal_key_values_free(&kvs, count);
        return 0;
    }
    s_pending_t *pending = s_pending_for(run, op->key);
    if (!pending)
        return -1;
    shoal_msg_key_value_t next = {
        .key = shoal_strdup(op->key),
        .value_size = op->value_size,
        .version = pending->deleted ? 1 : pending->kv.version + 1,
        .create_revision = pending->deleted ? run->revision : pending->kv.create_revision,
        .mod_revision = run->revision,
        .lease = op->lease,
    };
    if (op->value_size) {
        next.value = (uint8_t *) zmalloc(op->value_size);
        memcpy(next.value, op->value, op->value_size);
    }
    if (!pending->deleted)
        run->bytes -= s_kv_bytes(&pending->kv);
    run->bytes += s_kv_bytes(&next);
    shoal_msg_key_value_codec.clear(&pending->kv);
    pending->kv = next;
    pending->deleted = false;
    run->wrote = true;
    return 0;
}

//  Writes the overlay and the key space's new record in one batch, with
//  the leases' index.
static int
s_commit(s_run_t *run)
{
    size_t count = zhashx_size(run->pending);
    shoal_key_write_t *writes = (shoal_key_write_t *) zmalloc((count + 1) * sizeof *writes);
    size_t used = 0;
    for (s_pending_t *pending = (s_pending_t *) zhashx_first(run->pending); pending;
         pending = (s_pending_t *) zhashx_next(run->pending)) {
        if (pending->deleted && !pending->existed)
            continue;
        writes[used++] = (shoal_key_write_t) {
            .key = (const char *) zhashx_cursor(run->pending),
            .kv = pending->deleted ? NULL : &pending->kv,
            .prior_lease = pending->prior_lease,
        };
    }
    shoal_msg_claim_keys_t meta = run->meta;
    meta.revision = run->revision;
    meta.bytes = (uint64_t) run->bytes;
    shoal_key_change_t change = { &meta, writes, used };
    int rc = shoal_key_space_apply(run->owner->space, &change, 1, NULL, 0);
    free(writes);
    return rc;
}

//  Serves a transaction on CLAIM_ID (its whole id) for REQUEST.
static shoal_envelope_t *
s_run(shoal_txn_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller, const char *claim_id,
      const shoal_claim_record_t *record)
{
    const shoal_msg_claim_txn_t *body = (const shoal_msg_claim_txn_t *) request->body;
    s_run_t run = { .owner = self, .claim_id = claim_id };
    if (shoal_key_space_meta(self->space, claim_id, &run.meta))
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_key_space_error(self->space));
    shoal_envelope_t *reply = NULL;
    if (*run.meta.move_id && record->state == SHOAL_CLAIM_MOVING) {
        reply = shoal_envelope_reply(request, SHOAL_STATUS_UNAVAILABLE, "claim '%s' is moving: its keys "
                                     "go with it, retry", claim_id);
        reply->retry_after_ms = TXN_RETRY_AFTER_MS;
        shoal_msg_claim_keys_codec.clear(&run.meta);
        return reply;
    }
    if (*run.meta.move_id) {
        //  The move that froze it is over and the claim is still here: it
        //  aborted. The space thaws with this transaction's batch, or alone.
        free(run.meta.move_id);
        run.meta.move_id = shoal_strdup("");
        if (shoal_key_space_set_meta(self->space, &run.meta)) {
            shoal_msg_claim_keys_codec.clear(&run.meta);
            return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_key_space_error(self->space));
        }
    }
    //  Every lease the branches name must be one the caller may use:
    //  checked before anything runs, whichever branch will.
    const shoal_msg_key_op_t *branches[2] = { body->success, body->failure };
    size_t branch_counts[2] = { body->success_count, body->failure_count };
    for (int b = 0; b < 2 && !reply; b++)
        for (size_t i = 0; i < branch_counts[b] && !reply; i++) {
            uint64_t lease = branches[b][i].lease;
            if (!lease)
                continue;
            reply = self->lease_check ? self->lease_check(lease, request, caller, self->lease_check_arg)
                  : shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "node %s holds no leases",
                                         self->settings->node_id);
        }
    if (reply) {
        shoal_msg_claim_keys_codec.clear(&run.meta);
        return reply;
    }
    run.pending = zhashx_new();
    zhashx_set_destructor(run.pending, s_pending_free);
    run.revision = run.meta.revision + 1;
    run.bytes = (int64_t) run.meta.bytes;
    bool succeeded = true;
    int rc = 0;
    for (size_t i = 0; i < body->compare_count && succeeded && rc == 0; i++) {
        int holds = s_compare_holds(&run, &body->compares[i]);
        if (holds < 0)
            rc = -1;
        succeeded = holds == 1;
    }
    const shoal_msg_key_op_t *ops = succeeded ? body->success : body->failure;
    size_t op_count = succeeded ? body->success_count : body->failure_count;
    shoal_msg_key_result_t *results = (shoal_msg_key_result_t *) zmalloc((op_count + 1) * sizeof *results);
    size_t result_count = 0;
    for (size_t i = 0; i < op_count && rc == 0; i++)
        rc = s_apply(&run, &ops[i], &results[result_count++]);
    if (rc)
        reply = shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_key_space_error(self->space));
    else
    if (run.bytes > SHOAL_CLAIM_KEYS_BYTES_MAX)
        reply = shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "claim '%s': its keys would count %"
                                     PRId64 " bytes, more than the %d a claim's keys hold (each key counts its "
                                     "key, its value and %d)", claim_id, run.bytes, SHOAL_CLAIM_KEYS_BYTES_MAX,
                                     SHOAL_CLAIM_KEY_OVERHEAD);
    else
    if (run.reply_bytes > SHOAL_PAGE_BYTES_MAX)
        reply = shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "claim '%s': the gets of this "
                                     "transaction return %zu bytes, more than one reply holds (%d): get less "
                                     "at once", claim_id, run.reply_bytes, SHOAL_PAGE_BYTES_MAX);
    else
    if (run.wrote && s_commit(&run))
        reply = shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "claim '%s': cannot write its keys: %s",
                                     claim_id, shoal_key_space_error(self->space));
    if (!reply) {
        reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
        shoal_msg_claim_txn_reply_t *answer = (shoal_msg_claim_txn_reply_t *) shoal_envelope_new_body(reply);
        answer->succeeded = succeeded;
        answer->revision = run.wrote ? run.revision : run.meta.revision;
        answer->owner = shoal_strdup(self->settings->node_id);
        answer->results = results;
        answer->count = result_count;
        results = NULL;
    }
    for (size_t i = 0; results && i < result_count; i++)
        shoal_key_values_free(&results[i].kvs, results[i].count);
    free(results);
    zhashx_destroy(&run.pending);
    shoal_msg_claim_keys_codec.clear(&run.meta);
    return reply;
}

static shoal_envelope_t *
s_txn(shoal_txn_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_claim_txn_t *body = (const shoal_msg_claim_txn_t *) request->body;
    shoal_claim_record_t record;
    shoal_envelope_t *reply = shoal_claims_find(self->claims, request, caller, body->claim_id, &record);
    if (reply)
        return reply;
    if (record.state == SHOAL_CLAIM_RELEASED)
        reply = shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "claim '%s' was released: its keys went "
                                     "with it", record.id);
    else
        reply = s_run(self, request, caller, record.id, &record);
    shoal_claim_codec.clear(&record);
    return reply;
}

//  MOVE_KEYS: a source sends the key space of a claim moving here.
static shoal_envelope_t *
s_move_keys(shoal_txn_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    if (!streq(caller->role, SHOAL_ROLE_NODE))
        return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN, "move_keys comes from nodes only, not "
                                    "from role %s", caller->role);
    const shoal_msg_claim_keys_t *body = (const shoal_msg_claim_keys_t *) request->body;
    if (shoal_key_space_stage(self->space, body))
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "cannot keep the keys of claim '%s': %s",
                                    body->claim_id, shoal_key_space_error(self->space));
    zsys_info("txn: %s: %zu key(s) at revision %" PRIu64 " arrived with move %s", body->claim_id, body->count,
              body->revision, body->move_id);
    return shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
}

shoal_envelope_t *
shoal_txn_handle(shoal_txn_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    switch (request->type) {
        case SHOAL_MSG_CLAIM_TXN: return s_txn(self, request, caller);
        case SHOAL_MSG_MOVE_KEYS: return s_move_keys(self, request, caller);
        default:
            return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "%s is not a key request",
                                        shoal_msg_type_name(request->type));
    }
}

void
shoal_txn_tick(shoal_txn_t *self)
{
    int64_t now = zclock_mono();
    if (now < self->sweep_next_ms)
        return;
    zlistx_t *claims = shoal_key_space_claims(self->space, self->sweep_after, TXN_SWEEP_BATCH);
    if (!claims) {
        zsys_error("txn: the sweep cannot read the key spaces: %s", shoal_key_space_error(self->space));
        self->sweep_next_ms = now + TXN_SWEEP_REST_MS;
        return;
    }
    shoal_claim_store_t *store = shoal_claims_store(self->claims);
    for (const char *id = (const char *) zlistx_first(claims); id; id = (const char *) zlistx_next(claims)) {
        shoal_claim_record_t record;
        bool found = false;
        if (shoal_claim_store_get(store, id, &record, &found))
            continue;
        bool gone = !found || record.state == SHOAL_CLAIM_RELEASED;
        if (found)
            shoal_claim_codec.clear(&record);
        if (gone && shoal_key_space_drop(self->space, id) == 0)
            zsys_info("txn: %s is no longer held here: its keys are removed", id);
    }
    const char *last = (const char *) zlistx_last(claims);
    free(self->sweep_after);
    self->sweep_after = shoal_strdup(last && zlistx_size(claims) == TXN_SWEEP_BATCH ? last : "");
    if (zlistx_size(claims) < TXN_SWEEP_BATCH)
        self->sweep_next_ms = now + TXN_SWEEP_REST_MS;
    zlistx_destroy(&claims);
}

//  What a move_keys answer is brought back with.
typedef struct {
    shoal_txn_sent_fn *fn;
    void *arg;
} s_sent_t;

static void
s_keys_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    s_sent_t *sent = (s_sent_t *) arg;
    char error[TXN_MESSAGE_MAX];
    if (!reply)
        snprintf(error, sizeof error, "node %s did not take the claim's keys in time", node_id);
    else
    if (reply->status != SHOAL_STATUS_OK)
        snprintf(error, sizeof error, "node %s refused the claim's keys: %s", node_id, reply->message);
    sent->fn(reply && reply->status == SHOAL_STATUS_OK ? NULL : error, sent->arg);
    free(sent);
}

//  Adds to SPACE (a move's) CLAIM_ID's lock and the leases its keys and
//  locks are attached to. Returns 0 or -1.
static int
s_lock_export(shoal_txn_t *self, const char *claim_id, shoal_msg_claim_keys_t *space)
{
    shoal_msg_locks_t state;
    if (shoal_key_space_lock_state(self->space, claim_id, &state))
        return -1;
    int rc = shoal_key_space_lock_records(self->space, claim_id, &state);
    space->lock_readers = state.readers;
    space->lock_writer = state.writer;
    space->lock_waiter = state.waiter;
    space->locks = state.records;
    space->lock_count = state.count;
    state.writer = state.waiter = NULL;
    state.records = NULL;
    state.count = 0;
    shoal_msg_locks_codec.clear(&state);
    zhashx_t *ids = zhashx_new();
    char id[32];
    for (size_t i = 0; i < space->count; i++)
        if (space->kvs[i].lease) {
            snprintf(id, sizeof id, "%" PRIu64, space->kvs[i].lease);
            zhashx_update(ids, id, (void *) (uintptr_t) space->kvs[i].lease);
        }
    for (size_t i = 0; i < space->lock_count; i++)
        if (space->locks[i].lease) {
            snprintf(id, sizeof id, "%" PRIu64, space->locks[i].lease);
            zhashx_update(ids, id, (void *) (uintptr_t) space->locks[i].lease);
        }
    space->leases = (shoal_msg_lease_t *) zmalloc((zhashx_size(ids) + 1) * sizeof *space->leases);
    for (void *each = zhashx_first(ids); each && rc == 0; each = zhashx_next(ids)) {
        bool found = false;
        shoal_msg_lease_t *lease = &space->leases[space->lease_count];
        rc = shoal_key_space_lease(self->space, (uint64_t) (uintptr_t) each, lease, &found);
        //  A copy knows its home: the node that granted the lease, this
        //  one unless the lease came here as a copy itself.
        if (found && (!lease->home || !*lease->home)) {
            free(lease->home);
            lease->home = shoal_strdup(self->settings->node_id);
        }
        if (found)
            space->lease_count++;
    }
    zhashx_destroy(&ids);
    return rc;
}

int
shoal_txn_move_send(shoal_txn_t *self, const shoal_move_t *move, shoal_txn_sent_fn *fn, void *arg)
{
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_MOVE_KEYS, 0);
    shoal_msg_claim_keys_t *body = (shoal_msg_claim_keys_t *) shoal_envelope_new_body(request);
    if (shoal_key_space_export(self->space, move->claim_id, body)) {
        zsys_error("moves: %s: cannot read its keys: %s", move->claim_id, shoal_key_space_error(self->space));
        shoal_envelope_destroy(&request);
        return -1;
    }
    free(body->move_id);
    body->move_id = shoal_strdup(move->move_id ? move->move_id : "");
    if (s_lock_export(self, move->claim_id, body)) {
        zsys_error("moves: %s: cannot read its lock: %s", move->claim_id, shoal_key_space_error(self->space));
        shoal_envelope_destroy(&request);
        return -1;
    }
    //  Frozen before it goes: nothing is acknowledged here that the
    //  target does not get.
    if (shoal_key_space_set_meta(self->space, body)) {
        zsys_error("moves: %s: cannot freeze its keys: %s", move->claim_id, shoal_key_space_error(self->space));
        shoal_envelope_destroy(&request);
        return -1;
    }
    s_sent_t *sent = (s_sent_t *) zmalloc(sizeof *sent);
    sent->fn = fn;
    sent->arg = arg;
    if (shoal_mesh_send(self->mesh, move->to, &request, self->settings->move_step_ms, s_keys_done, sent)) {
        shoal_envelope_destroy(&request);
        free(sent);
        return -1;
    }
    return 0;
}

int
shoal_txn_move_install(shoal_txn_t *self, const char *claim_id)
{
    bool found = false;
    if (shoal_key_space_install(self->space, claim_id, true, &found)) {
        zsys_error("moves: %s: cannot install the keys it brought: %s", claim_id, shoal_key_space_error(self->space));
        return -1;
    }
    if (found)
        zsys_info("txn: %s: its keys are this node's now", claim_id);
    return 0;
}

int
shoal_txn_move_unstage(shoal_txn_t *self, const char *claim_id, const char *move_id)
{
    bool removed = false;
    if (shoal_key_space_unstage(self->space, claim_id, move_id, &removed)) {
        zsys_error("moves: %s: cannot remove the keys move %s staged: %s", claim_id, move_id,
                   shoal_key_space_error(self->space));
        return -1;
    }
    if (removed)
        zsys_info("txn: %s: the keys move %s staged here are removed: the move did not end here", claim_id,
                  move_id);
    return 0;
}

int
shoal_txn_unstage_orphans(shoal_txn_t *self, shoal_txn_receiving_fn *receiving, void *arg)
{
    shoal_staged_t *staged = NULL;
    size_t count = 0;
    if (shoal_key_space_staged(self->space, &staged, &count)) {
        zsys_error("txn: cannot read the key spaces moves staged: %s", shoal_key_space_error(self->space));
        return -1;
    }
    int removed = 0;
    for (size_t i = 0; i < count; i++) {
        if (receiving(staged[i].claim_id, staged[i].move_id, arg))
            continue;
        bool gone = false;
        if (shoal_key_space_unstage(self->space, staged[i].claim_id, staged[i].move_id, &gone))
            zsys_error("txn: %s: cannot remove the keys move %s staged: %s", staged[i].claim_id,
                       staged[i].move_id, shoal_key_space_error(self->space));
        else
        if (gone) {
            zsys_info("txn: %s: the %zu key(s) move %s staged here are removed: no reception of that move "
                      "is under way", staged[i].claim_id, staged[i].count, staged[i].move_id);
            removed++;
        }
    }
    shoal_staged_free(&staged, count);
    return removed;
}

shoal_key_space_t *
shoal_txn_space(shoal_txn_t *self)
{
    return self->space;
}

void
shoal_txn_set_lease_check(shoal_txn_t *self, shoal_txn_lease_check_fn *check, void *arg)
{
    self->lease_check = check;
    self->lease_check_arg = arg;
}

shoal_envelope_t *
shoal_txn_lease_check(shoal_txn_t *self, uint64_t id, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    if (!self->lease_check)
        return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "node %s holds no leases", self->settings->node_id);
    return self->lease_check(id, request, caller, self->lease_check_arg);
}

//  One claim's part of a lease's end.
typedef struct {
    shoal_msg_claim_keys_t meta;        //  its record, with its next revision
    shoal_msg_key_value_t *kvs;         //  the keys read, to know their size
    shoal_key_write_t *writes;          //  one removal per key
    size_t count;
} s_lease_part_t;

int
shoal_txn_lease_end(shoal_txn_t *self, uint64_t id, size_t *removed_p)
{
    shoal_leased_t *items = NULL;
    size_t count = 0;
    if (shoal_key_space_leased(self->space, id, &items, &count))
        return -1;
    //  Grouped by claim: the index is in (kind, claim, name) order.
    s_lease_part_t *parts = (s_lease_part_t *) zmalloc((count + 1) * sizeof *parts);
    size_t part_count = 0, removed = 0;
    int rc = 0;
    shoal_claim_store_t *claims = shoal_claims_store(self->claims);
    for (size_t i = 0; i < count && rc == 0; i++) {
        //  A lock is rolled back as its release would: record and count in
        //  one batch of their own.
        if (streq(items[i].kind, "lock")) {
            rc = shoal_locks_rollback(self->space, items[i].claim_id, items[i].name, id);
            removed += rc == 0;
            continue;
        }
        if (!streq(items[i].kind, "key"))
            continue;
        s_lease_part_t *part = part_count ? &parts[part_count - 1] : NULL;
        if (!part || !streq(part->meta.claim_id, items[i].claim_id)) {
            //  A claim that left this node took its keys along: nothing
            //  of it to remove here.
            shoal_claim_record_t record;
            bool held = false;
            rc = shoal_claim_store_get(claims, items[i].claim_id, &record, &held);
            if (held)
                shoal_claim_codec.clear(&record);
            if (rc || !held)
                continue;
            part = &parts[part_count++];
            rc = shoal_key_space_meta(self->space, items[i].claim_id, &part->meta);
            part->kvs = (shoal_msg_key_value_t *) zmalloc(count * sizeof *part->kvs);
            part->writes = (shoal_key_write_t *) zmalloc(count * sizeof *part->writes);
            part->meta.revision++;
        }
        bool found = false;
        shoal_msg_key_value_t *kv = &part->kvs[part->count];
        if (rc == 0)
            rc = shoal_key_space_get(self->space, items[i].claim_id, items[i].name, kv, &found);
        if (rc || !found)
            continue;
        if (kv->lease != id) {
            shoal_msg_key_value_codec.clear(kv);
            continue;
        }
        uint64_t size = (uint64_t) s_kv_bytes(kv);
        part->meta.bytes = part->meta.bytes > size ? part->meta.bytes - size : 0;
        part->writes[part->count] = (shoal_key_write_t) { .key = kv->key, .prior_lease = id };
        part->count++;
        removed++;
    }
    shoal_key_change_t *changes = (shoal_key_change_t *) zmalloc((part_count + 1) * sizeof *changes);
    size_t change_count = 0;
    for (size_t i = 0; i < part_count; i++)
        if (parts[i].count)
            changes[change_count++] = (shoal_key_change_t) { &parts[i].meta, parts[i].writes, parts[i].count };
    if (rc == 0)
        rc = shoal_key_space_apply(self->space, changes, change_count, NULL, id);
    if (rc)
        zsys_error("txn: cannot end lease %" PRIu64 ": %s", id, shoal_key_space_error(self->space));
    for (size_t i = 0; i < part_count; i++) {
        shoal_key_values_free(&parts[i].kvs, parts[i].count);
        free(parts[i].writes);
        shoal_msg_claim_keys_codec.clear(&parts[i].meta);
    }
    free(parts);
    free(changes);
    shoal_leased_free(&items, count);
    if (removed_p)
        *removed_p = removed;
    return rc;
}

int64_t
shoal_txn_revision(shoal_txn_t *self, const char *claim_id)
{
    shoal_msg_claim_keys_t meta;
    if (shoal_key_space_meta(self->space, claim_id, &meta))
        return -1;
    int64_t revision = (int64_t) meta.revision;
    shoal_msg_claim_keys_codec.clear(&meta);
    return revision;
}
