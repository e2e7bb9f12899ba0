/*  shoal_claim_store: claims and counters, each change one batch. */
#include "shoal_claim_store.h"
#include "shoal_alloc.h"

#include <czmq.h>

#define CLAIMS_KEY_CLAIM "claim"
#define CLAIMS_KEY_NODE "node"
#define CLAIMS_KEY_TENANT "tenant"
#define CLAIMS_KEY_MOVE "move"
//  Smallest capacity a list starts with.
#define CLAIMS_LIST_MIN 8
//  Room for a tenant read back from a key (it cannot be longer).
#define CLAIMS_NAME_SIZE SHOAL_KEY_MAX

struct _shoal_claim_store_t {
    shoal_store_t *store;       //  the node's store (borrowed)
    bool sync;                  //  make every write durable before returning
    shoal_claim_store_observer_fn *observer;    //  told of every change written, or NULL
    void *observer_arg;         //  its argument
};

//  What one claim adds to the counters of its scopes.
typedef struct {
    int64_t claims;             //  1 unless released
    int64_t running;            //  1 when it holds a guest
    int64_t memory_bytes;       //  its memory when it holds a guest
} s_usage_t;

void
shoal_claim_records_clear(shoal_claim_records_t *list)
{
    for (size_t i = 0; i < list->count; i++)
        shoal_claim_codec.clear(&list->items[i]);
    free(list->items);
    memset(list, 0, sizeof *list);
}

bool
shoal_claim_holds_guest(shoal_claim_state_t state)
{
    return state == SHOAL_CLAIM_CREATING || state == SHOAL_CLAIM_RUNNING
        || state == SHOAL_CLAIM_PAUSED || state == SHOAL_CLAIM_MOVING;
}

shoal_claim_store_t *
shoal_claim_store_new(shoal_store_t *store, bool sync)
{
    shoal_claim_store_t *self = (shoal_claim_store_t *) zmalloc(sizeof *self);
    self->store = store;
    self->sync = sync;
    return self;
}

void
shoal_claim_store_destroy(shoal_claim_store_t **self_p)
{
    if (*self_p) {
        free(*self_p);
        *self_p = NULL;
    }
}

const char *
shoal_claim_store_error(shoal_claim_store_t *self)
{
    return shoal_store_error(self->store);
}

static void
s_key_claim(shoal_key_t *key, const char *id)
{
    shoal_key_init(key);
    shoal_key_add_str(key, CLAIMS_KEY_CLAIM);
    if (id)
        shoal_key_add_str(key, id);
}

//  The counters key of TENANT, or of the node when TENANT is NULL; with
//  ANY_TENANT, the prefix of every tenant's key.
static void
s_key_counters(shoal_key_t *key, const char *tenant, bool any_tenant)
{
    shoal_key_init(key);
    if (!tenant && !any_tenant) {
        shoal_key_add_str(key, CLAIMS_KEY_NODE);
        return;
    }
    shoal_key_add_str(key, CLAIMS_KEY_TENANT);
    if (tenant)
        shoal_key_add_str(key, tenant);
}

static s_usage_t
s_usage(const shoal_claim_record_t *record)
{
    s_usage_t usage = { 0, 0, 0 };
    if (record && record->state != SHOAL_CLAIM_RELEASED)
        usage.claims = 1;
    if (record && shoal_claim_holds_guest(record->state)) {
        usage.running = 1;
        usage.memory_bytes = (int64_t) record->memory_bytes;
    }
    return usage;
}

int
shoal_claim_store_get(shoal_claim_store_t *self, const char *id, shoal_claim_record_t *record,
                      bool *found)
{
    shoal_key_t key;
    s_key_claim(&key, id);
    return shoal_store_get_record(self->store, SHOAL_CF_CLAIMS, &key, &shoal_claim_codec, record, found);
}

int
shoal_claim_store_counters(shoal_claim_store_t *self, const char *tenant, shoal_counter_record_t *counters)
{
    shoal_key_t key;
    s_key_counters(&key, tenant, false);
    bool found = false;
    if (shoal_store_get_record(self->store, SHOAL_CF_COUNTERS, &key, &shoal_counter_codec, counters, &found))
        return -1;
    if (!found)
        memset(counters, 0, sizeof *counters);
    return 0;
}

//  Adds to BATCH the counters of TENANT (NULL: the node) changed by ADDED
//  minus REMOVED. Returns 0 or -1.
static int
s_batch_counters(shoal_claim_store_t *self, shoal_batch_t *batch, const char *tenant,
                 s_usage_t added, s_usage_t removed)
{
    shoal_counter_record_t counters;
    if (shoal_claim_store_counters(self, tenant, &counters))
        return -1;
    counters.claims = shoal_count_add(counters.claims, added.claims - removed.claims);
    counters.running = shoal_count_add(counters.running, added.running - removed.running);
    counters.memory_bytes = shoal_count_add(counters.memory_bytes, added.memory_bytes - removed.memory_bytes);
    shoal_key_t key;
    s_key_counters(&key, tenant, false);
    return shoal_batch_put_record(batch, SHOAL_CF_COUNTERS, &key, &shoal_counter_codec, &counters);
}

//  The key of ROLE's move record of claim ID (ID NULL: the prefix of all).
static void
s_key_move(shoal_key_t *key, shoal_move_role_t role, const char *id)
{
    shoal_key_init(key);
    shoal_key_add_str(key, CLAIMS_KEY_MOVE);
    if (id) {
        shoal_key_add_u64(key, (uint64_t) role);
        shoal_key_add_str(key, id);
    }
}

int
shoal_claim_store_change(shoal_claim_store_t *self, const shoal_claim_record_t *previous,
                         const shoal_claim_record_t *record, const shoal_move_t *move, bool sync)
{
    //  A claim never changes tenant: its counters move within one scope.
    assert(!previous || !record || streq(previous->tenant, record->tenant));
    s_usage_t added = s_usage(record);
    s_usage_t removed = s_usage(previous);
    const shoal_claim_record_t *claim = record ? record : previous;
    shoal_batch_t *batch = shoal_batch_new(self->store);
    shoal_key_t key;
    int rc = 0;
    if (claim) {
        s_key_claim(&key, claim->id);
        if (record)
            rc = shoal_batch_put_record(batch, SHOAL_CF_CLAIMS, &key, &shoal_claim_codec, record);
        else
            shoal_batch_delete(batch, SHOAL_CF_CLAIMS, &key);
        if (rc == 0)
            rc = s_batch_counters(self, batch, NULL, added, removed);
        if (rc == 0)
            rc = s_batch_counters(self, batch, claim->tenant, added, removed);
    }
    if (rc == 0 && move) {
        s_key_move(&key, move->role, move->claim_id);
        rc = shoal_batch_put_record(batch, SHOAL_CF_MOVES, &key, &shoal_msg_move_codec, move);
    }
    if (rc == 0)
        rc = shoal_store_write(self->store, batch, self->sync && sync);
    shoal_batch_destroy(&batch);
    if (rc == 0 && self->observer && (claim || move))
        self->observer(previous, record, move, SHOAL_MOVE_ROLE_NONE, NULL, self->observer_arg);
    return rc;
}

void
shoal_claim_store_set_observer(shoal_claim_store_t *self, shoal_claim_store_observer_fn *fn, void *arg)
{
    self->observer = fn;
    self->observer_arg = arg;
}

int
shoal_claim_store_put(shoal_claim_store_t *self, const shoal_claim_record_t *previous,
                      const shoal_claim_record_t *record)
{
    return shoal_claim_store_change(self, previous, record, NULL, true);
}

int
shoal_claim_store_move_get(shoal_claim_store_t *self, shoal_move_role_t role, const char *claim_id,
                           shoal_move_t *move, bool *found)
{
    shoal_key_t key;
    s_key_move(&key, role, claim_id);
    return shoal_store_get_record(self->store, SHOAL_CF_MOVES, &key, &shoal_msg_move_codec, move, found);
}

int
shoal_claim_store_move_delete(shoal_claim_store_t *self, shoal_move_role_t role, const char *claim_id)
{
    shoal_key_t key;
    s_key_move(&key, role, claim_id);
    int rc = shoal_store_delete(self->store, SHOAL_CF_MOVES, &key, self->sync);
    if (rc == 0 && self->observer)
        self->observer(NULL, NULL, NULL, role, claim_id, self->observer_arg);
    return rc;
}

void
shoal_move_unreadables_clear(shoal_move_unreadables_t *list)
{
    for (size_t i = 0; i < list->count; i++) {
        free(list->items[i].claim_id);
        free(list->items[i].key);
        free(list->items[i].error);
    }
    free(list->items);
    memset(list, 0, sizeof *list);
}

//  Adds the record under the iterator, which does not decode, to LIST.
static void
s_unreadable_add(shoal_claim_store_t *self, shoal_iter_t *iter, shoal_move_unreadables_t *list)
{
    list->items = (shoal_move_unreadable_t *) shoal_realloc(list->items, (list->count + 1) * sizeof *list->items);
    shoal_move_unreadable_t *item = &list->items[list->count++];
    size_t size;
    const uint8_t *bytes = shoal_iter_key(iter, &size);
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, bytes, size);
    char kind[sizeof CLAIMS_KEY_MOVE + 1];
    char id[CLAIMS_NAME_SIZE];
    uint64_t role = 0;
    bool reads = shoal_key_read_str(&reader, kind, sizeof kind) == 0 && streq(kind, CLAIMS_KEY_MOVE)
              && shoal_key_read_u64(&reader, &role) == 0 && shoal_key_read_str(&reader, id, sizeof id) == 0;
    item->role = reads ? (shoal_move_role_t) role : SHOAL_MOVE_ROLE_NONE;
    item->claim_id = shoal_strdup(reads ? id : "");
    //  The key is there for the operator to read; without the memory to
    //  write it out it shows as "(?)", as the WAL report shows such a key.
    item->key = shoal_key_format(bytes, size);
    if (!item->key)
        item->key = shoal_strdup("(?)");
    item->error = shoal_strdup(shoal_store_error(self->store));
}

int
shoal_claim_store_move_list(shoal_claim_store_t *self, shoal_msg_moves_t *list)
{
    return shoal_claim_store_move_scan(self, list, NULL);
}

int
shoal_claim_store_move_scan(shoal_claim_store_t *self, shoal_msg_moves_t *list,
                            shoal_move_unreadables_t *unreadable)
{
    if (unreadable)
        shoal_move_unreadables_clear(unreadable);
    shoal_msg_moves_codec.clear(list);
    shoal_key_t prefix;
    s_key_move(&prefix, SHOAL_MOVE_ROLE_NONE, NULL);
    shoal_iter_t *iter = shoal_iter_prefix(self->store, SHOAL_CF_MOVES, &prefix);
    if (!iter)
        return -1;
    int rc = 0;
    size_t capacity = 0;
    for (bool valid = shoal_iter_first(iter); valid && rc == 0; valid = shoal_iter_next(iter)) {
        if (list->count == capacity) {
            capacity = capacity ? capacity * 2 : CLAIMS_LIST_MIN;
            list->moves = (shoal_move_t *) shoal_realloc(list->moves, capacity * sizeof *list->moves);
        }
        rc = shoal_iter_record(iter, &shoal_msg_move_codec, &list->moves[list->count]);
        if (rc == 0)
            list->count++;
        else
        if (unreadable) {
            s_unreadable_add(self, iter, unreadable);
            rc = 0;
        }
    }
    if (rc == 0)
        rc = shoal_iter_status(iter);
    shoal_iter_destroy(&iter);
    if (rc)
        shoal_msg_moves_codec.clear(list);
    return rc;
}

//  Reads claims in id order into LIST (cleared first): after AFTER (NULL or
//  "": from the first), at most LIMIT (0: all).
static int
s_list(shoal_claim_store_t *self, const char *after, size_t limit, shoal_claim_records_t *list)
{
    shoal_claim_records_clear(list);
    shoal_key_t prefix;
    s_key_claim(&prefix, NULL);
    shoal_iter_t *iter = shoal_iter_prefix(self->store, SHOAL_CF_CLAIMS, &prefix);
    if (!iter)
        return -1;
    bool valid;
    if (after && *after) {
        //  Keys order as ids do: the first key at or past AFTER's, less AFTER itself.
        shoal_key_t from;
        s_key_claim(&from, after);
        valid = shoal_iter_seek(iter, &from);
        size_t size = 0;
        const uint8_t *key = valid ? shoal_iter_key(iter, &size) : NULL;
        if (key && size == from.size && memcmp(key, from.bytes, size) == 0)
            valid = shoal_iter_next(iter);
    }
    else
        valid = shoal_iter_first(iter);
    int rc = 0;
    for (; valid && rc == 0 && (limit == 0 || list->count < limit); valid = shoal_iter_next(iter)) {
        if (list->count == list->capacity) {
            list->capacity = list->capacity ? list->capacity * 2 : CLAIMS_LIST_MIN;
            list->items = (shoal_claim_record_t *) shoal_realloc(list->items, list->capacity * sizeof *list->items);
        }
        rc = shoal_iter_record(iter, &shoal_claim_codec, &list->items[list->count]);
        if (rc == 0)
            list->count++;
    }
    if (rc == 0)
        rc = shoal_iter_status(iter);
    shoal_iter_destroy(&iter);
    if (rc)
        shoal_claim_records_clear(list);
    return rc;
}

int
shoal_claim_store_list(shoal_claim_store_t *self, shoal_claim_records_t *list)
{
    return s_list(self, NULL, 0, list);
}

int
shoal_claim_store_list_after(shoal_claim_store_t *self, const char *after, size_t limit,
                             shoal_claim_records_t *list)
{
    return s_list(self, after, limit, list);
}

//  Adds RECORD's usage to COUNTERS.
static void
s_count(shoal_counter_record_t *counters, const shoal_claim_record_t *record)
{
    s_usage_t usage = s_usage(record);
    counters->claims += (uint64_t) usage.claims;
    counters->running += (uint64_t) usage.running;
    counters->memory_bytes += (uint64_t) usage.memory_bytes;
}

int
shoal_claim_store_recount(shoal_claim_store_t *self, const char *tenant, shoal_counter_record_t *counters)
{
    memset(counters, 0, sizeof *counters);
    shoal_claim_records_t list = { 0 };
    if (shoal_claim_store_list(self, &list))
        return -1;
    for (size_t i = 0; i < list.count; i++)
        if (!tenant || streq(list.items[i].tenant, tenant))
            s_count(counters, &list.items[i]);
    shoal_claim_records_clear(&list);
    return 0;
}

//  Adds to BATCH the counters of TENANT (NULL: the node) when the stored ones
//  differ from COUNTED; counts the fix in *FIXED. Returns 0 or -1.
static int
s_repair_scope(shoal_claim_store_t *self, shoal_batch_t *batch, const char *tenant,
               const shoal_counter_record_t *counted, size_t *fixed)
{
    shoal_counter_record_t stored;
    if (shoal_claim_store_counters(self, tenant, &stored))
        return -1;
    if (memcmp(&stored, counted, sizeof stored) == 0)
        return 0;
    zsys_warning("claims: counters of %s%s were %" PRIu64 "/%" PRIu64 "/%" PRIu64 ", a recount says %"
                 PRIu64 "/%" PRIu64 "/%" PRIu64 " (claims/running/memory): repaired",
                 tenant ? "tenant " : "the node", tenant ? tenant : "", stored.claims, stored.running,
                 stored.memory_bytes, counted->claims, counted->running, counted->memory_bytes);
    (*fixed)++;
    shoal_key_t key;
    s_key_counters(&key, tenant, false);
    return shoal_batch_put_record(batch, SHOAL_CF_COUNTERS, &key, &shoal_counter_codec, counted);
}

zlistx_t *
shoal_claim_store_tenants(shoal_claim_store_t *self)
{
    shoal_key_t prefix;
    s_key_counters(&prefix, NULL, true);
    shoal_iter_t *iter = shoal_iter_prefix(self->store, SHOAL_CF_COUNTERS, &prefix);
    if (!iter)
        return NULL;
    zlistx_t *tenants = zlistx_new();
    zlistx_set_duplicator(tenants, (zlistx_duplicator_fn *) shoal_strdup);
    zlistx_set_destructor(tenants, (zlistx_destructor_fn *) zstr_free);
    for (bool valid = shoal_iter_first(iter); valid; valid = shoal_iter_next(iter)) {
        size_t size;
        const uint8_t *bytes = shoal_iter_key(iter, &size);
        shoal_key_reader_t reader;
        shoal_key_reader_init(&reader, bytes, size);
        char scope[CLAIMS_NAME_SIZE], tenant[CLAIMS_NAME_SIZE];
        if (shoal_key_read_str(&reader, scope, sizeof scope) == 0
        &&  shoal_key_read_str(&reader, tenant, sizeof tenant) == 0)
            zlistx_add_end(tenants, tenant);
    }
    if (shoal_iter_status(iter))
        zlistx_destroy(&tenants);
    shoal_iter_destroy(&iter);
    return tenants;
}

int
shoal_claim_store_repair(shoal_claim_store_t *self, size_t *fixed_p)
{
    shoal_claim_records_t list = { 0 };
    if (shoal_claim_store_list(self, &list))
        return -1;
    //  Every tenant that has claims or has counters is recounted: a tenant
    //  whose counters say more than its claims must come back to them.
    zhashx_t *tenants = zhashx_new();
    zhashx_set_destructor(tenants, shoal_free_item);
    shoal_counter_record_t node = { 0, 0, 0 };
    for (size_t i = 0; i < list.count; i++) {
        const shoal_claim_record_t *record = &list.items[i];
        s_count(&node, record);
        shoal_counter_record_t *counted = (shoal_counter_record_t *) zhashx_lookup(tenants, record->tenant);
        if (!counted) {
            counted = (shoal_counter_record_t *) zmalloc(sizeof *counted);
            zhashx_insert(tenants, record->tenant, counted);
        }
        s_count(counted, record);
    }
    zlistx_t *stored = shoal_claim_store_tenants(self);
    int rc = stored ? 0 : -1;
    for (const char *tenant = stored ? (const char *) zlistx_first(stored) : NULL; tenant;
         tenant = (const char *) zlistx_next(stored))
        if (!zhashx_lookup(tenants, tenant))
            zhashx_insert(tenants, tenant, zmalloc(sizeof(shoal_counter_record_t)));
    zlistx_destroy(&stored);

    size_t fixed = 0;
    shoal_batch_t *batch = shoal_batch_new(self->store);
    if (rc == 0)
        rc = s_repair_scope(self, batch, NULL, &node, &fixed);
    for (shoal_counter_record_t *counted = (shoal_counter_record_t *) zhashx_first(tenants);
         counted && rc == 0; counted = (shoal_counter_record_t *) zhashx_next(tenants))
        rc = s_repair_scope(self, batch, (const char *) zhashx_cursor(tenants), counted, &fixed);
    if (rc == 0 && fixed)
        rc = shoal_store_write(self->store, batch, self->sync);
    shoal_batch_destroy(&batch);
    zhashx_destroy(&tenants);
    shoal_claim_records_clear(&list);
    if (fixed_p)
        *fixed_p = rc == 0 ? fixed : 0;
    return rc;
}

void
shoal_claim_item_clear(shoal_claim_item_t *item)
{
    shoal_claim_codec.clear(&item->claim);
    shoal_msg_move_codec.clear(&item->move);
}

int
shoal_claim_store_read_item(shoal_cf_t cf, const uint8_t *key, size_t key_size, const uint8_t *value,
                            size_t size, shoal_claim_item_t *item, char *why, size_t why_size)
{
    memset(item, 0, sizeof *item);
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, key, key_size);
    char scope[CLAIMS_NAME_SIZE];
    uint64_t role = 0;
    bool parsed = shoal_key_read_str(&reader, scope, sizeof scope) == 0;
    if (parsed && cf == SHOAL_CF_CLAIMS && streq(scope, CLAIMS_KEY_CLAIM)) {
        item->kind = SHOAL_CLAIM_ITEM_CLAIM;
        parsed = shoal_key_read_str(&reader, item->name, sizeof item->name) == 0;
    }
    else
    if (parsed && cf == SHOAL_CF_COUNTERS && streq(scope, CLAIMS_KEY_NODE))
        item->kind = SHOAL_CLAIM_ITEM_NODE_COUNTERS;
    else
    if (parsed && cf == SHOAL_CF_COUNTERS && streq(scope, CLAIMS_KEY_TENANT)) {
        item->kind = SHOAL_CLAIM_ITEM_TENANT_COUNTERS;
        parsed = shoal_key_read_str(&reader, item->name, sizeof item->name) == 0;
    }
    else
    if (parsed && cf == SHOAL_CF_MOVES && streq(scope, CLAIMS_KEY_MOVE)) {
        item->kind = SHOAL_CLAIM_ITEM_MOVE;
        parsed = shoal_key_read_u64(&reader, &role) == 0 && shoal_key_read_str(&reader, item->name, sizeof item->name) == 0
              && (role == SHOAL_MOVE_SOURCE || role == SHOAL_MOVE_TARGET);
        item->role = (shoal_move_role_t) role;
    }
    else
        parsed = false;
    if (!parsed || !shoal_key_reader_done(&reader)) {
        snprintf(why, why_size, "not a key of %s", shoal_cf_name(cf));
        memset(item, 0, sizeof *item);
        return -1;
    }
    char error[256];
    int rc = 0;
    if (item->kind == SHOAL_CLAIM_ITEM_CLAIM) {
        rc = shoal_claim_codec.decode(value, size, &item->claim, error, sizeof error);
        if (rc == 0 && !streq(item->claim.id, item->name)) {
            snprintf(error, sizeof error, "holds claim '%s', not the claim its key names", item->claim.id);
            rc = -1;
        }
    }
    else
    if (item->kind == SHOAL_CLAIM_ITEM_MOVE) {
        rc = shoal_msg_move_codec.decode(value, size, &item->move, error, sizeof error);
        if (rc == 0 && (!item->move.claim_id || !streq(item->move.claim_id, item->name) || item->move.role != item->role)) {
            snprintf(error, sizeof error, "holds the %s record of claim '%s', not the one its key names",
                     item->move.role == SHOAL_MOVE_SOURCE ? "source" : "target", item->move.claim_id ? item->move.claim_id : "");
            rc = -1;
        }
    }
    else
        rc = shoal_counter_codec.decode(value, size, &item->counters, error, sizeof error);
    if (rc) {
        snprintf(why, why_size, "the value does not decode: %s", error);
        shoal_claim_item_clear(item);
        return -1;
    }
    return 0;
}
