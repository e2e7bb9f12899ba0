/*  shoal_client_leases: leases, asked of their home through the node the
    client talks to. */
#include "shoal_client_internal.h"
#include "shoal_alloc.h"

static void
s_lease_copy(shoal_lease_t *to, const shoal_msg_lease_t *from)
{
    to->id = from->id;
    to->ttl_ms = from->ttl_ms;
    to->remaining_ms = from->remaining_ms;
    to->expires_ms = from->expires_ms;
    to->granted_ms = from->granted_ms;
    to->attached = from->attached;
    to->holder = shoal_strdup(from->holder);
    to->tenant = shoal_strdup(from->tenant);
    to->home = shoal_strdup(from->home ? from->home : "");
}

//  One lease request; the first lease of the reply into LEASE (may be NULL).
static int
s_lease_call(shoal_client_t *self, shoal_lease_op_t op, uint64_t id, uint64_t ttl_ms, shoal_lease_t *lease,
             bool *shortened)
{
    if (lease)
        memset(lease, 0, sizeof *lease);
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_LEASE, 0);
    shoal_msg_lease_request_t *body = (shoal_msg_lease_request_t *) shoal_envelope_new_body(request);
    body->op = op;
    body->id = id;
    body->ttl_ms = ttl_ms;
    shoal_envelope_t *reply;
    //  A grant is the connected node's; the rest go to the lease's home.
    int rc = op == SHOAL_LEASE_GRANT ? shoal_client_call(self, &request, &reply)
           : shoal_client_call_lease(self, id, &request, &reply);
    if (rc == SHOAL_STATUS_OK) {
        const shoal_msg_leases_t *answer = (const shoal_msg_leases_t *) reply->body;
        if (lease && answer->count)
            s_lease_copy(lease, &answer->leases[0]);
        if (shortened)
            *shortened = answer->shortened;
    }
    shoal_envelope_destroy(&reply);
    return rc;
}

int
shoal_client_lease_grant(shoal_client_t *self, uint64_t ttl_ms, uint64_t id, shoal_lease_t *lease, bool *shortened)
{
    if (shortened)
        *shortened = false;
    return s_lease_call(self, SHOAL_LEASE_GRANT, id, ttl_ms, lease, shortened);
}

int
shoal_client_lease_keepalive(shoal_client_t *self, uint64_t id, shoal_lease_t *lease)
{
    return s_lease_call(self, SHOAL_LEASE_KEEPALIVE, id, 0, lease, NULL);
}

int
shoal_client_lease_revoke(shoal_client_t *self, uint64_t id)
{
    return s_lease_call(self, SHOAL_LEASE_REVOKE, id, 0, NULL, NULL);
}

int
shoal_client_lease_ttl(shoal_client_t *self, uint64_t id, shoal_lease_t *lease)
{
    return s_lease_call(self, SHOAL_LEASE_TTL, id, 0, lease, NULL);
}

int
shoal_client_lease_list(shoal_client_t *self, shoal_lease_t **leases, size_t *count)
{
    *leases = NULL;
    *count = 0;
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_LEASE, 0);
    shoal_msg_lease_request_t *body = (shoal_msg_lease_request_t *) shoal_envelope_new_body(request);
    body->op = SHOAL_LEASE_LIST;
    shoal_envelope_t *reply;
    int rc = shoal_client_call(self, &request, &reply);
    if (rc == SHOAL_STATUS_OK) {
        const shoal_msg_leases_t *answer = (const shoal_msg_leases_t *) reply->body;
        *leases = (shoal_lease_t *) zmalloc((answer->count + 1) * sizeof **leases);
        for (size_t i = 0; i < answer->count; i++)
            s_lease_copy(&(*leases)[i], &answer->leases[i]);
        *count = answer->count;
    }
    shoal_envelope_destroy(&reply);
    return rc;
}

void
shoal_lease_clear(shoal_lease_t *lease)
{
    free(lease->holder);
    free(lease->tenant);
    free(lease->home);
    memset(lease, 0, sizeof *lease);
}

void
shoal_leases_clear(shoal_lease_t **leases, size_t count)
{
    if (*leases) {
        for (size_t i = 0; i < count; i++)
            shoal_lease_clear(&(*leases)[i]);
        free(*leases);
        *leases = NULL;
    }
}
