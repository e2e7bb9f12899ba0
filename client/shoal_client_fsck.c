/*  shoal_client_fsck: a node's consistency sweep through libshoal. */
#include "shoal_client_internal.h"
#include "shoal_alloc.h"

#include <czmq.h>

//  How often shoal_client_fsck asks for the run's state by default.
#define FSCK_POLL_MS 100

static char *
s_copy(const char *text)
{
    return shoal_strdup(text ? text : "");
}

static void
s_report_copy(shoal_fsck_report_t *report, const shoal_msg_fsck_report_t *body)
{
    report->run = body->run;
    report->done = body->done;
    report->repair = body->repair;
    report->trigger = s_copy(body->trigger);
    report->check = s_copy(body->check);
    report->keys = body->keys;
    report->started_ms = body->started_ms;
    report->finished_ms = body->finished_ms;
    report->finding_count = body->finding_count;
    report->remaining = body->remaining;
    report->error = s_copy(body->error);
    report->node_id = s_copy(body->node_id);
    report->findings = (shoal_fsck_finding_t *) zmalloc(sizeof(shoal_fsck_finding_t) * (body->count + 1));
    for (size_t i = 0; i < body->count; i++) {
        const shoal_msg_fsck_finding_t *from = &body->findings[i];
        shoal_fsck_finding_t *to = &report->findings[i];
        to->check = s_copy(from->check);
        to->where = s_copy(from->where);
        to->key = s_copy(from->key);
        to->problem = s_copy(from->problem);
        to->repairable = from->repairable;
        to->repaired = s_copy(from->repaired);
    }
    report->count = body->count;
}

static int
s_fsck_call(shoal_client_t *self, shoal_fsck_op_t op, bool repair, shoal_fsck_report_t *report)
{
    memset(report, 0, sizeof *report);
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_FSCK, 0);
    shoal_msg_fsck_request_t *body = (shoal_msg_fsck_request_t *) shoal_envelope_new_body(request);
    body->op = op;
    body->repair = repair;
    shoal_envelope_t *reply;
    int rc = shoal_client_call(self, &request, &reply);
    if (rc == SHOAL_STATUS_OK)
        s_report_copy(report, (const shoal_msg_fsck_report_t *) reply->body);
    shoal_envelope_destroy(&reply);
    return rc;
}

int
shoal_client_fsck_start(shoal_client_t *self, bool repair, shoal_fsck_report_t *report)
{
    return s_fsck_call(self, SHOAL_FSCK_START, repair, report);
}

int
shoal_client_fsck_status(shoal_client_t *self, shoal_fsck_report_t *report)
{
    return s_fsck_call(self, SHOAL_FSCK_STATUS, false, report);
}

int
shoal_client_fsck(shoal_client_t *self, bool repair, int poll_ms, shoal_fsck_progress_fn *progress, void *arg,
                  shoal_fsck_report_t *report)
{
    int rc = shoal_client_fsck_start(self, repair, report);
    uint64_t run = report->run;
    while (rc == SHOAL_STATUS_OK && !report->done) {
        if (progress)
            progress(report, arg);
        zclock_sleep(poll_ms > 0 ? poll_ms : FSCK_POLL_MS);
        shoal_fsck_report_clear(report);
        rc = shoal_client_fsck_status(self, report);
        //  Another run would mean ours was lost (the node restarted).
        if (rc == SHOAL_STATUS_OK && report->run != run) {
            shoal_client_set_error(self, "fsck run %" PRIu64 " is gone: the node answers with run %" PRIu64
                                   " (it restarted, or another run ended ours)", run, report->run);
            shoal_fsck_report_clear(report);
            return SHOAL_E_BAD_REPLY;
        }
    }
    return rc;
}

void
shoal_fsck_report_clear(shoal_fsck_report_t *report)
{
    for (size_t i = 0; i < report->count; i++) {
        shoal_fsck_finding_t *finding = &report->findings[i];
        free(finding->check);
        free(finding->where);
        free(finding->key);
        free(finding->problem);
        free(finding->repaired);
    }
    free(report->findings);
    free(report->trigger);
    free(report->check);
    free(report->error);
    free(report->node_id);
    memset(report, 0, sizeof *report);
}
