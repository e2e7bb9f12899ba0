/*  shoal_driver: what the node asks of a guest driver.

    A driver runs the guests of claims: it creates a guest's state, starts,
    pauses, resumes and stops its process, says whether it is alive, and
    removes it. Guest calls (the guest's key/value area) go through it too.
    The node keeps claims and their states; a driver keeps nothing a restart
    would lose: whether a guest is alive is asked of the system each time.
    Actions return 0, or -1 with *ERROR_P (the caller frees) saying why.

    Two drivers: proc (shoal-guest processes, shoal_driver_proc.h) and exec
    (an external VM manager, shoal_driver_exec.h). An operation a driver
    cannot do is NULL in its table: exec guests take no guest calls and
    have no image a move copies page by page; proc guests do not move
    through a manager's capture and receive.
*/
#ifndef SHOAL_DRIVER_H_INCLUDED
#define SHOAL_DRIVER_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

//  What a guest is made with.
typedef struct {
    uint64_t memory_bytes;      //  its memory
    uint64_t disk_bytes;        //  its disk (may be 0)
    uint64_t rate;              //  its load's bytes/s (0: idle)
} shoal_guest_spec_t;

//  One file of a move round, as the manager that wrote or read it listed
//  it. Its content is the manager's: the node only moves it.
typedef struct {
    char *path;                 //  relative to the round's directory
    uint64_t size;              //  bytes
} shoal_driver_file_t;

//  The files of one round, in the order the manager listed them.
typedef struct {
    shoal_driver_file_t *items; //  COUNT files, owned
    size_t count;
} shoal_driver_files_t;

//  Frees what FILES holds and empties it.
static inline void
shoal_driver_files_clear(shoal_driver_files_t *files)
{
    for (size_t i = 0; i < files->count; i++)
        free(files->items[i].path);
    free(files->items);
    files->items = NULL;
    files->count = 0;
}

//  What a look at a guest found (shoal_driver_probe).
typedef enum {
    SHOAL_GUEST_UNKNOWN = -1,   //  the driver could not tell (its manager did not answer)
    SHOAL_GUEST_GONE = 0,       //  the guest does not run
    SHOAL_GUEST_RUNS = 1,       //  the guest's process runs (paused counts)
} shoal_guest_liveness_t;

typedef struct _shoal_driver_t shoal_driver_t;

//  A driver's operations; SELF is the driver they came with.
typedef struct {
    const char *name;           //  "proc" or "exec", as claims name their driver
    int (*create) (shoal_driver_t *self, const char *id, const shoal_guest_spec_t *spec, char **error_p);
    int (*start) (shoal_driver_t *self, const char *id, char **error_p);
    //  Starts the guest paused: it runs nothing (its load does not write,
    //  its clock does not tick) until resume. NULL when the driver cannot:
    //  the exec manager's contract has no such verb, so its guests are
    //  started and then paused (a guest it receives from a move is made
    //  paused by the contract, and stays so).
    int (*start_paused) (shoal_driver_t *self, const char *id, char **error_p);
    //  Returns once the guest no longer runs (a move's final round relies
    //  on its memory holding still).
    int (*pause) (shoal_driver_t *self, const char *id, char **error_p);
    int (*resume) (shoal_driver_t *self, const char *id, char **error_p);
    //  Ends the guest's process and waits for it; its state stays.
    int (*stop) (shoal_driver_t *self, const char *id, char **error_p);
    //  Removes the guest's state (stopping it first if it runs).
    int (*destroy) (shoal_driver_t *self, const char *id, char **error_p);
    //  Whether the guest's process runs (paused counts), with *WHY_P (may
    //  be NULL; the caller frees) saying why not.
    bool (*alive) (shoal_driver_t *self, const char *id, char **why_p);
    //  As alive, telling a guest that is gone from one the driver could
    //  not look at (NULL: alive always knows).
    shoal_guest_liveness_t (*probe) (shoal_driver_t *self, const char *id, char **why_p);
    //  The guest's key/value area (NULL: its guests take no calls).
    int (*kv_put) (shoal_driver_t *self, const char *id, const char *key, const void *value,
                   size_t size, char **error_p);
    //  Copies at most CAPACITY bytes into VALUE; *FOUND false when absent.
    int (*kv_get) (shoal_driver_t *self, const char *id, const char *key, void *value,
                   size_t capacity, size_t *size, bool *found, char **error_p);
    //  Moves: the directory of the guest's image files (shoal_image.h),
    //  which a move copies page by page; a new string the caller frees, or
    //  NULL when this driver's guests cannot be moved that way.
    char *(*image_dir) (shoal_driver_t *self, const char *id);
    //  Moves through the guest's manager (NULL when this driver's guests
    //  move by image_dir). Capture writes round ROUND (1: the baseline) of
    //  guest ID into the directory DIR and lists what it wrote in *FILES
    //  (the caller clears it); FINAL marks the last round, taken while the
    //  guest is paused. Receive makes guest ID, paused, from the rounds in
    //  DIR and lists the files it read. Abort ends a series on the source:
    //  its files are gone and a paused guest runs again.
    int (*migrate_capture) (shoal_driver_t *self, const char *id, const char *dir, uint32_t round,
                            bool final, shoal_driver_files_t *files, char **error_p);
    int (*migrate_receive) (shoal_driver_t *self, const char *id, const char *dir,
                            shoal_driver_files_t *files, char **error_p);
    int (*migrate_abort) (shoal_driver_t *self, const char *id, char **error_p);
    //  Holds back PERCENT of the guest's writes (0: none), for a move that
    //  does not converge (auto-converge). NULL when the driver cannot: the
    //  exec manager's contract has no such verb.
    int (*throttle) (shoal_driver_t *self, const char *id, uint32_t percent, char **error_p);
    void (*free) (shoal_driver_t *self);
} shoal_driver_ops_t;

//  Every driver's struct starts with this, so that the node can call it.
struct _shoal_driver_t {
    const shoal_driver_ops_t *ops;  //  the driver's operations
};

//  Whether guest ID of SELF runs, is gone, or cannot be told now, with
//  *WHY_P (may be NULL; the caller frees) saying why when it does not run.
static inline shoal_guest_liveness_t
shoal_driver_probe(shoal_driver_t *self, const char *id, char **why_p)
{
    if (self->ops->probe)
        return self->ops->probe(self, id, why_p);
    return self->ops->alive(self, id, why_p) ? SHOAL_GUEST_RUNS : SHOAL_GUEST_GONE;
}

//  Frees *SELF_P through its driver; safe twice.
static inline void
shoal_driver_destroy(shoal_driver_t **self_p)
{
    if (*self_p) {
        (*self_p)->ops->free(*self_p);
        *self_p = NULL;
    }
}

#endif
