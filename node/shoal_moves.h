/*  shoal_moves: live moves of running claims to a named peer.

    The source is the authority: the decision of a move lives in the
    source's record (column family "moves"), so no database outside the two
    nodes is needed. Source record states, each a compare-and-set journaled
    before the step it guards:

        pending    written before anything is sent (the claim is moving)
        final      the guest is paused for the last round
        committed  the target asked to start its copy, and may: no return
        started    the target runs the guest; the source drops its copy,
                   then deletes the record
        aborted    from pending or final, written before the source resumes
                   its guest; deleted once the target said it dropped its copy

    The target keeps a reception record of its own (receiving, received,
    adopted), and deletes it itself. A move goes:

     1. admit: the target checks every limit and holds a reservation; a
        refusal answers the caller before anything pauses
     2. rounds: baseline, then dirty pages while they shrink (a sender actor
        and the target's receiver actor, shoal_transfer); rounds that do
        not shrink enough have the guest throttled step by step
        (auto-converge, unless the move asked no_converge or its driver
        cannot); the move aborts when the final round's estimate does not
        fit max_downtime_ms once the throttle is at its floor
     3. final: the target rechecks memory, the claim's keys go to the
        target (shoal_txn.h; both sides write them synced, so they go
        before the pause), the source pauses the guest (calls answer 503
        "moving"), writes final, sends the rest
     4. the target makes its copy durable as far as a copy of a running
        guest can be (the disk synced each round; the memory written back
        and synced at the end of each round but the final one, whose pages
        stay in the page cache, which outlives a crash of either process
        but, like the guest's own memory, not of the machine) and asks to
        commit; the source sets committed from final (the one synced write
        of the move's records inside the downtime: final, received and
        adopted are written unsynced, as a restart that lost them recovers
        as from the step before; the images synced during the rounds, the
        target's and the source's own, leave it little to flush), or
        answers 409 when it aborted
     5. the target adopts the claim with epoch + 1 (its reservation becomes
        the claim in one batch), starts the guest, registers itself as the
        owner, and tells the source; the source drops the claim, its guest
        and files, and deletes its record. Calls to it answer 404 since.

    Every step is guarded by progress, not by its length: a side gives up
    once the other showed no progress (chunk, credit, acknowledgement,
    answer) for move/step_timeout_ms, so a round over a slow link lasts as
    long as the link needs. While the guest is paused the bound is
    move/final_timeout_ms instead (1 s by default): the sender gives up on
    a target silent that long in the final round, and the source on one
    that has not asked to commit that long after the round's end. A guest
    paused by a final round that fails therefore runs again on the source
    within the final round's own length (its estimate fitted the budget)
    plus move/final_timeout_ms plus a poll of the sender (100 ms), not a
    step timeout. Before committed, any failure aborts: the guest runs on
    the source, the target drops what it received and its reservation. A restart reads the records: the source
    aborts pending and final moves and resumes their guests; the target
    asks the source about a copy it holds and adopts it only if the answer
    is committed (or started). After committed a source that cannot reach
    its target keeps the guest paused; `shoalctl move resume` runs it on the
    source again, at the operator's word, and a target that returns later
    is told the move was aborted. Records left past move/record_ttl_ms are
    swept.

    move/concurrency counts moves in both directions; past it a move is
    refused with 429, and lowering it stops none in flight.

    Where each step is, in order (shoal_move_source.c: S, shoal_move_target.c:
    T, shoal_moves.c: M; every guest operation goes through the guest actor
    and comes back to the function after the arrow):

     1. S shoal_moves_move checks, asks the guest actor for the image's size
        -> S s_move_begin journals pending, S s_admit_ask asks the target;
        T shoal_moves_admit reserves, journals receiving, has the receiver
        make the image -> T s_in_prepared answers -> S s_admit_done starts
        the sender
     2. S s_sender_readable follows the rounds (T s_receiver_readable the
        chunks); at THROTTLE S s_throttle asks the guest actor for the
        step -> S s_throttled tells the sender; at READY it asks T
        shoal_moves_prepare
     3. S s_prepare_done -> S s_keys_send (the keys) -> S s_keys_sent
        asks the guest actor to pause -> S s_paused_done journals final
        and sends the last round
     4. T s_receiver_readable: the copy is durable, journals received,
        T s_in_ask_commit -> S shoal_moves_commit journals committed ->
        T s_commit_done
     5. T shoal_moves_in_adopt journals adopted, asks the guest actor to
        start the guest -> T s_in_guest_started writes the claim running,
        registers it, T s_in_tell_started -> S shoal_moves_started ->
        S shoal_moves_out_drop asks the guest actor to remove the guest ->
        S s_dropped deletes the claim with the record's last write,
        S s_out_done keeps the result; T s_started_done deletes its record.
     Aborts: S shoal_moves_out_abort journals aborted, S
     shoal_moves_source_restore writes the claim running and has the guest
     resumed, T shoal_moves_abort -> T shoal_moves_in_drop removes what was
     received (guest actor) -> T s_in_dropped. Recovery after a restart:
     M s_recover; timeouts and retries: M shoal_moves_tick. The records'
     steps: shoal_move_record.

    A guest whose driver moves it through its manager (exec:
    shoal_guests_migrates) goes through the same steps, records, budget,
    faults and recovery; what differs is where a round's bytes come from
    and go to. Its rounds are files in the move's directory on each node
    (M shoal_moves_files_dir, under the data directory, named after the
    move so that a restart finds them from the record):

     1. S s_move_begin: the guest actor's image read only checks the VM
        runs (no pages to count); T shoal_moves_admit has the receiver make
        the move's directory (shoal_receiver_prepare_files)
     2. S s_sender_readable: at each CAPTURE event S s_capture asks the
        guest actor for the manager's capture of that round -> S
        s_captured hands the files to the sender, which streams them over
        the same socket (T s_receiver_readable as for pages)
     3. S s_paused_done -> S s_final_go asks the guest actor for the
        final capture, the guest paused -> S s_captured
        hands it to the sender as the final round
     4. as above; the receiver syncs every file of a round before it
        acknowledges it
     5. T shoal_moves_in_adopt asks the guest actor for the manager's
        receive from the round files (MIGRATE_RECEIVE: made paused unless
        it exists, resumed, the files removed) -> T s_in_guest_started; S
        shoal_moves_out_drop's removal takes the source's round files too.
     Aborts: S shoal_moves_source_restore has the guest actor run the
     manager's abort (MIGRATE_ABORT: the guest runs again, the round files
     go) instead of a resume; T shoal_moves_in_drop's removal takes the
     received files.
*/
#ifndef SHOAL_MOVES_H_INCLUDED
#define SHOAL_MOVES_H_INCLUDED

#include <czmq.h>

#include "shoal_auth.h"
#include "shoal_claims.h"
#include "shoal_txn.h"
#include "shoal_config.h"
#include "shoal_mesh.h"
#include "shoal_proto.h"

typedef struct _shoal_moves_t shoal_moves_t;

//  Moves of this node's CLAIMS, to and from peers of MESH, their guests
//  reached through GUESTS, with the live SETTINGS (all borrowed); the receiver presents CLUSTER (copied) and is
//  advertised with the host of ENDPOINT. Returns NULL with *ERROR_P.
shoal_moves_t *shoal_moves_new(const shoal_settings_t *settings, const char *endpoint, zcert_t *cluster,
                               shoal_claims_t *claims, shoal_guests_t *guests, shoal_mesh_t *mesh,
                               char **error_p);
void shoal_moves_destroy(shoal_moves_t **self_p);

//  Counts moves as they end, and refusals, in METRICS (borrowed; NULL: none).
typedef struct _shoal_metrics_t shoal_metrics_t;
void shoal_moves_set_metrics(shoal_moves_t *self, shoal_metrics_t *metrics);
//  The claims' key spaces (borrowed), which go with a claim in the final
//  step (shoal_txn.h): without them a move carries no keys.
void shoal_moves_set_txn(shoal_moves_t *self, shoal_txn_t *txn);

//  Reads the move records left by a previous run and resolves what it can
//  at once; registers its readers on LOOP and answers late on ROUTER.
//  Returns 0 or -1.
int shoal_moves_start(shoal_moves_t *self, zloop_t *loop, zsock_t *router);

//  The node is stopping: moves that can still abort do (their guests run
//  on), and answers that arrive from now on are dropped.
void shoal_moves_stop(shoal_moves_t *self);

//  Time-driven work: step timeouts, retries towards the other side, the
//  sweep. Call it from the node's tick.
void shoal_moves_tick(shoal_moves_t *self);

bool shoal_moves_handles(shoal_msg_type_t type);

//  Told once how a move asked with shoal_moves_begin ended: refused before
//  it began (MOVE NULL, STATUS and MESSAGE say why), or ended with MOVE's
//  phase done (STATUS 200) or aborted (STATUS the abort's, MESSAGE why).
typedef void (shoal_moves_ended_fn) (void *arg, const char *claim_id, uint32_t status, const char *message,
                                     const shoal_move_t *move);

//  Moves claim CLAIM_ID of this node to node TO with a final-round budget
//  of MAX_DOWNTIME_MS (0: the node's), as an operator's MOVE would, for a
//  caller inside the node (a drain). ENDED (with ARG) is told the end,
//  once; a refusal of the checks made at once is told from within this
//  call. A node that stops tells nothing more.
void shoal_moves_begin(shoal_moves_t *self, const char *claim_id, const char *to, uint32_t max_downtime_ms,
                       shoal_moves_ended_fn *ended, void *arg);

//  The progress of an outgoing move of CLAIM_ID: true with *BYTES_SENT and
//  *PHASE (borrowed, until the next turn of the reactor), false when none
//  runs.
bool shoal_moves_progress(shoal_moves_t *self, const char *claim_id, uint64_t *bytes_sent, const char **phase);

//  Moves in flight here, both ways, as move/concurrency counts them.
size_t shoal_moves_active(shoal_moves_t *self);

//  The move records recovery found unreadable (damage that waits for an
//  operator). Borrowed.
const shoal_move_unreadables_t *shoal_moves_unreadable(shoal_moves_t *self);

//  Deletes the unreadable move record at INDEX of that list, once an
//  operator settled its claim. Returns 0 or -1.
int shoal_moves_forget_unreadable(shoal_moves_t *self, size_t index);

//  Whether the moves of this node hold ROLE's move of CLAIM_ID: a record
//  they will see to its end (the consistency sweep asks).
bool shoal_moves_holds(shoal_moves_t *self, shoal_move_role_t role, const char *claim_id);

//  Removes ROLE's record of CLAIM_ID, and the moves forget it, when its
//  move is over (a source's aborted or started, a target's adopted), no
//  claim here in use needs it and nothing of it is in flight: what the
//  sweep's repair may mend. Returns 0, or -1 with WHY saying why not.
int shoal_moves_forget_finished(shoal_moves_t *self, shoal_move_role_t role, const char *claim_id, char *why,
                                size_t why_size);

//  Answers REQUEST from CALLER. Returns the reply, or NULL when it comes
//  later (a move is answered once the target admitted it): a copy of
//  ROUTING_ID is kept for it.
shoal_envelope_t *shoal_moves_handle(shoal_moves_t *self, const shoal_envelope_t *request,
                                     const shoal_caller_t *caller, zframe_t *routing_id);

#endif
