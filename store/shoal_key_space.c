/*  shoal_key_space: a claim's keys, each write one batch. */
#include "shoal_key_space.h"

#define SPACE_KEY_META "meta"
#define SPACE_KEY_KEY "key"
#define SPACE_KEY_STAGED "staged"
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
        meta->claim_id = strdup(claim_id);
        meta->move_id = strdup("");
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
            *kvs_p = (shoal_msg_key_value_t *) realloc(*kvs_p, capacity * sizeof **kvs_p);
            assert(*kvs_p);
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

int
shoal_key_space_write(shoal_key_space_t *self, const shoal_msg_claim_keys_t *meta,
                      const shoal_msg_key_value_t *puts, size_t put_count,
                      char *const *deletes, size_t delete_count)
{
    shoal_batch_t *batch = shoal_batch_new(self->store);
    int rc = s_batch_meta(batch, meta);
    for (size_t i = 0; i < delete_count && rc == 0; i++) {
        shoal_key_t key;
        s_key_of(&key, meta->claim_id, deletes[i]);
        shoal_batch_delete(batch, SHOAL_CF_CLAIM_KEYS, &key);
    }
    for (size_t i = 0; i < put_count && rc == 0; i++) {
        shoal_key_t key;
        s_key_of(&key, meta->claim_id, puts[i].key);
        rc = shoal_batch_put_record(batch, SHOAL_CF_CLAIM_KEYS, &key, &shoal_msg_key_value_codec, &puts[i]);
    }
    if (rc == 0)
        rc = shoal_store_write(self->store, batch, self->sync);
    shoal_batch_destroy(&batch);
    return rc;
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
shoal_key_space_install(shoal_key_space_t *self, const char *claim_id, bool *found)
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
        shoal_key_t key;
        s_key_of(&key, claim_id, staged.kvs[i].key);
        rc = shoal_batch_put_record(batch, SHOAL_CF_CLAIM_KEYS, &key, &shoal_msg_key_value_codec, &staged.kvs[i]);
    }
    if (rc == 0)
        rc = shoal_store_write(self->store, batch, self->sync);
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
    shoal_batch_t *batch = shoal_batch_new(self->store);
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
    zlistx_set_duplicator(claims, (zlistx_duplicator_fn *) strdup);
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
