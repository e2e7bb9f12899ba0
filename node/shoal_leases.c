/*  shoal_leases: grants, keepalives and ends of leases. See shoal_leases.h.

    The store holds the leases; the node keeps only the earliest time one
    of them ends, so that the tick reads the store only when a lease is due
    (or after a change that may have made one due sooner).
*/
#include "shoal_leases.h"
#include "shoal_alloc.h"

#include <sodium.h>

//  Lease ids stay positive in signed JSON numbers: 63 bits. The top
//  LEASES_HOME_BITS of them mark the home (a hash of its node id), the
//  rest are random, so that they are not guessed.
#define LEASES_ID_MASK UINT64_C(0x7FFFFFFFFFFFFFFF)
#define LEASES_HOME_BITS 16
#define LEASES_HOME_SHIFT (63 - LEASES_HOME_BITS)
#define LEASES_RANDOM_MASK ((UINT64_C(1) << LEASES_HOME_SHIFT) - 1)
//  How long a copy's question to its home may take before the copy ends
//  (a home that cannot say the lease lives: it is not kept alive).
#define LEASES_HOME_TIMEOUT_MS 3000
//  How soon the tick looks again at a copy whose question is out.
#define LEASES_ASKING_REST_MS 50
//  How long a search that found no home stands: a request naming a lease
//  no peer said it holds, within this time, is answered 404 at once rather
//  than made to wait for other questions. A home found is used only by the
//  requests that waited for it: the lease may end any time after.
#define LEASES_FETCH_REST_MS 2000

//  A request that waits for a copy of a lease it names (parked).
typedef struct {
    zframe_t *routing_id;       //  its sender
    shoal_envelope_t *request;  //  the request, answered once the copy came or not
    char *role;                 //  its caller, as the node knew it
    char *tenant;
    char *name;
} s_parked_t;

//  A lease's home sought for requests that name it: first the peer the
//  id's mark names, then, when that one does not hold it (a client chose
//  the id, or two nodes' marks are alike), every other peer alive.
typedef struct {
    shoal_leases_t *self;       //  the leases it is for
    uint64_t id;                //  the lease
    zlistx_t *parked;           //  s_parked_t that wait for its answer
    zhashx_t *asked;            //  the peers asked in this search (values unused)
    size_t out;                 //  questions not answered yet, of this search or an earlier one
    bool asking;                //  the search is under way
    bool copy;                  //  a parked request attaches to it: the lease found is kept as a copy
    bool resuming;              //  its waiting requests are being answered from what it found
    int64_t done_ms;            //  monotonic time the search ended (0: not yet)
    char *home;                 //  the node that holds it (NULL: none found)
    char *tenant;               //  the lease's tenant, as its home said
} s_fetch_t;

struct _shoal_leases_t {
    const shoal_settings_t *settings;   //  the node's live settings (borrowed)
    shoal_txn_t *txn;                   //  keys attached to leases, and the store (borrowed)
    shoal_key_space_t *space;           //  the leases' records (borrowed from txn)
    shoal_mesh_t *mesh;                 //  homes asked, copies told, endpoints looked up (borrowed)
    int64_t earliest_ms;                //  wall clock the first lease ends at; 0: look at the next tick
    zhashx_t *asking;                   //  ids of copies whose home is being asked (values unused)
    zhashx_t *fetches;                  //  s_fetch_t by lease id: copies asked for requests that name them
    uint64_t wanted;                    //  the lease the last check found neither here nor asked (0: none)
    shoal_leases_resume_fn *resume;     //  answers a parked request once its copy came, or not
    void *resume_arg;                   //  its argument
};

//  A copy's question to its home, brought back with the answer.
typedef struct {
    shoal_leases_t *self;
    uint64_t id;
} s_ask_t;

//  The mark of NODE_ID's leases in their ids.
static uint64_t
s_home_mark(const char *node_id)
{
    uint64_t hash = UINT64_C(14695981039346656037);
    for (const unsigned char *c = (const unsigned char *) node_id; *c; c++)
        hash = (hash ^ *c) * UINT64_C(1099511628211);
    return (hash ^ (hash >> 32) ^ (hash >> 16)) & ((UINT64_C(1) << LEASES_HOME_BITS) - 1);
}

//  Whether LEASE is a copy: it came with a moved claim, its home elsewhere.
static bool
s_is_copy(shoal_leases_t *self, const shoal_msg_lease_t *lease)
{
    return lease->home && *lease->home && !streq(lease->home, self->settings->node_id);
}

static char *
s_key_of(uint64_t id, char *key, size_t size)
{
    snprintf(key, size, "%" PRIu64, id);
    return key;
}

static int64_t
s_now(void)
{
    return zclock_time();
}

static void
s_parked_destroy(s_parked_t **parked_p)
{
    if (*parked_p) {
        s_parked_t *parked = *parked_p;
        zframe_destroy(&parked->routing_id);
        shoal_envelope_destroy(&parked->request);
        free(parked->role);
        free(parked->tenant);
        free(parked->name);
        free(parked);
        *parked_p = NULL;
    }
}

static void
s_fetch_destroy(void **item_p)
{
    s_fetch_t *fetch = (s_fetch_t *) *item_p;
    if (fetch) {
        s_parked_t *parked;
        while ((parked = (s_parked_t *) zlistx_detach(fetch->parked, NULL)))
            s_parked_destroy(&parked);
        zlistx_destroy(&fetch->parked);
        zhashx_destroy(&fetch->asked);
        free(fetch->home);
        free(fetch->tenant);
        free(fetch);
        *item_p = NULL;
    }
}

static shoal_envelope_t *
s_check(uint64_t id, const shoal_envelope_t *request, const shoal_caller_t *caller, void *arg)
{
    return shoal_leases_check((shoal_leases_t *) arg, id, request, caller);
}

shoal_leases_t *
shoal_leases_new(const shoal_settings_t *settings, shoal_txn_t *txn, shoal_mesh_t *mesh, char **error_p)
{
    shoal_leases_t *self = (shoal_leases_t *) zmalloc(sizeof *self);
    self->settings = settings;
    self->txn = txn;
    self->space = shoal_txn_space(txn);
    self->mesh = mesh;
    self->asking = zhashx_new();
    self->fetches = zhashx_new();
    zhashx_set_destructor(self->fetches, s_fetch_destroy);
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
        zhashx_destroy(&self->asking);
        zhashx_destroy(&self->fetches);
        free(self);
        *self_p = NULL;
    }
}

bool
shoal_leases_handles(shoal_msg_type_t type)
{
    return type == SHOAL_MSG_LEASE || type == SHOAL_MSG_LEASE_ENDED || type == SHOAL_MSG_LEASE_LOOKUP;
}

static bool
s_may_use(const shoal_caller_t *caller, const shoal_msg_lease_t *lease)
{
    return !shoal_caller_is_tenant(caller) || streq(caller->tenant, lease->tenant);
}

//  Reads lease ID for CALLER. Returns NULL with LEASE filled, or the reply
//  to send instead (404: none here, not the caller's, or its time passed;
//  unless COPIES, a copy here: its home answers for it).
static shoal_envelope_t *
s_find(shoal_leases_t *self, uint64_t id, const shoal_envelope_t *request, const shoal_caller_t *caller,
       shoal_msg_lease_t *lease, bool copies)
{
    bool found = false;
    if (shoal_key_space_lease(self->space, id, lease, &found))
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_key_space_error(self->space));
    bool usable = found && s_may_use(caller, lease) && (int64_t) lease->expires_ms > s_now();
    if (usable && (copies || !s_is_copy(self, lease)))
        return NULL;
    shoal_envelope_t *reply = usable
        ? shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "node %s keeps a copy of lease %" PRIu64 " (it came "
                               "with a moved claim); its home, node %s, answers for it (lease_lookup)",
                               self->settings->node_id, id, lease->home)
        : shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "node %s holds no lease %" PRIu64
                               " (a lease is held by the node that granted it, lease_lookup names it; it may have "
                               "ended)", self->settings->node_id, id);
    if (found)
        shoal_msg_lease_codec.clear(lease);
    return reply;
}

//  Whether a search for lease ID's home is wanted (it is not held here):
//  unless the requests that waited for one are being answered from it, or
//  one found no home a moment ago.
static bool
s_search_wanted(shoal_leases_t *self, uint64_t id)
{
    char key[32];
    s_fetch_t *fetch = (s_fetch_t *) zhashx_lookup(self->fetches, s_key_of(id, key, sizeof key));
    return !fetch || fetch->asking
        || (!fetch->resuming && (fetch->home || zclock_mono() - fetch->done_ms > LEASES_FETCH_REST_MS));
}

shoal_envelope_t *
shoal_leases_check(shoal_leases_t *self, uint64_t id, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    //  Neither held nor copied here: a copy may be asked of its home (the
    //  node parks the request, shoal_leases_park), unless its home said no
    //  a moment ago.
    shoal_msg_lease_t lease;
    bool here = false;
    if (shoal_key_space_lease(self->space, id, &lease, &here) == 0 && here)
        shoal_msg_lease_codec.clear(&lease);
    if (!here && !self->wanted && s_search_wanted(self, id))
        self->wanted = id;
    shoal_envelope_t *reply = s_find(self, id, request, caller, &lease, true);
    if (!reply)
        shoal_msg_lease_codec.clear(&lease);
    return reply;
}

//  Fills INFO from LEASE for a reply: what is left, what is attached.
static void
s_info_fill(shoal_leases_t *self, shoal_msg_lease_t *info, const shoal_msg_lease_t *lease)
{
    *info = *lease;
    info->holder = shoal_strdup(lease->holder ? lease->holder : "");
    info->tenant = shoal_strdup(lease->tenant ? lease->tenant : "");
    info->home = shoal_strdup(lease->home && *lease->home ? lease->home : self->settings->node_id);
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
    if (id > LEASES_ID_MASK)
        return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "lease id %" PRIu64 " is out of range: a "
                                    "lease id is 1 to %" PRIu64 " (0: the node picks one)", id, LEASES_ID_MASK);
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
    //  The id names its home (shoal_leases_lookup): any node finds it.
    while (!id) {
        randombytes_buf(&id, sizeof id);
        id = (s_home_mark(self->settings->node_id) << LEASES_HOME_SHIFT) | (id & LEASES_RANDOM_MASK);
        if (!(id & LEASES_RANDOM_MASK))
            id = 0;
    }
    bool shortened = body->ttl_ms > SHOAL_LEASE_TTL_MAX_MS;
    int64_t now = s_now();
    shoal_msg_lease_t lease = {
        .id = id,
        .ttl_ms = shortened ? SHOAL_LEASE_TTL_MAX_MS : body->ttl_ms,
        .holder = (char *) caller->name,
        .tenant = (char *) (shoal_caller_is_tenant(caller) ? caller->tenant : ""),
        .granted_ms = (uint64_t) now,
        .home = (char *) self->settings->node_id,
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

//  The home ended lease ID: every peer that may keep a copy is told, once,
//  without waiting (a copy that misses it asks when it is due, and hears
//  that the lease is gone).
static void
s_tell_ended(shoal_leases_t *self, uint64_t id)
{
    zlistx_t *alive = shoal_mesh_alive(self->mesh);
    for (const char *node = (const char *) zlistx_first(alive); node; node = (const char *) zlistx_next(alive)) {
        shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_LEASE_ENDED, 0);
        shoal_msg_lease_request_t *body = (shoal_msg_lease_request_t *) shoal_envelope_new_body(request);
        body->op = SHOAL_LEASE_TTL;
        body->id = id;
        shoal_mesh_send(self->mesh, node, &request, LEASES_HOME_TIMEOUT_MS, NULL, NULL);
    }
    zlistx_destroy(&alive);
}

static shoal_envelope_t *
s_one(shoal_leases_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_lease_request_t *body = (const shoal_msg_lease_request_t *) request->body;
    shoal_msg_lease_t lease;
    shoal_envelope_t *reply = s_find(self, body->id, request, caller, &lease, false);
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
            s_tell_ended(self, lease.id);
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

//  LEASE_ENDED: the home of lease ID ended it; a copy here ends too.
static shoal_envelope_t *
s_ended(shoal_leases_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_lease_request_t *body = (const shoal_msg_lease_request_t *) request->body;
    if (!streq(caller->role, SHOAL_ROLE_NODE))
        return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN, "lease_ended comes from nodes only, not from "
                                    "role %s", caller->role);
    shoal_msg_lease_t lease;
    bool found = false;
    if (shoal_key_space_lease(self->space, body->id, &lease, &found))
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_key_space_error(self->space));
    shoal_envelope_t *reply = NULL;
    if (found && s_is_copy(self, &lease)) {
        size_t removed = 0;
        if (shoal_txn_lease_end(self->txn, lease.id, &removed))
            reply = shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "cannot end the copy of lease %" PRIu64
                                         ": %s", lease.id, shoal_key_space_error(self->space));
        else
            zsys_info("leases: %" PRIu64 " ended at its home %s: its copy here ended, %zu key(s) and lock(s) went "
                      "with it", lease.id, lease.home, removed);
    }
    if (found)
        shoal_msg_lease_codec.clear(&lease);
    return reply ? reply : shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
}

//  LEASE_LOOKUP: which node is lease ID's home.
static shoal_envelope_t *
s_lookup(shoal_leases_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_lease_request_t *body = (const shoal_msg_lease_request_t *) request->body;
    shoal_msg_lease_t lease;
    bool found = false;
    if (shoal_key_space_lease(self->space, body->id, &lease, &found))
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_key_space_error(self->space));
    char *home = NULL;
    if (found && s_may_use(caller, &lease))
        home = shoal_strdup(s_is_copy(self, &lease) ? lease.home : self->settings->node_id);
    if (found)
        shoal_msg_lease_codec.clear(&lease);
    //  Not kept here: the peers are asked (the request waits, see
    //  shoal_leases_park), first the one its id marks, or a search that
    //  ended a moment ago says.
    char key[32];
    s_fetch_t *fetch = found ? NULL : (s_fetch_t *) zhashx_lookup(self->fetches, s_key_of(body->id, key, sizeof key));
    if (!found && s_search_wanted(self, body->id))
        self->wanted = body->id;
    else
    if (fetch && fetch->resuming && fetch->home
    &&  (!shoal_caller_is_tenant(caller) || streq(caller->tenant, fetch->tenant)))
        home = shoal_strdup(fetch->home);
    const char *endpoint = !home ? NULL : streq(home, self->settings->node_id) ? shoal_mesh_endpoint(self->mesh)
                         : shoal_mesh_peer_endpoint(self->mesh, home);
    shoal_envelope_t *reply = NULL;
    if (!endpoint)
        reply = shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "node %s knows no home of lease %" PRIu64
                                     "%s%s%s", self->settings->node_id, body->id, home ? " (node " : ": no peer "
                                     "alive holds it", home ? home : "", home ? " holds it, not alive here)" : "");
    else {
        reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
        shoal_msg_member_t *member = (shoal_msg_member_t *) shoal_envelope_new_body(reply);
        member->node_id = shoal_strdup(home);
        member->endpoint = shoal_strdup(endpoint);
        member->state = SHOAL_MEMBER_ALIVE;
    }
    free(home);
    return reply;
}

shoal_envelope_t *
shoal_leases_handle(shoal_leases_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    if (request->type == SHOAL_MSG_LEASE_ENDED)
        return s_ended(self, request, caller);
    if (request->type == SHOAL_MSG_LEASE_LOOKUP)
        return s_lookup(self, request, caller);
    const shoal_msg_lease_request_t *body = (const shoal_msg_lease_request_t *) request->body;
    switch (body->op) {
        case SHOAL_LEASE_GRANT: return s_grant(self, request, caller);
        case SHOAL_LEASE_LIST: return s_list(self, request, caller);
        default: return s_one(self, request, caller);
    }
}

//  Ends the copy of lease ID here, saying WHY.
static void
s_copy_end(shoal_leases_t *self, uint64_t id, const char *home, const char *why)
{
    size_t removed = 0;
    if (shoal_txn_lease_end(self->txn, id, &removed) == 0)
        zsys_info("leases: the copy of %" PRIu64 " (home %s) ended: %s; %zu key(s) and lock(s) went with it", id,
                  home, why, removed);
    else
        self->earliest_ms = 0;      //  tried again at the next tick
}

static void
s_home_answered(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    s_ask_t *ask = (s_ask_t *) arg;
    shoal_leases_t *self = ask->self;
    uint64_t id = ask->id;
    free(ask);
    //  A node that stops hears no answer: that says nothing of the lease.
    if (shoal_mesh_stopping(mesh))
        return;
    char key[32];
    zhashx_delete(self->asking, s_key_of(id, key, sizeof key));
    shoal_msg_lease_t lease;
    bool found = false;
    if (shoal_key_space_lease(self->space, id, &lease, &found) || !found)
        return;     //  ended meanwhile (lease_ended), or read again at its time
    const shoal_msg_leases_t *body = reply && reply->status == SHOAL_STATUS_OK
                                   ? (const shoal_msg_leases_t *) reply->body : NULL;
    int64_t now = s_now();
    if (body && body->count && (int64_t) body->leases[0].expires_ms > now) {
        //  Kept alive at its home: the copy ends when the home's does.
        lease.expires_ms = body->leases[0].expires_ms;
        if (shoal_key_space_apply(self->space, NULL, 0, &lease, 0))
            zsys_error("leases: cannot keep the copy of %" PRIu64 ": %s", id, shoal_key_space_error(self->space));
        if (self->earliest_ms == 0 || (int64_t) lease.expires_ms < self->earliest_ms)
            self->earliest_ms = (int64_t) lease.expires_ms;
    }
    else {
        char why[256];
        snprintf(why, sizeof why, "its home %s", !reply ? "did not answer in time"
                 : reply->status == SHOAL_STATUS_NOT_FOUND ? "holds it no more" : "could not say it lives");
        s_copy_end(self, id, node_id, why);
    }
    shoal_msg_lease_codec.clear(&lease);
}

//  Asks the home of LEASE, a copy whose time came, what its time is now.
static void
s_ask_home(shoal_leases_t *self, const shoal_msg_lease_t *lease)
{
    //  A copy with nothing attached here any more (its claim moved on) is
    //  of no use: it ends without asking.
    shoal_leased_t *items = NULL;
    size_t count = 0;
    if (shoal_key_space_leased(self->space, lease->id, &items, &count) == 0 && count == 0) {
        s_copy_end(self, lease->id, lease->home, "nothing here is attached to it any more");
        return;
    }
    shoal_leased_free(&items, count);
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_LEASE, 0);
    shoal_msg_lease_request_t *body = (shoal_msg_lease_request_t *) shoal_envelope_new_body(request);
    body->op = SHOAL_LEASE_TTL;
    body->id = lease->id;
    s_ask_t *ask = (s_ask_t *) zmalloc(sizeof *ask);
    ask->self = self;
    ask->id = lease->id;
    if (shoal_mesh_send(self->mesh, lease->home, &request, LEASES_HOME_TIMEOUT_MS, s_home_answered, ask)) {
        free(ask);
        s_copy_end(self, lease->id, lease->home, "its home is no peer of this node");
        return;
    }
    char key[32];
    zhashx_insert(self->asking, s_key_of(lease->id, key, sizeof key), (void *) 1);
}

void
shoal_leases_set_resume(shoal_leases_t *self, shoal_leases_resume_fn *fn, void *arg)
{
    self->resume = fn;
    self->resume_arg = arg;
}

//  The search for a lease's home ended, with its home or without: the
//  requests that waited for it are answered now, each as if it came now;
//  one that names another lease missing here may wait again, for that one.
static void
s_search_end(s_fetch_t *fetch)
{
    shoal_leases_t *self = fetch->self;
    fetch->asking = false;
    fetch->done_ms = zclock_mono();
    zlistx_t *waiting = fetch->parked;
    fetch->parked = zlistx_new();
    fetch->resuming = true;
    s_parked_t *parked;
    while ((parked = (s_parked_t *) zlistx_detach(waiting, NULL))) {
        shoal_caller_t caller = { parked->role, parked->tenant, parked->name };
        if (self->resume)
            self->resume(&parked->request, &caller, parked->routing_id, self->resume_arg);
        s_parked_destroy(&parked);
    }
    fetch->resuming = false;
    zlistx_destroy(&waiting);
}

static void s_fetched(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg);

//  Asks NODE whether it is the home of FETCH's lease. Returns whether the
//  question went.
static bool
s_search_ask(s_fetch_t *fetch, const char *node)
{
    shoal_envelope_t *question = shoal_envelope_new(SHOAL_MSG_LEASE, 0);
    shoal_msg_lease_request_t *body = (shoal_msg_lease_request_t *) shoal_envelope_new_body(question);
    body->op = SHOAL_LEASE_TTL;
    body->id = fetch->id;
    if (shoal_mesh_send(fetch->self->mesh, node, &question, LEASES_HOME_TIMEOUT_MS, s_fetched, fetch)) {
        shoal_envelope_destroy(&question);
        return false;
    }
    zhashx_insert(fetch->asked, node, (void *) 1);
    fetch->out++;
    return true;
}

//  The next round of a search: the peers alive whose mark the id carries,
//  then every other peer alive; with nobody left to ask, it ends unfound.
static void
s_search_next(s_fetch_t *fetch)
{
    shoal_leases_t *self = fetch->self;
    uint64_t mark = fetch->id >> LEASES_HOME_SHIFT;
    bool marked_round = zhashx_size(fetch->asked) == 0;
    size_t asked = 0;
    zlistx_t *alive = shoal_mesh_alive(self->mesh);
    for (int round = marked_round ? 0 : 1; round < 2 && !asked; round++)
        for (const char *node = (const char *) zlistx_first(alive); node; node = (const char *) zlistx_next(alive))
            if ((round == 1 || s_home_mark(node) == mark) && !zhashx_lookup(fetch->asked, node)
            &&  !streq(node, self->settings->node_id))
                asked += s_search_ask(fetch, node);
    zlistx_destroy(&alive);
    if (!asked)
        s_search_end(fetch);
}

//  A peer answered whether it is the home of a lease sought (REPLY NULL: it
//  did not in time). The home found ends the search, and when a request
//  that waits attaches to the lease, a lease the home keeps alive becomes a
//  copy here, as a moving claim's would. When every peer asked said no,
//  the next round asks the others.
static void
s_fetched(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    s_fetch_t *fetch = (s_fetch_t *) arg;
    //  A stopping node answers nobody: the searches go with the leases.
    if (shoal_mesh_stopping(mesh))
        return;
    shoal_leases_t *self = fetch->self;
    fetch->out--;
    if (!fetch->asking)
        return;     //  an answer to a search that ended already
    const shoal_msg_leases_t *body = reply && reply->status == SHOAL_STATUS_OK
                                   ? (const shoal_msg_leases_t *) reply->body : NULL;
    if (!body || !body->count || body->leases[0].id != fetch->id || (int64_t) body->leases[0].expires_ms <= s_now()) {
        if (fetch->out == 0)
            s_search_next(fetch);
        return;
    }
    fetch->home = shoal_strdup(node_id);
    fetch->tenant = shoal_strdup(body->leases[0].tenant ? body->leases[0].tenant : "");
    shoal_msg_lease_t held;
    bool here = false;
    if (shoal_key_space_lease(self->space, fetch->id, &held, &here) == 0 && here)
        shoal_msg_lease_codec.clear(&held);
    if (fetch->copy && !here) {
        shoal_msg_lease_t copy = body->leases[0];
        copy.home = (char *) node_id;
        copy.remaining_ms = 0;
        copy.attached = 0;
        if (shoal_key_space_apply(self->space, NULL, 0, &copy, 0))
            zsys_error("leases: cannot keep the copy of %" PRIu64 " from its home %s: %s", fetch->id, node_id,
                       shoal_key_space_error(self->space));
        else {
            zsys_info("leases: took a copy of %" PRIu64 " from its home %s for a claim of this node", fetch->id,
                      node_id);
            if (self->earliest_ms == 0 || (int64_t) copy.expires_ms < self->earliest_ms)
                self->earliest_ms = (int64_t) copy.expires_ms;
        }
    }
    s_search_end(fetch);
}

bool
shoal_leases_park(shoal_leases_t *self, const shoal_envelope_t *reply, shoal_envelope_t **request_p,
                  const shoal_caller_t *caller, zframe_t *routing_id)
{
    uint64_t id = self->wanted;
    self->wanted = 0;
    if (!id || !reply || reply->status != SHOAL_STATUS_NOT_FOUND || !self->resume)
        return false;
    char key[32];
    s_fetch_t *fetch = (s_fetch_t *) zhashx_lookup(self->fetches, s_key_of(id, key, sizeof key));
    if (!fetch) {
        fetch = (s_fetch_t *) zmalloc(sizeof *fetch);
        fetch->self = self;
        fetch->id = id;
        fetch->parked = zlistx_new();
        zhashx_insert(self->fetches, key, fetch);
    }
    //  A lookup only seeks the home; a key or a lock attaches to the lease.
    bool copy = (*request_p)->type != SHOAL_MSG_LEASE_LOOKUP;
    if (!fetch->asking) {
        zhashx_destroy(&fetch->asked);
        fetch->asked = zhashx_new();
        zstr_free(&fetch->home);
        zstr_free(&fetch->tenant);
        fetch->copy = copy;
        fetch->asking = true;
        fetch->done_ms = 0;
        s_search_next(fetch);
        if (!fetch->asking)
            return false;   //  no peer to ask: the 404 stands
    }
    fetch->copy = fetch->copy || copy;
    s_parked_t *parked = (s_parked_t *) zmalloc(sizeof *parked);
    parked->routing_id = zframe_dup(routing_id);
    parked->request = *request_p;
    *request_p = NULL;
    parked->role = shoal_strdup(caller->role);
    parked->tenant = shoal_strdup(caller->tenant);
    parked->name = shoal_strdup(caller->name);
    zlistx_add_end(fetch->parked, parked);
    return true;
}

void
shoal_leases_tick(shoal_leases_t *self)
{
    //  Answers to fetches stand a moment, then are forgotten.
    int64_t mono = zclock_mono();
    zlistx_t *stale = zlistx_new();
    for (s_fetch_t *fetch = (s_fetch_t *) zhashx_first(self->fetches); fetch;
         fetch = (s_fetch_t *) zhashx_next(self->fetches))
        if (!fetch->asking && !fetch->out && mono - fetch->done_ms > LEASES_FETCH_REST_MS
        &&  zlistx_size(fetch->parked) == 0)
            zlistx_add_end(stale, (void *) zhashx_cursor(self->fetches));
    for (const char *key = (const char *) zlistx_first(stale); key; key = (const char *) zlistx_next(stale))
        zhashx_delete(self->fetches, key);
    zlistx_destroy(&stale);
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
    char key[32];
    for (size_t i = 0; i < count; i++) {
        int64_t ends = (int64_t) leases[i].expires_ms;
        size_t removed = 0;
        if (ends > now) {
            earliest = ends < earliest ? ends : earliest;
            continue;
        }
        if (s_is_copy(self, &leases[i])) {
            //  A copy is due: its home says whether the lease lives on.
            int64_t again = now + LEASES_ASKING_REST_MS;
            earliest = again < earliest ? again : earliest;
            if (!zhashx_lookup(self->asking, s_key_of(leases[i].id, key, sizeof key)))
                s_ask_home(self, &leases[i]);
            continue;
        }
        if (shoal_txn_lease_end(self->txn, leases[i].id, &removed) == 0) {
            zsys_info("leases: %" PRIu64 " of %s ended %" PRId64 " ms after its time, %zu key(s) went with it",
                      leases[i].id, leases[i].holder, now - ends, removed);
            s_tell_ended(self, leases[i].id);
        }
        else
            earliest = now;     //  tried again at the next tick
    }
    self->earliest_ms = earliest;
    shoal_leases_free(&leases, count);
}
