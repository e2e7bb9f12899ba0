/*  shoal_client_events: following a node's event stream.

    A watch is a MSG_WATCH the node answers, then events as they come; it is
    sent again every S_RENEW_MS, naming the last event seen, which keeps the
    node's lease on the watch and, after the node restarted (it forgot the
    watch), has it replay what it kept since. An event whose previous_seq
    is not the last seen means some were lost on the way: the watch is sent
    again at once, and the node replays them. Events already seen (a replay
    overlapping what was in flight) are skipped.
*/
#include "shoal_client_internal.h"
#include "shoal_alloc.h"

#include <czmq.h>

//  How often a watch is renewed: well inside the node's lease.
#define S_RENEW_MS 1000

//  Sends a watch of KINDS after AFTER_SEQ.
static int
s_watch_send(shoal_client_t *self, const char *kinds, uint64_t after_seq)
{
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_WATCH, 0);
    shoal_msg_watch_t *body = (shoal_msg_watch_t *) shoal_envelope_new_body(request);
    body->kinds = shoal_strdup(kinds ? kinds : "");
    body->after_seq = after_seq;
    return shoal_client_send(self, &request, NULL);
}

static const char *
s_text(const char *text)
{
    return text ? text : "";
}

int
shoal_client_watch(shoal_client_t *self, const char *kinds, uint64_t after_seq, shoal_watch_fn *fn, void *arg)
{
    uint64_t last_seen = after_seq;
    bool answered = false;
    int rc = s_watch_send(self, kinds, after_seq);
    if (rc)
        return rc;
    int64_t started = zclock_mono();
    int64_t renew_at = started + S_RENEW_MS;
    while (true) {
        int64_t now = zclock_mono();
        if (now >= renew_at) {
            if (!answered && now - started >= shoal_client_timeout(self))
                return shoal_client_no_reply(self, "watch");
            if (answered && fn(NULL, NULL, arg))
                return 0;
            s_watch_send(self, kinds, last_seen);
            renew_at = now + S_RENEW_MS;
            continue;
        }
        shoal_envelope_t *message = NULL;
        rc = shoal_client_receive(self, (int) (renew_at - now), &message);
        if (rc == SHOAL_E_TIMEOUT)
            continue;
        if (rc)
            return rc;
        if (message->type == SHOAL_MSG_WATCH && message->status != SHOAL_STATUS_OK) {
            shoal_client_set_error(self, "%u %s%s%s", message->status, shoal_status_text(message->status),
                                   message->message && *message->message ? ": " : "",
                                   message->message ? message->message : "");
            rc = (int) message->status;
            shoal_envelope_destroy(&message);
            return rc;
        }
        int stop = 0;
        if (message->type == SHOAL_MSG_WATCH) {
            const shoal_msg_watch_reply_t *body = (const shoal_msg_watch_reply_t *) message->body;
            answered = true;
            shoal_watch_info_t info = {
                s_text(body->node_id), body->last_seq, body->first_kept_seq, body->missed_from, body->missed_to,
                body->replayed, s_text(message->message)
            };
            //  From now on, the node's last number is where a watch that
            //  asked for nothing old stands.
            if (!last_seen)
                last_seen = body->last_seq;
            stop = fn(NULL, &info, arg);
        }
        else
        if (message->type == SHOAL_MSG_EVENT && message->status == SHOAL_STATUS_OK) {
            const shoal_msg_event_t *body = (const shoal_msg_event_t *) message->body;
            if (body->seq > last_seen && body->previous_seq != last_seen && last_seen) {
                //  Lost on the way: ask again after the last one seen.
                s_watch_send(self, kinds, last_seen);
                renew_at = zclock_mono() + S_RENEW_MS;
            }
            else
            if (body->seq > last_seen) {
                last_seen = body->seq;
                shoal_event_t event = {
                    body->seq, body->previous_seq, s_text(body->kind), s_text(body->what), s_text(body->node_id),
                    body->time_ms, s_text(body->claim_id), s_text(body->tenant), s_text(body->peer),
                    s_text(body->detail), body->round, body->bytes_sent, body->epoch
                };
                stop = fn(&event, NULL, arg);
            }
        }
        shoal_envelope_destroy(&message);
        if (stop)
            return 0;
    }
}
