/*  shoal_drain_store: a node's drain record, kept across restarts.

    One fact, in oplog_meta beside the node's other facts about itself:

        ("drain") -> Drain (shoal_msg_drain_t: the draining mark, and the
                     last drain's phase and each of its claims)

    The mark must outlive a restart (a node being emptied for maintenance
    must not take claims again because it restarted), and so must the
    drain's own progress: a drain that a crash interrupted resumes from it,
    or reports where it stopped. Every write is synced.
*/
#ifndef SHOAL_DRAIN_STORE_H_INCLUDED
#define SHOAL_DRAIN_STORE_H_INCLUDED

#include <stdbool.h>

#include "shoal_msg.h"
#include "shoal_store.h"

//  The record's key in oplog_meta (one string).
#define SHOAL_DRAIN_STORE_KEY "drain"

//  Whether VALUE (SIZE bytes) is a drain record that decodes and checks.
//  Returns 0, or -1 with ERROR saying why not (the consistency sweep).
int shoal_drain_store_check(const uint8_t *value, size_t size, char *error, size_t error_size);

//  Reads the record into DRAIN (the caller clears it). Returns 0 with
//  *FOUND set, or -1 when it cannot be read or does not decode (logged,
//  the error names the key).
int shoal_drain_store_get(shoal_store_t *store, shoal_msg_drain_t *drain, bool *found);

//  Writes DRAIN, synced. Returns 0 or -1.
int shoal_drain_store_put(shoal_store_t *store, const shoal_msg_drain_t *drain);

#endif
