/*  shoal_admission: whether this node may take one more claim, or run one.

    Four limits, each a reloadable key: limits/max_claims (claims on the
    node), limits/tenant_max_claims (one tenant's claims on the node),
    limits/max_running (claims holding a guest) and limits/memory_mb (the
    memory of those guests). What is in use comes from the stored counters,
    plus the reservations incoming moves hold: a reservation counts like a
    claim in every limit, but it is no claim, so listings never show it.
    Reservations live in memory only; a move that a restart interrupts is
    resolved by the move's own records.

    A refusal is 429 naming the limit, or 507 for memory. Lowering a limit
    refuses new claims and stops none.
*/
#ifndef SHOAL_ADMISSION_H_INCLUDED
#define SHOAL_ADMISSION_H_INCLUDED

#include "shoal_claim_store.h"
#include "shoal_config.h"

typedef struct _shoal_admission_t shoal_admission_t;

//  Admission against the live SETTINGS and the counters in CLAIMS (both
//  borrowed).
shoal_admission_t *shoal_admission_new(const shoal_settings_t *settings, shoal_claim_store_t *claims);
void shoal_admission_destroy(shoal_admission_t **self_p);

//  Counts each refusal in METRICS (borrowed; NULL: none).
typedef struct _shoal_metrics_t shoal_metrics_t;
void shoal_admission_set_metrics(shoal_admission_t *self, shoal_metrics_t *metrics);

//  Whether a claim of TENANT with MEMORY_BYTES may start: as a new claim
//  (NEW_CLAIM, counted in both claim limits too) or as a stopped claim
//  starting again. Returns SHOAL_STATUS_OK (200), or 429 / 507 / 500 with
//  MESSAGE saying which limit refused it and by how much.
uint32_t shoal_admission_check(shoal_admission_t *self, const char *tenant, uint64_t memory_bytes,
                               bool new_claim, char *message, size_t message_size);

//  Whether a guest with a disk of DISK_BYTES and a load of RATE bytes/s may
//  be made in GUESTS_DIR: the rate within limits/guest_rate_mb (else 400),
//  the disk within limits/disk_mb and the space free in GUESTS_DIR (else
//  507). Returns 200, or the refusal with MESSAGE naming the limit.
uint32_t shoal_admission_check_guest(shoal_admission_t *self, const char *guests_dir, uint64_t disk_bytes,
                                     uint64_t rate, char *message, size_t message_size);

//  Checks as for a new claim and, when admitted, holds a reservation of
//  TENANT for MEMORY_BYTES until shoal_admission_unreserve. Returns the
//  status as shoal_admission_check does.
uint32_t shoal_admission_reserve(shoal_admission_t *self, const char *tenant, uint64_t memory_bytes,
                                 char *message, size_t message_size);

//  Holds a reservation without checking: a move found in flight at a
//  restart had it before.
void shoal_admission_hold(shoal_admission_t *self, const char *tenant, uint64_t memory_bytes);

//  Checks again, before a move's final round, that the memory in use with
//  the reservations held (the move's own among them, for MEMORY_BYTES) is
//  within limits/memory_mb, which a reload or a gauge may have changed.
//  Returns 200, or 507 with MESSAGE.
uint32_t shoal_admission_recheck_memory(shoal_admission_t *self, const char *tenant, uint64_t memory_bytes,
                                        char *message, size_t message_size);

//  Marks the node draining (REASON, copied: what a refusal names) or not
//  (NULL): while it drains, a new claim and an incoming move are refused
//  with 503 naming the drain; claims already here start and stop as ever.
void shoal_admission_set_draining(shoal_admission_t *self, const char *reason);

//  The node's limits and what counts against them, reservations included,
//  into CAPACITY (its counts and limits; the caller sets the rest). Returns
//  0, or -1 when the counters cannot be read.
int shoal_admission_capacity(shoal_admission_t *self, shoal_msg_capacity_t *capacity);

//  Gives back one reservation of TENANT for MEMORY_BYTES.
void shoal_admission_unreserve(shoal_admission_t *self, const char *tenant, uint64_t memory_bytes);

//  The reservations held: of TENANT, or of the node when TENANT is NULL.
shoal_counter_record_t shoal_admission_reserved(shoal_admission_t *self, const char *tenant);

//  The tenants holding reservations: a new list of strings, the caller's
//  to destroy.
zlistx_t *shoal_admission_reserved_tenants(shoal_admission_t *self);

#endif
