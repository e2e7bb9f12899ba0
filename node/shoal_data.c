/*  shoal_data: kv and oplog request handlers. */
#include "shoal_data.h"
#include "shoal_alloc.h"

//  Copies an entry's identity and value into a kv item body.
static void
s_item_from_entry(shoal_msg_kv_item_t *item, const shoal_oplog_entry_t *entry)
{
    item->dataset = shoal_strdup(entry->dataset);
    item->key = shoal_strdup(entry->key);
    item->deleted = entry->op == SHOAL_OPLOG_DELETE;
    item->wall_ms = entry->wall_ms;
    item->logic = entry->logic;
    item->node = shoal_strdup(entry->node);
    memcpy(item->hash, entry->hash, SHOAL_HASH_SIZE);
}

static void
s_item_from_record(shoal_msg_kv_item_t *item, const char *dataset, const char *key,
                   const shoal_kv_record_t *record)
{
    item->dataset = shoal_strdup(dataset);
    item->key = shoal_strdup(key);
    if (record->value_size) {
        item->value = (uint8_t *) zmalloc(record->value_size);
        memcpy(item->value, record->value, record->value_size);
        item->value_size = record->value_size;
    }
    item->deleted = record->deleted;
    item->wall_ms = record->wall_ms;
    item->logic = record->logic;
    item->node = shoal_strdup(record->node);
    memcpy(item->hash, record->hash, SHOAL_HASH_SIZE);
}

static shoal_envelope_t *
s_not_found(const shoal_envelope_t *request, const char *dataset, const char *key)
{
    if (key)
        return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "no key '%s' in dataset '%s'", key, dataset);
    return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "no dataset '%s'", dataset);
}

//  The refusal for a dataset CALLER may not reach: 404 when it may not even
//  read it (nothing is revealed), 403 when it may read but not write.
static shoal_envelope_t *
s_refuse(const shoal_envelope_t *request, const shoal_caller_t *caller, const char *dataset)
{
    if (!shoal_caller_may_read(caller, dataset))
        return s_not_found(request, dataset, NULL);
    return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN,
                                "dataset '%s' is written by nodes only", dataset);
}

//  The answer to a failed store call: 507 when the store lacks space (the
//  write can be retried once space returns), 500 otherwise.
static shoal_envelope_t *
s_failed(const shoal_envelope_t *request, shoal_oplog_t *oplog)
{
    uint32_t status = shoal_store_error_no_space(shoal_oplog_store(oplog))
                    ? SHOAL_STATUS_NO_SPACE : SHOAL_STATUS_INTERNAL;
    return shoal_envelope_reply(request, status, "%s", shoal_oplog_error(oplog));
}

static shoal_envelope_t *
s_kv_write(shoal_oplog_t *oplog, const shoal_envelope_t *request, const shoal_caller_t *caller,
           const char *dataset, const char *key, shoal_oplog_op_t op, const uint8_t *value, size_t size,
           shoal_data_written_fn *written, void *arg)
{
    if (!shoal_caller_may_write(caller, dataset))
        return s_refuse(request, caller, dataset);
    shoal_oplog_entry_t entry = { 0 };
    if (shoal_oplog_write(oplog, dataset, key, op, value, size, &entry))
        return s_failed(request, oplog);
    if (written)
        written(&entry, arg);
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    s_item_from_entry((shoal_msg_kv_item_t *) shoal_envelope_new_body(reply), &entry);
    shoal_oplog_entry_codec.clear(&entry);
    return reply;
}

static shoal_envelope_t *
s_kv_get(shoal_oplog_t *oplog, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_kv_key_t *body = (const shoal_msg_kv_key_t *) request->body;
    if (!shoal_caller_may_read(caller, body->dataset))
        return s_not_found(request, body->dataset, NULL);
    shoal_kv_record_t record = { 0 };
    bool found = false;
    if (shoal_oplog_kv_get(oplog, body->dataset, body->key, &record, &found))
        return s_failed(request, oplog);
    if (!found)
        return s_not_found(request, body->dataset, body->key);
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    s_item_from_record((shoal_msg_kv_item_t *) shoal_envelope_new_body(reply), body->dataset, body->key, &record);
    shoal_kv_codec.clear(&record);
    return reply;
}

static shoal_envelope_t *
s_kv_scan(shoal_oplog_t *oplog, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_kv_scan_t *body = (const shoal_msg_kv_scan_t *) request->body;
    if (!shoal_caller_may_read(caller, body->dataset))
        return s_not_found(request, body->dataset, NULL);
    size_t limit = body->limit ? body->limit : SHOAL_SCAN_LIMIT_DEFAULT;
    shoal_kv_list_t list = { 0 };
    //  One more than asked tells whether the scan stopped at the limit.
    if (shoal_oplog_kv_scan(oplog, body->dataset, body->prefix, body->start_after, limit + 1, &list))
        return s_failed(request, oplog);
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    shoal_msg_kv_items_t *items = (shoal_msg_kv_items_t *) shoal_envelope_new_body(reply);
    size_t wanted = list.count > limit ? limit : list.count;
    items->items = (shoal_msg_kv_item_t *) zmalloc(sizeof(shoal_msg_kv_item_t) * (wanted + 1));
    //  A page holds as many items as were asked for and fit its byte budget
    //  (the first always fits: shoal_limits.h); the rest is the next page's.
    size_t bytes = 0;
    while (items->count < wanted) {
        shoal_msg_kv_item_t *item = &items->items[items->count];
        s_item_from_record(item, body->dataset, list.items[items->count].key,
                           &list.items[items->count].record);
        bytes += shoal_data_item_size(item);
        if (items->count && bytes > SHOAL_PAGE_BYTES_MAX) {
            shoal_msg_kv_item_codec.clear(item);
            break;
        }
        items->count++;
    }
    items->more = list.count > items->count;
    shoal_kv_list_clear(&list);
    return reply;
}

//  The datasets a request names: the one given, or every dataset the caller
//  may read when it names none. Returns a new list of strings, or NULL with
//  *REPLY_P set to the answer (404 for a named dataset the caller cannot see
//  or that does not exist, 500 when the store failed).
static zlistx_t *
s_datasets(shoal_oplog_t *oplog, const shoal_envelope_t *request, const char *named,
           const shoal_caller_t *caller, shoal_envelope_t **reply_p)
{
    zlistx_t *all = shoal_oplog_datasets(oplog);
    if (!all) {
        *reply_p = s_failed(request, oplog);
        return NULL;
    }
    zlistx_t *chosen = zlistx_new();
    zlistx_set_destructor(chosen, (zlistx_destructor_fn *) zstr_free);
    zlistx_set_duplicator(chosen, (zlistx_duplicator_fn *) shoal_strdup);
    for (const char *dataset = (const char *) zlistx_first(all); dataset;
         dataset = (const char *) zlistx_next(all))
        if ((*named ? streq(named, dataset) : true) && shoal_caller_may_read(caller, dataset))
            zlistx_add_end(chosen, (void *) dataset);
    zlistx_destroy(&all);
    if (*named && zlistx_size(chosen) == 0) {
        zlistx_destroy(&chosen);
        *reply_p = s_not_found(request, named, NULL);
    }
    return chosen;
}

static shoal_envelope_t *
s_oplog_heads(shoal_oplog_t *oplog, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_dataset_t *body = (const shoal_msg_dataset_t *) request->body;
    shoal_envelope_t *refusal = NULL;
    zlistx_t *datasets = s_datasets(oplog, request, body->dataset, caller, &refusal);
    if (!datasets)
        return refusal;
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    shoal_msg_heads_t *heads = (shoal_msg_heads_t *) shoal_envelope_new_body(reply);
    int rc = shoal_data_heads_fill(oplog, datasets, heads);
    zlistx_destroy(&datasets);
    if (rc) {
        shoal_envelope_destroy(&reply);
        return s_failed(request, oplog);
    }
    return reply;
}

static shoal_envelope_t *
s_oplog_stats(shoal_oplog_t *oplog, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_dataset_t *body = (const shoal_msg_dataset_t *) request->body;
    shoal_envelope_t *refusal = NULL;
    zlistx_t *datasets = s_datasets(oplog, request, body->dataset, caller, &refusal);
    if (!datasets)
        return refusal;
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    shoal_msg_oplog_stats_t *stats = (shoal_msg_oplog_stats_t *) shoal_envelope_new_body(reply);
    stats->datasets = (shoal_msg_dataset_stats_t *)
        zmalloc(sizeof(shoal_msg_dataset_stats_t) * (zlistx_size(datasets) + 1));
    int rc = 0;
    for (const char *dataset = (const char *) zlistx_first(datasets); dataset && rc == 0;
         dataset = (const char *) zlistx_next(datasets)) {
        shoal_msg_dataset_stats_t *item = &stats->datasets[stats->count++];
        item->dataset = shoal_strdup(dataset);
        int64_t entries = shoal_oplog_count(oplog, dataset);
        int64_t keys = shoal_oplog_kv_count(oplog, dataset);
        shoal_oplog_heads_t heads = { 0 };
        shoal_hlc_stamp_t watermark = { 0, 0 };
        bool pruned = false;
        rc = entries < 0 || keys < 0 || shoal_oplog_heads(oplog, dataset, &heads)
          || shoal_oplog_watermark(oplog, dataset, &watermark, &pruned) ? -1 : 0;
        item->entries = entries > 0 ? (uint64_t) entries : 0;
        item->keys = keys > 0 ? (uint64_t) keys : 0;
        item->nodes = heads.count;
        item->watermark_ms = pruned ? watermark.wall_ms : 0;
        shoal_oplog_heads_clear(&heads);
    }
    zlistx_destroy(&datasets);
    if (rc) {
        shoal_envelope_destroy(&reply);
        return s_failed(request, oplog);
    }
    return reply;
}

static shoal_envelope_t *
s_oplog_prune(shoal_oplog_t *oplog, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_prune_t *body = (const shoal_msg_prune_t *) request->body;
    if (shoal_caller_is_tenant(caller))
        return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN, "%s", "pruning the log is for admins");
    shoal_envelope_t *refusal = NULL;
    zlistx_t *datasets = s_datasets(oplog, request, body->dataset, caller, &refusal);
    if (!datasets)
        return refusal;
    //  Every entry stamped within the cutoff millisecond goes, whatever its
    //  logical counter.
    shoal_hlc_stamp_t cutoff = { body->before_ms, UINT32_MAX };
    uint64_t total = 0;
    int rc = 0;
    for (const char *dataset = (const char *) zlistx_first(datasets); dataset && rc == 0;
         dataset = (const char *) zlistx_next(datasets)) {
        size_t pruned = 0;
        rc = shoal_oplog_prune(oplog, dataset, &cutoff, &pruned);
        total += pruned;
    }
    zlistx_destroy(&datasets);
    if (rc)
        return s_failed(request, oplog);
    zsys_info("data: pruned %" PRIu64 " entries stamped at or before %" PRIu64 " from %s",
              total, body->before_ms, *body->dataset ? body->dataset : "every dataset");
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    ((shoal_msg_prune_reply_t *) shoal_envelope_new_body(reply))->pruned = total;
    return reply;
}

int
shoal_data_heads_fill(shoal_oplog_t *oplog, zlistx_t *datasets, shoal_msg_heads_t *body)
{
    size_t capacity = body->count;
    int rc = 0;
    for (const char *dataset = (const char *) zlistx_first(datasets); dataset && rc == 0;
         dataset = (const char *) zlistx_next(datasets)) {
        shoal_oplog_heads_t found = { 0 };
        rc = shoal_oplog_heads(oplog, dataset, &found);
        for (size_t i = 0; rc == 0 && i < found.count; i++) {
            if (body->count == capacity) {
                capacity = capacity ? capacity * 2 : 16;
                body->heads = (shoal_msg_head_t *) shoal_realloc(body->heads, capacity * sizeof *body->heads);
            }
            shoal_msg_head_t *head = &body->heads[body->count++];
            memset(head, 0, sizeof *head);
            head->dataset = shoal_strdup(dataset);
            head->node = shoal_strdup(found.heads[i].node);
            head->wall_ms = found.heads[i].stamp.wall_ms;
            head->logic = found.heads[i].stamp.logic;
            memcpy(head->hash, found.heads[i].hash, SHOAL_HASH_SIZE);
        }
        shoal_oplog_heads_clear(&found);
    }
    return rc;
}

size_t
shoal_data_item_size(const shoal_msg_kv_item_t *item)
{
    uint8_t *bytes = NULL;
    size_t size = 0;
    char error[SHOAL_DATA_ERROR_MAX];
    //  An item that does not encode is refused when the page is; count it
    //  as the largest so that it stands alone.
    if (shoal_msg_kv_item_codec.encode(item, &bytes, &size, error, sizeof error))
        return SHOAL_PAGE_BYTES_MAX;
    free(bytes);
    return size + SHOAL_PAGE_ELEMENT_OVERHEAD;
}

bool
shoal_data_handles(shoal_msg_type_t type)
{
    return type >= SHOAL_MSG_KV_PUT && type <= SHOAL_MSG_OPLOG_PRUNE;
}

shoal_envelope_t *
shoal_data_handle(shoal_oplog_t *oplog, const shoal_envelope_t *request, const shoal_caller_t *caller,
                  shoal_data_written_fn *written, void *arg)
{
    switch (request->type) {
        case SHOAL_MSG_KV_PUT: {
            const shoal_msg_kv_put_t *body = (const shoal_msg_kv_put_t *) request->body;
            return s_kv_write(oplog, request, caller, body->dataset, body->key, SHOAL_OPLOG_PUT,
                              body->value, body->value_size, written, arg);
        }
        case SHOAL_MSG_KV_DEL: {
            const shoal_msg_kv_key_t *body = (const shoal_msg_kv_key_t *) request->body;
            return s_kv_write(oplog, request, caller, body->dataset, body->key, SHOAL_OPLOG_DELETE, NULL, 0,
                              written, arg);
        }
        case SHOAL_MSG_KV_GET:
            return s_kv_get(oplog, request, caller);
        case SHOAL_MSG_KV_SCAN:
            return s_kv_scan(oplog, request, caller);
        case SHOAL_MSG_OPLOG_HEADS:
            return s_oplog_heads(oplog, request, caller);
        case SHOAL_MSG_OPLOG_STATS:
            return s_oplog_stats(oplog, request, caller);
        case SHOAL_MSG_OPLOG_PRUNE:
            return s_oplog_prune(oplog, request, caller);
        default:
            return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "%s is not a data request",
                                        shoal_msg_type_name(request->type));
    }
}
