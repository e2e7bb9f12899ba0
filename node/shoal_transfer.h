/*  shoal_transfer: a move's bytes, from the source's guest image into the
    target's, beside the node's reactor rather than through it.

    The target's receiver is one actor per node with a ROUTER of its own
    (a CURVE server presenting the cluster key; only callers with the node
    role are served), so bulk bytes never wait behind requests, and the
    reactor never copies a page. The source runs one sender actor per
    outgoing move, with one DEALER to the receiver. Each actor's thread does
    its own copying; libzmq's I/O thread encrypts on one side and decrypts
    on the other, so a move at full speed uses both cores while each
    reactor stays free for heartbeats.

    A sender runs the rounds on its own: a baseline of every page (those
    still as the image was created are skipped: the target's new image
    holds them already), then the pages the guest dirtied meanwhile, while
    each round shrinks. After every round it estimates the final round from
    the pages now dirty and the rate measured so far; once that fits the
    downtime budget (half of it while the rounds still halve what is left)
    it syncs the source's own image while the guest still runs (its
    writeback is started all along the rounds), so that no writeback of it
    lands in the final step's synced writes, and says READY and waits. The
    node pauses the guest and says FINAL; the sender sends what is left,
    and the receiver makes the image durable before it acknowledges. A round that no longer shrinks, or
    too many rounds, fail the move with the figures that decided it.

    Liveness is judged by progress, never by how long a round lasts: a round
    over a slow link may take minutes. The sender gives up once the receiver
    said nothing (no credit, no acknowledgement) for the step timeout, or
    for the shorter final timeout once the guest is paused; the receiver
    tells its node every SHOAL_TRANSFER_PROGRESS_MS that chunks arrive, and
    the node gives up on a source that sent nothing for the step timeout.

    A guest whose manager captures it (the exec driver) moves in files
    instead: the sender asks its node for each round (CAPTURE), the node
    has the guest actor run the manager's capture and hands the sender the
    files it listed (shoal_sender_files); the sender streams them over the
    same socket, with the same credit, and the receiver writes them under
    the move's directory on the target, where the manager's receive reads
    them. The budget rule is the same, with a round's bytes for its pages:
    a round's size is known once it is captured, so the final round is
    estimated from the size of the last one at the rate of the last delta
    round, and a round that does not shrink counts as a stall. Every
    file of a round is synced before its acknowledgement (the node cannot
    tell a manager's memory from its disk).

    Wire (binary frames, integers little-endian):
        source -> target  CHUNK ["C", move id, head, pages]
                              head: u32 round, u8 object, u32 runs, then per run
                              u32 first page, u32 count; pages: the runs' pages
                          FILE  ["F", move id, head, bytes]
                              head: u32 round, u64 offset, then the file's path
                              (relative to the move's directory); a file's first
                              chunk (offset 0) makes it anew
                          END   ["E", move id, u32 round, u8 final, u64 pages]
                              (bytes, for a move in files)
                          OBJECT ["O", id, u64 offset, bytes]: an object's
                              bytes in order, its END final with the byte count
                          AT WORK ["P", move id], every SHOAL_TRANSFER_PROGRESS_MS
                              while the node captures a round: progress
        target -> source  CREDIT ["K", move id, u32 chunks]
                          ACK    ["A", move id, u32 round]
                          ERROR  ["X", move id, text]
    A sender has SHOAL_TRANSFER_WINDOW chunks of credit to start with and
    gets one back for each chunk the receiver has written, so neither side
    buffers more than the window. The receiver gives them back
    SHOAL_TRANSFER_CREDIT_BATCH at a time: each CREDIT costs both sides a
    system call, a wake-up and three CURVE boxes. A sender without credit
    has a whole window in flight or owed, so the batch always fills. Pages go out in chunks of up to 1 MiB,
    read from the image's file into buffers the sender reuses (handed to
    libzmq with zmq_msg_init_data, given back once sent): CURVE copies
    each message to encrypt it, so sending from the mapped image saved
    no copy, and the first touch of each page of a mapping cost more than
    the stream where page tables are shadowed (see s_run_add).
*/
#ifndef SHOAL_TRANSFER_H_INCLUDED
#define SHOAL_TRANSFER_H_INCLUDED

#include <czmq.h>

#include "shoal_checksum.h"
#include "shoal_driver.h"
#include "shoal_gate.h"
#include "shoal_image.h"

//  Chunks a sender may have in flight.
#define SHOAL_TRANSFER_WINDOW 16
//  Credit a receiver gives back in one CREDIT: at most the window.
#define SHOAL_TRANSFER_CREDIT_BATCH 4
//  Most pages in one chunk (1 MiB).
#define SHOAL_TRANSFER_CHUNK_PAGES 256
//  Most rounds before the final one.
#define SHOAL_TRANSFER_ROUNDS_MAX 30
//  Auto-converge: the first throttle step, each further one, and the floor
//  (percent of the guest's writes held back), as QEMU's defaults.
#define SHOAL_TRANSFER_THROTTLE_FIRST 20
#define SHOAL_TRANSFER_THROTTLE_STEP 10
#define SHOAL_TRANSFER_THROTTLE_MAX 99
//  How often each side tells its node that a round is under way.
#define SHOAL_TRANSFER_PROGRESS_MS 200

// ---------------------------------------------------------------------------
//  Receiver (target)

typedef struct _shoal_receiver_t shoal_receiver_t;

//  A receiver bound to BIND (tcp://HOST:PORT, port 0 or * for any),
//  advertised with the host of ADVERTISE (the node's own endpoint); its
//  socket presents CLUSTER (copied); GATE bounds its connections that do
//  not authenticate. Returns NULL with *ERROR_P on failure.
shoal_receiver_t *shoal_receiver_new(const char *bind, const char *advertise, zcert_t *cluster,
                                     const shoal_gate_options_t *gate, char **error_p);
void shoal_receiver_destroy(shoal_receiver_t **self_p);

//  The endpoint senders connect to.
const char *shoal_receiver_endpoint(shoal_receiver_t *self);

//  The socket the receiver's events arrive on, for the reactor to read
//  with shoal_receiver_event.
zsock_t *shoal_receiver_sock(shoal_receiver_t *self);

//  Prepares the image of move MOVE_ID in DIR (any old one there removed),
//  its memory files under MEMORY_DIR (NULL or "": in DIR; see
//  shoal_image_create_in): MEMORY_BYTES of memory and DISK_BYTES of disk, sparse files that the
//  chunks for the move are written into from then on (pages never sent
//  stay zeros, pristine). An event (prepared) says when it is ready, or why not.
//  The image must come out at MEMORY_PAGES pages and DISK_BLOCKS blocks,
//  as the source's has.
void shoal_receiver_prepare(shoal_receiver_t *self, const char *move_id, const char *dir,
                            const char *memory_dir, uint64_t memory_bytes, uint64_t disk_bytes, uint64_t memory_pages,
                            uint64_t disk_blocks);

//  Prepares move MOVE_ID in files (a guest whose manager captures it): DIR
//  is made empty, and the round files are written under it. An event
//  (prepared) says when it is ready, or why not.
void shoal_receiver_prepare_files(shoal_receiver_t *self, const char *move_id, const char *dir);

//  Removes DIR, a move's directory of round files, and all it holds.
//  Returns 0, or -1 when something stayed.
int shoal_transfer_files_remove(const char *dir);

//  Prepares to receive an object's bytes as ID: SIZE bytes into the file
//  PATH (made anew), which must hash to CHECKSUM (copied), with the
//  algorithm it carries (shoal_checksum.h). The sender's END is acknowledged only once every byte arrived,
//  the checksum matched and the file is durable; otherwise the sender is
//  refused and the event (final) carries the error. An event (prepared)
//  says when it is ready, or why not.
void shoal_receiver_prepare_object(shoal_receiver_t *self, const char *id, const char *path, uint64_t size,
                                   const shoal_checksum_t *checksum);

//  Stops receiving MOVE_ID and closes its image. With REMOVE its files go
//  too: the receiver takes commands in order, so an image still being
//  prepared is removed once made.
void shoal_receiver_forget(shoal_receiver_t *self, const char *move_id, bool remove);

//  One event of the receiver: a move's image is ready (PREPARED), chunks
//  of a round keep arriving (PROGRESS, at most every
//  SHOAL_TRANSFER_PROGRESS_MS), a round of a move arrived whole (and, when
//  FINAL, the image is durable), or the move failed (ERROR set).
typedef struct {
    char move_id[64];
    bool prepared;
    bool progress;
    uint32_t round;
    bool final;
    uint64_t pages;             //  pages the round carried (bytes, for a move in files)
    uint64_t sync_us;           //  how long the round's sync took (final: inside the downtime)
    char error[256];            //  empty unless it failed
} shoal_receiver_event_t;

//  Reads one event from shoal_receiver_sock. Returns 0 or -1 (none).
int shoal_receiver_event(shoal_receiver_t *self, shoal_receiver_event_t *event);

// ---------------------------------------------------------------------------
//  Sender (source)

typedef struct {
    const char *move_id;
    const char *endpoint;       //  the target's receiver
    zcert_t *cluster;           //  presented to the receiver (copied)
    const char *server_key;     //  the receiver's public key (the cluster's)
    const char *image_dir;      //  the guest's image (NULL: a move in files)
    const char *files_dir;      //  a move in files: where the node's captures write the rounds
    const char *object_path;    //  an object: the file sent whole in one final round (DONE once verified)
    uint32_t max_downtime_ms;   //  the budget of the final round
    int64_t step_timeout_ms;    //  longest silence of the receiver while the guest runs
    int64_t final_timeout_ms;   //  longest silence of the receiver while the guest is paused
    bool converge;              //  throttle a guest that dirties faster than the rounds shrink
} shoal_sender_args_t;

//  What a sender tells its node, read with shoal_sender_event.
typedef enum {
    SHOAL_SENDER_PROGRESS,      //  a round arrived whole, or one is under way
    SHOAL_SENDER_READY,         //  the final round fits the budget: pause the guest, then FINAL
    SHOAL_SENDER_DONE,          //  the final round arrived and is durable
    SHOAL_SENDER_FAILED,        //  the move cannot go on (error says why)
    SHOAL_SENDER_CAPTURE,       //  a move in files: capture round ROUND, then shoal_sender_files
    SHOAL_SENDER_THROTTLE,      //  auto-converge: hold back THROTTLE percent of the guest's writes,
                                //  then shoal_sender_throttled
} shoal_sender_what_t;

typedef struct {
    shoal_sender_what_t what;
    uint32_t round;             //  rounds sent so far
    uint64_t bytes;             //  bytes sent so far
    uint64_t rate;              //  bytes/s of the rounds so far
    uint64_t dirty_rate;        //  bytes/s the guest dirtied in the last round
    uint64_t estimate_ms;       //  the final round, estimated
    uint64_t final_us;          //  DONE: how long the final round took, acknowledgement included
    uint64_t final_bytes;       //  DONE: what the final round carried
    uint32_t throttle;          //  THROTTLE: the percent asked
    char error[512];
} shoal_sender_event_t;

//  Starts a sender for ARGS (copied). Its actor's socket carries its events;
//  send it "FINAL" after READY. Destroying it ends the move's transfer.
zactor_t *shoal_sender_new(const shoal_sender_args_t *args);

//  A move in files: round ROUND was captured into the files dir as FILES
//  lists (paths relative to it); FINAL for the last one, the guest paused
//  (it takes the place of "FINAL").
void shoal_sender_files(zactor_t *sender, uint32_t round, bool final, const shoal_driver_files_t *files);

//  Auto-converge: the guest's throttle is THROTTLE percent now, or (ERROR
//  not NULL) it could not be set, which fails the move with ERROR.
void shoal_sender_throttled(zactor_t *sender, uint32_t throttle, const char *error);

//  Reads one event from SENDER. Returns 0 or -1 (none).
int shoal_sender_event(zactor_t *sender, shoal_sender_event_t *event);

#endif
