/*  shoal_guests: the guest actor, the one door to the guests of claims.

    Every guest operation that can block (a driver's create, start, pause,
    resume, stop, destroy, liveness look, guest call, a move's image read
    and the start of a received guest) runs here, on a small pool of worker
    threads that own the drivers, never on the node's reactor: a VM manager
    may take seconds to answer and a guest may ignore SIGTERM for the whole
    stop timeout, while a peer's probe times out in hundreds of
    milliseconds. The reactor submits a request and gets the answer later,
    from its own loop, as a callback.

    One guest's operations run one at a time and in the order they were
    submitted; operations on other guests run beside them, up to the size
    of the pool (past it they wait for a worker in submission order).

    A request is "exclusive" when it changes what the guest is (create,
    start, stop, pause, resume, destroy, a move's steps); while one is
    queued or running, shoal_guests_busy names it, and the claims and moves
    modules answer another state change of that claim 409 (a guest call
    503 with a retry-after, as during a move's final round). Liveness looks and
    guest calls are not exclusive: they queue behind whatever runs.

    Guests of a driver with a manager (exec) move through it: the actor runs
    the manager's capture of each round, its receive on the target and its
    abort, and removes the round files of a move that ended (DIR of the
    request): the transfer carries the files, and nothing else touches
    them.

    A checkpoint reads a stopped or paused guest's image into an object's
    file, and a restore makes a guest's image from one and starts it
    (shoal_checkpoint.h): both read or write a whole image, so both run
    here, beside the node's reactor.

    Nothing outside this module and the drivers includes a driver or the
    guest image code for a guest operation; the transfer's sender and
    receiver actors read and write the image files of a move themselves, on
    their own threads.
*/
#ifndef SHOAL_GUESTS_H_INCLUDED
#define SHOAL_GUESTS_H_INCLUDED

#include "shoal_checksum.h"
#include "shoal_config.h"
#include "shoal_driver.h"

#include <czmq.h>

typedef struct _shoal_guests_t shoal_guests_t;

//  The unit a move counts memory pages and disk blocks in (the guest
//  image's page, checked where both are known).
#define SHOAL_GUESTS_PAGE_BYTES 4096

//  What a request asks of a guest.
typedef enum {
    SHOAL_GUEST_CREATE,         //  create with SPEC, then start
    SHOAL_GUEST_START,          //  start; paused again when PAUSED
    SHOAL_GUEST_PAUSE,
    SHOAL_GUEST_RESUME,         //  with IF_ALIVE: only when it runs, a gone guest is no error
    SHOAL_GUEST_STOP,
    SHOAL_GUEST_DESTROY,        //  stop it if it runs, remove its state and files
    SHOAL_GUEST_PROBE,          //  whether it runs (answer's liveness)
    SHOAL_GUEST_RECONCILE,      //  as probe; a gone guest is started again when RESTART (paused when PAUSED)
    SHOAL_GUEST_KV_PUT,         //  a guest call: KEY = VALUE
    SHOAL_GUEST_KV_GET,         //  a guest call: KEY's value (answer's found and value)
    SHOAL_GUEST_IMAGE_INFO,     //  a move's start: the image's pages; the guest's gap measure starts again
    SHOAL_GUEST_ADOPT,          //  a received guest: start it unless it runs, then its own measure of the downtime (PAUSED: paused again at once)
    //  A move through the guest's manager (drivers that migrate, shoal_guests_migrates):
    SHOAL_GUEST_MIGRATE_CAPTURE,    //  round ROUND (FINAL: the last, guest paused) into DIR (answer's files)
    SHOAL_GUEST_MIGRATE_RECEIVE,    //  make the guest from DIR unless it exists, run it (PAUSED: leave it paused), remove DIR
    SHOAL_GUEST_MIGRATE_ABORT,      //  end the series on the source: the guest runs, DIR is removed
    SHOAL_GUEST_THROTTLE,       //  hold back THROTTLE percent of its writes (a move's auto-converge; 0: none)
    //  Storage objects (shoal_checkpoint.h), for drivers whose guests keep an image:
    SHOAL_GUEST_CHECKPOINT,     //  the stopped or paused guest's image into the empty file PATH (answer's bytes, checksum)
    SHOAL_GUEST_RESTORE,        //  make the guest from the checkpoint at PATH (SIZE bytes, CHECKSUM), then start it
} shoal_guest_op_t;

//  A request. Submit copies it: its strings stay the caller's.
typedef struct {
    shoal_guest_op_t op;
    const char *claim_id;       //  the guest's claim
    const char *driver;         //  the driver the claim names
    shoal_guest_spec_t spec;    //  create: what the guest is made with
    bool paused;                //  start, reconcile, adopt: pause it again once started; receive: leave it paused
    bool restart;               //  reconcile: start a gone guest again
    bool if_alive;              //  resume: only a guest that runs
    const char *key;            //  guest calls
    const uint8_t *value;       //  put: the value, VALUE_SIZE bytes
    size_t value_size;
    const char *dir;            //  a move's round files (capture, receive, abort); destroy removes it too
    uint32_t round;             //  capture: the round (1: the baseline)
    bool final;                 //  capture: the last round, taken while the guest is paused
    uint32_t throttle;          //  throttle: percent of its writes held back
    const char *path;           //  checkpoint, restore: the object's file
    uint64_t size;              //  restore: its bytes
    const shoal_checksum_t *checksum;   //  restore: what they hash to
} shoal_guest_request_t;

//  The answer to a request, read in the callback (borrowed: it goes when
//  the callback returns).
typedef struct {
    int rc;                             //  0, or -1 with ERROR
    const char *error;                  //  why it failed ("" when it did not)
    bool cancelled;                     //  the node stops: the answer was never read; do nothing but free
    shoal_guest_liveness_t liveness;    //  probe, reconcile: what the first look found
    bool restarted;                     //  reconcile: a gone guest was started again
    bool found;                         //  get: the key is there
    const uint8_t *value;               //  get: its value, VALUE_SIZE bytes
    size_t value_size;
    uint64_t memory_pages;              //  image info
    uint64_t disk_blocks;               //  image info
    uint64_t guest_downtime_ms;         //  adopt: the longest tick gap the guest saw
    uint64_t guest_switch_gap_ms;       //  adopt: its last tick on the source to its first here (0: not known)
    int64_t started_ms;                 //  adopt: wall ms the guest was started at (0: it ran already)
    int64_t took_ms;                    //  how long the driver took
    const shoal_driver_files_t *files;  //  capture: what the manager wrote; receive: what it read
    uint64_t files_bytes;               //  capture: their size
    uint64_t bytes;                     //  checkpoint: the bytes written
    const shoal_checksum_t *checksum;   //  checkpoint: what they hash to
    uint64_t memory_bytes;              //  checkpoint, restore: the guest's memory
    uint64_t disk_bytes;                //  and disk
    bool mismatch;                      //  restore: the file's bytes do not hash to the checksum
} shoal_guest_answer_t;

//  Told of the answer to REQUEST (its strings as submitted), from the
//  reactor's loop; ARG as submitted.
typedef void (shoal_guests_done_fn) (const shoal_guest_request_t *request, const shoal_guest_answer_t *answer,
                                     void *arg);

//  The guest actor with the node's live SETTINGS (borrowed; the stop and
//  manager time limits are read from them at each tick). Makes the proc
//  driver, and the exec driver when a manager is configured; a driver that
//  cannot run is logged and its guests' requests answer with the reason.
shoal_guests_t *shoal_guests_new(const shoal_settings_t *settings);

//  Ends the workers (one in a driver call finishes it first) and tells
//  every request not answered yet, cancelled. Safe twice.
void shoal_guests_destroy(shoal_guests_t **self_p);

//  Reads answers in LOOP from now on. Requests submitted before are run at
//  once and answered once the loop runs.
int shoal_guests_start(shoal_guests_t *self, zloop_t *loop);

//  Copies the reloadable time limits to the drivers. Called from the tick.
void shoal_guests_tick(shoal_guests_t *self);

//  Queues REQUEST (copied) for its guest, EXCLUSIVE as the header says;
//  DONE (with ARG) is told the answer later, never from within this call.
void shoal_guests_submit(shoal_guests_t *self, const shoal_guest_request_t *request, bool exclusive,
                         shoal_guests_done_fn *done, void *arg);

//  What exclusive operation is queued or running on the guest of CLAIM_ID
//  ("pause", "stop"...), or NULL when none is.
const char *shoal_guests_busy(shoal_guests_t *self, const char *claim_id);

//  Whether any request on the guest of CLAIM_ID is queued or running.
bool shoal_guests_pending(shoal_guests_t *self, const char *claim_id);

//  NULL when this node can run guests of driver NAME; else why not (a new
//  string, the caller's).
char *shoal_guests_driver_missing(shoal_guests_t *self, const char *name);

//  Whether guests of driver NAME take guest calls.
bool shoal_guests_take_calls(shoal_guests_t *self, const char *name);

//  The directory of the image files a live move copies page by page, of
//  guest ID of driver NAME (a path, nothing is opened: a new string the
//  caller frees), or NULL when that driver's guests do not move so.
char *shoal_guests_image_dir(shoal_guests_t *self, const char *name, const char *id);

//  Whether guests of driver NAME move through their manager's capture,
//  receive and abort (the round files carried by the transfer), rather than
//  page by page from an image.
bool shoal_guests_migrates(shoal_guests_t *self, const char *name);

//  Whether guests of driver NAME can be throttled (a move's auto-converge).
bool shoal_guests_throttles(shoal_guests_t *self, const char *name);

//  The name of OP ("pause").
const char *shoal_guest_op_name(shoal_guest_op_t op);

#endif
