/*  shoal_mesh: membership, SWIM failure detection and the peer DEALERs.

    DESIGN

    Members are kept in one table, this node apart. A member's record is
    (node id, endpoint, incarnation, state), and two records of one member
    are ordered by incarnation first, then by state: alive < suspect < dead
    < left. Merging gossip keeps the greater record, so a suspicion spreads
    through the mesh until its subject, hearing it, raises its incarnation
    and its "alive" overtakes it. A node's incarnation starts at its start
    time in ms: a node that comes back after a crash is newer than anything
    said about its former self, and rejoins.

    Every request to a peer goes through one path (s_request_send): a
    request id from one counter, a pending record with a deadline and a
    callback, and the reply matched on the DEALER it arrives at. Probes,
    indirect probes, joins, relayed probes and the sync's requests all use
    it, so a timeout is handled once, in the tick, for all of them. DEALERs
    are "immediate": a message for a peer with no connection fails at once
    instead of queueing behind a dead link. The request stays pending and
    each tick offers it again until its deadline: a peer restarted at its
    endpoint is heard from (its join) a moment before our DEALER has
    reconnected to it, and the probe and heads exchange sent in that moment
    must still reach it, not time out into a false suspicion. So a
    request's deadline counts from when a connection took it; one no
    connection took by its deadline is given up then, unless the DEALER is
    new (made for a peer that just joined, rejoined or moved): connecting
    and the CURVE handshake of a new connection may outlast a probe timeout
    on a loaded machine, and a probe that never left says nothing about its
    target. Such a request waits at most a suspect timeout for its
    connection. A DEALER that has been there longer and cannot send has
    lost its peer: its requests time out as before.

    The probe of a period is a small state machine: ping the target; on a
    missed ack, ping-req up to SHOAL_MESH_INDIRECT_PROBES others; the
    target turns suspect only when the last of those has failed too. A
    period starts no probe while the previous one is still undecided.

    A probe is evidence about one incarnation of its target: the one it was
    sent to. If a newer incarnation is heard while it is out (the target
    restarted, and joined again, before the probe's deadline), the probe's
    silence says nothing about the new process, which never received it:
    the probe ends without a verdict, and the next period probes the new
    incarnation. Without this, a restart under load reads as a suspicion of
    the very process that just announced itself alive.

    A ping-req is answered late: the relaying node pings the target and
    answers the requester when the ack (or the timeout) comes, on the
    ROUTER, with the routing id it kept.

    Handlers only update the table and send a few small messages: none of
    them waits, so heartbeats never queue behind bulk work.

    THE LOCK SWEEP OF A RUN (seed 001: a node's locks are swept before it
    is alive again)

    A node's locks on other nodes' claims are held by holders that run on
    it; a run that ended took them along. A run is told by its boot, the
    incarnation it started with (refutations raise the incarnation, not the
    boot). A restart seen as a dead member coming back is swept by the
    locks module inside the rejoin; a restart quicker than the suspect
    timeout is only a newer incarnation, which a refutation also is. So:

     1. Every node tells each live peer its run (lock_sweep: boot and
        incarnation now) when it first sees the peer, and again whenever
        its own incarnation or the peer's changed since the peer last
        acknowledged (the peer restarted and forgot, or this node refuted),
        one request in flight per peer, retried each probe interval.
     2. The peer's locks module rolls back every lock whose holder runs on
        that node and was taken under another boot, then confirms the
        incarnation here (shoal_mesh_confirm), and answers.
     3. Once every peer it counts live acknowledged its run at both
        incarnations as they are now, the node tells each of them so
        (sweep_done: its boot and incarnation), again whenever that holds
        anew (a peer restarted, or it refuted), one request in flight per
        peer, retried each probe interval. Its locks were swept on every
        node that may have held them.
     4. A live member whose incarnation is newer than the last one
        confirmed (step 2), or than the last one it said was swept
        everywhere (step 3), is held back ("sweeping" in peers): no lock is
        taken for its holders and no claim is moved to it. So no node sees
        it alive again before the sweep of its locks has completed on every
        node that held them, not only its own. Gossip about it is merged as
        ever: it is probed, synced and not suspected for sweeping, only not
        used for placing.
*/
#include "shoal_mesh.h"
#include "shoal_names.h"
#include "shoal_resolve.h"
#include "shoal_alloc.h"

#include <inttypes.h>

//  Milliseconds a DEALER keeps unsent messages when it is closed: the
//  goodbye of a clean stop gets this long to leave.
#define S_LEAVE_LINGER_MS 500
//  A relayed probe waits one probe timeout for the target; the requester
//  waits this many, so that the relay's answer can reach it.
#define S_INDIRECT_TIMEOUT_FACTOR 2
//  A join no seed took (none connected yet: a node that just started) is
//  sent again this soon, not a probe interval later: joining is what a new
//  node waits on before anything else.
#define S_JOIN_RETRY_MS 10
//  Room for an error text.
#define S_ERROR_MAX 512
//  Room for a request id as the text key of the pending table.
#define S_REQUEST_KEY_MAX 24

//  One member other than this node.
typedef struct {
    char *node_id;              //  its id
    char *endpoint;             //  where it serves
    uint64_t incarnation;       //  the newest incarnation heard of
    shoal_member_state_t state; //  as merged from everything heard
    zsock_t *dealer;            //  our connection to it
    int64_t dealer_since_ms;    //  monotonic time that DEALER was made
    int64_t last_heard_ms;      //  monotonic time of its last message to us (0: never)
    int64_t suspect_since_ms;   //  monotonic time it turned suspect
    uint64_t lag;               //  entries it lacked at the last head exchange
    uint64_t confirmed;         //  its newest incarnation whose lock sweep ran here (0: none)
    uint64_t boot;              //  the incarnation its run started with, as its sweep said (0: unknown)
    uint64_t told_mine;         //  this node's incarnation it last acknowledged a sweep of
    uint64_t told_theirs;       //  its incarnation when it acknowledged that
    bool telling;               //  a lock_sweep to it is in flight
    int64_t next_tell_ms;       //  monotonic time a failed lock_sweep may go again
    uint64_t released;          //  its newest incarnation it said was swept on all its peers (sweep_done)
    uint64_t done_mine;         //  this node's incarnation it acknowledged a sweep_done of
    uint64_t done_theirs;       //  its incarnation when it acknowledged that
    bool done_telling;          //  a sweep_done to it is in flight
    int64_t next_done_ms;       //  monotonic time a failed sweep_done may go again
} s_peer_t;

//  A request sent and not yet answered.
typedef struct {
    uint64_t request_id;        //  matches the reply
    char *target;               //  the peer's id, or the seed's endpoint for a join
    int64_t deadline_ms;        //  monotonic time it times out
    int64_t timeout_ms;         //  how long after it left it may take
    shoal_mesh_reply_fn *fn;    //  told of the reply or the timeout
    void *arg;                  //  its argument
    zmsg_t *unsent;             //  the request while no connection to the peer took it
    bool taken;                 //  a connection to the peer took it: it left
} s_pending_t;

//  A seed endpoint while this node is joining.
typedef struct {
    char *endpoint;             //  as configured or remembered
    zsock_t *dealer;            //  our connection to it
} s_seed_t;

//  A ping-req this node relays: whom to answer once the target acks.
typedef struct {
    zframe_t *routing_id;       //  the requester on the ROUTER
    shoal_envelope_t *request;  //  the request, for its type and id
} s_relay_t;

//  A subscriber to the events.
typedef struct {
    shoal_mesh_event_fn *fn;    //  told of each event
    void *arg;                  //  its argument
} s_subscriber_t;

struct _shoal_mesh_t {
    const shoal_settings_t *settings;   //  the node's live settings (borrowed)
    char *node_id;              //  this node
    char *endpoint;             //  where this node serves
    uint64_t incarnation;       //  this node's, raised to refute suspicion
    uint64_t boot;              //  the incarnation this run started with: tells runs apart
    zcert_t *cluster;           //  presented by every DEALER
    shoal_members_t *members;   //  remembered peers (borrowed)
    zhashx_t *peers;            //  node id -> s_peer_t
    zhashx_t *forgotten;        //  node id -> incarnation (uint64_t *) at forget
    zhashx_t *pending;          //  request id -> s_pending_t
    zlistx_t *seeds;            //  s_seed_t while joining
    zlistx_t *names;            //  shoal_resolve_t: join names looked up again while joining
    zlistx_t *subscribers;      //  s_subscriber_t
    zloop_t *loop;              //  the node's reactor (borrowed), once started
    zsock_t *router;            //  the node's ROUTER (borrowed), for late replies
    bool joined;                //  a seed let us in, or there was none to ask nor name to look up
    int64_t next_join_ms;       //  when joins are sent again
    int64_t next_probe_ms;      //  when the next probe period starts
    int64_t next_reconnect_ms;  //  when the next dead member is tried again
    size_t reconnect_cursor;    //  which dead member that will be
    size_t probe_cursor;        //  round-robin position among the peers
    char *probe_target;         //  the member being probed, or NULL
    uint64_t probe_incarnation; //  the target's incarnation when the probe was sent
    uint64_t probe_serial;      //  tells the current probe's replies from stale ones
    bool probe_acked;           //  the current target answered
    size_t probe_indirect;      //  ping-reqs of the current probe still out
    bool probe_unsent;          //  the current probe's ping never left: no connection took it
    bool finishing_untaken;     //  in a request's callback: no connection ever took the request
    uint64_t next_request_id;   //  request ids of this node's requests
    char *failure;              //  why this node must stop, or NULL
    bool stopping;              //  no new requests while the mesh is destroyed
};

static void s_peer_destroy(s_peer_t **self_p);
static int s_handle_dealer(zloop_t *loop, zsock_t *dealer, void *arg);

const char *
shoal_mesh_event_name(shoal_mesh_event_t event)
{
    switch (event) {
        case SHOAL_MESH_JOINED: return "joined";
        case SHOAL_MESH_ALIVE: return "alive";
        case SHOAL_MESH_SUSPECT: return "suspect";
        case SHOAL_MESH_DEAD: return "dead";
        case SHOAL_MESH_LEFT: return "left";
        case SHOAL_MESH_REJOINED: return "rejoined";
    }
    return "unknown";
}

// ---------------------------------------------------------------------------
//  Sockets

static zsock_t *
s_dealer_new(shoal_mesh_t *self, const char *endpoint)
{
    zsock_t *dealer = zsock_new(ZMQ_DEALER);
    if (!dealer)
        return NULL;
    zcert_apply(self->cluster, dealer);
    zsock_set_curve_serverkey(dealer, zcert_public_txt(self->cluster));
    zsock_set_linger(dealer, 0);
    zsock_set_immediate(dealer, 1);
    zsock_set_sndtimeo(dealer, 0);
    zsock_set_maxmsgsize(dealer, (int) (self->settings->max_message_mb * 1024 * 1024));
    if (zsock_connect(dealer, "%s", endpoint) != 0) {
        zsys_warning("mesh: cannot connect to %s: %s", endpoint, zmq_strerror(zmq_errno()));
        zsock_destroy(&dealer);
        return NULL;
    }
    if (self->loop) {
        zloop_reader(self->loop, dealer, s_handle_dealer, self);
        zloop_reader_set_tolerant(self->loop, dealer);
    }
    return dealer;
}

static void
s_dealer_destroy(shoal_mesh_t *self, zsock_t **dealer_p)
{
    if (*dealer_p && self->loop)
        zloop_reader_end(self->loop, *dealer_p);
    zsock_destroy(dealer_p);
}

// ---------------------------------------------------------------------------
//  Requests and replies

static const char *
s_request_key(char *key, uint64_t request_id)
{
    snprintf(key, S_REQUEST_KEY_MAX, "%" PRIu64, request_id);
    return key;
}

//  Sends REQUEST (taken) on DEALER to TARGET and records it as pending.
//  *SENT (may be NULL) says whether the socket took it: one not connected
//  yet refuses it at once.
static int
s_request_send(shoal_mesh_t *self, zsock_t *dealer, const char *target, shoal_envelope_t **request_p,
               int64_t timeout_ms, shoal_mesh_reply_fn *fn, void *arg, bool *sent)
{
    if (sent)
        *sent = false;
    shoal_envelope_t *request = *request_p;
    *request_p = NULL;
    request->request_id = self->next_request_id++;
    char error[S_ERROR_MAX];
    zmsg_t *msg = shoal_envelope_encode(request, error, sizeof error);
    if (!msg) {
        zsys_error("mesh: cannot encode %s for %s: %s", shoal_msg_type_name(request->type), target, error);
        shoal_envelope_destroy(&request);
        return -1;
    }
    s_pending_t *pending = (s_pending_t *) zmalloc(sizeof *pending);
    pending->request_id = request->request_id;
    pending->target = shoal_strdup(target);
    pending->deadline_ms = zclock_mono() + timeout_ms;
    pending->timeout_ms = timeout_ms;
    pending->fn = fn;
    pending->arg = arg;
    char key[S_REQUEST_KEY_MAX];
    zhashx_insert(self->pending, s_request_key(key, pending->request_id), pending);
    //  A peer with no connection refuses the message at once: the tick
    //  offers it again until the deadline (see the top of this file).
    if (zmsg_send(&msg, dealer) == 0) {
        pending->taken = true;
        if (sent)
            *sent = true;
    }
    else
    if (zhashx_lookup(self->peers, target))
        pending->unsent = msg;
    else
        zmsg_destroy(&msg);
    shoal_envelope_destroy(&request);
    return 0;
}

static void
s_pending_destroy(s_pending_t **self_p)
{
    if (*self_p) {
        free((*self_p)->target);
        zmsg_destroy(&(*self_p)->unsent);
        free(*self_p);
        *self_p = NULL;
    }
}

//  Calls the pending request's callback with REPLY (NULL: none) and drops it.
static void
s_pending_finish(shoal_mesh_t *self, s_pending_t *pending, const shoal_envelope_t *reply)
{
    char key[S_REQUEST_KEY_MAX];
    zhashx_delete(self->pending, s_request_key(key, pending->request_id));
    self->finishing_untaken = !pending->taken;
    if (pending->fn)
        pending->fn(self, pending->target, reply, pending->arg);
    self->finishing_untaken = false;
    s_pending_destroy(&pending);
}

static s_peer_t *
s_peer_by_dealer(shoal_mesh_t *self, zsock_t *dealer)
{
    for (s_peer_t *peer = (s_peer_t *) zhashx_first(self->peers); peer;
         peer = (s_peer_t *) zhashx_next(self->peers))
        if (peer->dealer == dealer)
            return peer;
    return NULL;
}

//  A reply from a peer or a seed.
static int
s_handle_dealer(zloop_t *loop, zsock_t *dealer, void *arg)
{
    shoal_mesh_t *self = (shoal_mesh_t *) arg;
    zmsg_t *msg = zmsg_recv(dealer);
    if (!msg)
        return 0;
    char error[S_ERROR_MAX];
    shoal_envelope_t *reply = shoal_envelope_decode(msg, error, sizeof error);
    zmsg_destroy(&msg);
    s_peer_t *peer = s_peer_by_dealer(self, dealer);
    if (!reply) {
        zsys_warning("mesh: bad reply from %s: %s", peer ? peer->node_id : "a seed", error);
        return 0;
    }
    if (peer)
        peer->last_heard_ms = zclock_mono();
    char key[S_REQUEST_KEY_MAX];
    s_pending_t *pending = (s_pending_t *) zhashx_lookup(self->pending, s_request_key(key, reply->request_id));
    //  A reply after its timeout was already reported as missing.
    if (pending)
        s_pending_finish(self, pending, reply);
    shoal_envelope_destroy(&reply);
    //  A refused join ends the node: the reactor stops on -1.
    return self->failure ? -1 : 0;
}

// ---------------------------------------------------------------------------
//  The member table

static void
s_emit(shoal_mesh_t *self, shoal_mesh_event_t event, const s_peer_t *peer)
{
    zsys_info("mesh: node %s (%s) %s (incarnation %" PRIu64 ")", peer->node_id, peer->endpoint,
              shoal_mesh_event_name(event), peer->incarnation);
    for (s_subscriber_t *subscriber = (s_subscriber_t *) zlistx_first(self->subscribers); subscriber;
         subscriber = (s_subscriber_t *) zlistx_next(self->subscribers))
        subscriber->fn(event, peer->node_id, peer->endpoint, subscriber->arg);
}

static void
s_peer_destroy(s_peer_t **self_p)
{
    if (*self_p) {
        s_peer_t *self = *self_p;
        free(self->node_id);
        free(self->endpoint);
        zsock_destroy(&self->dealer);
        free(self);
        *self_p = NULL;
    }
}

static void
s_remember(shoal_mesh_t *self, const s_peer_t *peer)
{
    if (shoal_members_track(self->members, peer->node_id, peer->endpoint, peer->incarnation))
        zsys_warning("mesh: cannot record member %s", peer->node_id);
}

static s_peer_t *
s_peer_add(shoal_mesh_t *self, const shoal_msg_member_t *member)
{
    s_peer_t *peer = (s_peer_t *) zmalloc(sizeof *peer);
    peer->node_id = shoal_strdup(member->node_id);
    peer->endpoint = shoal_strdup(member->endpoint);
    peer->incarnation = member->incarnation;
    peer->state = member->state;
    peer->dealer = s_dealer_new(self, peer->endpoint);
    peer->dealer_since_ms = zclock_mono();
    if (peer->state == SHOAL_MEMBER_SUSPECT)
        peer->suspect_since_ms = zclock_mono();
    zhashx_insert(self->peers, peer->node_id, peer);
    zhashx_delete(self->forgotten, peer->node_id);
    s_remember(self, peer);
    return peer;
}

static bool
s_is_live(shoal_member_state_t state)
{
    return state == SHOAL_MEMBER_ALIVE || state == SHOAL_MEMBER_SUSPECT;
}

//  Raises this node's incarnation over what MEMBER says about it, when it
//  says this node is anything but alive.
static void
s_refute(shoal_mesh_t *self, const shoal_msg_member_t *member)
{
    if (member->state == SHOAL_MEMBER_ALIVE || member->incarnation < self->incarnation)
        return;
    self->incarnation = member->incarnation + 1;
    zsys_info("mesh: heard this node (%s) is %s, refuting with incarnation %" PRIu64,
              self->node_id, shoal_member_state_name(member->state), self->incarnation);
}

//  Takes in what gossip (or a member itself) says about MEMBER.
static void
s_merge(shoal_mesh_t *self, const shoal_msg_member_t *member)
{
    if (streq(member->node_id, self->node_id)) {
        s_refute(self, member);
        return;
    }
    s_peer_t *peer = (s_peer_t *) zhashx_lookup(self->peers, member->node_id);
    if (!peer) {
        //  Nothing to learn from the death of a stranger; and a forgotten
        //  member comes back only as a newer self.
        uint64_t *forgotten = (uint64_t *) zhashx_lookup(self->forgotten, member->node_id);
        if (!s_is_live(member->state) || (forgotten && member->incarnation <= *forgotten))
            return;
        peer = s_peer_add(self, member);
        s_emit(self, SHOAL_MESH_JOINED, peer);
        if (peer->state == SHOAL_MEMBER_SUSPECT)
            s_emit(self, SHOAL_MESH_SUSPECT, peer);
        return;
    }
    bool newer = member->incarnation > peer->incarnation;
    bool worse = member->incarnation == peer->incarnation && member->state > peer->state;
    if (!newer && !worse)
        return;
    shoal_member_state_t was = peer->state;
    peer->incarnation = member->incarnation;
    peer->state = member->state;
    //  A new endpoint needs a new connection; so does a member back from
    //  the dead or from leaving: the old connection may wait out its
    //  reconnect interval before it tries the new process, and the probe
    //  that follows a rejoin at once would wait with it.
    bool back = newer && !s_is_live(was) && s_is_live(peer->state);
    bool moved = !streq(peer->endpoint, member->endpoint);
    if (moved || back) {
        if (moved) {
            free(peer->endpoint);
            peer->endpoint = shoal_strdup(member->endpoint);
        }
        s_dealer_destroy(self, &peer->dealer);
        peer->dealer = s_dealer_new(self, peer->endpoint);
        peer->dealer_since_ms = zclock_mono();
    }
    if (newer)
        s_remember(self, peer);
    if (was == peer->state)
        return;
    switch (peer->state) {
        case SHOAL_MEMBER_ALIVE:
            s_emit(self, was == SHOAL_MEMBER_SUSPECT ? SHOAL_MESH_ALIVE : SHOAL_MESH_REJOINED, peer);
            break;
        case SHOAL_MEMBER_SUSPECT:
            peer->suspect_since_ms = zclock_mono();
            s_emit(self, was == SHOAL_MEMBER_ALIVE ? SHOAL_MESH_SUSPECT : SHOAL_MESH_REJOINED, peer);
            break;
        case SHOAL_MEMBER_DEAD:
            s_emit(self, SHOAL_MESH_DEAD, peer);
            break;
        case SHOAL_MEMBER_LEFT:
            s_emit(self, SHOAL_MESH_LEFT, peer);
            break;
    }
}

static void
s_merge_all(shoal_mesh_t *self, const shoal_msg_member_t *members, size_t count)
{
    for (size_t i = 0; i < count; i++)
        s_merge(self, &members[i]);
}

//  Marks PEER suspect (or dead) on this node's own evidence.
static void
s_declare(shoal_mesh_t *self, s_peer_t *peer, shoal_member_state_t state)
{
    shoal_msg_member_t member = {
        peer->node_id, peer->endpoint, peer->incarnation, state
    };
    s_merge(self, &member);
}

static void
s_member_fill(shoal_msg_member_t *member, const char *node_id, const char *endpoint,
              uint64_t incarnation, shoal_member_state_t state)
{
    member->node_id = shoal_strdup(node_id);
    member->endpoint = shoal_strdup(endpoint);
    member->incarnation = incarnation;
    member->state = state;
}

//  Every member this node knows, itself first: the gossip every probe and
//  every ack carries.
static void
s_gossip(shoal_mesh_t *self, shoal_msg_member_t **members_p, size_t *count_p)
{
    size_t count = zhashx_size(self->peers) + 1;
    shoal_msg_member_t *members = (shoal_msg_member_t *) zmalloc(count * sizeof *members);
    s_member_fill(&members[0], self->node_id, self->endpoint, self->incarnation, SHOAL_MEMBER_ALIVE);
    size_t index = 1;
    for (s_peer_t *peer = (s_peer_t *) zhashx_first(self->peers); peer;
         peer = (s_peer_t *) zhashx_next(self->peers))
        s_member_fill(&members[index++], peer->node_id, peer->endpoint, peer->incarnation, peer->state);
    *members_p = members;
    *count_p = count;
}

static shoal_envelope_t *
s_members_reply(shoal_mesh_t *self, const shoal_envelope_t *request)
{
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    shoal_msg_members_t *body = (shoal_msg_members_t *) shoal_envelope_new_body(reply);
    s_gossip(self, &body->members, &body->count);
    return reply;
}

static shoal_envelope_t *
s_ping_new(shoal_mesh_t *self, shoal_msg_type_t type, const char *target)
{
    shoal_envelope_t *request = shoal_envelope_new(type, 0);
    shoal_msg_ping_t *body = (shoal_msg_ping_t *) shoal_envelope_new_body(request);
    body->from = shoal_strdup(self->node_id);
    body->target = shoal_strdup(target);
    s_gossip(self, &body->members, &body->count);
    return request;
}

// ---------------------------------------------------------------------------
//  Joining

static void
s_seed_destroy(s_seed_t **self_p)
{
    if (*self_p) {
        zsock_destroy(&(*self_p)->dealer);
        free((*self_p)->endpoint);
        free(*self_p);
        *self_p = NULL;
    }
}

static void
s_seeds_clear(shoal_mesh_t *self)
{
    s_seed_t *seed;
    while ((seed = (s_seed_t *) zlistx_detach(self->seeds, NULL))) {
        s_dealer_destroy(self, &seed->dealer);
        s_seed_destroy(&seed);
    }
}

static void
s_seed_add(shoal_mesh_t *self, const char *endpoint)
{
    if (!*endpoint || streq(endpoint, self->endpoint))
        return;
    for (s_seed_t *seed = (s_seed_t *) zlistx_first(self->seeds); seed;
         seed = (s_seed_t *) zlistx_next(self->seeds))
        if (streq(seed->endpoint, endpoint))
            return;
    s_seed_t *seed = (s_seed_t *) zmalloc(sizeof *seed);
    seed->endpoint = shoal_strdup(endpoint);
    seed->dealer = s_dealer_new(self, endpoint);
    if (!seed->dealer) {
        s_seed_destroy(&seed);
        return;
    }
    zlistx_add_end(self->seeds, seed);
}

static void
s_join_done(shoal_mesh_t *self, const char *endpoint, const shoal_envelope_t *reply, void *arg)
{
    if (!reply || self->joined)
        return;
    if (reply->status == SHOAL_STATUS_CONFLICT) {
        //  Another live node has our id: serving under it would split every
        //  fact it owns in two. Stop, and say why.
        self->failure = zsys_sprintf("refused by %s: %s", endpoint,
                                     reply->message ? reply->message : "node id taken");
        zsys_error("mesh: %s", self->failure);
        return;
    }
    if (reply->status != SHOAL_STATUS_OK) {
        zsys_warning("mesh: join through %s answered %u %s", endpoint, reply->status,
                     reply->message ? reply->message : "");
        return;
    }
    const shoal_msg_members_t *body = (const shoal_msg_members_t *) reply->body;
    self->joined = true;
    zsys_info("mesh: %s joined the mesh through %s (%zu member(s) known)", self->node_id, endpoint,
              body->count);
    s_merge_all(self, body->members, body->count);
    //  Seeds are reached as peers from now on: their DEALERs go at once.
    //  This runs from one of their readers, which touches its socket no
    //  more after this callback, and zloop rebuilds its poll set before it
    //  calls another reader.
    s_seeds_clear(self);
}

//  Adds the addresses of every join name whose lookup has ended as seeds.
static void
s_names_take(shoal_mesh_t *self)
{
    for (shoal_resolve_t *name = (shoal_resolve_t *) zlistx_first(self->names); name;
         name = (shoal_resolve_t *) zlistx_next(self->names)) {
        zlistx_t *endpoints = shoal_resolve_poll(name);
        if (!endpoints)
            continue;
        for (const char *endpoint = (const char *) zlistx_first(endpoints); endpoint;
             endpoint = (const char *) zlistx_next(endpoints))
            s_seed_add(self, endpoint);
        zlistx_destroy(&endpoints);
    }
}

//  Sends a join to every seed. Returns whether one went out: a seed not
//  connected yet refuses it, and is asked again soon rather than a probe
//  interval later.
static bool
s_join_send(shoal_mesh_t *self)
{
    bool sent = false;
    for (s_seed_t *seed = (s_seed_t *) zlistx_first(self->seeds); seed;
         seed = (s_seed_t *) zlistx_next(self->seeds)) {
        shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_MESH_JOIN, 0);
        shoal_msg_member_t *body = (shoal_msg_member_t *) shoal_envelope_new_body(request);
        s_member_fill(body, self->node_id, self->endpoint, self->incarnation, SHOAL_MEMBER_ALIVE);
        bool taken;
        s_request_send(self, seed->dealer, seed->endpoint, &request, self->settings->probe_timeout_ms,
                       s_join_done, NULL, &taken);
        sent = sent || taken;
    }
    return sent;
}

// ---------------------------------------------------------------------------
//  Probing

static void
s_probe_end(shoal_mesh_t *self)
{
    zstr_free(&self->probe_target);
    self->probe_indirect = 0;
    self->probe_acked = false;
    self->probe_unsent = false;
}

//  The probe failed every way it could: its target turns suspect, unless
//  a newer incarnation of it was heard meanwhile (see the top of this file).
//  The log says which evidence the suspicion rests on: a ping that left on
//  a connection and was not answered in time (a target down, or too busy
//  to answer), or one that never left, no connection to the target having
//  taken it (a connection that could not be made).
static void
s_probe_failed(shoal_mesh_t *self)
{
    s_peer_t *peer = (s_peer_t *) zhashx_lookup(self->peers, self->probe_target);
    if (peer && peer->state == SHOAL_MEMBER_ALIVE && peer->incarnation == self->probe_incarnation) {
        zsys_info("mesh: probe of %s at incarnation %" PRIu64 " failed: %s", peer->node_id,
                  self->probe_incarnation, self->probe_unsent ? "its ping never left, no connection took it"
                                                              : "its ping left and was not answered in time");
        s_declare(self, peer, SHOAL_MEMBER_SUSPECT);
    }
    else
    if (peer && peer->incarnation != self->probe_incarnation)
        zsys_info("mesh: probe of %s at incarnation %" PRIu64 " unanswered, but incarnation %" PRIu64
                  " was heard since: no suspicion", peer->node_id, self->probe_incarnation, peer->incarnation);
    s_probe_end(self);
}

static bool
s_probe_current(shoal_mesh_t *self, void *arg)
{
    return self->probe_target && (uint64_t) (uintptr_t) arg == self->probe_serial;
}

static void
s_indirect_done(shoal_mesh_t *self, const char *via, const shoal_envelope_t *reply, void *arg)
{
    if (!s_probe_current(self, arg) || self->stopping)
        return;
    if (reply && reply->status == SHOAL_STATUS_OK) {
        const shoal_msg_members_t *body = (const shoal_msg_members_t *) reply->body;
        s_merge_all(self, body->members, body->count);
        self->probe_acked = true;
    }
    if (--self->probe_indirect == 0) {
        if (self->probe_acked)
            s_probe_end(self);
        else
            s_probe_failed(self);
    }
}

static void
s_probe_done(shoal_mesh_t *self, const char *target, const shoal_envelope_t *reply, void *arg)
{
    if (!s_probe_current(self, arg) || self->stopping)
        return;
    if (reply && reply->status == SHOAL_STATUS_OK) {
        const shoal_msg_members_t *body = (const shoal_msg_members_t *) reply->body;
        s_merge_all(self, body->members, body->count);
        s_probe_end(self);
        return;
    }
    self->probe_unsent = !reply && self->finishing_untaken;
    //  No ack: ask up to SHOAL_MESH_INDIRECT_PROBES other live peers to try.
    size_t asked = 0;
    for (s_peer_t *peer = (s_peer_t *) zhashx_first(self->peers);
         peer && asked < SHOAL_MESH_INDIRECT_PROBES; peer = (s_peer_t *) zhashx_next(self->peers)) {
        if (peer->state != SHOAL_MEMBER_ALIVE || streq(peer->node_id, target) || !peer->dealer)
            continue;
        shoal_envelope_t *request = s_ping_new(self, SHOAL_MSG_MESH_PING_REQ, target);
        if (s_request_send(self, peer->dealer, peer->node_id, &request,
                           self->settings->probe_timeout_ms * S_INDIRECT_TIMEOUT_FACTOR,
                           s_indirect_done, arg, NULL) == 0)
            asked++;
    }
    self->probe_indirect = asked;
    if (asked == 0)
        s_probe_failed(self);
}

//  Starts the probe of the next live peer, round robin.
static void
s_probe_start(shoal_mesh_t *self)
{
    size_t count = zhashx_size(self->peers);
    if (count == 0)
        return;
    zlistx_t *ids = zhashx_keys(self->peers);
    zlistx_sort(ids);
    s_peer_t *target = NULL;
    for (size_t tried = 0; tried < count && !target; tried++) {
        size_t index = self->probe_cursor++ % count;
        const char *id = (const char *) zlistx_first(ids);
        for (size_t i = 0; i < index; i++)
            id = (const char *) zlistx_next(ids);
        s_peer_t *peer = (s_peer_t *) zhashx_lookup(self->peers, id);
        if (peer && s_is_live(peer->state) && peer->dealer)
            target = peer;
    }
    zlistx_destroy(&ids);
    if (!target)
        return;
    self->probe_target = shoal_strdup(target->node_id);
    self->probe_incarnation = target->incarnation;
    self->probe_serial++;
    self->probe_acked = false;
    shoal_envelope_t *request = s_ping_new(self, SHOAL_MSG_MESH_PING, target->node_id);
    s_request_send(self, target->dealer, target->node_id, &request, self->settings->probe_timeout_ms,
                   s_probe_done, (void *) (uintptr_t) self->probe_serial, NULL);
}

//  A member declared dead is not probed, yet a partition that heals must
//  bring it back: every suspect timeout one dead member (round robin) gets a
//  ping. The ping's gossip tells it that it was declared dead; it refutes
//  with a higher incarnation, and its ack carries that refutation, which the
//  merge takes as a rejoin. A member that left, or was forgotten, is not
//  tried.
static void s_heard(shoal_mesh_t *self, const char *node_id);

static void
s_reconnect_done(shoal_mesh_t *self, const char *target, const shoal_envelope_t *reply, void *arg)
{
    if (self->stopping || !reply || reply->status != SHOAL_STATUS_OK)
        return;
    const shoal_msg_members_t *body = (const shoal_msg_members_t *) reply->body;
    s_merge_all(self, body->members, body->count);
    s_heard(self, target);
}

static void
s_reconnect_start(shoal_mesh_t *self)
{
    zlistx_t *dead = zlistx_new();
    for (s_peer_t *peer = (s_peer_t *) zhashx_first(self->peers); peer;
         peer = (s_peer_t *) zhashx_next(self->peers))
        if (peer->state == SHOAL_MEMBER_DEAD && peer->dealer)
            zlistx_add_end(dead, peer->node_id);
    size_t count = zlistx_size(dead);
    if (count) {
        zlistx_sort(dead);
        const char *id = (const char *) zlistx_first(dead);
        for (size_t i = 0; i < self->reconnect_cursor++ % count; i++)
            id = (const char *) zlistx_next(dead);
        s_peer_t *peer = (s_peer_t *) zhashx_lookup(self->peers, id);
        shoal_envelope_t *request = s_ping_new(self, SHOAL_MSG_MESH_PING, peer->node_id);
        s_request_send(self, peer->dealer, peer->node_id, &request, self->settings->probe_timeout_ms,
                       s_reconnect_done, NULL, NULL);
    }
    zlistx_destroy(&dead);
}

// ---------------------------------------------------------------------------
//  Requests from peers

static void
s_heard(shoal_mesh_t *self, const char *node_id)
{
    s_peer_t *peer = (s_peer_t *) zhashx_lookup(self->peers, node_id);
    if (peer)
        peer->last_heard_ms = zclock_mono();
}

static shoal_envelope_t *
s_handle_join(shoal_mesh_t *self, const shoal_envelope_t *request)
{
    const shoal_msg_member_t *member = (const shoal_msg_member_t *) request->body;
    const s_peer_t *peer = (const s_peer_t *) zhashx_lookup(self->peers, member->node_id);
    const char *holder = streq(member->node_id, self->node_id) ? self->endpoint
                       : peer && s_is_live(peer->state) && !streq(peer->endpoint, member->endpoint)
                       ? peer->endpoint : NULL;
    if (holder) {
        zsys_error("mesh: refused node %s joining from %s: node id %s is already alive at %s",
                   member->node_id, member->endpoint, member->node_id, holder);
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT,
                                    "node id %s is already alive at %s", member->node_id, holder);
    }
    shoal_msg_member_t alive = *member;
    alive.state = SHOAL_MEMBER_ALIVE;
    s_merge(self, &alive);
    s_heard(self, member->node_id);
    return s_members_reply(self, request);
}

static shoal_envelope_t *
s_handle_ping(shoal_mesh_t *self, const shoal_envelope_t *request)
{
    const shoal_msg_ping_t *body = (const shoal_msg_ping_t *) request->body;
    if (!streq(body->target, self->node_id))
        return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "this is node %s, not %s",
                                    self->node_id, body->target);
    s_merge_all(self, body->members, body->count);
    s_heard(self, body->from);
    return s_members_reply(self, request);
}

static void
s_relay_destroy(s_relay_t **self_p)
{
    if (*self_p) {
        zframe_destroy(&(*self_p)->routing_id);
        shoal_envelope_destroy(&(*self_p)->request);
        free(*self_p);
        *self_p = NULL;
    }
}

//  Answers the requester of a relayed probe with what the target did.
static void
s_relay_done(shoal_mesh_t *self, const char *target, const shoal_envelope_t *ack, void *arg)
{
    s_relay_t *relay = (s_relay_t *) arg;
    shoal_envelope_t *reply;
    if (ack && ack->status == SHOAL_STATUS_OK) {
        const shoal_msg_members_t *body = (const shoal_msg_members_t *) ack->body;
        s_merge_all(self, body->members, body->count);
        reply = s_members_reply(self, relay->request);
    }
    else
        reply = shoal_envelope_reply(relay->request, SHOAL_STATUS_UNAVAILABLE,
                                     "%s did not answer within %" PRId64 " ms", target,
                                     self->settings->probe_timeout_ms);
    char error[S_ERROR_MAX];
    zmsg_t *msg = self->router ? shoal_envelope_encode(reply, error, sizeof error) : NULL;
    if (msg) {
        zmsg_prepend(msg, &relay->routing_id);
        zmsg_send(&msg, self->router);
    }
    shoal_envelope_destroy(&reply);
    s_relay_destroy(&relay);
}

static shoal_envelope_t *
s_handle_ping_req(shoal_mesh_t *self, const shoal_envelope_t *request, zframe_t *routing_id)
{
    const shoal_msg_ping_t *body = (const shoal_msg_ping_t *) request->body;
    s_merge_all(self, body->members, body->count);
    s_heard(self, body->from);
    s_peer_t *peer = (s_peer_t *) zhashx_lookup(self->peers, body->target);
    if (!peer || !peer->dealer)
        return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "node %s is not known here",
                                    body->target);
    s_relay_t *relay = (s_relay_t *) zmalloc(sizeof *relay);
    relay->routing_id = zframe_dup(routing_id);
    relay->request = shoal_envelope_new(request->type, request->request_id);
    shoal_envelope_t *ping = s_ping_new(self, SHOAL_MSG_MESH_PING, body->target);
    s_request_send(self, peer->dealer, peer->node_id, &ping, self->settings->probe_timeout_ms,
                   s_relay_done, relay, NULL);
    return NULL;
}

static shoal_envelope_t *
s_handle_leave(shoal_mesh_t *self, const shoal_envelope_t *request)
{
    shoal_msg_member_t member = *(const shoal_msg_member_t *) request->body;
    member.state = SHOAL_MEMBER_LEFT;
    s_merge(self, &member);
    return shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
}

static shoal_envelope_t *
s_handle_peers(shoal_mesh_t *self, const shoal_envelope_t *request)
{
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    shoal_msg_peers_t *body = (shoal_msg_peers_t *) shoal_envelope_new_body(reply);
    body->peers = (shoal_msg_peer_t *) zmalloc((zhashx_size(self->peers) + 1) * sizeof *body->peers);
    shoal_msg_peer_t *mine = &body->peers[body->count++];
    mine->node_id = shoal_strdup(self->node_id);
    mine->endpoint = shoal_strdup(self->endpoint);
    mine->state = SHOAL_MEMBER_ALIVE;
    mine->incarnation = self->incarnation;
    mine->self = true;
    int64_t now = zclock_mono();
    for (s_peer_t *peer = (s_peer_t *) zhashx_first(self->peers); peer;
         peer = (s_peer_t *) zhashx_next(self->peers)) {
        shoal_msg_peer_t *item = &body->peers[body->count++];
        item->node_id = shoal_strdup(peer->node_id);
        item->endpoint = shoal_strdup(peer->endpoint);
        item->state = peer->state;
        item->incarnation = peer->incarnation;
        //  "Never" is 0; a message heard this very millisecond still reads 1.
        item->last_heard_ms = peer->last_heard_ms ? (uint64_t) (now - peer->last_heard_ms) + 1 : 0;
        item->lag = peer->lag;
    }
    return reply;
}

//  A live member with an incarnation newer than its last sweep confirmed
//  here, or than the last it said was swept on all its peers (see THE LOCK
//  SWEEP OF A RUN).
static bool
s_held(const s_peer_t *peer)
{
    return s_is_live(peer->state) && (peer->confirmed < peer->incarnation || peer->released < peer->incarnation);
}

static shoal_envelope_t *
s_handle_sweeping(shoal_mesh_t *self, const shoal_envelope_t *request)
{
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    shoal_msg_members_t *body = (shoal_msg_members_t *) shoal_envelope_new_body(reply);
    body->members = (shoal_msg_member_t *) zmalloc((zhashx_size(self->peers) + 1) * sizeof *body->members);
    for (s_peer_t *peer = (s_peer_t *) zhashx_first(self->peers); peer;
         peer = (s_peer_t *) zhashx_next(self->peers))
        if (s_held(peer))
            s_member_fill(&body->members[body->count++], peer->node_id, peer->endpoint, peer->incarnation,
                          peer->state);
    return reply;
}

static shoal_envelope_t *
s_handle_forget(shoal_mesh_t *self, const shoal_envelope_t *request)
{
    const shoal_msg_node_ref_t *body = (const shoal_msg_node_ref_t *) request->body;
    s_peer_t *peer = (s_peer_t *) zhashx_lookup(self->peers, body->node_id);
    if (!peer)
        return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "node %s is not a known peer",
                                    body->node_id);
    if (shoal_members_forget(self->members, peer->node_id, peer->endpoint, peer->incarnation))
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "cannot record that %s is forgotten",
                                    body->node_id);
    zsys_info("mesh: node %s (%s) forgotten: no longer tracked", peer->node_id, peer->endpoint);
    uint64_t *incarnation = (uint64_t *) zmalloc(sizeof *incarnation);
    *incarnation = peer->incarnation;
    zhashx_update(self->forgotten, peer->node_id, incarnation);
    if (self->probe_target && streq(self->probe_target, peer->node_id))
        s_probe_end(self);
    s_dealer_destroy(self, &peer->dealer);
    zhashx_delete(self->peers, body->node_id);
    return shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
}

//  SWEEP_DONE: a peer's run was swept on every node it counts live (step 3
//  of THE LOCK SWEEP OF A RUN): it is held back no longer for it.
static shoal_envelope_t *
s_handle_sweep_done(shoal_mesh_t *self, const shoal_envelope_t *request)
{
    const shoal_msg_lock_request_t *body = (const shoal_msg_lock_request_t *) request->body;
    if (body->op != SHOAL_LOCK_SWEEP)
        return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "sweep_done carries op sweep, not %s",
                                    shoal_lock_op_name(body->op));
    s_peer_t *peer = (s_peer_t *) zhashx_lookup(self->peers, body->holder_node);
    if (!peer) {
        shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_UNAVAILABLE, "node %s is not a "
                                                       "member here yet: tell again", body->holder_node);
        reply->retry_after_ms = (uint32_t) self->settings->probe_interval_ms;
        return reply;
    }
    bool was_held = s_held(peer);
    if (body->holder_incarnation > peer->released)
        peer->released = body->holder_incarnation;
    if (was_held && !s_held(peer))
        zsys_info("mesh: node %s (%s) swept on all its peers: alive again (incarnation %" PRIu64 ")",
                  peer->node_id, peer->endpoint, peer->incarnation);
    return shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
}

bool
shoal_mesh_handles(shoal_msg_type_t type)
{
    return (type >= SHOAL_MSG_MESH_JOIN && type <= SHOAL_MSG_MESH_LEAVE) || type == SHOAL_MSG_SWEEP_DONE
        || type == SHOAL_MSG_PEERS || type == SHOAL_MSG_PEERS_FORGET || type == SHOAL_MSG_PEERS_SWEEPING;
}

shoal_envelope_t *
shoal_mesh_handle(shoal_mesh_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller,
                  zframe_t *routing_id)
{
    switch (request->type) {
        case SHOAL_MSG_PEERS:
            if (shoal_caller_is_tenant(caller))
                return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN, "%s",
                                            "the mesh is shown to admins only");
            return s_handle_peers(self, request);
        case SHOAL_MSG_PEERS_FORGET:
            if (!streq(caller->role, SHOAL_ROLE_ADMIN))
                return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN, "%s",
                                            "forgetting a peer is for admins");
            return s_handle_forget(self, request);
        case SHOAL_MSG_PEERS_SWEEPING:
            if (shoal_caller_is_tenant(caller))
                return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN, "%s",
                                            "the mesh is shown to admins only");
            return s_handle_sweeping(self, request);
        default:
            break;
    }
    if (!streq(caller->role, SHOAL_ROLE_NODE))
        return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN, "%s is for mesh nodes only",
                                    shoal_msg_type_name(request->type));
    switch (request->type) {
        case SHOAL_MSG_MESH_JOIN:
            return s_handle_join(self, request);
        case SHOAL_MSG_MESH_PING:
            return s_handle_ping(self, request);
        case SHOAL_MSG_MESH_PING_REQ:
            return s_handle_ping_req(self, request, routing_id);
        case SHOAL_MSG_MESH_LEAVE:
            return s_handle_leave(self, request);
        case SHOAL_MSG_SWEEP_DONE:
            return s_handle_sweep_done(self, request);
        default:
            return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "%s is not a mesh request",
                                        shoal_msg_type_name(request->type));
    }
}

// ---------------------------------------------------------------------------
//  Life cycle

static void
s_subscriber_destroy(s_subscriber_t **self_p)
{
    free(*self_p);
    *self_p = NULL;
}

shoal_mesh_t *
shoal_mesh_new(const shoal_settings_t *settings, const char *endpoint, zcert_t *cluster,
               shoal_members_t *members)
{
    shoal_mesh_t *self = (shoal_mesh_t *) zmalloc(sizeof *self);
    self->settings = settings;
    self->node_id = shoal_strdup(settings->node_id);
    self->endpoint = shoal_strdup(endpoint);
    //  The start time: newer than any incarnation of an earlier run.
    self->incarnation = (uint64_t) zclock_time();
    self->boot = self->incarnation;
    self->cluster = zcert_dup(cluster);
    self->members = members;
    self->peers = zhashx_new();
    zhashx_set_destructor(self->peers, (zhashx_destructor_fn *) s_peer_destroy);
    self->forgotten = zhashx_new();
    zhashx_set_destructor(self->forgotten, shoal_free_item);
    self->pending = zhashx_new();
    self->seeds = zlistx_new();
    self->names = zlistx_new();
    zlistx_set_destructor(self->names, (zlistx_destructor_fn *) shoal_resolve_destroy);
    self->subscribers = zlistx_new();
    zlistx_set_destructor(self->subscribers, (zlistx_destructor_fn *) s_subscriber_destroy);
    self->next_request_id = 1;
    return self;
}

void
shoal_mesh_destroy(shoal_mesh_t **self_p)
{
    if (*self_p) {
        shoal_mesh_t *self = *self_p;
        self->stopping = true;
        //  Callers learn that their requests will never be answered.
        s_pending_t *pending;
        while ((pending = (s_pending_t *) zhashx_first(self->pending)))
            s_pending_finish(self, pending, NULL);
        zhashx_destroy(&self->pending);
        s_seeds_clear(self);
        zlistx_destroy(&self->seeds);
        zlistx_destroy(&self->names);
        for (s_peer_t *peer = (s_peer_t *) zhashx_first(self->peers); peer;
             peer = (s_peer_t *) zhashx_next(self->peers))
            s_dealer_destroy(self, &peer->dealer);
        zhashx_destroy(&self->peers);
        zhashx_destroy(&self->forgotten);
        zlistx_destroy(&self->subscribers);
        zcert_destroy(&self->cluster);
        free(self->node_id);
        free(self->endpoint);
        free(self->probe_target);
        free(self->failure);
        free(self);
        *self_p = NULL;
    }
}

int
shoal_mesh_start(shoal_mesh_t *self, zloop_t *loop, zsock_t *router)
{
    self->loop = loop;
    self->router = router;
    //  Seeds: the configured ones, then every member remembered from an
    //  earlier run, so that a restarted seed finds its mesh again.
    char *join = shoal_strdup(self->settings->join ? self->settings->join : "");
    char *rest = join;
    for (char *item = strsep(&rest, ","); item; item = strsep(&rest, ",")) {
        //  A name stands for every address it resolves to: those are the
        //  seeds, found by a lookup that the tick takes the result of.
        shoal_resolve_t *name = shoal_resolve_new(item);
        if (name) {
            shoal_resolve_start(name);
            zlistx_add_end(self->names, name);
        }
        else
            s_seed_add(self, item);
    }
    free(join);
    shoal_member_list_t remembered = { 0 };
    if (shoal_members_list(self->members, &remembered) == 0)
        for (size_t i = 0; i < remembered.count; i++) {
            shoal_member_record_t *record = &remembered.items[i];
            if (record->forgotten) {
                uint64_t *incarnation = (uint64_t *) zmalloc(sizeof *incarnation);
                *incarnation = record->incarnation;
                zhashx_update(self->forgotten, record->node, incarnation);
            }
            else
            if (!streq(record->node, self->node_id))
                s_seed_add(self, record->endpoint);
        }
    shoal_member_list_clear(&remembered);
    self->joined = zlistx_size(self->seeds) == 0 && zlistx_size(self->names) == 0;
    bool sent = !self->joined && s_join_send(self);
    int64_t now = zclock_mono();
    self->next_join_ms = now + (sent ? self->settings->probe_interval_ms : S_JOIN_RETRY_MS);
    self->next_probe_ms = now + self->settings->probe_interval_ms;
    return 0;
}

void
shoal_mesh_leave(shoal_mesh_t *self)
{
    size_t told = 0;
    for (s_peer_t *peer = (s_peer_t *) zhashx_first(self->peers); peer;
         peer = (s_peer_t *) zhashx_next(self->peers)) {
        if (!s_is_live(peer->state) || !peer->dealer)
            continue;
        zsock_set_linger(peer->dealer, S_LEAVE_LINGER_MS);
        shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_MESH_LEAVE, 0);
        shoal_msg_member_t *body = (shoal_msg_member_t *) shoal_envelope_new_body(request);
        s_member_fill(body, self->node_id, self->endpoint, self->incarnation, SHOAL_MEMBER_LEFT);
        if (s_request_send(self, peer->dealer, peer->node_id, &request, 0, NULL, NULL, NULL) == 0)
            told++;
    }
    if (told)
        zsys_info("mesh: %s leaving, told %zu peer(s)", self->node_id, told);
}

//  What a lock_sweep to a peer was sent with.
typedef struct {
    uint64_t mine;              //  this node's incarnation
    uint64_t theirs;            //  the peer's
} s_telling_t;

static void
s_told(shoal_mesh_t *self, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    s_telling_t *telling = (s_telling_t *) arg;
    s_peer_t *peer = self->stopping ? NULL : (s_peer_t *) zhashx_lookup(self->peers, node_id);
    if (peer) {
        peer->telling = false;
        if (reply && reply->status == SHOAL_STATUS_OK) {
            peer->told_mine = telling->mine;
            peer->told_theirs = telling->theirs;
        }
        else {
            peer->next_tell_ms = zclock_mono() + self->settings->probe_interval_ms;
            if (reply)
                zsys_warning("mesh: %s answered the sweep of this run with %u %s", node_id, reply->status,
                             reply->message ? reply->message : "");
        }
    }
    free(telling);
}

//  A request of TYPE about this node's run (its boot and incarnation): the
//  sweep of its locks, or that every peer swept them.
static shoal_envelope_t *
s_run_request(shoal_mesh_t *self, shoal_msg_type_t type)
{
    shoal_envelope_t *request = shoal_envelope_new(type, 0);
    shoal_msg_lock_request_t *body = (shoal_msg_lock_request_t *) shoal_envelope_new_body(request);
    body->op = SHOAL_LOCK_SWEEP;
    body->claim_id = shoal_strdup("");
    body->holder = shoal_strdup("");
    body->holder_node = shoal_strdup(self->node_id);
    body->holder_boot = self->boot;
    body->holder_incarnation = self->incarnation;
    return request;
}

//  Step 1 of THE LOCK SWEEP OF A RUN: each live peer that has not
//  acknowledged this run at both incarnations as they are now is told.
static void
s_tell_runs(shoal_mesh_t *self, int64_t now)
{
    for (s_peer_t *peer = (s_peer_t *) zhashx_first(self->peers); peer;
         peer = (s_peer_t *) zhashx_next(self->peers)) {
        if (!s_is_live(peer->state) || !peer->dealer || peer->telling || now < peer->next_tell_ms
        ||  (peer->told_mine == self->incarnation && peer->told_theirs == peer->incarnation))
            continue;
        shoal_envelope_t *request = s_run_request(self, SHOAL_MSG_LOCK_SWEEP);
        s_telling_t *telling = (s_telling_t *) zmalloc(sizeof *telling);
        telling->mine = self->incarnation;
        telling->theirs = peer->incarnation;
        peer->telling = s_request_send(self, peer->dealer, peer->node_id, &request,
                                       self->settings->suspect_timeout_ms, s_told, telling, NULL) == 0;
        if (!peer->telling)
            free(telling);
    }
}

//  What a sweep_done to a peer was sent with.
typedef s_telling_t s_done_t;

static void
s_done_told(shoal_mesh_t *self, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    s_done_t *done = (s_done_t *) arg;
    s_peer_t *peer = self->stopping ? NULL : (s_peer_t *) zhashx_lookup(self->peers, node_id);
    if (peer) {
        peer->done_telling = false;
        if (reply && reply->status == SHOAL_STATUS_OK) {
            peer->done_mine = done->mine;
            peer->done_theirs = done->theirs;
        }
        else {
            peer->next_done_ms = zclock_mono() + self->settings->probe_interval_ms;
            if (reply)
                zsys_warning("mesh: %s answered that this run was swept everywhere with %u %s", node_id,
                             reply->status, reply->message ? reply->message : "");
        }
    }
    free(done);
}

//  Step 3 of THE LOCK SWEEP OF A RUN: once every live peer acknowledged
//  this run as things are now, each that was not told so is told.
static void
s_tell_done(shoal_mesh_t *self, int64_t now)
{
    for (s_peer_t *peer = (s_peer_t *) zhashx_first(self->peers); peer;
         peer = (s_peer_t *) zhashx_next(self->peers))
        if (s_is_live(peer->state)
        &&  (peer->told_mine != self->incarnation || peer->told_theirs != peer->incarnation))
            return;     //  a live peer has not swept this run yet
    for (s_peer_t *peer = (s_peer_t *) zhashx_first(self->peers); peer;
         peer = (s_peer_t *) zhashx_next(self->peers)) {
        if (!s_is_live(peer->state) || !peer->dealer || peer->done_telling || now < peer->next_done_ms
        ||  (peer->done_mine == self->incarnation && peer->done_theirs == peer->incarnation))
            continue;
        shoal_envelope_t *request = s_run_request(self, SHOAL_MSG_SWEEP_DONE);
        s_done_t *done = (s_done_t *) zmalloc(sizeof *done);
        done->mine = self->incarnation;
        done->theirs = peer->incarnation;
        peer->done_telling = s_request_send(self, peer->dealer, peer->node_id, &request,
                                            self->settings->suspect_timeout_ms, s_done_told, done, NULL) == 0;
        if (!peer->done_telling)
            free(done);
    }
}

void
shoal_mesh_tick(shoal_mesh_t *self)
{
    int64_t now = zclock_mono();
    //  Requests no connection took yet are offered again, then those past
    //  their deadline are answered with silence.
    for (s_pending_t *pending = (s_pending_t *) zhashx_first(self->pending); pending;
         pending = (s_pending_t *) zhashx_next(self->pending)) {
        s_peer_t *peer = pending->unsent ? (s_peer_t *) zhashx_lookup(self->peers, pending->target) : NULL;
        zmsg_t *copy = peer && peer->dealer ? zmsg_dup(pending->unsent) : NULL;
        if (copy && zmsg_send(&copy, peer->dealer) == 0) {
            //  It leaves only now: its time starts now (see the top of this file).
            zmsg_destroy(&pending->unsent);
            pending->taken = true;
            pending->deadline_ms = now + pending->timeout_ms;
        }
        zmsg_destroy(&copy);
    }
    zlistx_t *expired = zlistx_new();
    for (s_pending_t *pending = (s_pending_t *) zhashx_first(self->pending); pending;
         pending = (s_pending_t *) zhashx_next(self->pending)) {
        if (pending->deadline_ms > now)
            continue;
        //  Not sent yet on a connection still being made: it waits for it,
        //  up to a suspect timeout after the connection was begun.
        s_peer_t *peer = pending->unsent ? (s_peer_t *) zhashx_lookup(self->peers, pending->target) : NULL;
        if (peer && peer->dealer && now - peer->dealer_since_ms < self->settings->suspect_timeout_ms)
            continue;
        zlistx_add_end(expired, pending);
    }
    for (s_pending_t *pending = (s_pending_t *) zlistx_first(expired); pending;
         pending = (s_pending_t *) zlistx_next(expired))
        s_pending_finish(self, pending, NULL);
    zlistx_destroy(&expired);

    if (!self->joined)
        s_names_take(self);
    if (!self->joined && now >= self->next_join_ms) {
        //  A name that resolved to this node alone (the first replica up)
        //  is looked up again: the others may have appeared since.
        for (shoal_resolve_t *name = (shoal_resolve_t *) zlistx_first(self->names); name;
             name = (shoal_resolve_t *) zlistx_next(self->names))
            shoal_resolve_start(name);
        bool sent = s_join_send(self);
        self->next_join_ms = now + (sent ? self->settings->probe_interval_ms : S_JOIN_RETRY_MS);
    }
    //  A suspect that nobody heard refute its suspicion in time is dead.
    for (s_peer_t *peer = (s_peer_t *) zhashx_first(self->peers); peer;
         peer = (s_peer_t *) zhashx_next(self->peers))
        if (peer->state == SHOAL_MEMBER_SUSPECT
        &&  now - peer->suspect_since_ms >= self->settings->suspect_timeout_ms) {
            peer->state = SHOAL_MEMBER_DEAD;
            s_emit(self, SHOAL_MESH_DEAD, peer);
        }
    if (now >= self->next_probe_ms) {
        self->next_probe_ms = now + self->settings->probe_interval_ms;
        if (!self->probe_target)
            s_probe_start(self);
    }
    if (now >= self->next_reconnect_ms) {
        self->next_reconnect_ms = now + self->settings->suspect_timeout_ms;
        s_reconnect_start(self);
    }
    s_tell_runs(self, now);
    s_tell_done(self, now);
}

const char *
shoal_mesh_failure(shoal_mesh_t *self)
{
    return self->failure;
}

int
shoal_mesh_subscribe(shoal_mesh_t *self, shoal_mesh_event_fn *fn, void *arg)
{
    s_subscriber_t *subscriber = (s_subscriber_t *) zmalloc(sizeof *subscriber);
    subscriber->fn = fn;
    subscriber->arg = arg;
    return zlistx_add_end(self->subscribers, subscriber) ? 0 : -1;
}

int
shoal_mesh_send(shoal_mesh_t *self, const char *node_id, shoal_envelope_t **request_p,
                int64_t timeout_ms, shoal_mesh_reply_fn *fn, void *arg)
{
    s_peer_t *peer = (s_peer_t *) zhashx_lookup(self->peers, node_id);
    if (self->stopping || !peer || !peer->dealer) {
        shoal_envelope_destroy(request_p);
        return -1;
    }
    return s_request_send(self, peer->dealer, node_id, request_p, timeout_ms, fn, arg, NULL);
}

zlistx_t *
shoal_mesh_alive(shoal_mesh_t *self)
{
    zlistx_t *alive = zlistx_new();
    zlistx_set_destructor(alive, (zlistx_destructor_fn *) zstr_free);
    zlistx_set_duplicator(alive, (zlistx_duplicator_fn *) shoal_strdup);
    for (s_peer_t *peer = (s_peer_t *) zhashx_first(self->peers); peer;
         peer = (s_peer_t *) zhashx_next(self->peers))
        if (peer->state == SHOAL_MEMBER_ALIVE)
            zlistx_add_end(alive, peer->node_id);
    zlistx_sort(alive);
    return alive;
}

void
shoal_mesh_set_lag(shoal_mesh_t *self, const char *node_id, uint64_t lag)
{
    s_peer_t *peer = (s_peer_t *) zhashx_lookup(self->peers, node_id);
    if (peer)
        peer->lag = lag;
}

bool
shoal_mesh_peer_state(shoal_mesh_t *self, const char *node_id, shoal_member_state_t *state)
{
    s_peer_t *peer = (s_peer_t *) zhashx_lookup(self->peers, node_id);
    if (peer)
        *state = peer->state;
    return peer != NULL;
}

size_t
shoal_mesh_size(shoal_mesh_t *self)
{
    return zhashx_size(self->peers);
}

uint64_t
shoal_mesh_boot(shoal_mesh_t *self)
{
    return self->boot;
}

bool
shoal_mesh_peer_ready(shoal_mesh_t *self, const char *node_id, uint64_t *boot_p, char *why, size_t why_size)
{
    s_peer_t *peer = (s_peer_t *) zhashx_lookup(self->peers, node_id);
    if (!peer)
        snprintf(why, why_size, "node %s is not a peer of %s", node_id, self->node_id);
    else
    if (!s_is_live(peer->state))
        snprintf(why, why_size, "node %s is %s", node_id, shoal_member_state_name(peer->state));
    else
    if (s_held(peer))
        snprintf(why, why_size, "node %s is sweeping: its locks from an earlier run are rolled back first",
                 node_id);
    else {
        if (boot_p)
            *boot_p = peer->boot;
        return true;
    }
    return false;
}

int
shoal_mesh_confirm(shoal_mesh_t *self, const char *node_id, uint64_t incarnation, uint64_t boot)
{
    s_peer_t *peer = (s_peer_t *) zhashx_lookup(self->peers, node_id);
    if (!peer)
        return -1;
    bool was_held = s_held(peer);
    if (incarnation > peer->confirmed)
        peer->confirmed = incarnation;
    bool new_run = peer->boot != boot;
    peer->boot = boot;
    if (was_held && !s_held(peer))
        zsys_info("mesh: node %s (%s) swept%s: alive again (incarnation %" PRIu64 ")", peer->node_id,
                  peer->endpoint, new_run ? " for a new run" : "", peer->incarnation);
    return 0;
}

const char *
shoal_mesh_endpoint(shoal_mesh_t *self)
{
    return self->endpoint;
}

const char *
shoal_mesh_peer_endpoint(shoal_mesh_t *self, const char *node_id)
{
    s_peer_t *peer = (s_peer_t *) zhashx_lookup(self->peers, node_id);
    return peer ? peer->endpoint : NULL;
}

bool
shoal_mesh_stopping(shoal_mesh_t *self)
{
    return self->stopping;
}
