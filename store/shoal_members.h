/*  shoal_members: what a node remembers of its peers across restarts.

    Two facts, both in oplog_meta, so that prune can be held back by peers
    the node knew before it last started:

        ("member", node)                     -> (forgotten, incarnation, endpoint)
        ("confirm", peer, dataset, origin)   -> (wall, logic)

    A member is tracked from the first time it is seen alive until an
    operator forgets it; a forgotten member stays on record with the
    incarnation it had, so that gossip about its old self does not bring it
    back, while the member itself, returning with a newer incarnation, does.
    A confirmation says that PEER holds every entry ORIGIN wrote in DATASET
    up to the stamp: prune waits for it.
*/
#ifndef SHOAL_MEMBERS_H_INCLUDED
#define SHOAL_MEMBERS_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shoal_hlc.h"
#include "shoal_store.h"

typedef struct {
    char *node;                 //  the member's node id (owned)
    char *endpoint;             //  where it last served (owned)
    uint64_t incarnation;       //  the newest incarnation seen
    bool forgotten;             //  retired by an operator
} shoal_member_record_t;

typedef struct {
    shoal_member_record_t *items;   //  COUNT records, owned
    size_t count;               //  records in use
    size_t capacity;            //  records allocated
} shoal_member_list_t;

void shoal_member_list_clear(shoal_member_list_t *list);

typedef struct _shoal_members_t shoal_members_t;

//  Opens the records in STORE (borrowed; it must outlive them).
shoal_members_t *shoal_members_new(shoal_store_t *store);
void shoal_members_destroy(shoal_members_t **self_p);

//  Records NODE as tracked (no longer forgotten) at ENDPOINT and INCARNATION.
int shoal_members_track(shoal_members_t *self, const char *node, const char *endpoint,
                        uint64_t incarnation);

//  Records NODE as forgotten and removes every confirmation it made.
int shoal_members_forget(shoal_members_t *self, const char *node, const char *endpoint,
                         uint64_t incarnation);

//  Every recorded member, by node id. LIST is cleared first.
int shoal_members_list(shoal_members_t *self, shoal_member_list_t *list);

//  Records that PEER holds ORIGIN's entries of DATASET up to STAMP.
int shoal_members_confirm(shoal_members_t *self, const char *peer, const char *dataset,
                          const char *origin, const shoal_hlc_stamp_t *stamp);

//  Reads PEER's confirmation for ORIGIN in DATASET. Returns 0 with *FOUND set, or -1.
int shoal_members_confirmed(shoal_members_t *self, const char *peer, const char *dataset,
                            const char *origin, shoal_hlc_stamp_t *stamp, bool *found);

#endif
