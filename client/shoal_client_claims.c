/*  shoal_client_claims: claim calls of libshoal, and lookup. */
#include "shoal_client_internal.h"
#include "shoal_alloc.h"

static void
s_info_copy(shoal_claim_info_t *info, const shoal_msg_claim_info_t *from)
{
    info->id = shoal_strdup(from->id);
    info->tenant = shoal_strdup(from->tenant);
    //  Decoding checked the state against its enumeration.
    info->state = shoal_strdup(shoal_claim_state_name((shoal_claim_state_t) from->state));
    info->memory_bytes = from->memory_bytes;
    info->driver = shoal_strdup(from->driver);
    info->epoch = from->epoch;
    info->created_ms = from->created_ms;
    info->error = shoal_strdup(from->error);
    info->owner = shoal_strdup(from->owner);
}

int
shoal_client_claim_create(shoal_client_t *self, const shoal_claim_spec_t *spec, shoal_claim_info_t *info)
{
    if (info)
        memset(info, 0, sizeof *info);
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_CLAIM_CREATE, 0);
    shoal_msg_claim_create_t *body = (shoal_msg_claim_create_t *) shoal_envelope_new_body(request);
    body->tenant = shoal_strdup(spec->tenant ? spec->tenant : "");
    body->memory_bytes = spec->memory_bytes;
    body->driver = shoal_strdup(spec->driver ? spec->driver : "");
    body->id = shoal_strdup(spec->id ? spec->id : "");
    body->disk_bytes = spec->disk_bytes;
    body->rate = spec->rate;
    body->from_object = shoal_strdup(spec->from_object ? spec->from_object : "");
    shoal_envelope_t *reply;
    //  A guest made from an object may wait for its copy to this node.
    int rc = *body->from_object ? shoal_client_call_objects(self, NULL, &request, &reply)
           : shoal_client_call(self, &request, &reply);
    if (rc == SHOAL_STATUS_OK && info)
        s_info_copy(info, (const shoal_msg_claim_info_t *) reply->body);
    shoal_envelope_destroy(&reply);
    return rc;
}

int
shoal_client_claim_list(shoal_client_t *self, shoal_claim_list_t *list)
{
    memset(list, 0, sizeof *list);
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_CLAIM_LIST, 0);
    shoal_envelope_t *reply;
    int rc = shoal_client_call(self, &request, &reply);
    if (rc == SHOAL_STATUS_OK) {
        const shoal_msg_claim_list_t *body = (const shoal_msg_claim_list_t *) reply->body;
        list->claims = (shoal_claim_info_t *) zmalloc(sizeof(shoal_claim_info_t) * (body->count + 1));
        for (size_t i = 0; i < body->count; i++)
            s_info_copy(&list->claims[i], &body->claims[i]);
        list->count = body->count;
    }
    shoal_envelope_destroy(&reply);
    return rc;
}

static int
s_claim_ref_call(shoal_client_t *self, shoal_msg_type_t type, const char *id, shoal_claim_info_t *info)
{
    if (info)
        memset(info, 0, sizeof *info);
    shoal_envelope_t *request = shoal_envelope_new(type, 0);
    shoal_msg_claim_ref_t *body = (shoal_msg_claim_ref_t *) shoal_envelope_new_body(request);
    body->id = shoal_strdup(id ? id : "");
    shoal_envelope_t *reply;
    int rc = shoal_client_call_claim(self, id ? id : "", &request, &reply);
    if (rc == SHOAL_STATUS_OK && info)
        s_info_copy(info, (const shoal_msg_claim_info_t *) reply->body);
    shoal_envelope_destroy(&reply);
    return rc;
}

int
shoal_client_claim_show(shoal_client_t *self, const char *id, shoal_claim_info_t *info)
{
    return s_claim_ref_call(self, SHOAL_MSG_CLAIM_SHOW, id, info);
}

int
shoal_client_claim_stop(shoal_client_t *self, const char *id, shoal_claim_info_t *info)
{
    return s_claim_ref_call(self, SHOAL_MSG_CLAIM_STOP, id, info);
}

int
shoal_client_claim_start(shoal_client_t *self, const char *id, shoal_claim_info_t *info)
{
    return s_claim_ref_call(self, SHOAL_MSG_CLAIM_START, id, info);
}

int
shoal_client_claim_pause(shoal_client_t *self, const char *id, shoal_claim_info_t *info)
{
    return s_claim_ref_call(self, SHOAL_MSG_CLAIM_PAUSE, id, info);
}

int
shoal_client_claim_resume(shoal_client_t *self, const char *id, shoal_claim_info_t *info)
{
    return s_claim_ref_call(self, SHOAL_MSG_CLAIM_RESUME, id, info);
}

int
shoal_client_claim_release(shoal_client_t *self, const char *id, shoal_claim_info_t *info)
{
    return s_claim_ref_call(self, SHOAL_MSG_CLAIM_RELEASE, id, info);
}

//  A guest call: OP ("put" or "get") of KEY, with VALUE for a put.
static int
s_guest_call(shoal_client_t *self, const char *id, const char *op, const char *key, const void *value,
             size_t size, uint8_t **value_p, size_t *size_p)
{
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_CLAIM_CALL, 0);
    shoal_msg_claim_call_t *body = (shoal_msg_claim_call_t *) shoal_envelope_new_body(request);
    body->id = shoal_strdup(id ? id : "");
    body->op = shoal_strdup(op);
    body->key = shoal_strdup(key ? key : "");
    if (size) {
        body->value = (uint8_t *) zmalloc(size);
        memcpy(body->value, value, size);
        body->value_size = size;
    }
    shoal_envelope_t *reply;
    int rc = shoal_client_call_claim(self, id ? id : "", &request, &reply);
    if (rc == SHOAL_STATUS_OK && value_p) {
        const shoal_msg_claim_call_reply_t *answer = (const shoal_msg_claim_call_reply_t *) reply->body;
        *value_p = (uint8_t *) zmalloc(answer->value_size + 1);
        if (answer->value_size)
            memcpy(*value_p, answer->value, answer->value_size);
        if (size_p)
            *size_p = answer->value_size;
    }
    shoal_envelope_destroy(&reply);
    return rc;
}

int
shoal_client_claim_put(shoal_client_t *self, const char *id, const char *key, const void *value, size_t size)
{
    return s_guest_call(self, id, "put", key, value, size, NULL, NULL);
}

int
shoal_client_claim_get(shoal_client_t *self, const char *id, const char *key, uint8_t **value, size_t *size)
{
    if (value)
        *value = NULL;
    if (size)
        *size = 0;
    return s_guest_call(self, id, "get", key, NULL, 0, value, size);
}

int
shoal_client_lookup(shoal_client_t *self, const char *id, shoal_lookup_t *lookup)
{
    memset(lookup, 0, sizeof *lookup);
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_LOOKUP, 0);
    shoal_msg_claim_ref_t *body = (shoal_msg_claim_ref_t *) shoal_envelope_new_body(request);
    body->id = shoal_strdup(id ? id : "");
    shoal_envelope_t *reply;
    int rc = shoal_client_call(self, &request, &reply);
    if (rc == SHOAL_STATUS_OK) {
        const shoal_registry_record_t *record = (const shoal_registry_record_t *) reply->body;
        lookup->claim_id = shoal_strdup(record->claim_id);
        lookup->owner = shoal_strdup(record->owner);
        lookup->endpoint = shoal_strdup(record->endpoint);
        lookup->epoch = record->epoch;
        lookup->tenant = shoal_strdup(record->tenant ? record->tenant : "");
    }
    shoal_envelope_destroy(&reply);
    return rc;
}

void
shoal_claim_info_clear(shoal_claim_info_t *info)
{
    free(info->id);
    free(info->tenant);
    free(info->state);
    free(info->driver);
    free(info->error);
    free(info->owner);
    memset(info, 0, sizeof *info);
}

void
shoal_claim_list_clear(shoal_claim_list_t *list)
{
    for (size_t i = 0; i < list->count; i++)
        shoal_claim_info_clear(&list->claims[i]);
    free(list->claims);
    memset(list, 0, sizeof *list);
}

void
shoal_lookup_clear(shoal_lookup_t *lookup)
{
    free(lookup->claim_id);
    free(lookup->owner);
    free(lookup->endpoint);
    free(lookup->tenant);
    memset(lookup, 0, sizeof *lookup);
}
