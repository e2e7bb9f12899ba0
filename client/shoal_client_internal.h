/*  shoal_client_internal: what the client's modules share and users do not.

    shoal_client.c owns the connection; the request families (kv, oplog,
    and those to come) are each a file of their own on top of one call.
*/
#ifndef SHOAL_CLIENT_INTERNAL_H_INCLUDED
#define SHOAL_CLIENT_INTERNAL_H_INCLUDED

#include "shoal.h"
#include "shoal_proto.h"

//  Sends REQUEST (taken) and waits for its reply. Returns the reply's status
//  with *REPLY_P set (the caller destroys it), or a negative shoal_error_t
//  with *REPLY_P NULL; shoal_client_error says what happened either way.
int shoal_client_call(shoal_client_t *self, shoal_envelope_t **request_p, shoal_envelope_t **reply_p);

//  As shoal_client_call, for a call about claim ID: a 404 is followed by a
//  lookup and, when another node owns the claim, the same call at its
//  owner. The reply is the last one had.
int shoal_client_call_claim(shoal_client_t *self, const char *id, shoal_envelope_t **request_p,
                            shoal_envelope_t **reply_p);

//  The client of the node at ENDPOINT: SELF, or one kept beside it (SELF
//  owns it; the next call for another endpoint replaces it). NULL, with
//  SELF's error set, when it cannot be made.
shoal_client_t *shoal_client_at(shoal_client_t *self, const char *endpoint);

//  As shoal_client_call, for a call about lease ID (keepalive, revoke,
//  ttl): a 404 is followed by a lease_lookup and, when another node is the
//  lease's home, the same call there. Each call resolves anew, so a lease
//  works from whichever node the client talks to.
int shoal_client_call_lease(shoal_client_t *self, uint64_t id, shoal_envelope_t **request_p,
                            shoal_envelope_t **reply_p);

//  The id of the node this client talks to, asked once and kept; NULL
//  when it cannot be asked.
const char *shoal_client_node_id(shoal_client_t *self);

//  Sends REQUEST (taken) without waiting for a reply; *REQUEST_ID_P (may be
//  NULL) gets the id it went with. Returns 0 or a negative shoal_error_t.
int shoal_client_send(shoal_client_t *self, shoal_envelope_t **request_p, uint64_t *request_id_p);

//  Waits up to TIMEOUT_MS for the next message from the node, whatever it
//  answers. Returns 0 with *MESSAGE_P (the caller destroys it), or a
//  negative shoal_error_t: SHOAL_E_TIMEOUT when none came (not an error
//  for a stream), SHOAL_E_REFUSED when the node refused our key.
int shoal_client_receive(shoal_client_t *self, int timeout_ms, shoal_envelope_t **message_p);

//  The error for a request that got no reply, from what the connection
//  saw: refused key, no connection, or a timeout.
int shoal_client_no_reply(shoal_client_t *self, const char *what);

//  How often a refused reader resolves the claim again and asks again.
unsigned shoal_client_read_resolves(shoal_client_t *self);

//  How long a call waits for its reply.
int shoal_client_timeout(shoal_client_t *self);

//  What a call whose answer waits for an object's bytes to be copied or
//  written (replicate, checkpoint, a claim made from an object) waits at
//  least.
#define SHOAL_CLIENT_OBJECT_TIMEOUT_MS (10 * 60 * 1000)

//  As shoal_client_call (or shoal_client_call_claim, with CLAIM_ID), for a
//  request whose answer waits on an object's bytes: it waits at least
//  SHOAL_CLIENT_OBJECT_TIMEOUT_MS.
int shoal_client_call_objects(shoal_client_t *self, const char *claim_id, shoal_envelope_t **request_p,
                              shoal_envelope_t **reply_p);

//  Records a failure that happened on this side of the call.
void shoal_client_set_error(shoal_client_t *self, const char *format, ...) CHECK_PRINTF(2);

#endif
