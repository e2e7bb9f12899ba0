/*  shoal_client_drain: hot drains through libshoal. */
#include "shoal_client_internal.h"
#include "shoal_alloc.h"

static char *
s_copy(const char *text)
{
    return shoal_strdup(text ? text : "");
}

static void
s_info_copy(shoal_drain_info_t *info, const shoal_msg_drain_t *from)
{
    info->node_id = s_copy(from->node_id);
    info->draining = from->draining;
    info->phase = s_copy(from->phase);
    info->note = s_copy(from->note);
    info->max_downtime_ms = from->max_downtime_ms;
    info->parallel = from->parallel;
    info->started_ms = from->started_ms;
    info->total_ms = from->total_ms;
    info->claims = (shoal_drain_claim_t *) zmalloc(sizeof(shoal_drain_claim_t) * (from->count + 1));
    info->count = from->count;
    for (size_t i = 0; i < from->count; i++) {
        const shoal_msg_drain_claim_t *entry = &from->claims[i];
        shoal_drain_claim_t *claim = &info->claims[i];
        claim->claim_id = s_copy(entry->claim_id);
        claim->state = s_copy(entry->state);
        claim->to = s_copy(entry->to);
        claim->reason = s_copy(entry->reason);
        claim->phase = s_copy(entry->phase);
        claim->attempts = entry->attempts;
        claim->memory_bytes = entry->memory_bytes;
        claim->bytes_sent = entry->bytes_sent;
        claim->total_ms = entry->total_ms;
        claim->node_downtime_ms = entry->node_downtime_ms;
    }
}

static int
s_drain_call(shoal_client_t *self, shoal_msg_type_t type, const char *node_id, uint32_t max_downtime_ms,
             uint32_t parallel, shoal_drain_info_t *info)
{
    if (info)
        memset(info, 0, sizeof *info);
    shoal_envelope_t *request = shoal_envelope_new(type, 0);
    shoal_msg_drain_request_t *body = (shoal_msg_drain_request_t *) shoal_envelope_new_body(request);
    body->node_id = s_copy(node_id);
    body->max_downtime_ms = max_downtime_ms;
    body->parallel = parallel;
    shoal_envelope_t *reply;
    int rc = shoal_client_call(self, &request, &reply);
    if (rc == SHOAL_STATUS_OK && info && reply->body)
        s_info_copy(info, (const shoal_msg_drain_t *) reply->body);
    shoal_envelope_destroy(&reply);
    return rc;
}

int
shoal_client_drain(shoal_client_t *self, const char *node_id, uint32_t max_downtime_ms, uint32_t parallel,
                   shoal_drain_info_t *info)
{
    return s_drain_call(self, SHOAL_MSG_DRAIN, node_id, max_downtime_ms, parallel, info);
}

int
shoal_client_drain_status(shoal_client_t *self, const char *node_id, shoal_drain_info_t *info)
{
    return s_drain_call(self, SHOAL_MSG_DRAIN_STATUS, node_id, 0, 0, info);
}

int
shoal_client_undrain(shoal_client_t *self, const char *node_id, shoal_drain_info_t *info)
{
    return s_drain_call(self, SHOAL_MSG_UNDRAIN, node_id, 0, 0, info);
}

void
shoal_drain_info_clear(shoal_drain_info_t *info)
{
    for (size_t i = 0; i < info->count; i++) {
        shoal_drain_claim_t *claim = &info->claims[i];
        free(claim->claim_id);
        free(claim->state);
        free(claim->to);
        free(claim->reason);
        free(claim->phase);
    }
    free(info->claims);
    free(info->node_id);
    free(info->phase);
    free(info->note);
    memset(info, 0, sizeof *info);
}
