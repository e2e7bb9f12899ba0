/*  shoal_data: the node's answers to kv and oplog requests.

    The replicated datasets a client reaches through kv put/get/del/scan, and
    the oplog views an operator needs (heads, stats, prune). Each handler
    checks the caller's right to the dataset first: a tenant reaches only its
    own "org/project/" datasets, and a dataset it may not read answers 404,
    as if it did not exist, so that tenants learn nothing of each other.
*/
#ifndef SHOAL_DATA_H_INCLUDED
#define SHOAL_DATA_H_INCLUDED

#include "shoal_auth.h"
#include "shoal_oplog.h"
#include "shoal_proto.h"

//  Appends every node's head in each of DATASETS (strings) to BODY, as
//  oplog_heads answers and the sync's heads exchange sends. Returns 0 or -1
//  (the oplog's error says why).
int shoal_data_heads_fill(shoal_oplog_t *oplog, zlistx_t *datasets, shoal_msg_heads_t *body);

//  Room for a codec's error where only its outcome matters.
#define SHOAL_DATA_ERROR_MAX 256

//  Bytes ITEM takes in a page: its encoding and its framing there. A page
//  adds items while the sum stays within SHOAL_PAGE_BYTES_MAX.
size_t shoal_data_item_size(const shoal_msg_kv_item_t *item);

//  True when TYPE is a request this module answers.
bool shoal_data_handles(shoal_msg_type_t type);

//  Told of each entry a request wrote locally, after the write succeeded;
//  ENTRY is borrowed for the call.
typedef void (shoal_data_written_fn) (const shoal_oplog_entry_t *entry, void *arg);

//  Answers REQUEST (one of the types above) from OPLOG. WRITTEN (may be
//  NULL) is told of each local write, with ARG. Returns a new reply.
shoal_envelope_t *shoal_data_handle(shoal_oplog_t *oplog, const shoal_envelope_t *request,
                                    const shoal_caller_t *caller, shoal_data_written_fn *written,
                                    void *arg);

#endif
