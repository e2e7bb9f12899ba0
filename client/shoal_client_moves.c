/*  shoal_client_moves: live moves through libshoal. */
#include "shoal_client_internal.h"
#include "shoal_alloc.h"

static void
s_info_copy(shoal_move_info_t *info, const shoal_move_t *from)
{
    info->move_id = shoal_strdup(from->move_id ? from->move_id : "");
    info->claim_id = shoal_strdup(from->claim_id);
    info->from = shoal_strdup(from->from ? from->from : "");
    info->to = shoal_strdup(from->to ? from->to : "");
    info->state = shoal_strdup(shoal_move_state_name(from->state));
    info->phase = shoal_strdup(from->phase ? from->phase : "");
    info->error = shoal_strdup(from->error ? from->error : "");
    info->round = from->round;
    info->max_downtime_ms = from->max_downtime_ms;
    info->memory_bytes = from->memory_bytes;
    info->bytes_sent = from->bytes_sent;
    info->rate = from->rate;
    info->dirty_rate = from->dirty_rate;
    info->estimate_ms = from->estimate_ms;
    info->total_ms = from->total_ms;
    info->node_downtime_ms = from->node_downtime_ms;
    info->guest_downtime_ms = from->guest_downtime_ms;
    info->guest_switch_gap_ms = from->guest_switch_gap_ms;
    info->done = from->done;
    info->throttle_steps = from->throttle_steps;
    info->throttle_percent = from->throttle_percent;
    info->throttled_ms = from->throttled_ms;
    info->pause_us = from->pause_us;
    info->final_wait_us = from->final_wait_us;
    info->final_bytes = from->final_bytes;
    info->final_us = from->final_us;
    info->target_sync_us = from->target_sync_us;
    info->commit_asked_us = from->commit_asked_us;
    info->commit_us = from->commit_us;
    info->start_us = from->start_us;
}

//  A move request of TYPE about claim ID.
static int
s_move_call(shoal_client_t *self, shoal_msg_type_t type, const char *id, const char *to,
            const shoal_move_options_t *options, shoal_move_info_t *info)
{
    if (info)
        memset(info, 0, sizeof *info);
    shoal_envelope_t *request = shoal_envelope_new(type, 0);
    shoal_move_t *body = (shoal_move_t *) shoal_envelope_new_body(request);
    body->claim_id = shoal_strdup(id ? id : "");
    body->to = shoal_strdup(to ? to : "");
    body->max_downtime_ms = options ? options->max_downtime_ms : 0;
    body->no_converge = options && options->no_converge;
    shoal_envelope_t *reply;
    int rc = shoal_client_call(self, &request, &reply);
    if (rc == SHOAL_STATUS_OK && info && reply->body)
        s_info_copy(info, (const shoal_move_t *) reply->body);
    shoal_envelope_destroy(&reply);
    return rc;
}

int
shoal_client_move(shoal_client_t *self, const char *id, const char *to, uint32_t max_downtime_ms,
                  shoal_move_info_t *info)
{
    shoal_move_options_t options = { .max_downtime_ms = max_downtime_ms };
    return s_move_call(self, SHOAL_MSG_MOVE, id, to, &options, info);
}

int
shoal_client_move_with(shoal_client_t *self, const char *id, const char *to, const shoal_move_options_t *options,
                       shoal_move_info_t *info)
{
    return s_move_call(self, SHOAL_MSG_MOVE, id, to, options, info);
}

int
shoal_client_move_status(shoal_client_t *self, const char *id, shoal_move_info_t *info)
{
    return s_move_call(self, SHOAL_MSG_MOVE_STATUS, id, NULL, NULL, info);
}

int
shoal_client_move_resume(shoal_client_t *self, const char *id, shoal_move_info_t *info)
{
    return s_move_call(self, SHOAL_MSG_MOVE_RESUME, id, NULL, NULL, info);
}

int
shoal_client_move_list(shoal_client_t *self, shoal_move_list_t *list)
{
    memset(list, 0, sizeof *list);
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_MOVE_LIST, 0);
    shoal_envelope_t *reply;
    int rc = shoal_client_call(self, &request, &reply);
    if (rc == SHOAL_STATUS_OK) {
        const shoal_msg_moves_t *body = (const shoal_msg_moves_t *) reply->body;
        list->moves = (shoal_move_info_t *) zmalloc(sizeof(shoal_move_info_t) * (body->count + 1));
        for (size_t i = 0; i < body->count; i++)
            s_info_copy(&list->moves[i], &body->moves[i]);
        list->count = body->count;
    }
    shoal_envelope_destroy(&reply);
    return rc;
}

void
shoal_move_info_clear(shoal_move_info_t *info)
{
    free(info->move_id);
    free(info->claim_id);
    free(info->from);
    free(info->to);
    free(info->state);
    free(info->phase);
    free(info->error);
    memset(info, 0, sizeof *info);
}

void
shoal_move_list_clear(shoal_move_list_t *list)
{
    for (size_t i = 0; i < list->count; i++)
        shoal_move_info_clear(&list->moves[i]);
    free(list->moves);
    memset(list, 0, sizeof *list);
}
