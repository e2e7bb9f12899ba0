/*  shoal_object_store: what a node keeps of storage objects for itself.

    The catalog of objects is replicated (the "objects" dataset, written
    through the oplog); what lives here belongs to this node alone:

        objects    ("ids", KIND)              the id allocator's reservation:
                                              ids below it may have been given out
        instances  ("lock", IID)              a local instance's lock (ObjectLock)
                   ("record", IID, HOLDER)    one lock record per holder

    A lock and the record of the holder it changes are written in one synced
    batch (seed 001: the count and its record change atomically).
*/
#ifndef SHOAL_OBJECT_STORE_H_INCLUDED
#define SHOAL_OBJECT_STORE_H_INCLUDED

#include "shoal_store.h"
#include "shoal_msg.h"

//  The id allocator's reservation for KIND: every id it gave out is below
//  *RESERVED_P (0 when it never reserved). Returns 0 or -1.
int shoal_object_store_ids_reserved(shoal_store_t *store, shoal_object_id_kind_t kind, uint64_t *reserved_p);

//  Raises the reservation of KIND to RESERVED, synced before it returns:
//  ids below it may be given out from then on. Returns 0 or -1.
int shoal_object_store_ids_reserve(shoal_store_t *store, shoal_object_id_kind_t kind, uint64_t reserved);

//  Reads the lock of local instance IID into LOCK; *FOUND_P false when it
//  has none (LOCK is then zeroed). Returns 0 or -1 (a value that does not
//  decode is an error naming its key).
int shoal_object_store_lock_get(shoal_store_t *store, uint64_t iid, shoal_msg_object_lock_t *lock, bool *found_p);

//  Reads HOLDER's lock record of IID. Returns 0 with *FOUND_P, or -1.
int shoal_object_store_record_get(shoal_store_t *store, uint64_t iid, const char *holder,
                                  shoal_msg_object_lock_record_t *record, bool *found_p);

//  Writes LOCK with, in the same synced batch, RECORD put (NULL: none) and
//  the record of DROP_HOLDER deleted (NULL: none). Returns 0 or -1.
int shoal_object_store_lock_write(shoal_store_t *store, const shoal_msg_object_lock_t *lock,
                                  const shoal_msg_object_lock_record_t *record, const char *drop_holder);

//  Removes the lock of IID and every record of it, in one synced batch.
//  Returns 0 or -1.
int shoal_object_store_lock_remove(shoal_store_t *store, uint64_t iid);

//  Calls FN for every local lock (with RECORDS, its COUNT records, all
//  borrowed for the call). FN returns 0 to go on, -1 to stop. Returns 0,
//  or -1 when the store failed or a value does not decode (the store's
//  error names the key).
typedef int (shoal_object_lock_fn) (const shoal_msg_object_lock_t *lock, const shoal_msg_object_lock_record_t *records,
                                    size_t count, void *arg);
int shoal_object_store_lock_each(shoal_store_t *store, shoal_object_lock_fn *fn, void *arg);

//  Calls FN for every lock record whose lock is missing (LOCK zeroed but
//  for its instance id): an fsck's orphans. Same returns as lock_each.
int shoal_object_store_orphan_records(shoal_store_t *store, shoal_object_lock_fn *fn, void *arg);

#endif
