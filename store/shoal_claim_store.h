/*  shoal_claim_store: the owner-local claims and their admission counters.

    Two column families, both written only by the claim's owner:

        claims     ("claim", id)        -> ClaimRecord
        counters   ("node")             -> CounterRecord of the whole node
                   ("tenant", tenant)   -> CounterRecord of one tenant

    A claim's change and the counter change it implies are one batch, so a
    crash leaves either both or neither: the counters always equal a count
    of the claims. The counters say how many claims are not released, how
    many hold a guest (creating, running, paused, moving) and how much memory
    those guests have. A released claim stays on record with state released,
    so that its id is never given out again.
*/
#ifndef SHOAL_CLAIM_STORE_H_INCLUDED
#define SHOAL_CLAIM_STORE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shoal_store.h"

//  Every claim of a listing, in id order.
typedef struct {
    shoal_claim_record_t *items;    //  COUNT records, owned
    size_t count;                   //  records in use
    size_t capacity;                //  records allocated
} shoal_claim_records_t;

void shoal_claim_records_clear(shoal_claim_records_t *list);

//  True when a claim in STATE holds a guest and so counts as running.
bool shoal_claim_holds_guest(shoal_claim_state_t state);

typedef struct _shoal_claim_store_t shoal_claim_store_t;

//  Claims in STORE (borrowed; it must outlive them). SYNC asks every write
//  to be durable before it returns.
shoal_claim_store_t *shoal_claim_store_new(shoal_store_t *store, bool sync);
void shoal_claim_store_destroy(shoal_claim_store_t **self_p);

//  Reads claim ID. Returns 0 with *FOUND set (RECORD filled when found; the
//  caller clears it with shoal_claim_codec.clear), or -1.
int shoal_claim_store_get(shoal_claim_store_t *self, const char *id, shoal_claim_record_t *record,
                          bool *found);

//  Writes RECORD, which replaces PREVIOUS (NULL for a new claim), and
//  changes the node's and the tenant's counters by the difference, in one
//  batch. Returns 0 or -1 (nothing written).
int shoal_claim_store_put(shoal_claim_store_t *self, const shoal_claim_record_t *previous,
                          const shoal_claim_record_t *record);

//  Every claim, released ones included. LIST is cleared first. Returns 0 or -1.
int shoal_claim_store_list(shoal_claim_store_t *self, shoal_claim_records_t *list);

//  The stored counters of TENANT (NULL: of the node). A scope never written
//  reads as zero. Returns 0 or -1.
int shoal_claim_store_counters(shoal_claim_store_t *self, const char *tenant,
                               shoal_counter_record_t *counters);

//  Counts the claims of TENANT (NULL: of the node) afresh. Returns 0 or -1.
int shoal_claim_store_recount(shoal_claim_store_t *self, const char *tenant,
                              shoal_counter_record_t *counters);

//  Rewrites every stored counter that differs from a recount (a damaged
//  store, or counters from before they were kept), in one batch. *FIXED (may
//  be NULL) receives how many scopes were rewritten. Returns 0 or -1.
int shoal_claim_store_repair(shoal_claim_store_t *self, size_t *fixed);

//  The last error, as the store keeps it.
const char *shoal_claim_store_error(shoal_claim_store_t *self);

#endif
