/*  shoal_client: one CurveZMQ connection to one node, request by request.

    The DEALER socket connects in the background, so a request sent before
    the handshake is simply queued. What the caller needs when no reply comes
    is why: a socket monitor watches the connection, so a timeout can be told
    apart from a refused key (the node's ZAP handler said no) and from an
    endpoint nobody answers at.
*/
#include "shoal_client_internal.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <stdarg.h>

#define S_ERROR_MAX 1024
#define S_LINGER_MS 0
//  What zcert reports as the secret key of a certificate loaded without one.
#define S_NO_SECRET "0000000000000000000000000000000000000000"

struct _shoal_client_t {
    char *endpoint;             //  the node we talk to
    char *client_cert;          //  our certificate, for connections to claim owners
    char *cluster_cert;         //  the cluster's public certificate, likewise
    shoal_client_t *owner;      //  the last claim owner a 404 sent us to, or NULL
    zsock_t *dealer;            //  the connection, CURVE client
    zactor_t *monitor;          //  connection events of dealer
    int timeout_ms;             //  how long a call waits for its reply
    uint64_t next_request_id;   //  ids pair requests with replies
    bool handshake_ok;          //  the handshake succeeded at least once
    bool handshake_refused;     //  the node's ZAP handler refused our key
    bool handshake_failed;      //  the handshake broke (wrong cluster key, no CURVE)
    uint32_t retry_after_ms;    //  from the last reply
    char error[S_ERROR_MAX];    //  message of the last call
    char *node_id;              //  the connected node's id, once a lock call asked for it (NULL before)
    unsigned read_resolves;     //  how often a refused reader resolves the claim again and asks again
};

void
shoal_client_set_error(shoal_client_t *self, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(self->error, sizeof self->error, format, args);
    va_end(args);
}

static zcert_t *
s_cert_load(const char *path, char **error_p)
{
    zcert_t *cert = path ? zcert_load(path) : NULL;
    if (!cert && error_p)
        *error_p = zsys_sprintf("cannot read certificate %s", path ? path : "(none given)");
    return cert;
}

shoal_client_t *
shoal_client_new(const char *endpoint, const char *client_cert, const char *cluster_cert,
                 char **error_p)
{
    if (!endpoint || strncmp(endpoint, "tcp://", 6) != 0) {
        if (error_p)
            *error_p = zsys_sprintf("endpoint '%s' is not tcp://HOST:PORT", endpoint ? endpoint : "");
        return NULL;
    }
    zcert_t *mine = s_cert_load(client_cert, error_p);
    zcert_t *cluster = mine ? s_cert_load(cluster_cert, error_p) : NULL;
    shoal_client_t *self = NULL;
    if (!cluster)
        goto cleanup;
    if (streq(zcert_secret_txt(mine), S_NO_SECRET)) {
        if (error_p)
            *error_p = zsys_sprintf("certificate %s has no secret key (%s_secret is missing)",
                                    client_cert, client_cert);
        goto cleanup;
    }
    self = (shoal_client_t *) zmalloc(sizeof *self);
    self->endpoint = shoal_strdup(endpoint);
    self->client_cert = shoal_strdup(client_cert);
    self->cluster_cert = shoal_strdup(cluster_cert);
    self->timeout_ms = SHOAL_DEFAULT_TIMEOUT_MS;
    self->read_resolves = SHOAL_LOCK_READ_RESOLVES;
    self->next_request_id = 1;
    self->dealer = zsock_new(ZMQ_DEALER);
    zsock_set_linger(self->dealer, S_LINGER_MS);
    //  A call never waits longer than its timeout, not even to send.
    zsock_set_sndtimeo(self->dealer, self->timeout_ms);
    zcert_apply(mine, self->dealer);
    zsock_set_curve_serverkey(self->dealer, zcert_public_txt(cluster));
    self->monitor = zactor_new(zmonitor, self->dealer);
    zstr_sendx(self->monitor, "LISTEN", "HANDSHAKE_SUCCEEDED", "HANDSHAKE_FAILED_AUTH",
               "HANDSHAKE_FAILED_PROTOCOL", "HANDSHAKE_FAILED_NO_DETAIL", NULL);
    zstr_sendx(self->monitor, "START", NULL);
    zsock_wait(self->monitor);
    if (zsock_connect(self->dealer, "%s", endpoint) != 0) {
        if (error_p)
            *error_p = zsys_sprintf("cannot connect to %s: %s", endpoint, zmq_strerror(zmq_errno()));
        shoal_client_destroy(&self);
    }
cleanup:
    zcert_destroy(&mine);
    zcert_destroy(&cluster);
    return self;
}

void
shoal_client_destroy(shoal_client_t **self_p)
{
    if (*self_p) {
        shoal_client_t *self = *self_p;
        shoal_client_destroy(&self->owner);
        zactor_destroy(&self->monitor);
        zsock_destroy(&self->dealer);
        free(self->endpoint);
        free(self->node_id);
        free(self->client_cert);
        free(self->cluster_cert);
        free(self);
        *self_p = NULL;
    }
}

void
shoal_client_set_timeout(shoal_client_t *self, int timeout_ms)
{
    self->timeout_ms = timeout_ms;
    zsock_set_sndtimeo(self->dealer, timeout_ms);
}

void
shoal_client_set_read_resolves(shoal_client_t *self, unsigned resolves)
{
    self->read_resolves = resolves;
}

unsigned
shoal_client_read_resolves(shoal_client_t *self)
{
    return self->read_resolves;
}

const char *
shoal_client_error(shoal_client_t *self)
{
    return self->error;
}

uint32_t
shoal_client_retry_after_ms(shoal_client_t *self)
{
    return self->retry_after_ms;
}

//  Takes in one connection event from the monitor.
static void
s_handle_monitor(shoal_client_t *self)
{
    zmsg_t *event = zmsg_recv(self->monitor);
    char *name = event ? zmsg_popstr(event) : NULL;
    if (name) {
        if (streq(name, "HANDSHAKE_SUCCEEDED")) {
            self->handshake_ok = true;
            self->handshake_refused = self->handshake_failed = false;
        }
        else
        if (streq(name, "HANDSHAKE_FAILED_AUTH"))
            self->handshake_refused = true;
        else
            self->handshake_failed = true;
    }
    free(name);
    zmsg_destroy(&event);
}

//  The error for a call that got no reply, from what the monitor saw.
static int
s_no_reply(shoal_client_t *self, const char *what)
{
    if (self->handshake_refused) {
        shoal_client_set_error(self, "%s refused our key at the handshake (not an admitted client)", self->endpoint);
        return SHOAL_E_REFUSED;
    }
    if (self->handshake_failed && !self->handshake_ok) {
        shoal_client_set_error(self, "handshake with %s failed: is the cluster key right, and is it a shoal node?",
                    self->endpoint);
        return SHOAL_E_REFUSED;
    }
    if (!self->handshake_ok) {
        shoal_client_set_error(self, "%s is unreachable (no connection within %d ms)", self->endpoint, self->timeout_ms);
        return SHOAL_E_UNREACHABLE;
    }
    shoal_client_set_error(self, "%s: no reply to %s within %d ms", self->endpoint, what, self->timeout_ms);
    return SHOAL_E_TIMEOUT;
}

int
shoal_client_call(shoal_client_t *self, shoal_envelope_t **request_p, shoal_envelope_t **reply_p)
{
    shoal_envelope_t *request = *request_p;
    *request_p = NULL;
    *reply_p = NULL;
    self->retry_after_ms = 0;
    const char *what = shoal_msg_type_name(request->type);
    request->request_id = self->next_request_id++;
    char error[S_ERROR_MAX];
    zmsg_t *msg = shoal_envelope_encode(request, error, sizeof error);
    uint64_t request_id = request->request_id;
    shoal_envelope_destroy(&request);
    if (!msg) {
        shoal_client_set_error(self, "cannot encode the request: %s", error);
        return SHOAL_E_INVALID;
    }
    if (zmsg_send(&msg, self->dealer) != 0) {
        zmsg_destroy(&msg);
        shoal_client_set_error(self, "cannot send to %s: %s", self->endpoint, zmq_strerror(zmq_errno()));
        return SHOAL_E_UNREACHABLE;
    }
    int64_t deadline = zclock_mono() + self->timeout_ms;
    zpoller_t *poller = zpoller_new(self->dealer, self->monitor, NULL);
    int rc = SHOAL_E_TIMEOUT;
    while (true) {
        int64_t left = deadline - zclock_mono();
        void *which = left > 0 ? zpoller_wait(poller, (int) left) : NULL;
        if (which == self->monitor) {
            s_handle_monitor(self);
            //  A refusal is final: waiting out the timeout would not change it.
            if (self->handshake_refused) {
                rc = s_no_reply(self, what);
                break;
            }
            continue;
        }
        if (which != self->dealer) {
            rc = s_no_reply(self, what);
            break;
        }
        zmsg_t *answer = zmsg_recv(self->dealer);
        shoal_envelope_t *reply = answer ? shoal_envelope_decode(answer, error, sizeof error) : NULL;
        zmsg_destroy(&answer);
        if (!reply) {
            shoal_client_set_error(self, "bad reply from %s: %s", self->endpoint, error);
            rc = SHOAL_E_BAD_REPLY;
            break;
        }
        //  A stale reply to an earlier call that timed out is dropped; a reply
        //  with id 0 answers a request the node could not decode: ours.
        if (reply->request_id != request_id && reply->request_id != 0) {
            shoal_envelope_destroy(&reply);
            continue;
        }
        self->retry_after_ms = reply->retry_after_ms;
        shoal_client_set_error(self, "%u %s%s%s", reply->status, shoal_status_text(reply->status),
                    reply->message && *reply->message ? ": " : "", reply->message ? reply->message : "");
        rc = (int) reply->status;
        *reply_p = reply;
        break;
    }
    zpoller_destroy(&poller);
    return rc;
}

//  A copy of REQUEST, by encoding and decoding it: what a retry sends.
static shoal_envelope_t *
s_envelope_copy(const shoal_envelope_t *request)
{
    char error[S_ERROR_MAX];
    zmsg_t *msg = shoal_envelope_encode(request, error, sizeof error);
    shoal_envelope_t *copy = msg ? shoal_envelope_decode(msg, error, sizeof error) : NULL;
    zmsg_destroy(&msg);
    return copy;
}

//  The client of the node at ENDPOINT: this one, the owner client kept
//  from before, or a new owner client with our keys.
static shoal_client_t *
s_client_at(shoal_client_t *self, const char *endpoint)
{
    if (streq(endpoint, self->endpoint))
        return self;
    if (self->owner && streq(self->owner->endpoint, endpoint))
        return self->owner;
    shoal_client_destroy(&self->owner);
    char *error = NULL;
    self->owner = shoal_client_new(endpoint, self->client_cert, self->cluster_cert, &error);
    if (!self->owner) {
        shoal_client_set_error(self, "cannot connect to the claim's owner at %s: %s", endpoint,
                               error ? error : "no reason given");
        free(error);
        return NULL;
    }
    self->owner->timeout_ms = self->timeout_ms;
    return self->owner;
}

shoal_client_t *
shoal_client_at(shoal_client_t *self, const char *endpoint)
{
    return s_client_at(self, endpoint);
}

int
shoal_client_call_objects(shoal_client_t *self, const char *claim_id, shoal_envelope_t **request_p,
                          shoal_envelope_t **reply_p)
{
    int timeout = shoal_client_timeout(self);
    if (timeout < SHOAL_CLIENT_OBJECT_TIMEOUT_MS)
        shoal_client_set_timeout(self, SHOAL_CLIENT_OBJECT_TIMEOUT_MS);
    int rc = claim_id ? shoal_client_call_claim(self, claim_id, request_p, reply_p)
                      : shoal_client_call(self, request_p, reply_p);
    shoal_client_set_timeout(self, timeout);
    return rc;
}

int
shoal_client_call_claim(shoal_client_t *self, const char *id, shoal_envelope_t **request_p,
                        shoal_envelope_t **reply_p)
{
    shoal_envelope_t *retry = s_envelope_copy(*request_p);
    int rc = shoal_client_call(self, request_p, reply_p);
    if (rc != SHOAL_STATUS_NOT_FOUND || !retry) {
        shoal_envelope_destroy(&retry);
        return rc;
    }
    shoal_lookup_t lookup;
    char first_error[S_ERROR_MAX];
    snprintf(first_error, sizeof first_error, "%s", self->error);
    int found = shoal_client_lookup(self, id, &lookup);
    shoal_client_t *owner = found == SHOAL_STATUS_OK ? s_client_at(self, lookup.endpoint) : NULL;
    if (found != SHOAL_STATUS_OK || owner == self || !owner) {
        //  No other owner to ask: the first answer stands.
        if (owner != NULL || found != SHOAL_STATUS_OK)
            snprintf(self->error, sizeof self->error, "%s", first_error);
        if (found == SHOAL_STATUS_OK)
            shoal_lookup_clear(&lookup);
        shoal_envelope_destroy(&retry);
        return owner || found != SHOAL_STATUS_OK ? rc : SHOAL_E_UNREACHABLE;
    }
    shoal_lookup_clear(&lookup);
    shoal_envelope_destroy(reply_p);
    rc = shoal_client_call(owner, &retry, reply_p);
    self->retry_after_ms = owner->retry_after_ms;
    snprintf(self->error, sizeof self->error, "%s", owner->error);
    return rc;
}

int
shoal_client_call_lease(shoal_client_t *self, uint64_t id, shoal_envelope_t **request_p, shoal_envelope_t **reply_p)
{
    shoal_envelope_t *retry = s_envelope_copy(*request_p);
    int rc = shoal_client_call(self, request_p, reply_p);
    if (rc != SHOAL_STATUS_NOT_FOUND || !retry) {
        shoal_envelope_destroy(&retry);
        return rc;
    }
    //  Not the lease's home: the node names it (lease_lookup).
    char first_error[S_ERROR_MAX];
    snprintf(first_error, sizeof first_error, "%s", self->error);
    shoal_envelope_t *lookup = shoal_envelope_new(SHOAL_MSG_LEASE_LOOKUP, 0);
    shoal_msg_lease_request_t *body = (shoal_msg_lease_request_t *) shoal_envelope_new_body(lookup);
    body->op = SHOAL_LEASE_TTL;
    body->id = id;
    shoal_envelope_t *where = NULL;
    int found = shoal_client_call(self, &lookup, &where);
    const shoal_msg_member_t *home = found == SHOAL_STATUS_OK ? (const shoal_msg_member_t *) where->body : NULL;
    shoal_client_t *owner = home ? s_client_at(self, home->endpoint) : NULL;
    shoal_envelope_destroy(&where);
    if (!owner || owner == self) {
        //  No other home to ask: the first answer stands.
        if (owner || found != SHOAL_STATUS_OK)
            snprintf(self->error, sizeof self->error, "%s", first_error);
        shoal_envelope_destroy(&retry);
        return owner || found != SHOAL_STATUS_OK ? rc : SHOAL_E_UNREACHABLE;
    }
    shoal_envelope_destroy(reply_p);
    rc = shoal_client_call(owner, &retry, reply_p);
    self->retry_after_ms = owner->retry_after_ms;
    snprintf(self->error, sizeof self->error, "%s", owner->error);
    return rc;
}

int
shoal_client_status(shoal_client_t *self, shoal_status_t *status)
{
    memset(status, 0, sizeof *status);
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_STATUS, 0);
    shoal_envelope_t *reply;
    int rc = shoal_client_call(self, &request, &reply);
    //  Decoding guarantees a 200 reply its body, with no NULL string in it.
    if (rc == SHOAL_STATUS_OK) {
        const shoal_msg_status_reply_t *body = (const shoal_msg_status_reply_t *) reply->body;
        status->node_id = shoal_strdup(body->node_id);
        status->version = shoal_strdup(body->version);
        status->uptime_ms = body->uptime_ms;
        status->endpoint = shoal_strdup(body->endpoint);
        status->data_dir = shoal_strdup(body->data_dir);
        status->claims = body->claims;
        status->peers = body->peers;
        status->clients = body->clients;
        status->role = shoal_strdup(body->role);
        status->tenant = shoal_strdup(body->tenant);
        status->space_free_bytes = body->space_free_bytes;
        status->space_reserve_bytes = body->space_reserve_bytes;
        status->oplog_migrating = body->oplog_migrating;
        status->oplog_migrated = body->oplog_migrated;
        status->damage_count = body->damage_count;
        status->damage = (shoal_damage_info_t *) shoal_calloc(body->damage_count + 1, sizeof *status->damage);
        for (size_t i = 0; status->damage && i < body->damage_count; i++) {
            const shoal_msg_damage_t *from = &body->damage[i];
            shoal_damage_info_t *to = &status->damage[i];
            to->id = shoal_strdup(from->id);
            to->kind = shoal_strdup(from->kind);
            to->what = shoal_strdup(from->what);
            to->keys = shoal_strdup(from->keys);
            to->claim_id = shoal_strdup(from->claim_id);
            to->found_ms = from->found_ms;
            to->action = shoal_strdup(from->action);
        }
        if (!status->damage)
            status->damage_count = 0;
    }
    shoal_envelope_destroy(&reply);
    return rc;
}

int
shoal_client_damage_forget(shoal_client_t *self, const char *id)
{
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_DAMAGE_FORGET, 0);
    shoal_msg_damage_ref_t *body = (shoal_msg_damage_ref_t *) shoal_envelope_new_body(request);
    body->id = shoal_strdup(id ? id : "");
    shoal_envelope_t *reply;
    int rc = shoal_client_call(self, &request, &reply);
    shoal_envelope_destroy(&reply);
    return rc;
}

void
shoal_status_clear(shoal_status_t *status)
{
    free(status->node_id);
    free(status->version);
    free(status->endpoint);
    free(status->data_dir);
    free(status->role);
    free(status->tenant);
    for (size_t i = 0; i < status->damage_count; i++) {
        shoal_damage_info_t *damage = &status->damage[i];
        free(damage->id);
        free(damage->kind);
        free(damage->what);
        free(damage->keys);
        free(damage->claim_id);
        free(damage->action);
    }
    free(status->damage);
    memset(status, 0, sizeof *status);
}

const char *
shoal_client_node_id(shoal_client_t *self)
{
    if (!self->node_id) {
        shoal_status_t status;
        if (shoal_client_status(self, &status) == SHOAL_STATUS_OK) {
            self->node_id = shoal_strdup(status.node_id);
            shoal_status_clear(&status);
        }
    }
    return self->node_id;
}

int
shoal_client_send(shoal_client_t *self, shoal_envelope_t **request_p, uint64_t *request_id_p)
{
    shoal_envelope_t *request = *request_p;
    *request_p = NULL;
    request->request_id = self->next_request_id++;
    if (request_id_p)
        *request_id_p = request->request_id;
    char error[S_ERROR_MAX];
    zmsg_t *msg = shoal_envelope_encode(request, error, sizeof error);
    shoal_envelope_destroy(&request);
    if (!msg) {
        shoal_client_set_error(self, "cannot encode the request: %s", error);
        return SHOAL_E_INVALID;
    }
    if (zmsg_send(&msg, self->dealer) != 0) {
        zmsg_destroy(&msg);
        shoal_client_set_error(self, "cannot send to %s: %s", self->endpoint, zmq_strerror(zmq_errno()));
        return SHOAL_E_UNREACHABLE;
    }
    return 0;
}

int
shoal_client_receive(shoal_client_t *self, int timeout_ms, shoal_envelope_t **message_p)
{
    *message_p = NULL;
    int64_t deadline = zclock_mono() + timeout_ms;
    zpoller_t *poller = zpoller_new(self->dealer, self->monitor, NULL);
    int rc = SHOAL_E_TIMEOUT;
    while (true) {
        int64_t left = deadline - zclock_mono();
        void *which = left > 0 ? zpoller_wait(poller, (int) left) : NULL;
        if (which == self->monitor) {
            s_handle_monitor(self);
            if (self->handshake_refused) {
                rc = s_no_reply(self, "the request");
                break;
            }
            continue;
        }
        if (which != self->dealer)
            break;
        char error[S_ERROR_MAX];
        zmsg_t *answer = zmsg_recv(self->dealer);
        *message_p = answer ? shoal_envelope_decode(answer, error, sizeof error) : NULL;
        zmsg_destroy(&answer);
        if (*message_p)
            rc = 0;
        else {
            shoal_client_set_error(self, "bad message from %s: %s", self->endpoint, error);
            rc = SHOAL_E_BAD_REPLY;
        }
        break;
    }
    zpoller_destroy(&poller);
    return rc;
}

int
shoal_client_no_reply(shoal_client_t *self, const char *what)
{
    return s_no_reply(self, what);
}

int
shoal_client_timeout(shoal_client_t *self)
{
    return self->timeout_ms;
}
