/*  shoal_moves_internal: what the three files of the moves module share,
    and nothing outside them includes.

        shoal_moves.c         the module's front: requests, the tick, recovery
                              after a restart, and the helpers both sides use
        shoal_move_source.c   the source's side (an outgoing move, shoal_move_out_t)
        shoal_move_target.c   the target's side (an incoming move, shoal_move_in_t)

    The records both sides write, and the steps they may take, are
    shoal_move_record's.
*/
#ifndef SHOAL_MOVES_INTERNAL_H_INCLUDED
#define SHOAL_MOVES_INTERNAL_H_INCLUDED

#include "shoal_moves.h"
#include "shoal_claim_store.h"
#include "shoal_fault.h"
#include "shoal_guests.h"
#include "shoal_metrics.h"
#include "shoal_move_record.h"
#include "shoal_transfer.h"

#define MOVES_MESSAGE_MAX 512
//  How often a side retries a request the other side did not answer.
#define MOVES_RETRY_MS 1000
//  How long a finished move's result stays for `move status`.
#define MOVES_RESULT_TTL_MS (3600 * 1000)
//  Where the round files of moves through a guest's manager go, under the
//  node's data directory.
#define MOVES_FILES_DIR "moves"

struct _shoal_moves_t {
    const shoal_settings_t *settings;   //  live settings (borrowed)
    shoal_claims_t *claims;             //  borrowed
    shoal_guests_t *guests;             //  the guest actor: every guest operation goes through it (borrowed)
    shoal_claim_store_t *store;         //  the claims' store (borrowed)
    shoal_mesh_t *mesh;                 //  borrowed
    zcert_t *cluster;                   //  presented by senders
    shoal_receiver_t *receiver;         //  this node's move receiver
    zloop_t *loop;                      //  the node's reactor (borrowed)
    zsock_t *router;                    //  for late replies (borrowed)
    zhashx_t *outgoing;                 //  claim id -> shoal_move_out_t
    zhashx_t *incoming;                 //  claim id -> shoal_move_in_t
    zhashx_t *results;                  //  claim id -> shoal_move_t of the last finished move
    shoal_move_unreadables_t unreadable;    //  move records recovery could not read: they wait for an operator
    bool stopping;                      //  the node is stopping: answers are dropped
    shoal_metrics_t *metrics;           //  counts moves and refusals (borrowed; may be NULL)
    shoal_txn_t *txn;                   //  the claims' keys, sent in the final step (borrowed; NULL: none)
};

//  An outgoing move (this node is the source).
typedef struct {
    shoal_move_t move;                  //  the record, with its progress (first: shoal_moves_move_for)
    shoal_moves_t *owner;
    zactor_t *sender;                   //  NULL once the transfer ended, or after a restart
    zframe_t *client;                   //  the caller waiting for the admission, or NULL
    uint64_t client_request_id;
    int64_t deadline;                   //  monotonic ms the current step must end by (0: none)
    int64_t next_try;                   //  monotonic ms of the next retry towards the target
    int64_t paused_at;                  //  wall ms the guest paused at (0: it runs)
    int64_t paused_us;                  //  monotonic µs of the same, for the downtime's steps
    int64_t pause_asked_us;             //  monotonic µs the guest actor was asked to pause it
    int64_t started;                    //  monotonic ms the move started at
    bool target_dropped;                //  an aborted move's target said it dropped its copy
    bool dropping;                      //  the guest's removal here is in flight
    uint64_t target_started_ms;         //  when the target started the guest (wall ms, its clock)
    uint64_t target_guest_downtime_ms;  //  the gap the guest measured, as the target read it
    uint64_t target_guest_switch_gap_ms;    //  its gap across the switch, as the target read it
    int64_t throttled_at;               //  monotonic ms auto-converge first throttled the guest (0: never)
    shoal_moves_ended_fn *ended;        //  told how the move ended (shoal_moves_begin), or NULL
    void *ended_arg;
} shoal_move_out_t;

//  An incoming move (this node is the target).
typedef struct {
    shoal_move_t move;                  //  the reception record (first: shoal_moves_move_for)
    bool reserved;                      //  a reservation is held for it
    bool expecting;                     //  the receiver writes its chunks
    int64_t deadline;                   //  monotonic ms by which the source must show progress
    int64_t next_try;                   //  monotonic ms of the next request to the source
    bool asking;                        //  a request to the source is in flight
    zframe_t *admitting;                //  the source waiting for the admission, or NULL
    uint64_t admit_request_id;
    bool dropping;                      //  the removal of what was received is in flight
    int64_t committed_ms;               //  wall ms the source's commit was answered (0: not here)
} shoal_move_in_t;

//  What a callback needs to find its move again.
typedef struct {
    shoal_moves_t *self;
    char claim_id[SHOAL_KV_KEY_MAX + 1];
    char move_id[64];
} shoal_move_ask_t;


shoal_move_ask_t *shoal_moves_ask_new(shoal_moves_t *self, const shoal_move_t *move);
//  Reads claim ID. Returns 0 with *FOUND, or -1 (logged).
int shoal_moves_claim_get(shoal_moves_t *self, const char *id, shoal_claim_record_t *record, bool *found);
//  Deletes ROLE's record of a move of CLAIM_ID and forgets the move (each
//  side deletes its own record only).
void shoal_moves_forget(shoal_moves_t *self, shoal_move_role_t role, const char *claim_id);
//  Asks the guest actor to resume the guest of CLAIM if it runs (not
//  exclusive: the claim's record says running already). With MOVE (may be
//  NULL), a guest whose manager moves it has the series ended instead
//  (its abort), and the move's round files go; a guest MOVE found paused
//  stays paused (it is paused again after its manager's abort).
void shoal_moves_guest_resume(shoal_moves_t *self, const shoal_claim_record_t *claim, const shoal_move_t *move);
//  The directory of MOVE's round files on this node, for a guest whose
//  manager moves it (shoal_guests_migrates), or NULL for one moved page by
//  page. A new string the caller frees.
char *shoal_moves_files_dir(shoal_moves_t *self, const shoal_move_t *move);
//  Moves that count against move/concurrency: an aborted one only waits
//  for its target to confirm, and does not.
size_t shoal_moves_in_flight(shoal_moves_t *self);
//  The move ASK is about in MOVES (outgoing or incoming; both hold items
//  that start with their record), or NULL when it ended meanwhile.
void *shoal_moves_move_find(zhashx_t *moves, const char *claim_id, const char *move_id);
void *shoal_moves_move_for(shoal_moves_t *self, zhashx_t *moves, shoal_move_ask_t *ask);
int shoal_moves_record_write(shoal_moves_t *self, shoal_move_t *move, const shoal_claim_record_t *previous,
    const shoal_claim_record_t *record);
//  The same, not synced: for the steps inside the downtime that a machine
//  crash losing them leaves recoverable as before. A synced commit waits
//  behind the file system's writeback, up to 0.9 s here while the images
//  of a 2 GiB move were written back; the one that must be synced inside
//  the downtime is the source's commit, and it carries these with it (the
//  target writes the image back during the rounds, shoal_transfer's
//  s_image_round_sync, so that little is left for it to wait behind).
//    - final: a source that restarts pending aborts and resumes its guest,
//      as it does from final.
//    - received, adopted: a target that restarts receiving asks the source
//      and adopts the copy if the source committed, as it does from these.
int shoal_moves_record_write_lazy(shoal_moves_t *self, shoal_move_t *move,
    const shoal_claim_record_t *previous, const shoal_claim_record_t *record);
//  A refusal of REQUEST with STATUS and a printf-style message.
shoal_envelope_t *shoal_moves_refuse(const shoal_envelope_t *request, uint32_t status, const char *format,
    ...)
    CHECK_PRINTF(3);
//  Sends REPLY (taken) to the caller at ROUTING_ID.
void shoal_moves_reply_later(shoal_moves_t *self, zframe_t *routing_id, shoal_envelope_t **reply_p);
//  Keeps a finished move's record for `move status`.
void shoal_moves_result_keep(shoal_moves_t *self, const shoal_move_t *move);
bool shoal_moves_same_move(const shoal_move_t *move, const char *move_id);
int shoal_moves_send(shoal_moves_t *self, const char *node, shoal_msg_type_t type, const shoal_move_t *move,
    shoal_mesh_reply_fn *fn);
//  Sends a move request of TYPE about MOVE to NODE; FN gets the answer, or
//  NULL after TIMEOUT_MS. Returns 0, or -1 when NODE is no peer (FN is not
//  called).
int shoal_moves_send_within(shoal_moves_t *self, const char *node, shoal_msg_type_t type,
    const shoal_move_t *move, shoal_mesh_reply_fn *fn, int64_t timeout_ms);
void shoal_moves_text_set(char **field, const char *text);
int64_t shoal_moves_wall(void);
void shoal_moves_abort_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply,
    void *arg);
//  MOVE_COMMIT: the target's copy is durable; may it start?
shoal_envelope_t *shoal_moves_commit(shoal_moves_t *self, const shoal_envelope_t *request);
//  MOVE: an operator asks this node to move one of its claims. The checks
//  are made here and again once the guest actor has read the image.
shoal_envelope_t *shoal_moves_move(shoal_moves_t *self, const shoal_envelope_t *request,
    zframe_t *routing_id);
//  Ends OUT before the point of no return: the record says aborted before
//  the guest resumes, the target is told to drop its copy, the caller
//  hears why. Returns nothing: OUT stays until the target confirms.
void shoal_moves_out_abort(shoal_moves_t *self, shoal_move_out_t *out, uint32_t status, const char *reason);
void shoal_moves_out_destroy(void **item_p);
//  The claim moved: the source drops it, its guest and files (through the
//  guest actor), then its record. TOLD is the target's move as it told it
//  (borrowed; NULL when it told nothing): its updated_ms is when it started
//  the guest, its guest_downtime_ms and guest_switch_gap_ms the guest's gaps.
void shoal_moves_out_drop(shoal_moves_t *self, shoal_move_out_t *out, const shoal_move_t *told);
void shoal_moves_out_finish(shoal_moves_t *self, shoal_move_out_t *out);
void shoal_moves_query_target_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply,
    void *arg);
//  MOVE_RESUME: an operator resumes a committed move's guest here.
shoal_envelope_t *shoal_moves_resume(shoal_moves_t *self, const shoal_envelope_t *request);
//  Writes claim RECORD running again (paused, when MOVE moved a paused one)
//  with MOVE (aborted) in one batch, then has its guest resumed (or kept
//  paused). Returns 0 or -1.
int shoal_moves_source_restore(shoal_moves_t *self, shoal_move_t *move);
//  MOVE_STARTED: the target runs the guest.
shoal_envelope_t *shoal_moves_started(shoal_moves_t *self, const shoal_envelope_t *request);
//  MOVE_ABORT: the source gave up; drop what was received.
shoal_envelope_t *shoal_moves_abort(shoal_moves_t *self, const shoal_envelope_t *request);
//  MOVE_ADMIT: a source asks this node to take a claim.
shoal_envelope_t *shoal_moves_admit(shoal_moves_t *self, const shoal_envelope_t *request,
    zframe_t *routing_id);
//  The claim is this node's now: the reservation becomes the claim (one
//  batch with the record), the guest actor starts the guest, the registry
//  names this node.
void shoal_moves_in_adopt(shoal_moves_t *self, shoal_move_in_t *in);
void shoal_moves_in_destroy(void **item_p);
//  Drops what IN received: its files, its reservation, its record.
void shoal_moves_in_drop(shoal_moves_t *self, shoal_move_in_t *in, const char *reason);
//  MOVE_PREPARE: memory again, before the source pauses the guest.
shoal_envelope_t *shoal_moves_prepare(shoal_moves_t *self, const shoal_envelope_t *request);
void shoal_moves_query_source_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply,
    void *arg);
//  An event of the receiver.
int shoal_moves_receiver_readable(zloop_t *loop, zsock_t *sock, void *arg);

#endif
