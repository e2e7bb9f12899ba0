/*  shoal_members: tracked and forgotten peers, and their confirmations. */
#include "shoal_members.h"
#include "shoal_alloc.h"

#include <czmq.h>

#define MEMBERS_META_MEMBER "member"
#define MEMBERS_META_CONFIRM "confirm"
//  Room for a string read back from a key (it cannot be longer).
#define MEMBERS_NAME_SIZE SHOAL_KEY_MAX
//  Smallest capacity the list starts with.
#define MEMBERS_LIST_MIN 8

struct _shoal_members_t {
    shoal_store_t *store;       //  the node's store (borrowed)
};

void
shoal_member_list_clear(shoal_member_list_t *list)
{
    for (size_t i = 0; i < list->count; i++) {
        free(list->items[i].node);
        free(list->items[i].endpoint);
    }
    free(list->items);
    memset(list, 0, sizeof *list);
}

shoal_members_t *
shoal_members_new(shoal_store_t *store)
{
    shoal_members_t *self = (shoal_members_t *) zmalloc(sizeof *self);
    self->store = store;
    return self;
}

void
shoal_members_destroy(shoal_members_t **self_p)
{
    if (*self_p) {
        free(*self_p);
        *self_p = NULL;
    }
}

static void
s_key_member(shoal_key_t *key, const char *node)
{
    shoal_key_init(key);
    shoal_key_add_str(key, MEMBERS_META_MEMBER);
    if (node)
        shoal_key_add_str(key, node);
}

static void
s_key_confirm(shoal_key_t *key, const char *peer, const char *dataset, const char *origin)
{
    shoal_key_init(key);
    shoal_key_add_str(key, MEMBERS_META_CONFIRM);
    shoal_key_add_str(key, peer);
    if (dataset)
        shoal_key_add_str(key, dataset);
    if (origin)
        shoal_key_add_str(key, origin);
}

static int
s_member_put(shoal_members_t *self, const char *node, const char *endpoint, uint64_t incarnation,
             bool forgotten)
{
    shoal_key_t key, value;
    s_key_member(&key, node);
    shoal_key_init(&value);
    shoal_key_add_u64(&value, forgotten ? 1 : 0);
    shoal_key_add_u64(&value, incarnation);
    shoal_key_add_str(&value, endpoint ? endpoint : "");
    return shoal_store_put(self->store, SHOAL_CF_OPLOG_META, &key, value.bytes, value.size, true);
}

int
shoal_members_track(shoal_members_t *self, const char *node, const char *endpoint,
                    uint64_t incarnation)
{
    return s_member_put(self, node, endpoint, incarnation, false);
}

int
shoal_members_forget(shoal_members_t *self, const char *node, const char *endpoint,
                     uint64_t incarnation)
{
    shoal_key_t prefix, upper;
    s_key_confirm(&prefix, node, NULL, NULL);
    if (shoal_key_prefix_end(&prefix, &upper))
        return -1;
    shoal_batch_t *batch = shoal_batch_new(self->store);
    shoal_batch_delete_range(batch, SHOAL_CF_OPLOG_META, &prefix, &upper);
    int rc = shoal_store_write(self->store, batch, true);
    shoal_batch_destroy(&batch);
    if (rc == 0)
        rc = s_member_put(self, node, endpoint, incarnation, true);
    return rc;
}

int
shoal_members_list(shoal_members_t *self, shoal_member_list_t *list)
{
    shoal_member_list_clear(list);
    shoal_key_t prefix;
    s_key_member(&prefix, NULL);
    shoal_iter_t *iter = shoal_iter_prefix(self->store, SHOAL_CF_OPLOG_META, &prefix);
    if (!iter)
        return -1;
    int rc = 0;
    for (bool on = shoal_iter_first(iter); on && rc == 0; on = shoal_iter_next(iter)) {
        size_t key_size, value_size;
        const uint8_t *key_bytes = shoal_iter_key(iter, &key_size);
        const uint8_t *value_bytes = shoal_iter_value(iter, &value_size);
        char tag[MEMBERS_NAME_SIZE], node[MEMBERS_NAME_SIZE], endpoint[MEMBERS_NAME_SIZE];
        uint64_t forgotten, incarnation;
        shoal_key_reader_t reader;
        shoal_key_reader_init(&reader, key_bytes, key_size);
        rc = shoal_key_read_str(&reader, tag, sizeof tag) || shoal_key_read_str(&reader, node, sizeof node) ? -1 : 0;
        shoal_key_reader_init(&reader, value_bytes, value_size);
        if (rc == 0)
            rc = shoal_key_read_u64(&reader, &forgotten) || shoal_key_read_u64(&reader, &incarnation)
              || shoal_key_read_str(&reader, endpoint, sizeof endpoint) ? -1 : 0;
        if (rc) {
            char *where = shoal_key_format(key_bytes, key_size);
            zsys_error("members: oplog_meta %s does not hold a member record", where ? where : "(?)");
            free(where);
            break;
        }
        if (list->count == list->capacity) {
            list->capacity = list->capacity ? list->capacity * 2 : MEMBERS_LIST_MIN;
            list->items = (shoal_member_record_t *) shoal_realloc(list->items,
                                                                  list->capacity * sizeof *list->items);
        }
        shoal_member_record_t *item = &list->items[list->count++];
        item->node = shoal_strdup(node);
        item->endpoint = shoal_strdup(endpoint);
        item->incarnation = incarnation;
        item->forgotten = forgotten != 0;
    }
    if (rc == 0)
        rc = shoal_iter_status(iter);
    shoal_iter_destroy(&iter);
    if (rc)
        shoal_member_list_clear(list);
    return rc;
}

int
shoal_members_confirm(shoal_members_t *self, const char *peer, const char *dataset,
                      const char *origin, const shoal_hlc_stamp_t *stamp)
{
    shoal_key_t key, value;
    s_key_confirm(&key, peer, dataset, origin);
    shoal_key_init(&value);
    shoal_key_add_u64(&value, stamp->wall_ms);
    shoal_key_add_u64(&value, stamp->logic);
    //  A lost confirmation is only a prune postponed: no fsync.
    return shoal_store_put(self->store, SHOAL_CF_OPLOG_META, &key, value.bytes, value.size, false);
}

int
shoal_members_confirmed(shoal_members_t *self, const char *peer, const char *dataset,
                        const char *origin, shoal_hlc_stamp_t *stamp, bool *found)
{
    *found = false;
    shoal_key_t key;
    s_key_confirm(&key, peer, dataset, origin);
    uint8_t *value;
    size_t size;
    if (shoal_store_get(self->store, SHOAL_CF_OPLOG_META, &key, &value, &size))
        return -1;
    if (!value)
        return 0;
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, value, size);
    uint64_t wall, logic;
    int rc = shoal_key_read_u64(&reader, &wall) || shoal_key_read_u64(&reader, &logic)
          || logic > UINT32_MAX ? -1 : 0;
    free(value);
    if (rc) {
        zsys_error("members: confirmation of %s for %s/%s is not a stamp", peer, dataset, origin);
        return -1;
    }
    stamp->wall_ms = wall;
    stamp->logic = (uint32_t) logic;
    *found = true;
    return 0;
}
