/*  shoal_move_record: the record each side of a live move keeps, and the
    steps it may take.

    A move's decision lives in the source's record; the target keeps a
    record of what it received. Each record is written in the claims'
    store (with the claim change it journals, in one batch) and only along
    these steps (NONE is no record: its first write, and its deletion):

        source:  NONE -> pending -> final -> committed -> started -> NONE
                 pending | final -> aborted -> NONE
                 committed -> aborted    (an operator resumes the guest on the
                                          source after the commit: move resume)
                 started -> started, aborted -> aborted  (written again: the
                                          drop's last write, a restart
                                          finishing an abort's journal)
        target:  NONE -> receiving -> received -> adopted -> NONE
                 receiving | received -> NONE  (what was received is dropped)
                 adopted -> adopted       (the claim written running with it)

    A write or delete that would take another step is refused and logged:
    it is a bug of the move code, and the record keeps what it said.
*/
#ifndef SHOAL_MOVE_RECORD_H_INCLUDED
#define SHOAL_MOVE_RECORD_H_INCLUDED

#include "shoal_claim_store.h"
#include "shoal_proto.h"

#include <stdbool.h>

//  Whether ROLE's record may go FROM -> TO (SHOAL_MOVE_NONE: no record).
bool shoal_move_step_legal(shoal_move_role_t role, shoal_move_state_t from, shoal_move_state_t to);

//  Writes MOVE as its role's record, with the claim change PREVIOUS ->
//  RECORD in the same batch (both may be NULL), synced unless LAZY; MOVE's
//  updated time is set. The stored record's state must step to MOVE's.
//  Returns 0 or -1 (logged, nothing written).
int shoal_move_record_write(shoal_claim_store_t *store, shoal_move_t *move, const shoal_claim_record_t *previous,
                            const shoal_claim_record_t *record, bool lazy);

//  Deletes ROLE's record of CLAIM_ID, if its state may end there. Returns 0
//  or -1 (logged).
int shoal_move_record_delete(shoal_claim_store_t *store, shoal_move_role_t role, const char *claim_id);

//  A deep copy of MOVE into COPY (through its codec).
void shoal_move_copy(shoal_move_t *copy, const shoal_move_t *move);

#endif
