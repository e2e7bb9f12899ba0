/*  shoal_client_counters: a node's admission counters through libshoal. */
#include "shoal_client_internal.h"
#include "shoal_alloc.h"

int
shoal_client_counters(shoal_client_t *self, const char *tenant, shoal_counters_t *counters)
{
    memset(counters, 0, sizeof *counters);
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_COUNTERS, 0);
    shoal_msg_counters_request_t *body = (shoal_msg_counters_request_t *) shoal_envelope_new_body(request);
    body->tenant = shoal_strdup(tenant ? tenant : "");
    shoal_envelope_t *reply;
    int rc = shoal_client_call(self, &request, &reply);
    if (rc == SHOAL_STATUS_OK) {
        const shoal_msg_counters_t *answer = (const shoal_msg_counters_t *) reply->body;
        counters->scopes = (shoal_counter_scope_t *) zmalloc(sizeof(shoal_counter_scope_t) * (answer->count + 1));
        for (size_t i = 0; i < answer->count; i++) {
            const shoal_msg_counter_scope_t *from = &answer->scopes[i];
            shoal_counter_scope_t *scope = &counters->scopes[i];
            scope->tenant = shoal_strdup(from->tenant);
            scope->claims = from->used.claims;
            scope->running = from->used.running;
            scope->memory_bytes = from->used.memory_bytes;
            scope->reserved_claims = from->reserved.claims;
            scope->reserved_running = from->reserved.running;
            scope->reserved_memory_bytes = from->reserved.memory_bytes;
        }
        counters->count = answer->count;
        counters->more = answer->more;
    }
    shoal_envelope_destroy(&reply);
    return rc;
}

void
shoal_counters_clear(shoal_counters_t *counters)
{
    for (size_t i = 0; i < counters->count; i++)
        free(counters->scopes[i].tenant);
    free(counters->scopes);
    memset(counters, 0, sizeof *counters);
}
