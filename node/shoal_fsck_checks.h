/*  shoal_fsck_checks: the sweep's built-in checks, one per store and module
    of the node (see shoal_fsck.h for how a run drives them):

      oplog    the operation log's families: entries, chains, indexes, heads,
               counts, materialised keys (store/shoal_oplog_fsck.h); repair:
               reconcile rebuilds what derives from the entries
      claims   every claim and counter decodes, the counters equal a recount
               of the claims (per tenant and for the node), and every guest
               directory belongs to a claim held here; repair: the counters
               from a recount, orphan guest directories removed (never one a
               guest process still runs on; decided on the reactor, removed
               on the sweep's worker)
      memory   with guest/memory_dir set: every memory directory there that
               this node's guests' would be named (shoal_image_memory_owned)
               has a guest directory here linking to it, and no guest
               directory's image link dangles; repair: a memory directory
               of no guest removed (looked at again on the reactor, removed
               on the sweep's worker); a dangling link is left to an
               operator (the guest's memory is gone)
      moves    every move record decodes and has its claim or its move in
               flight, and every directory of round files its move; repair:
               a finished move's orphan record, orphan round files (removed
               on the sweep's worker)
      locks    every lock's counts equal its lock records, and every record
               is plausible: a mode, a holder node this node knows, a lease
               that exists, a claim held here; repair: the counts from the
               records, a record whose lease is gone rolled back
      values   every value of the claims' own key spaces and of the node's
               accounts of damage decodes (claim_keys, default)

      objects  the storage objects' catalog and this node's instances, their
               bytes, locks and files (objects, instances): the objects
               module's own check (shoal_objects_check), one call that reads
               them whole; repair: what that module mends
*/
#ifndef SHOAL_FSCK_CHECKS_H_INCLUDED
#define SHOAL_FSCK_CHECKS_H_INCLUDED

#include "shoal_fsck.h"
#include "shoal_claim_store.h"
#include "shoal_key_space.h"
#include "shoal_oplog.h"

typedef struct _shoal_moves_t shoal_moves_t;
typedef struct _shoal_objects_t shoal_objects_t;

//  What the built-in checks look at and mend through (all borrowed; they
//  must outlive the sweep).
typedef struct {
    const char *node_id;            //  this node: a lock held from it is plausible
    const char *data_dir;           //  DATA: its moves/ holds round files
    const char *guest_dir;          //  where guest directories live
    const char *memory_dir;         //  where their memory directories live (guest/memory_dir; NULL or "": none)
    shoal_oplog_t *oplog;           //  the log, for its validator and its reconcile
    shoal_claim_store_t *claims;    //  the live claims, counters and move records
    shoal_key_space_t *space;       //  the live key spaces and locks
    shoal_moves_t *moves;           //  the moves in flight (NULL: none are, no node runs)
} shoal_fsck_node_t;

//  Registers the checks above with FSCK, reading and mending through NODE
//  (borrowed, like what it points to: it must outlive FSCK).
void shoal_fsck_checks_register(shoal_fsck_t *fsck, const shoal_fsck_node_t *node);

//  Registers the storage objects' check with FSCK (OBJECTS borrowed; it must
//  outlive FSCK).
void shoal_fsck_objects_register(shoal_fsck_t *fsck, shoal_objects_t *objects);

#endif
