/*  shoal_leases: grants, keepalives and ends of leases. See shoal_leases.h.

    The store holds the leases; the node keeps only the earliest time one
    of them ends, so that the tick reads the store only when a lease is due
    (or after a change that may have made one due sooner).
*/
#include "shoal_leases.h"

#include <sodium.h>

//  Lease ids are random below this, so that they are not guessed and
//  stay positive in signed JSON numbers.
#define LEASES_ID_MASK UINT64_C(0x7FFFFFFFFFFFFFFF)

struct _shoal_leases_t {
    const shoal_settings_t *settings;   //  the node's live settings (borrowed)
    shoal_txn_t *txn;                   //  keys attached to leases, and the store (borrowed)
    shoal_key_space_t *space;           //  the leases' records (borrowed from txn)
    int64_t earliest_ms;                //  wall clock the first lease ends at; 0: look at the next tick
};

static int64_t
s_now(void)
{
    return zclock_time();
}

static shoal_envelope_t *
s_check(uint64_t id, const shoal_envelope_t *request, const shoal_caller_t *caller, void *arg)
{
    return shoal_leases_check((shoal_leases_t *) arg, id, request, caller);
}

shoal_leases_t *
shoal_leases_new(const shoal_settings_t *settings, shoal_txn_t *txn, char **error_p)
{
    shoal_leases_t *self = (shoal_leases_t *) zmalloc(sizeof *self);
    self->settings = settings;
    self->txn = txn;
    self->space = shoal_txn_space(txn);
    shoal_txn_set_lease_check(txn, s_check, self);
    //  Leases the store holds count from the times it keeps: one that
    //  ended while the node was down ends at the first tick.
    shoal_msg_lease_t *leases = NULL;
    size_t count = 0;
    if (shoal_key_space_leases(self->space, &leases, &count)) {
        *error_p = zsys_sprintf("cannot read the leases: %s", shoal_key_space_error(self->space));
        shoal_leases_destroy(&self);
        return NULL;
    }
    if (count)
        zsys_info("leases: %zu lease(s) held, each ending when its last keepalive said", count);
    shoal_leases_free(&leases, count);
    return self;
}

void
shoal_leases_destroy(shoal_leases_t **self_p)
{
    if (*self_p) {
        shoal_leases_t *self = *self_p;
        shoal_txn_set_lease_check(self->txn, NULL, NULL);
        free(self);
        *self_p = NULL;
    }
}

bool
shoal_leases_handles(shoal_msg_type_t type)
{
    return type == SHOAL_MSG_LEASE;
}

static bool
s_may_use(const shoal_caller_t *caller, const shoal_msg_lease_t *lease)
{
    return !shoal_caller_is_tenant(caller) || streq(caller->tenant, lease->tenant);
}

//  Reads lease ID for CALLER. Returns NULL with LEASE filled, or the reply
//  to send instead (404: none here, not the caller's, or its time passed).
static shoal_envelope_t *
s_find(shoal_leases_t *self, uint64_t id, const shoal_envelope_t *request, const shoal_caller_t *caller,
       shoal_msg_lease_t *lease)
{
    bool found = false;
    if (shoal_key_space_lease(self->space, id, lease, &found))
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_key_space_error(self->space));
    if (found && s_may_use(caller, lease) && (int64_t) lease->expires_ms > s_now())
        return NULL;
    if (found)
        shoal_msg_lease_codec.clear(lease);
    return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "node %s holds no lease %" PRIu64
                                " (leases are held by the node that granted them; it may have ended)",
                                self->settings->node_id, id);
}

shoal_envelope_t *
shoal_leases_check(shoal_leases_t *self, uint64_t id, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    shoal_msg_lease_t lease;
    shoal_envelope_t *reply = s_find(self, id, request, caller, &lease);
    if (!reply)
        shoal_msg_lease_codec.clear(&lease);
    return reply;
}

//  Fills INFO from LEASE for a reply: what is left, what is attached.
static void
s_info_fill(shoal_leases_t *self, shoal_msg_lease_t *info, const shoal_msg_lease_t *lease)
{
    *info = *lease;
    info->holder = strdup(lease->holder ? lease->holder : "");
    info->tenant = strdup(lease->tenant ? lease->tenant : "");
    int64_t left = (int64_t) lease->expires_ms - s_now();
    info->remaining_ms = left > 0 ? (uint64_t) left : 0;
    shoal_leased_t *items = NULL;
    size_t count = 0;
    if (shoal_key_space_leased(self->space, lease->id, &items, &count) == 0)
        info->attached = count;
    shoal_leased_free(&items, count);
}

//  A 200 reply carrying LEASE.
static shoal_envelope_t *
s_reply(shoal_leases_t *self, const shoal_envelope_t *request, const shoal_msg_lease_t *lease, bool shortened,
        const char *message)
{
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", message);
    shoal_msg_leases_t *body = (shoal_msg_leases_t *) shoal_envelope_new_body(reply);
    body->leases = (shoal_msg_lease_t *) zmalloc(sizeof *body->leases);
    body->count = 1;
    body->shortened = shortened;
    s_info_fill(self, &body->leases[0], lease);
    return reply;
}

static shoal_envelope_t *
s_grant(shoal_leases_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_lease_request_t *body = (const shoal_msg_lease_request_t *) request->body;
    uint64_t id = body->id;
    if (id) {
        shoal_msg_lease_t existing;
        bool found = false;
        if (shoal_key_space_lease(self->space, id, &existing, &found))
            return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_key_space_error(self->space));
        if (found) {
            shoal_msg_lease_codec.clear(&existing);
            return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "lease %" PRIu64 " exists", id);
        }
    }
    while (!id) {
        randombytes_buf(&id, sizeof id);
        id &= LEASES_ID_MASK;
    }
    bool shortened = body->ttl_ms > SHOAL_LEASE_TTL_MAX_MS;
    int64_t now = s_now();
    shoal_msg_lease_t lease = {
        .id = id,
        .ttl_ms = shortened ? SHOAL_LEASE_TTL_MAX_MS : body->ttl_ms,
        .holder = (char *) caller->name,
        .tenant = (char *) (shoal_caller_is_tenant(caller) ? caller->tenant : ""),
        .granted_ms = (uint64_t) now,
    };
    lease.expires_ms = (uint64_t) now + lease.ttl_ms;
    if (shoal_key_space_apply(self->space, NULL, 0, &lease, 0))
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "cannot keep the lease: %s",
                                    shoal_key_space_error(self->space));
    if (self->earliest_ms == 0 || (int64_t) lease.expires_ms < self->earliest_ms)
        self->earliest_ms = (int64_t) lease.expires_ms;
    char message[128];
    if (shortened)
        snprintf(message, sizeof message, "granted for %d ms, not the %" PRIu64 " ms asked: a lease lasts at most %d ms "
                 "without a keepalive", SHOAL_LEASE_TTL_MAX_MS, body->ttl_ms, SHOAL_LEASE_TTL_MAX_MS);
    else
        snprintf(message, sizeof message, "granted");
    return s_reply(self, request, &lease, shortened, message);
}

static shoal_envelope_t *
s_one(shoal_leases_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_lease_request_t *body = (const shoal_msg_lease_request_t *) request->body;
    shoal_msg_lease_t lease;
    shoal_envelope_t *reply = s_find(self, body->id, request, caller, &lease);
    if (reply)
        return reply;
    if (body->op == SHOAL_LEASE_KEEPALIVE) {
        //  Written synced before the answer: a restart keeps the time it set.
        lease.expires_ms = (uint64_t) s_now() + lease.ttl_ms;
        if (shoal_key_space_apply(self->space, NULL, 0, &lease, 0))
            reply = shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "cannot keep the lease alive: %s",
                                         shoal_key_space_error(self->space));
        else
            reply = s_reply(self, request, &lease, false, "kept alive");
    }
    else
    if (body->op == SHOAL_LEASE_REVOKE) {
        size_t removed = 0;
        shoal_msg_lease_t info;
        s_info_fill(self, &info, &lease);
        if (shoal_txn_lease_end(self->txn, lease.id, &removed))
            reply = shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "cannot revoke the lease: %s",
                                         shoal_key_space_error(self->space));
        else {
            zsys_info("leases: %" PRIu64 " revoked by %s, %zu key(s) went with it", lease.id, caller->name, removed);
            info.remaining_ms = 0;
            reply = s_reply(self, request, &info, false, "revoked");
        }
        shoal_msg_lease_codec.clear(&info);
    }
    else
        reply = s_reply(self, request, &lease, false, "OK");
    shoal_msg_lease_codec.clear(&lease);
    return reply;
}

static shoal_envelope_t *
s_list(shoal_leases_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    shoal_msg_lease_t *leases = NULL;
    size_t count = 0;
    if (shoal_key_space_leases(self->space, &leases, &count))
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_key_space_error(self->space));
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    shoal_msg_leases_t *body = (shoal_msg_leases_t *) shoal_envelope_new_body(reply);
    body->leases = (shoal_msg_lease_t *) zmalloc((count + 1) * sizeof *body->leases);
    int64_t now = s_now();
    for (size_t i = 0; i < count && body->count < SHOAL_LEASES_MAX; i++)
        if (s_may_use(caller, &leases[i]) && (int64_t) leases[i].expires_ms > now)
            s_info_fill(self, &body->leases[body->count++], &leases[i]);
    shoal_leases_free(&leases, count);
    return reply;
}

shoal_envelope_t *
shoal_leases_handle(shoal_leases_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_lease_request_t *body = (const shoal_msg_lease_request_t *) request->body;
    switch (body->op) {
        case SHOAL_LEASE_GRANT: return s_grant(self, request, caller);
        case SHOAL_LEASE_LIST: return s_list(self, request, caller);
        default: return s_one(self, request, caller);
    }
}

void
shoal_leases_tick(shoal_leases_t *self)
{
    int64_t now = s_now();
    if (self->earliest_ms && now < self->earliest_ms)
        return;
    shoal_msg_lease_t *leases = NULL;
    size_t count = 0;
    if (shoal_key_space_leases(self->space, &leases, &count)) {
        zsys_error("leases: cannot read the leases: %s", shoal_key_space_error(self->space));
        return;
    }
    //  With none left, the next grant sets the time to look again.
    int64_t earliest = INT64_MAX;
    for (size_t i = 0; i < count; i++) {
        int64_t ends = (int64_t) leases[i].expires_ms;
        size_t removed = 0;
        if (ends > now) {
            earliest = ends < earliest ? ends : earliest;
            continue;
        }
        if (shoal_txn_lease_end(self->txn, leases[i].id, &removed) == 0)
            zsys_info("leases: %" PRIu64 " of %s ended %" PRId64 " ms after its time, %zu key(s) went with it",
                      leases[i].id, leases[i].holder, now - ends, removed);
        else
            earliest = now;     //  tried again at the next tick
    }
    self->earliest_ms = earliest;
    shoal_leases_free(&leases, count);
}
