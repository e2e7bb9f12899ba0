/*  shoal_client_mesh: the mesh as one node sees it, and retiring a peer. */
#include "shoal_client_internal.h"
#include "shoal_alloc.h"

int
shoal_client_peers(shoal_client_t *self, shoal_peer_list_t *peers)
{
    memset(peers, 0, sizeof *peers);
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_PEERS, 0);
    shoal_envelope_t *reply;
    int rc = shoal_client_call(self, &request, &reply);
    if (rc == SHOAL_STATUS_OK) {
        const shoal_msg_peers_t *body = (const shoal_msg_peers_t *) reply->body;
        peers->peers = (shoal_peer_info_t *) zmalloc(sizeof(shoal_peer_info_t) * (body->count + 1));
        for (size_t i = 0; i < body->count; i++) {
            const shoal_msg_peer_t *from = &body->peers[i];
            shoal_peer_info_t *peer = &peers->peers[i];
            peer->node_id = shoal_strdup(from->node_id);
            peer->endpoint = shoal_strdup(from->endpoint);
            //  Decoding checked the state against its enumeration.
            peer->state = shoal_strdup(shoal_member_state_name(from->state));
            peer->incarnation = from->incarnation;
            peer->last_heard_ms = from->last_heard_ms;
            peer->lag = from->lag;
            peer->self = from->self;
        }
        peers->count = body->count;
    }
    shoal_envelope_destroy(&reply);
    //  Peers held back for their lock sweep read "sweeping" (an older node
    //  that does not know the question leaves the states as they are).
    request = rc == SHOAL_STATUS_OK ? shoal_envelope_new(SHOAL_MSG_PEERS_SWEEPING, 0) : NULL;
    if (request && shoal_client_call(self, &request, &reply) == SHOAL_STATUS_OK) {
        const shoal_msg_members_t *body = (const shoal_msg_members_t *) reply->body;
        for (size_t i = 0; i < body->count; i++)
            for (size_t j = 0; j < peers->count; j++)
                if (!peers->peers[j].self && streq(peers->peers[j].node_id, body->members[i].node_id)
                &&  peers->peers[j].incarnation <= body->members[i].incarnation) {
                    free(peers->peers[j].state);
                    peers->peers[j].state = shoal_strdup("sweeping");
                }
    }
    shoal_envelope_destroy(&reply);
    return rc;
}

int
shoal_client_peers_forget(shoal_client_t *self, const char *node_id)
{
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_PEERS_FORGET, 0);
    shoal_msg_node_ref_t *body = (shoal_msg_node_ref_t *) shoal_envelope_new_body(request);
    body->node_id = shoal_strdup(node_id ? node_id : "");
    shoal_envelope_t *reply;
    int rc = shoal_client_call(self, &request, &reply);
    shoal_envelope_destroy(&reply);
    return rc;
}

void
shoal_peer_list_clear(shoal_peer_list_t *peers)
{
    for (size_t i = 0; i < peers->count; i++) {
        free(peers->peers[i].node_id);
        free(peers->peers[i].endpoint);
        free(peers->peers[i].state);
    }
    free(peers->peers);
    memset(peers, 0, sizeof *peers);
}
