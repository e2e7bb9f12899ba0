/*  shoal_metrics: the node's metrics in Prometheus' text format, served on
    metrics/bind (off unless set) by libmicrohttpd.

    The counts live in the reactor and are changed only by it: claims and
    moves through the claim store's observer, admission refusals, membership
    events, catch-up pages and the tick through one-line calls from the
    modules where they happen; the gauges (members, lag, oplog, store) are
    sampled once a second. The reactor renders the text and publishes it,
    under a mutex held for a pointer swap; the HTTP server runs its own
    thread and only ever copies the last published text. A scrape therefore
    costs the reactor nothing, and the reactor never waits for a scrape.

    Every call takes a NULL SELF and does nothing then: a module without
    metrics (a test driving it alone) needs no special case.
*/
#ifndef SHOAL_METRICS_H_INCLUDED
#define SHOAL_METRICS_H_INCLUDED

#include <czmq.h>

#include "shoal_claim_store.h"
#include "shoal_mesh.h"
#include "shoal_oplog.h"
#include "shoal_store.h"

typedef struct _shoal_metrics_t shoal_metrics_t;

//  Why admission said no: the label of shoal_admission_refusals_total.
typedef enum {
    SHOAL_REFUSED_MAX_CLAIMS,           //  limits/max_claims
    SHOAL_REFUSED_TENANT_MAX_CLAIMS,    //  limits/tenant_max_claims
    SHOAL_REFUSED_MAX_RUNNING,          //  limits/max_running
    SHOAL_REFUSED_MEMORY,               //  limits/memory_mb
    SHOAL_REFUSED_DISK,                 //  limits/disk_mb
    SHOAL_REFUSED_GUEST_RATE,           //  limits/guest_rate_mb
    SHOAL_REFUSED_NO_SPACE,             //  the guests' file system is full
    SHOAL_REFUSED_MOVE_CONCURRENCY,     //  move/concurrency
    SHOAL_REFUSED_COUNT
} shoal_refusal_t;

//  Metrics of node NODE_ID, served on BIND ("HOST:PORT"; port 0 picks a
//  free one; "" serves nothing but still counts). CLAIMS (borrowed) is read
//  once for the claims' states. Returns NULL with *ERROR_P when BIND is
//  malformed or cannot be bound.
shoal_metrics_t *shoal_metrics_new(const char *bind, const char *node_id, shoal_claim_store_t *claims,
                                   char **error_p);
void shoal_metrics_destroy(shoal_metrics_t **self_p);

//  The port the server listens on (0 when none).
int shoal_metrics_port(shoal_metrics_t *self);

//  The claim store's observer (see shoal_claim_store_observer_fn); ARG is
//  the metrics.
void shoal_metrics_store_changed(const shoal_claim_record_t *previous, const shoal_claim_record_t *record,
                                 const shoal_move_t *move, shoal_move_role_t deleted_role,
                                 const char *deleted_claim, void *arg);

//  A subscriber to the mesh's events (see shoal_mesh_event_fn).
void shoal_metrics_mesh_event(shoal_mesh_event_t event, const char *node_id, const char *endpoint, void *arg);

//  Admission refused something, for REASON.
void shoal_metrics_refused(shoal_metrics_t *self, shoal_refusal_t reason);

//  An outgoing move ended: MOVE is its final record (state started or
//  aborted, with its rounds, bytes, duration and downtimes). STATUS is the
//  status its caller heard (200 when it moved).
void shoal_metrics_move_ended(shoal_metrics_t *self, const shoal_move_t *move, uint32_t status);

//  A catch-up in bulk took BYTES more, or the entries of PAGE.
void shoal_metrics_catchup(shoal_metrics_t *self, uint64_t bytes);
void shoal_metrics_catchup_page(shoal_metrics_t *self, const shoal_msg_bulk_t *page);

//  A tick came LATE_MS later than its period.
void shoal_metrics_tick_late(shoal_metrics_t *self, int64_t late_ms);

//  Once per tick: samples the gauges from MESH, OPLOG and STORE when a
//  second has passed since the last sample, and publishes the text when
//  anything changed. All borrowed.
void shoal_metrics_tick(shoal_metrics_t *self, shoal_mesh_t *mesh, shoal_oplog_t *oplog, shoal_store_t *store);

//  The text as last published (a new string, the caller frees), for tests
//  and for shoalctl top.
char *shoal_metrics_text(shoal_metrics_t *self);

#endif
