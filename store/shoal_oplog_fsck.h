/*  shoal_oplog_fsck: the operation log's part of the consistency sweep.

    A check of the log as a snapshot of the store holds it, a slice at a
    time, so that the node's reactor bounds the work of each tick. It looks
    at every key of the oplog's families once, in this order:

      1. oplog_by_node_hlc, every node's chain in order: each value decodes
         to an entry whose key it sits at, whose hash matches its fields and
         which links to the entry before it and is stamped after it (the
         validator every append uses, shoal_oplog_check); the first entry of
         a chain links to nothing unless the dataset was pruned.
      2. oplog_by_hash and oplog_by_hlc: walked without a lookup per key.
         Each dataset's keys (and, in oplog_by_hash, the locators) are
         summed into a digest; step 1 sums the keys and locators its entries
         should have there. Equal counts and digests say the indexes agree with the
         entries at the cost of a scan; a dataset whose figures differ is
         walked again, key by key with point reads (step 6), to name each
         key that is missing, extra or holds other bytes.
      3. oplog_node_head: each head decodes and follows the head rule (the
         node's latest entry, or a newer one that the watermark says was
         pruned); a chain without a head is named.
      4. kv: each materialised key decodes; live keys are counted.
      5. oplog_meta: each value reads as its name's tuple; each dataset's
         counts equal what steps 1 and 4 counted. oplog_prev_to_hash, an
         index no longer written, holds nothing.
      6. the datasets whose digests differed, key by key.

    Repairable findings are those shoal_oplog_reconcile mends (index keys,
    heads, counts); an entry that does not decode or hash is left for an
    operator (its bytes are all there is of it here; a peer holds it too).
*/
#ifndef SHOAL_OPLOG_FSCK_H_INCLUDED
#define SHOAL_OPLOG_FSCK_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shoal_finding.h"
#include "shoal_oplog.h"

typedef struct _shoal_oplog_fsck_t shoal_oplog_fsck_t;

//  A check of the log of OPLOG (borrowed: its validator and epochs) as
//  SNAPSHOT (borrowed, a shoal_store_snapshot of the oplog's store) holds it.
shoal_oplog_fsck_t *shoal_oplog_fsck_new(shoal_oplog_t *oplog, shoal_store_t *snapshot);
void shoal_oplog_fsck_destroy(shoal_oplog_fsck_t **self_p);

//  Looks at up to BUDGET keys, telling FN of each finding. Sets *DONE once
//  every step is over. Returns the keys looked at, or -1 when the snapshot
//  cannot be read (the store's error says why; the check is then over).
int64_t shoal_oplog_fsck_step(shoal_oplog_fsck_t *self, size_t budget, bool *done, shoal_finding_fn *fn,
                              void *arg);

//  Mends what the check found that is safe, in OPLOG (the live log): when
//  an index key, a head or the retired index was named, the indexes and
//  heads are rebuilt from the entries (shoal_oplog_repair_indexes, REPAIR
//  counting what it did); each dataset whose counts were named is
//  recounted. Returns 0, or -1 with shoal_oplog_error saying what failed.
int shoal_oplog_fsck_repair(shoal_oplog_fsck_t *self, shoal_oplog_t *oplog, shoal_oplog_repair_t *repair);

//  The same repair a slice at a time (shoal_oplog_rebuild_step): up to
//  BUDGET keys of the rebuild, or of a dataset's recount
//  (shoal_oplog_recount_step), per call; *DONE
//  once all is done. REPAIR (zeroed by the caller before the first call)
//  adds up what was done. Returns the keys visited, or -1 with
//  shoal_oplog_error saying what failed.
int64_t shoal_oplog_fsck_repair_step(shoal_oplog_fsck_t *self, shoal_oplog_t *oplog, size_t budget, bool *done,
                                     shoal_oplog_repair_t *repair);

//  Entries the check has seen so far (in oplog_by_node_hlc).
uint64_t shoal_oplog_fsck_entries(shoal_oplog_fsck_t *self);

#endif
