/*  shoal_key_space: a claim's keys, each write one batch. */
#include "shoal_key_space.h"
#include "shoal_alloc.h"

#define SPACE_KEY_META "meta"
#define SPACE_KEY_KEY "key"
#define SPACE_KEY_STAGED "staged"
#define SPACE_KEY_LEASE "lease"
#define SPACE_KEY_LEASED "leased"
#define SPACE_KIND_KEY "key"
//  Smallest capacity a range result grows to.
#define SPACE_RANGE_MIN 8
//  Room for a claim id read back from a key (it cannot be longer).
#define SPACE_NAME_SIZE SHOAL_KEY_MAX

struct _shoal_key_space_t {
    shoal_store_t *store;       //  the node's store (borrowed)
    bool sync;                  //  make every write durable before returning
};

shoal_key_space_t *
shoal_key_space_new(shoal_store_t *store, bool sync)
{
    shoal_key_space_t *self = (shoal_key_space_t *) zmalloc(sizeof *self);
    self->store = store;
    self->sync = sync;
    return self;
}

void
shoal_key_space_destroy(shoal_key_space_t **self_p)
{
    if (*self_p) {
        free(*self_p);
        *self_p = NULL;
    }
}

const char *
shoal_key_space_error(shoal_key_space_t *self)
{
    return shoal_store_error(self->store);
}

//  (KIND, CLAIM_ID): the key of a meta or staged record, or with KIND "key"
//  the prefix of every key of the claim.
static void
s_key(shoal_key_t *key, const char *kind, const char *claim_id)
{
    shoal_key_init(key);
    shoal_key_add_str(key, kind);
    if (claim_id)
        shoal_key_add_str(key, claim_id);
}

static void
s_key_of(shoal_key_t *key, const char *claim_id, const char *name)
{
    s_key(key, SPACE_KEY_KEY, claim_id);
    shoal_key_add_str(key, name);
}

int
shoal_key_space_meta(shoal_key_space_t *self, const char *claim_id, shoal_msg_claim_keys_t *meta)
{
    shoal_key_t key;
    s_key(&key, SPACE_KEY_META, claim_id);
    bool found = false;
    if (shoal_store_get_record(self->store, SHOAL_CF_CLAIM_KEYS, &key, &shoal_msg_claim_keys_codec, meta, &found))
        return -1;
    if (!found) {
        memset(meta, 0, sizeof *meta);
        meta->claim_id = shoal_strdup(claim_id);
        meta->move_id = shoal_strdup("");
    }
    return 0;
}

int
shoal_key_space_get(shoal_key_space_t *self, const char *claim_id, const char *name,
                    shoal_msg_key_value_t *kv, bool *found)
{
    shoal_key_t key;
    s_key_of(&key, claim_id, name);
    return shoal_store_get_record(self->store, SHOAL_CF_CLAIM_KEYS, &key, &shoal_msg_key_value_codec, kv, found);
}

int
shoal_key_space_range(shoal_key_space_t *self, const char *claim_id, const char *prefix,
                      shoal_msg_key_value_t **kvs_p, size_t *count_p)
{
    shoal_key_t start;
    s_key(&start, SPACE_KEY_KEY, claim_id);
    if (*prefix)
        shoal_key_add_str_prefix(&start, prefix);
    shoal_iter_t *iter = shoal_iter_prefix(self->store, SHOAL_CF_CLAIM_KEYS, &start);
    if (!iter)
        return -1;
    size_t capacity = *count_p;
    int rc = 0;
    for (bool valid = shoal_iter_first(iter); valid && rc == 0; valid = shoal_iter_next(iter)) {
        if (*count_p == capacity) {
            capacity = capacity < SPACE_RANGE_MIN ? SPACE_RANGE_MIN : capacity * 2;
            *kvs_p = (shoal_msg_key_value_t *) shoal_realloc(*kvs_p, capacity * sizeof **kvs_p);
        }
        memset(&(*kvs_p)[*count_p], 0, sizeof **kvs_p);
        rc = shoal_iter_record(iter, &shoal_msg_key_value_codec, &(*kvs_p)[*count_p]);
        if (rc == 0)
            (*count_p)++;
    }
    if (rc == 0)
        rc = shoal_iter_status(iter);
    shoal_iter_destroy(&iter);
    return rc;
}

//  Adds META to BATCH as its claim's record. Returns 0 or -1.
static int
s_batch_meta(shoal_batch_t *batch, const shoal_msg_claim_keys_t *meta)
{
    shoal_key_t key;
    s_key(&key, SPACE_KEY_META, meta->claim_id);
    //  The record holds no keys: they have theirs.
    shoal_msg_claim_keys_t bare = *meta;
    bare.kvs = NULL;
    bare.count = 0;
    bare.lock_readers = 0;
    bare.lock_writer = NULL;
    bare.lock_waiter = NULL;
    bare.locks = NULL;
    bare.lock_count = 0;
    bare.leases = NULL;
    bare.lease_count = 0;
    return shoal_batch_put_record(batch, SHOAL_CF_CLAIM_KEYS, &key, &shoal_msg_claim_keys_codec, &bare);
}

//  Adds to BATCH the removal of every key of CLAIM_ID.
static void
s_batch_clear_keys(shoal_batch_t *batch, const char *claim_id)
{
    shoal_key_t begin, end;
    s_key(&begin, SPACE_KEY_KEY, claim_id);
    shoal_key_prefix_end(&begin, &end);
    shoal_batch_delete_range(batch, SHOAL_CF_CLAIM_KEYS, &begin, &end);
}

//  The index entry of what lease ID holds: (KIND, CLAIM_ID, NAME), or with
//  KIND NULL the prefix of all it holds.
static void
s_key_leased(shoal_key_t *key, uint64_t id, const char *kind, const char *claim_id, const char *name)
{
    shoal_key_init(key);
    shoal_key_add_str(key, SPACE_KEY_LEASED);
    shoal_key_add_u64(key, id);
    if (kind) {
        shoal_key_add_str(key, kind);
        shoal_key_add_str(key, claim_id);
        shoal_key_add_str(key, name);
    }
}

static void
s_key_lease(shoal_key_t *key, uint64_t id)
{
    shoal_key_init(key);
    shoal_key_add_str(key, SPACE_KEY_LEASE);
    shoal_key_add_u64(key, id);
}

static void s_key_lock(shoal_key_t *key, const char *claim_id, const char *holder);

//  Adds to BATCH the removal of CLAIM_ID's lock: its state, its records
//  and their leases' index (RECORDS, COUNT of them, as read).
static void
s_batch_clear_lock(shoal_batch_t *batch, const char *claim_id, const shoal_msg_lock_record_t *records, size_t count)
{
    shoal_key_t key, end;
    s_key_lock(&key, claim_id, NULL);
    shoal_batch_delete(batch, SHOAL_CF_LOCKS, &key);
    for (size_t i = 0; i < count; i++)
        if (records[i].lease) {
            s_key_leased(&key, records[i].lease, "lock", claim_id, records[i].holder);
            shoal_batch_delete(batch, SHOAL_CF_CLAIM_KEYS, &key);
        }
    s_key_lock(&key, claim_id, "");
    shoal_key_prefix_end(&key, &end);
    shoal_batch_delete_range(batch, SHOAL_CF_LOCKS, &key, &end);
}

//  Adds WRITE of CLAIM_ID to BATCH, with its lease index. Returns 0 or -1.
static int
s_batch_key_write(shoal_batch_t *batch, const char *claim_id, const shoal_key_write_t *write)
{
    shoal_key_t key;
    s_key_of(&key, claim_id, write->key);
    uint64_t lease = write->kv ? write->kv->lease : 0;
    if (write->prior_lease && write->prior_lease != lease) {
        shoal_key_t index;
        s_key_leased(&index, write->prior_lease, SPACE_KIND_KEY, claim_id, write->key);
        shoal_batch_delete(batch, SHOAL_CF_CLAIM_KEYS, &index);
    }
    if (!write->kv) {
        shoal_batch_delete(batch, SHOAL_CF_CLAIM_KEYS, &key);
        return 0;
    }
    if (lease) {
        shoal_key_t index;
        s_key_leased(&index, lease, SPACE_KIND_KEY, claim_id, write->key);
        shoal_batch_put(batch, SHOAL_CF_CLAIM_KEYS, &index, "", 0);
    }
    return shoal_batch_put_record(batch, SHOAL_CF_CLAIM_KEYS, &key, &shoal_msg_key_value_codec, write->kv);
}

int
shoal_key_space_apply(shoal_key_space_t *self, const shoal_key_change_t *changes, size_t change_count,
                      const shoal_msg_lease_t *lease, uint64_t gone)
{
    shoal_batch_t *batch = shoal_batch_new(self->store);
    int rc = 0;
    for (size_t i = 0; i < change_count && rc == 0; i++) {
        rc = s_batch_meta(batch, changes[i].meta);
        for (size_t k = 0; k < changes[i].count && rc == 0; k++)
            rc = s_batch_key_write(batch, changes[i].meta->claim_id, &changes[i].writes[k]);
    }
    if (rc == 0 && lease) {
        shoal_key_t key;
        s_key_lease(&key, lease->id);
        rc = shoal_batch_put_record(batch, SHOAL_CF_CLAIM_KEYS, &key, &shoal_msg_lease_codec, lease);
    }
    if (rc == 0 && gone) {
        shoal_key_t key, begin, end;
        s_key_lease(&key, gone);
        shoal_batch_delete(batch, SHOAL_CF_CLAIM_KEYS, &key);
        s_key_leased(&begin, gone, NULL, NULL, NULL);
        shoal_key_prefix_end(&begin, &end);
        shoal_batch_delete_range(batch, SHOAL_CF_CLAIM_KEYS, &begin, &end);
    }
    if (rc == 0)
        rc = shoal_store_write(self->store, batch, self->sync);
    shoal_batch_destroy(&batch);
    return rc;
}

int
shoal_key_space_write(shoal_key_space_t *self, const shoal_msg_claim_keys_t *meta,
                      const shoal_msg_key_value_t *puts, size_t put_count,
                      char *const *deletes, size_t delete_count)
{
    shoal_key_write_t *writes = (shoal_key_write_t *) zmalloc((put_count + delete_count + 1) * sizeof *writes);
    size_t count = 0;
    for (size_t i = 0; i < delete_count; i++)
        writes[count++] = (shoal_key_write_t) { .key = deletes[i] };
    for (size_t i = 0; i < put_count; i++)
        writes[count++] = (shoal_key_write_t) { .key = puts[i].key, .kv = &puts[i] };
    shoal_key_change_t change = { meta, writes, count };
    int rc = shoal_key_space_apply(self, &change, 1, NULL, 0);
    free(writes);
    return rc;
}

int
shoal_key_space_lease(shoal_key_space_t *self, uint64_t id, shoal_msg_lease_t *lease, bool *found)
{
    shoal_key_t key;
    s_key_lease(&key, id);
    return shoal_store_get_record(self->store, SHOAL_CF_CLAIM_KEYS, &key, &shoal_msg_lease_codec, lease, found);
}

int
shoal_key_space_leases(shoal_key_space_t *self, shoal_msg_lease_t **leases_p, size_t *count_p)
{
    *leases_p = NULL;
    *count_p = 0;
    shoal_key_t prefix;
    shoal_key_init(&prefix);
    shoal_key_add_str(&prefix, SPACE_KEY_LEASE);
    shoal_iter_t *iter = shoal_iter_prefix(self->store, SHOAL_CF_CLAIM_KEYS, &prefix);
    if (!iter)
        return -1;
    size_t capacity = 0;
    int rc = 0;
    for (bool valid = shoal_iter_first(iter); valid && rc == 0; valid = shoal_iter_next(iter)) {
        if (*count_p == capacity) {
            capacity = capacity < SPACE_RANGE_MIN ? SPACE_RANGE_MIN : capacity * 2;
            *leases_p = (shoal_msg_lease_t *) shoal_realloc(*leases_p, capacity * sizeof **leases_p);
        }
        memset(&(*leases_p)[*count_p], 0, sizeof **leases_p);
        rc = shoal_iter_record(iter, &shoal_msg_lease_codec, &(*leases_p)[*count_p]);
        if (rc == 0)
            (*count_p)++;
    }
    if (rc == 0)
        rc = shoal_iter_status(iter);
    shoal_iter_destroy(&iter);
    return rc;
}

void
shoal_leases_free(shoal_msg_lease_t **leases_p, size_t count)
{
    if (*leases_p) {
        for (size_t i = 0; i < count; i++)
            shoal_msg_lease_codec.clear(&(*leases_p)[i]);
        free(*leases_p);
        *leases_p = NULL;
    }
}

int
shoal_key_space_leased(shoal_key_space_t *self, uint64_t id, shoal_leased_t **items_p, size_t *count_p)
{
    *items_p = NULL;
    *count_p = 0;
    shoal_key_t prefix;
    s_key_leased(&prefix, id, NULL, NULL, NULL);
    shoal_iter_t *iter = shoal_iter_prefix(self->store, SHOAL_CF_CLAIM_KEYS, &prefix);
    if (!iter)
        return -1;
    for (bool valid = shoal_iter_first(iter); valid; valid = shoal_iter_next(iter)) {
        size_t size;
        const uint8_t *bytes = shoal_iter_key(iter, &size);
        shoal_key_reader_t reader;
        shoal_key_reader_init(&reader, bytes, size);
        char tag[SPACE_NAME_SIZE], kind[SPACE_NAME_SIZE], claim[SPACE_NAME_SIZE], name[SPACE_NAME_SIZE];
        uint64_t lease;
        if (shoal_key_read_str(&reader, tag, sizeof tag) || shoal_key_read_u64(&reader, &lease)
        ||  shoal_key_read_str(&reader, kind, sizeof kind) || shoal_key_read_str(&reader, claim, sizeof claim)
        ||  shoal_key_read_str(&reader, name, sizeof name))
            continue;
        *items_p = (shoal_leased_t *) shoal_realloc(*items_p, (*count_p + 1) * sizeof **items_p);
        (*items_p)[(*count_p)++] = (shoal_leased_t) { shoal_strdup(kind), shoal_strdup(claim), shoal_strdup(name) };
    }
    int rc = shoal_iter_status(iter);
    shoal_iter_destroy(&iter);
    return rc;
}

void
shoal_leased_free(shoal_leased_t **items_p, size_t count)
{
    if (*items_p) {
        for (size_t i = 0; i < count; i++) {
            free((*items_p)[i].kind);
            free((*items_p)[i].claim_id);
            free((*items_p)[i].name);
        }
        free(*items_p);
        *items_p = NULL;
    }
}

int
shoal_key_space_set_meta(shoal_key_space_t *self, const shoal_msg_claim_keys_t *meta)
{
    return shoal_key_space_write(self, meta, NULL, 0, NULL, 0);
}

int
shoal_key_space_export(shoal_key_space_t *self, const char *claim_id, shoal_msg_claim_keys_t *space)
{
    if (shoal_key_space_meta(self, claim_id, space))
        return -1;
    if (shoal_key_space_range(self, claim_id, "", &space->kvs, &space->count)) {
        shoal_msg_claim_keys_codec.clear(space);
        return -1;
    }
    return 0;
}

int
shoal_key_space_stage(shoal_key_space_t *self, const shoal_msg_claim_keys_t *space)
{
    shoal_key_t key;
    s_key(&key, SPACE_KEY_STAGED, space->claim_id);
    shoal_batch_t *batch = shoal_batch_new(self->store);
    int rc = shoal_batch_put_record(batch, SHOAL_CF_CLAIM_KEYS, &key, &shoal_msg_claim_keys_codec, space);
    if (rc == 0)
        rc = shoal_store_write(self->store, batch, self->sync);
    shoal_batch_destroy(&batch);
    return rc;
}

int
shoal_key_space_unstage(shoal_key_space_t *self, const char *claim_id, const char *move_id, bool *removed_p)
{
    if (removed_p)
        *removed_p = false;
    shoal_key_t key;
    s_key(&key, SPACE_KEY_STAGED, claim_id);
    shoal_msg_claim_keys_t staged;
    bool found = false;
    if (shoal_store_get_record(self->store, SHOAL_CF_CLAIM_KEYS, &key, &shoal_msg_claim_keys_codec, &staged, &found))
        return -1;
    if (!found)
        return 0;
    bool ours = !move_id || streq(staged.move_id ? staged.move_id : "", move_id);
    shoal_msg_claim_keys_codec.clear(&staged);
    if (!ours)
        return 0;
    if (shoal_store_delete(self->store, SHOAL_CF_CLAIM_KEYS, &key, self->sync))
        return -1;
    if (removed_p)
        *removed_p = true;
    return 0;
}

int
shoal_key_space_staged(shoal_key_space_t *self, shoal_staged_t **staged_p, size_t *count_p)
{
    *staged_p = NULL;
    *count_p = 0;
    shoal_key_t prefix;
    s_key(&prefix, SPACE_KEY_STAGED, NULL);
    shoal_iter_t *iter = shoal_iter_prefix(self->store, SHOAL_CF_CLAIM_KEYS, &prefix);
    if (!iter)
        return -1;
    int rc = 0;
    for (bool valid = shoal_iter_first(iter); valid && rc == 0; valid = shoal_iter_next(iter)) {
        shoal_msg_claim_keys_t space = { 0 };
        rc = shoal_iter_record(iter, &shoal_msg_claim_keys_codec, &space);
        if (rc)
            break;
        *staged_p = (shoal_staged_t *) shoal_realloc(*staged_p, (*count_p + 1) * sizeof **staged_p);
        (*staged_p)[(*count_p)++] = (shoal_staged_t) {
            .claim_id = shoal_strdup(space.claim_id ? space.claim_id : ""),
            .move_id = shoal_strdup(space.move_id ? space.move_id : ""),
            .count = space.count,
        };
        shoal_msg_claim_keys_codec.clear(&space);
    }
    if (rc == 0)
        rc = shoal_iter_status(iter);
    shoal_iter_destroy(&iter);
    if (rc) {
        shoal_staged_free(staged_p, *count_p);
        *count_p = 0;
    }
    return rc;
}

void
shoal_staged_free(shoal_staged_t **staged_p, size_t count)
{
    if (*staged_p) {
        for (size_t i = 0; i < count; i++) {
            free((*staged_p)[i].claim_id);
            free((*staged_p)[i].move_id);
        }
        free(*staged_p);
        *staged_p = NULL;
    }
}

int
shoal_key_space_install(shoal_key_space_t *self, const char *claim_id, bool lazy, bool *found)
{
    shoal_key_t staged_key;
    s_key(&staged_key, SPACE_KEY_STAGED, claim_id);
    shoal_msg_claim_keys_t staged;
    if (shoal_store_get_record(self->store, SHOAL_CF_CLAIM_KEYS, &staged_key, &shoal_msg_claim_keys_codec,
                               &staged, found))
        return -1;
    if (!*found)
        return 0;
    shoal_batch_t *batch = shoal_batch_new(self->store);
    s_batch_clear_keys(batch, claim_id);
    shoal_batch_delete(batch, SHOAL_CF_CLAIM_KEYS, &staged_key);
    char *move_id = staged.move_id;
    staged.move_id = NULL;
    int rc = s_batch_meta(batch, &staged);
    for (size_t i = 0; i < staged.count && rc == 0; i++) {
        shoal_key_write_t write = { .key = staged.kvs[i].key, .kv = &staged.kvs[i] };
        rc = s_batch_key_write(batch, claim_id, &write);
    }
    //  The lock the move brought replaces any this node kept of the claim.
    shoal_msg_locks_t held = { 0 };
    if (rc == 0)
        rc = shoal_key_space_lock_records(self, claim_id, &held);
    if (rc == 0)
        s_batch_clear_lock(batch, claim_id, held.records, held.count);
    shoal_msg_locks_codec.clear(&held);
    shoal_msg_locks_t state = {
        .claim_id = (char *) claim_id, .readers = staged.lock_readers,
        .writer = (char *) (staged.lock_writer ? staged.lock_writer : ""),
        .waiter = (char *) (staged.lock_waiter ? staged.lock_waiter : ""),
    };
    shoal_key_t key;
    if (rc == 0 && (state.readers || *state.writer || *state.waiter)) {
        s_key_lock(&key, claim_id, NULL);
        rc = shoal_batch_put_record(batch, SHOAL_CF_LOCKS, &key, &shoal_msg_locks_codec, &state);
    }
    for (size_t i = 0; i < staged.lock_count && rc == 0; i++) {
        const shoal_msg_lock_record_t *record = &staged.locks[i];
        s_key_lock(&key, claim_id, record->holder);
        rc = shoal_batch_put_record(batch, SHOAL_CF_LOCKS, &key, &shoal_msg_lock_record_codec, record);
        if (rc == 0 && record->lease) {
            s_key_leased(&key, record->lease, "lock", claim_id, record->holder);
            shoal_batch_put(batch, SHOAL_CF_CLAIM_KEYS, &key, "", 0);
        }
    }
    //  The leases they hold come along, ending when they did on the source;
    //  a lease this node holds already is its own.
    for (size_t i = 0; i < staged.lease_count && rc == 0; i++) {
        shoal_msg_lease_t lease;
        bool have = false;
        rc = shoal_key_space_lease(self, staged.leases[i].id, &lease, &have);
        if (have)
            shoal_msg_lease_codec.clear(&lease);
        else
        if (rc == 0) {
            s_key_lease(&key, staged.leases[i].id);
            rc = shoal_batch_put_record(batch, SHOAL_CF_CLAIM_KEYS, &key, &shoal_msg_lease_codec, &staged.leases[i]);
        }
    }
    if (rc == 0)
        rc = shoal_store_write(self->store, batch, self->sync && !lazy);
    shoal_batch_destroy(&batch);
    free(move_id);
    shoal_msg_claim_keys_codec.clear(&staged);
    return rc;
}

int
shoal_key_space_drop(shoal_key_space_t *self, const char *claim_id)
{
    shoal_key_t meta, staged;
    s_key(&meta, SPACE_KEY_META, claim_id);
    s_key(&staged, SPACE_KEY_STAGED, claim_id);
    //  Keys attached to leases leave the leases' index too.
    shoal_msg_key_value_t *kvs = NULL;
    size_t count = 0;
    if (shoal_key_space_range(self, claim_id, "", &kvs, &count))
        return -1;
    shoal_batch_t *batch = shoal_batch_new(self->store);
    for (size_t i = 0; i < count; i++)
        if (kvs[i].lease) {
            shoal_key_t index;
            s_key_leased(&index, kvs[i].lease, SPACE_KIND_KEY, claim_id, kvs[i].key);
            shoal_batch_delete(batch, SHOAL_CF_CLAIM_KEYS, &index);
        }
    shoal_key_values_free(&kvs, count);
    shoal_msg_locks_t held = { 0 };
    if (shoal_key_space_lock_records(self, claim_id, &held)) {
        shoal_batch_destroy(&batch);
        return -1;
    }
    s_batch_clear_lock(batch, claim_id, held.records, held.count);
    shoal_msg_locks_codec.clear(&held);
    s_batch_clear_keys(batch, claim_id);
    shoal_batch_delete(batch, SHOAL_CF_CLAIM_KEYS, &meta);
    shoal_batch_delete(batch, SHOAL_CF_CLAIM_KEYS, &staged);
    int rc = shoal_store_write(self->store, batch, self->sync);
    shoal_batch_destroy(&batch);
    return rc;
}

zlistx_t *
shoal_key_space_claims(shoal_key_space_t *self, const char *after, size_t limit)
{
    shoal_key_t prefix;
    s_key(&prefix, SPACE_KEY_META, NULL);
    shoal_iter_t *iter = shoal_iter_prefix(self->store, SHOAL_CF_CLAIM_KEYS, &prefix);
    if (!iter)
        return NULL;
    zlistx_t *claims = zlistx_new();
    zlistx_set_duplicator(claims, (zlistx_duplicator_fn *) shoal_strdup);
    zlistx_set_destructor(claims, (zlistx_destructor_fn *) zstr_free);
    shoal_key_t from;
    s_key(&from, SPACE_KEY_META, after);
    bool valid = *after ? shoal_iter_seek(iter, &from) : shoal_iter_first(iter);
    for (; valid && zlistx_size(claims) < limit; valid = shoal_iter_next(iter)) {
        size_t size;
        const uint8_t *bytes = shoal_iter_key(iter, &size);
        shoal_key_reader_t reader;
        shoal_key_reader_init(&reader, bytes, size);
        char kind[SPACE_NAME_SIZE], claim[SPACE_NAME_SIZE];
        if (shoal_key_read_str(&reader, kind, sizeof kind) == 0
        &&  shoal_key_read_str(&reader, claim, sizeof claim) == 0 && !streq(claim, after))
            zlistx_add_end(claims, claim);
    }
    if (shoal_iter_status(iter))
        zlistx_destroy(&claims);
    shoal_iter_destroy(&iter);
    return claims;
}

void
shoal_key_values_free(shoal_msg_key_value_t **kvs_p, size_t count)
{
    if (*kvs_p) {
        for (size_t i = 0; i < count; i++)
            shoal_msg_key_value_codec.clear(&(*kvs_p)[i]);
        free(*kvs_p);
        *kvs_p = NULL;
    }
}

//  The lock state of CLAIM_ID, or with HOLDER the key of its record (with
//  HOLDER "" and PREFIX, the prefix of every record of the claim).
static void
s_key_lock(shoal_key_t *key, const char *claim_id, const char *holder)
{
    shoal_key_init(key);
    shoal_key_add_str(key, holder ? "lock" : "state");
    shoal_key_add_str(key, claim_id);
    if (holder && *holder)
        shoal_key_add_str(key, holder);
}

int
shoal_key_space_lock_state(shoal_key_space_t *self, const char *claim_id, shoal_msg_locks_t *state)
{
    shoal_key_t key;
    s_key_lock(&key, claim_id, NULL);
    bool found = false;
    if (shoal_store_get_record(self->store, SHOAL_CF_LOCKS, &key, &shoal_msg_locks_codec, state, &found))
        return -1;
    if (!found) {
        memset(state, 0, sizeof *state);
        state->claim_id = shoal_strdup(claim_id);
        state->writer = shoal_strdup("");
        state->waiter = shoal_strdup("");
    }
    return 0;
}

int
shoal_key_space_lock_get(shoal_key_space_t *self, const char *claim_id, const char *holder,
                         shoal_msg_lock_record_t *record, bool *found)
{
    shoal_key_t key;
    s_key_lock(&key, claim_id, holder);
    return shoal_store_get_record(self->store, SHOAL_CF_LOCKS, &key, &shoal_msg_lock_record_codec, record, found);
}

//  Appends the lock records under PREFIX to STATE.
static int
s_lock_records(shoal_key_space_t *self, const shoal_key_t *prefix_in, shoal_msg_locks_t *state);

int
shoal_key_space_lock_records(shoal_key_space_t *self, const char *claim_id, shoal_msg_locks_t *state)
{
    shoal_key_t prefix;
    s_key_lock(&prefix, claim_id, "");
    return s_lock_records(self, &prefix, state);
}

int
shoal_key_space_lock_all(shoal_key_space_t *self, shoal_msg_locks_t *state)
{
    shoal_key_t prefix;
    shoal_key_init(&prefix);
    shoal_key_add_str(&prefix, "lock");
    return s_lock_records(self, &prefix, state);
}

static int
s_lock_records(shoal_key_space_t *self, const shoal_key_t *prefix_in, shoal_msg_locks_t *state)
{
    shoal_key_t prefix = *prefix_in;
    shoal_iter_t *iter = shoal_iter_prefix(self->store, SHOAL_CF_LOCKS, &prefix);
    if (!iter)
        return -1;
    int rc = 0;
    for (bool valid = shoal_iter_first(iter); valid && rc == 0 && state->count < SHOAL_LOCK_RECORDS_MAX;
         valid = shoal_iter_next(iter)) {
        state->records = (shoal_msg_lock_record_t *) shoal_realloc(state->records, (state->count + 1) * sizeof *state->records);
        memset(&state->records[state->count], 0, sizeof *state->records);
        rc = shoal_iter_record(iter, &shoal_msg_lock_record_codec, &state->records[state->count]);
        if (rc == 0)
            state->count++;
    }
    if (rc == 0)
        rc = shoal_iter_status(iter);
    shoal_iter_destroy(&iter);
    return rc;
}

int
shoal_key_space_lock_write(shoal_key_space_t *self, const shoal_msg_locks_t *state,
                           const shoal_msg_lock_record_t *record, const char *drop, uint64_t drop_lease)
{
    shoal_batch_t *batch = shoal_batch_new(self->store);
    shoal_key_t key;
    s_key_lock(&key, state->claim_id, NULL);
    int rc = 0;
    bool empty = !state->readers && !*state->writer && !*state->waiter;
    if (empty)
        shoal_batch_delete(batch, SHOAL_CF_LOCKS, &key);
    else {
        shoal_msg_locks_t bare = *state;
        bare.records = NULL;
        bare.count = 0;
        bare.granted = false;
        rc = shoal_batch_put_record(batch, SHOAL_CF_LOCKS, &key, &shoal_msg_locks_codec, &bare);
    }
    if (rc == 0 && drop) {
        s_key_lock(&key, state->claim_id, drop);
        shoal_batch_delete(batch, SHOAL_CF_LOCKS, &key);
        if (drop_lease) {
            s_key_leased(&key, drop_lease, "lock", state->claim_id, drop);
            shoal_batch_delete(batch, SHOAL_CF_CLAIM_KEYS, &key);
        }
    }
    if (rc == 0 && record) {
        s_key_lock(&key, state->claim_id, record->holder);
        rc = shoal_batch_put_record(batch, SHOAL_CF_LOCKS, &key, &shoal_msg_lock_record_codec, record);
        if (rc == 0 && record->lease) {
            s_key_leased(&key, record->lease, "lock", state->claim_id, record->holder);
            shoal_batch_put(batch, SHOAL_CF_CLAIM_KEYS, &key, "", 0);
        }
    }
    if (rc == 0)
        rc = shoal_store_write(self->store, batch, self->sync);
    shoal_batch_destroy(&batch);
    return rc;
}

void
shoal_space_item_clear(shoal_space_item_t *item)
{
    shoal_msg_claim_keys_codec.clear(&item->space);
    shoal_msg_key_value_codec.clear(&item->kv);
    shoal_msg_lease_codec.clear(&item->lease_record);
    shoal_msg_locks_codec.clear(&item->locks);
    shoal_msg_lock_record_codec.clear(&item->record);
}

//  Parses KEY of CF into ITEM's kind and names. Returns 0 or -1.
static int
s_item_key(shoal_cf_t cf, const uint8_t *key, size_t key_size, shoal_space_item_t *item)
{
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, key, key_size);
    char kind[SPACE_NAME_SIZE], what[SPACE_NAME_SIZE];
    if (shoal_key_read_str(&reader, kind, sizeof kind))
        return -1;
    bool parsed = false;
    size_t claim_size = sizeof item->claim_id, name_size = sizeof item->name;
    if (cf == SHOAL_CF_LOCKS && streq(kind, "state")) {
        item->kind = SHOAL_SPACE_ITEM_LOCK_STATE;
        parsed = shoal_key_read_str(&reader, item->claim_id, claim_size) == 0;
    }
    else
    if (cf == SHOAL_CF_LOCKS && streq(kind, "lock")) {
        item->kind = SHOAL_SPACE_ITEM_LOCK_RECORD;
        parsed = shoal_key_read_str(&reader, item->claim_id, claim_size) == 0
              && shoal_key_read_str(&reader, item->name, name_size) == 0;
    }
    else
    if (cf == SHOAL_CF_CLAIM_KEYS && (streq(kind, SPACE_KEY_META) || streq(kind, SPACE_KEY_STAGED))) {
        item->kind = streq(kind, SPACE_KEY_META) ? SHOAL_SPACE_ITEM_META : SHOAL_SPACE_ITEM_STAGED;
        parsed = shoal_key_read_str(&reader, item->claim_id, claim_size) == 0;
    }
    else
    if (cf == SHOAL_CF_CLAIM_KEYS && streq(kind, SPACE_KEY_KEY)) {
        item->kind = SHOAL_SPACE_ITEM_KEY;
        parsed = shoal_key_read_str(&reader, item->claim_id, claim_size) == 0
              && shoal_key_read_str(&reader, item->name, name_size) == 0;
    }
    else
    if (cf == SHOAL_CF_CLAIM_KEYS && streq(kind, SPACE_KEY_LEASE)) {
        item->kind = SHOAL_SPACE_ITEM_LEASE;
        parsed = shoal_key_read_u64(&reader, &item->lease) == 0;
    }
    else
    if (cf == SHOAL_CF_CLAIM_KEYS && streq(kind, SPACE_KEY_LEASED)) {
        item->kind = SHOAL_SPACE_ITEM_LEASED;
        parsed = shoal_key_read_u64(&reader, &item->lease) == 0
              && shoal_key_read_str(&reader, what, sizeof what) == 0
              && shoal_key_read_str(&reader, item->claim_id, claim_size) == 0
              && shoal_key_read_str(&reader, item->name, name_size) == 0;
    }
    return parsed && shoal_key_reader_done(&reader) ? 0 : -1;
}

int
shoal_key_space_read_item(shoal_cf_t cf, const uint8_t *key, size_t key_size, const uint8_t *value,
                          size_t size, shoal_space_item_t *item, char *why, size_t why_size)
{
    memset(item, 0, sizeof *item);
    if (s_item_key(cf, key, key_size, item)) {
        snprintf(why, why_size, "not a key of %s", shoal_cf_name(cf));
        memset(item, 0, sizeof *item);
        return -1;
    }
    char error[256] = "";
    int rc = 0;
    const char *named = NULL;
    switch (item->kind) {
        case SHOAL_SPACE_ITEM_META:
        case SHOAL_SPACE_ITEM_STAGED:
            rc = shoal_msg_claim_keys_codec.decode(value, size, &item->space, error, sizeof error);
            named = rc ? NULL : item->space.claim_id;
            break;
        case SHOAL_SPACE_ITEM_KEY:
            rc = shoal_msg_key_value_codec.decode(value, size, &item->kv, error, sizeof error);
            if (rc == 0 && item->kv.key && !streq(item->kv.key, item->name)) {
                snprintf(error, sizeof error, "holds key '%s', not the key its key names", item->kv.key);
                rc = -1;
            }
            break;
        case SHOAL_SPACE_ITEM_LEASE:
            rc = shoal_msg_lease_codec.decode(value, size, &item->lease_record, error, sizeof error);
            if (rc == 0 && item->lease_record.id != item->lease) {
                snprintf(error, sizeof error, "holds lease %" PRIu64 ", not the lease its key names",
                         item->lease_record.id);
                rc = -1;
            }
            break;
        case SHOAL_SPACE_ITEM_LEASED:
            if (size) {
                snprintf(error, sizeof error, "holds %zu bytes where nothing is kept", size);
                rc = -1;
            }
            break;
        case SHOAL_SPACE_ITEM_LOCK_STATE:
            rc = shoal_msg_locks_codec.decode(value, size, &item->locks, error, sizeof error);
            named = rc ? NULL : item->locks.claim_id;
            break;
        case SHOAL_SPACE_ITEM_LOCK_RECORD:
            rc = shoal_msg_lock_record_codec.decode(value, size, &item->record, error, sizeof error);
            named = rc ? NULL : item->record.claim_id;
            if (rc == 0 && !streq(item->record.holder ? item->record.holder : "", item->name)) {
                snprintf(error, sizeof error, "holds the record of holder '%s', not the one its key names",
                         item->record.holder ? item->record.holder : "");
                rc = -1;
            }
            break;
    }
    if (rc == 0 && named && !streq(named, item->claim_id)) {
        snprintf(error, sizeof error, "names claim '%s', not the claim its key names", named);
        rc = -1;
    }
    if (rc) {
        snprintf(why, why_size, "the value does not decode: %s", error);
        shoal_space_item_clear(item);
        return -1;
    }
    return 0;
}
