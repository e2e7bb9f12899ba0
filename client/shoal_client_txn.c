/*  shoal_client_txn: transactions on a claim's keys, and the one-operation
    calls made of them. */
#include "shoal_client_internal.h"
#include "shoal_alloc.h"

static uint8_t *
s_bytes_dup(const void *data, size_t size)
{
    if (!size)
        return NULL;
    uint8_t *copy = (uint8_t *) zmalloc(size);
    memcpy(copy, data, size);
    return copy;
}

static void
s_op_fill(shoal_msg_key_op_t *to, const shoal_op_t *op)
{
    to->type = (shoal_key_op_type_t) op->type;
    to->key = shoal_strdup(op->key ? op->key : "");
    to->value = s_bytes_dup(op->value, op->value_size);
    to->value_size = op->value ? op->value_size : 0;
    to->lease = op->lease;
    to->prefix = op->prefix;
}

static void
s_kv_copy(shoal_key_value_t *to, const shoal_msg_key_value_t *from)
{
    to->key = shoal_strdup(from->key);
    to->value = (uint8_t *) zmalloc(from->value_size + 1);
    if (from->value_size)
        memcpy(to->value, from->value, from->value_size);
    to->value_size = from->value_size;
    to->version = from->version;
    to->create_revision = from->create_revision;
    to->mod_revision = from->mod_revision;
    to->lease = from->lease;
}

int
shoal_client_claim_txn(shoal_client_t *self, const char *id, const shoal_compare_t *compares, size_t compare_count,
                       const shoal_op_t *success, size_t success_count, const shoal_op_t *failure,
                       size_t failure_count, shoal_txn_result_t *result)
{
    if (result)
        memset(result, 0, sizeof *result);
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_CLAIM_TXN, 0);
    shoal_msg_claim_txn_t *body = (shoal_msg_claim_txn_t *) shoal_envelope_new_body(request);
    body->claim_id = shoal_strdup(id ? id : "");
    body->compares = (shoal_msg_key_compare_t *) zmalloc((compare_count + 1) * sizeof *body->compares);
    body->compare_count = compare_count;
    for (size_t i = 0; i < compare_count; i++) {
        shoal_msg_key_compare_t *to = &body->compares[i];
        to->key = shoal_strdup(compares[i].key ? compares[i].key : "");
        to->target = (shoal_key_target_t) compares[i].target;
        to->result = (shoal_key_result_t) compares[i].result;
        to->value = s_bytes_dup(compares[i].value, compares[i].value_size);
        to->value_size = compares[i].value ? compares[i].value_size : 0;
        to->number = compares[i].number;
    }
    body->success = (shoal_msg_key_op_t *) zmalloc((success_count + 1) * sizeof *body->success);
    body->success_count = success_count;
    for (size_t i = 0; i < success_count; i++)
        s_op_fill(&body->success[i], &success[i]);
    body->failure = (shoal_msg_key_op_t *) zmalloc((failure_count + 1) * sizeof *body->failure);
    body->failure_count = failure_count;
    for (size_t i = 0; i < failure_count; i++)
        s_op_fill(&body->failure[i], &failure[i]);
    shoal_envelope_t *reply;
    int rc = shoal_client_call_claim(self, id ? id : "", &request, &reply);
    if (rc == SHOAL_STATUS_OK && result) {
        const shoal_msg_claim_txn_reply_t *answer = (const shoal_msg_claim_txn_reply_t *) reply->body;
        result->succeeded = answer->succeeded;
        result->revision = answer->revision;
        result->owner = shoal_strdup(answer->owner);
        result->results = (shoal_op_result_t *) zmalloc((answer->count + 1) * sizeof *result->results);
        result->count = answer->count;
        for (size_t i = 0; i < answer->count; i++) {
            const shoal_msg_key_result_t *from = &answer->results[i];
            shoal_op_result_t *to = &result->results[i];
            to->type = (int) from->type;
            to->deleted = from->deleted;
            to->kvs = (shoal_key_value_t *) zmalloc((from->count + 1) * sizeof *to->kvs);
            to->count = from->count;
            for (size_t k = 0; k < from->count; k++)
                s_kv_copy(&to->kvs[k], &from->kvs[k]);
        }
    }
    shoal_envelope_destroy(&reply);
    return rc;
}

void
shoal_txn_result_clear(shoal_txn_result_t *result)
{
    for (size_t i = 0; result->results && i < result->count; i++)
        shoal_key_values_clear(&result->results[i].kvs, result->results[i].count);
    free(result->results);
    free(result->owner);
    memset(result, 0, sizeof *result);
}

int
shoal_client_key_put(shoal_client_t *self, const char *id, const char *key, const void *value, size_t size,
                     uint64_t lease, uint64_t *revision)
{
    shoal_op_t op = { .type = SHOAL_OP_PUT, .key = key, .value = value, .value_size = size, .lease = lease };
    shoal_txn_result_t result;
    int rc = shoal_client_claim_txn(self, id, NULL, 0, &op, 1, NULL, 0, &result);
    if (rc == SHOAL_STATUS_OK && revision)
        *revision = result.revision;
    if (rc == SHOAL_STATUS_OK)
        shoal_txn_result_clear(&result);
    return rc;
}

int
shoal_client_key_get(shoal_client_t *self, const char *id, const char *key, shoal_key_value_t *kv)
{
    memset(kv, 0, sizeof *kv);
    shoal_op_t op = { .type = SHOAL_OP_GET, .key = key };
    shoal_txn_result_t result;
    int rc = shoal_client_claim_txn(self, id, NULL, 0, &op, 1, NULL, 0, &result);
    if (rc != SHOAL_STATUS_OK)
        return rc;
    if (result.count == 1 && result.results[0].count == 1) {
        *kv = result.results[0].kvs[0];
        memset(&result.results[0].kvs[0], 0, sizeof *kv);
    }
    else {
        shoal_client_set_error(self, "claim '%s' has no key '%s'", id, key);
        rc = SHOAL_STATUS_NOT_FOUND;
    }
    shoal_txn_result_clear(&result);
    return rc;
}

int
shoal_client_key_delete(shoal_client_t *self, const char *id, const char *key, bool prefix, uint64_t *deleted)
{
    shoal_op_t op = { .type = SHOAL_OP_DELETE, .key = key, .prefix = prefix };
    shoal_txn_result_t result;
    int rc = shoal_client_claim_txn(self, id, NULL, 0, &op, 1, NULL, 0, &result);
    if (rc == SHOAL_STATUS_OK && deleted)
        *deleted = result.count ? result.results[0].deleted : 0;
    if (rc == SHOAL_STATUS_OK)
        shoal_txn_result_clear(&result);
    return rc;
}

int
shoal_client_key_list(shoal_client_t *self, const char *id, const char *prefix, shoal_key_value_t **kvs,
                      size_t *count)
{
    *kvs = NULL;
    *count = 0;
    shoal_op_t op = { .type = SHOAL_OP_GET, .key = prefix ? prefix : "", .prefix = true };
    shoal_txn_result_t result;
    int rc = shoal_client_claim_txn(self, id, NULL, 0, &op, 1, NULL, 0, &result);
    if (rc != SHOAL_STATUS_OK)
        return rc;
    if (result.count == 1) {
        *kvs = result.results[0].kvs;
        *count = result.results[0].count;
        result.results[0].kvs = NULL;
        result.results[0].count = 0;
    }
    shoal_txn_result_clear(&result);
    return rc;
}

void
shoal_key_value_clear(shoal_key_value_t *kv)
{
    free(kv->key);
    free(kv->value);
    memset(kv, 0, sizeof *kv);
}

void
shoal_key_values_clear(shoal_key_value_t **kvs, size_t count)
{
    if (*kvs) {
        for (size_t i = 0; i < count; i++)
            shoal_key_value_clear(&(*kvs)[i]);
        free(*kvs);
        *kvs = NULL;
    }
}
