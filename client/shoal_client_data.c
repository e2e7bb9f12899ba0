/*  shoal_client_data: kv and oplog calls of libshoal. */
#include "shoal_client_internal.h"
#include "shoal_alloc.h"

static void
s_hex(const uint8_t *hash, char out[65])
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < SHOAL_HASH_SIZE; i++) {
        out[2 * i] = digits[hash[i] >> 4];
        out[2 * i + 1] = digits[hash[i] & 0xF];
    }
    out[2 * SHOAL_HASH_SIZE] = 0;
}

static void
s_value_from_item(shoal_kv_value_t *value, const shoal_msg_kv_item_t *item)
{
    value->dataset = shoal_strdup(item->dataset);
    value->key = shoal_strdup(item->key);
    value->value = (uint8_t *) zmalloc(item->value_size + 1);
    if (item->value_size)
        memcpy(value->value, item->value, item->value_size);
    value->size = item->value_size;
    value->deleted = item->deleted;
    value->wall_ms = item->wall_ms;
    value->logic = item->logic;
    value->node = shoal_strdup(item->node);
    s_hex(item->hash, value->hash);
}

//  Sends REQUEST and, on 200, copies the kv item of the reply into VALUE
//  (when not NULL).
static int
s_kv_call(shoal_client_t *self, shoal_envelope_t *request, shoal_kv_value_t *value)
{
    if (value)
        memset(value, 0, sizeof *value);
    shoal_envelope_t *reply;
    int rc = shoal_client_call(self, &request, &reply);
    if (rc == SHOAL_STATUS_OK && value)
        s_value_from_item(value, (const shoal_msg_kv_item_t *) reply->body);
    shoal_envelope_destroy(&reply);
    return rc;
}

int
shoal_client_kv_put(shoal_client_t *self, const char *dataset, const char *key,
                    const void *value, size_t size, shoal_kv_value_t *written)
{
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_KV_PUT, 0);
    shoal_msg_kv_put_t *body = (shoal_msg_kv_put_t *) shoal_envelope_new_body(request);
    body->dataset = shoal_strdup(dataset ? dataset : "");
    body->key = shoal_strdup(key ? key : "");
    if (size) {
        body->value = (uint8_t *) zmalloc(size);
        memcpy(body->value, value, size);
        body->value_size = size;
    }
    return s_kv_call(self, request, written);
}

static int
s_kv_key_call(shoal_client_t *self, shoal_msg_type_t type, const char *dataset, const char *key,
              shoal_kv_value_t *value)
{
    shoal_envelope_t *request = shoal_envelope_new(type, 0);
    shoal_msg_kv_key_t *body = (shoal_msg_kv_key_t *) shoal_envelope_new_body(request);
    body->dataset = shoal_strdup(dataset ? dataset : "");
    body->key = shoal_strdup(key ? key : "");
    return s_kv_call(self, request, value);
}

int
shoal_client_kv_get(shoal_client_t *self, const char *dataset, const char *key, shoal_kv_value_t *value)
{
    return s_kv_key_call(self, SHOAL_MSG_KV_GET, dataset, key, value);
}

int
shoal_client_kv_del(shoal_client_t *self, const char *dataset, const char *key, shoal_kv_value_t *written)
{
    return s_kv_key_call(self, SHOAL_MSG_KV_DEL, dataset, key, written);
}

int
shoal_client_kv_scan(shoal_client_t *self, const char *dataset, const char *prefix,
                     const char *start_after, uint32_t limit, shoal_kv_page_t *page)
{
    memset(page, 0, sizeof *page);
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_KV_SCAN, 0);
    shoal_msg_kv_scan_t *body = (shoal_msg_kv_scan_t *) shoal_envelope_new_body(request);
    body->dataset = shoal_strdup(dataset ? dataset : "");
    body->prefix = shoal_strdup(prefix ? prefix : "");
    body->start_after = shoal_strdup(start_after ? start_after : "");
    body->limit = limit;
    shoal_envelope_t *reply;
    int rc = shoal_client_call(self, &request, &reply);
    if (rc == SHOAL_STATUS_OK) {
        const shoal_msg_kv_items_t *items = (const shoal_msg_kv_items_t *) reply->body;
        page->items = (shoal_kv_value_t *) zmalloc(sizeof(shoal_kv_value_t) * (items->count + 1));
        for (size_t i = 0; i < items->count; i++)
            s_value_from_item(&page->items[i], &items->items[i]);
        page->count = items->count;
        page->more = items->more;
    }
    shoal_envelope_destroy(&reply);
    return rc;
}

void
shoal_kv_value_clear(shoal_kv_value_t *value)
{
    free(value->dataset);
    free(value->key);
    free(value->value);
    free(value->node);
    memset(value, 0, sizeof *value);
}

void
shoal_kv_page_clear(shoal_kv_page_t *page)
{
    for (size_t i = 0; i < page->count; i++)
        shoal_kv_value_clear(&page->items[i]);
    free(page->items);
    memset(page, 0, sizeof *page);
}

static shoal_envelope_t *
s_dataset_request(shoal_msg_type_t type, const char *dataset)
{
    shoal_envelope_t *request = shoal_envelope_new(type, 0);
    shoal_msg_dataset_t *body = (shoal_msg_dataset_t *) shoal_envelope_new_body(request);
    body->dataset = shoal_strdup(dataset ? dataset : "");
    return request;
}

int
shoal_client_oplog_heads(shoal_client_t *self, const char *dataset, shoal_head_list_t *heads)
{
    memset(heads, 0, sizeof *heads);
    shoal_envelope_t *request = s_dataset_request(SHOAL_MSG_OPLOG_HEADS, dataset);
    shoal_envelope_t *reply;
    int rc = shoal_client_call(self, &request, &reply);
    if (rc == SHOAL_STATUS_OK) {
        const shoal_msg_heads_t *body = (const shoal_msg_heads_t *) reply->body;
        heads->heads = (shoal_head_info_t *) zmalloc(sizeof(shoal_head_info_t) * (body->count + 1));
        for (size_t i = 0; i < body->count; i++) {
            shoal_head_info_t *head = &heads->heads[i];
            head->dataset = shoal_strdup(body->heads[i].dataset);
            head->node = shoal_strdup(body->heads[i].node);
            head->wall_ms = body->heads[i].wall_ms;
            head->logic = body->heads[i].logic;
            s_hex(body->heads[i].hash, head->hash);
        }
        heads->count = body->count;
    }
    shoal_envelope_destroy(&reply);
    return rc;
}

int
shoal_client_oplog_stats(shoal_client_t *self, const char *dataset, shoal_dataset_list_t *stats)
{
    memset(stats, 0, sizeof *stats);
    shoal_envelope_t *request = s_dataset_request(SHOAL_MSG_OPLOG_STATS, dataset);
    shoal_envelope_t *reply;
    int rc = shoal_client_call(self, &request, &reply);
    if (rc == SHOAL_STATUS_OK) {
        const shoal_msg_oplog_stats_t *body = (const shoal_msg_oplog_stats_t *) reply->body;
        stats->datasets = (shoal_dataset_info_t *) zmalloc(sizeof(shoal_dataset_info_t) * (body->count + 1));
        for (size_t i = 0; i < body->count; i++) {
            shoal_dataset_info_t *info = &stats->datasets[i];
            info->dataset = shoal_strdup(body->datasets[i].dataset);
            info->entries = body->datasets[i].entries;
            info->keys = body->datasets[i].keys;
            info->nodes = body->datasets[i].nodes;
            info->watermark_ms = body->datasets[i].watermark_ms;
        }
        stats->count = body->count;
    }
    shoal_envelope_destroy(&reply);
    return rc;
}

int
shoal_client_oplog_prune(shoal_client_t *self, const char *dataset, uint64_t before_ms, uint64_t *pruned)
{
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_OPLOG_PRUNE, 0);
    shoal_msg_prune_t *body = (shoal_msg_prune_t *) shoal_envelope_new_body(request);
    body->dataset = shoal_strdup(dataset ? dataset : "");
    body->before_ms = before_ms;
    shoal_envelope_t *reply;
    int rc = shoal_client_call(self, &request, &reply);
    if (rc == SHOAL_STATUS_OK && pruned)
        *pruned = ((const shoal_msg_prune_reply_t *) reply->body)->pruned;
    shoal_envelope_destroy(&reply);
    return rc;
}

void
shoal_head_list_clear(shoal_head_list_t *heads)
{
    for (size_t i = 0; i < heads->count; i++) {
        free(heads->heads[i].dataset);
        free(heads->heads[i].node);
    }
    free(heads->heads);
    memset(heads, 0, sizeof *heads);
}

void
shoal_dataset_list_clear(shoal_dataset_list_t *stats)
{
    for (size_t i = 0; i < stats->count; i++)
        free(stats->datasets[i].dataset);
    free(stats->datasets);
    memset(stats, 0, sizeof *stats);
}
