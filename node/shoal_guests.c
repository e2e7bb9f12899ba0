/*  shoal_guests: the guest actor. See shoal_guests.h.

    DESIGN

    1. A job is one request with its answer, made on the reactor and
       owned by it from submit to callback. It goes to a worker as a
       pointer over the worker's pipe and comes back the same way: the
       worker writes only the job's answer, the reactor touches the job
       only while no worker holds it.
    2. Jobs wait in one queue in submission order. A job is handed to an
       idle worker only when no other job of its guest runs, so that one
       guest's operations never overlap and keep their order, while other
       guests' go on beside them (a slow manager holds one worker, not the
       node).
    3. The drivers are shared by the workers. They keep no state of their
       own but their configuration, and the time limits they read are
       cells of this module, copied from the live settings at each tick
       and read with atomic loads, so a reload never races a worker.
    4. At stop, the jobs already queued still run and are answered (an
       aborted move's resume must reach its guest), for at most
       GUESTS_DRAIN_MS; then the workers end (one inside a driver call
       finishes it first) and every job not answered is told cancelled, so
       its caller frees what it holds and does nothing else.
*/
#include "shoal_guests.h"
#include "shoal_checkpoint.h"
#include "shoal_driver_exec.h"
#include "shoal_driver_proc.h"
#include "shoal_image.h"
#include "shoal_msg.h"
#include "shoal_transfer.h"
#include "shoal_worker.h"
#include "shoal_alloc.h"

#include <errno.h>
#include <pthread.h>

_Static_assert(SHOAL_GUESTS_PAGE_BYTES == SHOAL_IMAGE_PAGE, "a move's page is the image's page");

//  Workers in the pool: as many guests' blocking operations run at once.
#define GUESTS_WORKERS 4
#define GUESTS_DEFAULT_DRIVER "proc"
#define GUESTS_EXEC_DRIVER "exec"
//  How long a received guest is given to tick once started, for its own
//  measure of the downtime: a bound for a loaded machine, not a figure (the
//  wait ends at the first tick, 17-58 ms after the start of an 8 GiB guest).
#define GUESTS_TICK_WAIT_MS 5000
//  A driver call slower than this is logged.
#define GUESTS_SLOW_MS 1000
//  How long a stopping node lets the jobs it queued run (an aborted move's
//  resume among them) before it gives up on the rest.
#define GUESTS_DRAIN_MS 15000

//  One request and its answer (DESIGN 1).
typedef struct {
    shoal_guest_request_t request;      //  its strings are the job's own copies
    bool exclusive;                     //  changes what the guest is
    shoal_guests_done_fn *done;         //  told the answer
    void *arg;                          //  its argument
    shoal_driver_t *driver;             //  the claim's driver, NULL when this node has none
    const char *memory_dir;             //  restore: where the guest's memory goes (guest/memory_dir, the settings')
    char *missing;                      //  why there is no driver
    //  The answer, written by the worker.
    int rc;
    char *error;
    shoal_guest_liveness_t liveness;
    bool restarted;
    bool found;
    uint8_t *value;
    size_t value_size;
    uint64_t memory_pages;
    uint64_t disk_blocks;
    uint64_t guest_downtime_ms;
    uint64_t guest_switch_gap_ms;
    int64_t started_ms;
    int64_t took_ms;
    shoal_driver_files_t files;         //  capture, receive: the manager's list
    uint64_t files_bytes;
    uint64_t bytes;                     //  checkpoint: its size
    shoal_checksum_t checksum;          //  and its checksum
    uint64_t memory_bytes;              //  restore: the image's memory
    uint64_t disk_bytes;                //  checkpoint, restore: its disk
    bool mismatch;                      //  restore: the bytes do not hash to the checksum
} s_job_t;

typedef struct {
    zactor_t *actor;                    //  the worker's thread and pipe
    s_job_t *job;                       //  the job it runs, or NULL when idle
} s_worker_t;

struct _shoal_guests_t {
    const shoal_settings_t *settings;   //  live settings (borrowed)
    shoal_driver_t *proc;               //  the proc driver, or NULL when it cannot run
    char *proc_failure;                 //  why there is no proc driver
    shoal_driver_t *exec;               //  the exec driver, or NULL
    char *exec_failure;                 //  why there is no exec driver
    int64_t stop_ms;                    //  the proc driver's stop limit (DESIGN 3)
    int64_t exec_timeout_ms;            //  the exec driver's call limit (DESIGN 3)
    int64_t exec_migrate_ms;            //  the exec driver's capture and receive limit (DESIGN 3)
    int64_t exec_nice;                  //  the niceness its manager runs at
    int64_t exec_idle;                  //  1: its manager runs under SCHED_IDLE
    s_worker_t workers[GUESTS_WORKERS]; //  the pool
    zlistx_t *queue;                    //  s_job_t waiting for a worker, oldest first
    zhashx_t *running;                  //  claim id -> its running s_job_t
    zloop_t *loop;                      //  the reactor, once started (borrowed)
};

static const char *s_op_names[] = {
    [SHOAL_GUEST_CREATE] = "create", [SHOAL_GUEST_START] = "start", [SHOAL_GUEST_PAUSE] = "pause",
    [SHOAL_GUEST_RESUME] = "resume", [SHOAL_GUEST_STOP] = "stop", [SHOAL_GUEST_DESTROY] = "destroy",
    [SHOAL_GUEST_PROBE] = "probe", [SHOAL_GUEST_RECONCILE] = "reconcile", [SHOAL_GUEST_KV_PUT] = "put",
    [SHOAL_GUEST_KV_GET] = "get", [SHOAL_GUEST_IMAGE_INFO] = "image read", [SHOAL_GUEST_ADOPT] = "adopt",
    [SHOAL_GUEST_MIGRATE_CAPTURE] = "capture", [SHOAL_GUEST_MIGRATE_RECEIVE] = "receive",
    [SHOAL_GUEST_MIGRATE_ABORT] = "migrate abort", [SHOAL_GUEST_THROTTLE] = "throttle",
    [SHOAL_GUEST_CHECKPOINT] = "checkpoint", [SHOAL_GUEST_RESTORE] = "restore",
};

const char *
shoal_guest_op_name(shoal_guest_op_t op)
{
    return op >= 0 && op < (int) (sizeof s_op_names / sizeof s_op_names[0]) && s_op_names[op]
         ? s_op_names[op] : "unknown";
}

static char *
s_strdup_or_null(const char *text)
{
    return text ? shoal_strdup(text) : NULL;
}

static void
s_job_destroy(s_job_t **job_p)
{
    s_job_t *job = *job_p;
    if (job) {
        free((char *) job->request.claim_id);
        free((char *) job->request.driver);
        free((char *) job->request.key);
        free((uint8_t *) job->request.value);
        free((char *) job->request.dir);
        free((char *) job->request.path);
        free((shoal_checksum_t *) job->request.checksum);
        shoal_driver_files_clear(&job->files);
        free(job->missing);
        free(job->error);
        free(job->value);
        free(job);
        *job_p = NULL;
    }
}

// ---------------------------------------------------------------------------
//  Worker side: runs a job's driver calls. Touches nothing but the job.

static void
s_fail(s_job_t *job, const char *format, const char *error)
{
    job->rc = -1;
    free(job->error);
    job->error = zsys_sprintf(format, error && *error ? error : "no reason given");
}

//  Starts the guest; PAUSED: paused before it runs anything where the
//  driver can start it so (the pause after covers a driver that cannot,
//  and a guest that ran already).
static int
s_start(shoal_driver_t *driver, const char *id, bool paused, char **error_p)
{
    int (*start) (shoal_driver_t *, const char *, char **) =
        paused && driver->ops->start_paused ? driver->ops->start_paused : driver->ops->start;
    if (start(driver, id, error_p))
        return -1;
    return paused ? driver->ops->pause(driver, id, error_p) : 0;
}

//  Opens the image of guest ID, or NULL with *ERROR_P.
static shoal_image_t *
s_image_open(shoal_driver_t *driver, const char *id, char **error_p)
{
    char *dir = driver->ops->image_dir ? driver->ops->image_dir(driver, id) : NULL;
    if (!dir) {
        *error_p = zsys_sprintf("driver %s keeps no image a move reads", driver->ops->name);
        return NULL;
    }
    shoal_image_t *image = shoal_image_open(dir, error_p);
    free(dir);
    return image;
}

static void
s_adopt(s_job_t *job, shoal_driver_t *driver, const char *id)
{
    char *error = NULL;
    //  The guest's tick clock as the source left it: the first tick after
    //  the start closes the longest gap it saw.
    shoal_image_t *image = s_image_open(driver, id, &error);
    uint64_t tick_before = image ? shoal_image_tick_ms(image) : 0;
    //  A move that throttled the guest to converge carried the throttle
    //  in its header: here it runs at its full rate again.
    if (image && shoal_image_throttle(image))
        shoal_image_set_throttle(image, 0);
    free(error);
    error = NULL;
    bool running = driver->ops->alive(driver, id, NULL);
    //  A paused claim's guest starts paused: its load never runs here
    //  before it is resumed (where the driver can start it so).
    int (*start) (shoal_driver_t *, const char *, char **) =
        job->request.paused && driver->ops->start_paused ? driver->ops->start_paused : driver->ops->start;
    //  For the log: the guest may tick before the start returns.
    int64_t start_called_ms = zclock_time();
    if (!running && start(driver, id, &error)) {
        s_fail(job, "%s", error);
        free(error);
        shoal_image_destroy(&image);
        return;
    }
    job->started_ms = running ? 0 : zclock_time();
    if (job->request.paused) {
        //  A paused claim moved: its guest is there, paused as it was (a
        //  restart adopting again pauses it again, which is harmless).
        //  No tick comes from a paused guest, so it measures no gap.
        if (driver->ops->pause(driver, id, &error)) {
            s_fail(job, "%s", error);
            free(error);
        }
        shoal_image_destroy(&image);
        return;
    }
    if (image) {
        int64_t deadline = zclock_mono() + GUESTS_TICK_WAIT_MS;
        while (shoal_image_tick_ms(image) == tick_before && zclock_mono() < deadline)
            zclock_sleep(1);
        //  The switch's own gap: the guest started here measures its first
        //  tick from its last on the source, so the two are the ends of the
        //  downtime the move caused (the longest gap may be a stall before).
        //  It is the gap the guest counted at its first tick here, not one
        //  to the tick this loop saw: the clock may have moved on by then.
        if (job->started_ms)
            job->guest_switch_gap_ms = shoal_image_start_gap_ms(image, tick_before);
        //  The first tick counted that gap in the longest before it was
        //  published, so the longest read after it holds it.
        job->guest_downtime_ms = shoal_image_max_gap_ms(image);
        //  Where the longest gap lies beside this start, for the log: a
        //  gap that began well before the start (the pause's own gap
        //  begins at the source's last tick) was a stall while it ran.
        //  Measured from when the start was called, which the guest's
        //  first tick cannot precede.
        uint64_t gap_at = shoal_image_max_gap_at_ms(image);
        uint64_t first_tick = tick_before + job->guest_switch_gap_ms;
        if (job->started_ms && gap_at && tick_before && job->guest_switch_gap_ms)
            zsys_info("guests: %s: the guest's longest gap since the move began, %" PRIu64 " ms, began %" PRId64
                      " ms before its start here; its last tick on the source was %" PRId64 " ms before the "
                      "start, its first tick here %" PRId64 " ms after the start was called",
                      id, job->guest_downtime_ms, start_called_ms - (int64_t) gap_at,
                      start_called_ms - (int64_t) tick_before, (int64_t) first_tick - start_called_ms);
    }
    shoal_image_destroy(&image);
}

//  Makes the guest received into DIR run (MIGRATE_RECEIVE): the manager
//  makes it, paused, unless it exists already (a restart adopting again),
//  then it resumes; the round files go once it runs.
static int
s_receive(s_job_t *job, shoal_driver_t *driver, const char *id, char **error_p)
{
    const char *dir = job->request.dir ? job->request.dir : "";
    if (shoal_driver_probe(driver, id, NULL) != SHOAL_GUEST_RUNS
    &&  driver->ops->migrate_receive(driver, id, dir, &job->files, error_p))
        return -1;
    char *why = NULL;
    if (job->request.paused) {
        //  A paused claim moved: the manager made its guest paused, and so
        //  it stays.
        if (*dir)
            shoal_transfer_files_remove(dir);
        return 0;
    }
    if (driver->ops->resume(driver, id, &why)) {
        //  A guest a previous run resumed already runs: nothing to do.
        if (shoal_driver_probe(driver, id, NULL) != SHOAL_GUEST_RUNS) {
            *error_p = why;
            return -1;
        }
        free(why);
    }
    else
        job->started_ms = zclock_time();
    if (*dir)
        shoal_transfer_files_remove(dir);
    return 0;
}

//  A checkpoint of the guest into REQUEST's path, or a restore from it
//  (shoal_checkpoint.h); a restored guest is started.
static int
s_checkpoint(s_job_t *job, shoal_driver_t *driver, const char *id, char **error_p)
{
    const shoal_guest_request_t *request = &job->request;
    char *dir = driver->ops->image_dir ? driver->ops->image_dir(driver, id) : NULL;
    if (!dir) {
        *error_p = zsys_sprintf("driver %s keeps no guest image to %s", driver->ops->name,
                                request->op == SHOAL_GUEST_CHECKPOINT ? "save" : "start from");
        return -1;
    }
    int rc = 0;
    shoal_checkpoint_header_t header = { 0 };
    if (request->op == SHOAL_GUEST_CHECKPOINT)
        rc = shoal_checkpoint_save(dir, request->spec.memory_bytes, request->path, &header, &job->bytes,
                                   &job->checksum, error_p);
    else {
        rc = shoal_checkpoint_restore(request->path, request->size, request->checksum, dir, job->memory_dir, &header,
                                      error_p);
        job->mismatch = rc == SHOAL_CHECKPOINT_MISMATCH;
        if (rc == 0)
            rc = driver->ops->start(driver, id, error_p);
    }
    job->memory_bytes = header.memory_bytes;
    job->disk_bytes = header.disk_bytes;
    rc = rc ? -1 : 0;
    free(dir);
    return rc;
}

static void
s_run(s_job_t *job)
{
    shoal_driver_t *driver = job->driver;
    const shoal_guest_request_t *request = &job->request;
    const char *id = request->claim_id;
    if (!driver) {
        s_fail(job, "%s", job->missing);
        return;
    }
    char *error = NULL;
    int rc = 0;
    switch (request->op) {
        case SHOAL_GUEST_CREATE:
            rc = driver->ops->create(driver, id, &request->spec, &error);
            if (rc == 0)
                rc = driver->ops->start(driver, id, &error);
            break;
        case SHOAL_GUEST_START:
            rc = s_start(driver, id, request->paused, &error);
            break;
        case SHOAL_GUEST_PAUSE:
            rc = driver->ops->pause(driver, id, &error);
            break;
        case SHOAL_GUEST_RESUME:
            //  SIGCONT to a guest that runs is harmless: an abort resumes
            //  whatever its record says.
            if (!request->if_alive || driver->ops->alive(driver, id, NULL))
                rc = driver->ops->resume(driver, id, &error);
            break;
        case SHOAL_GUEST_STOP:
            rc = driver->ops->stop(driver, id, &error);
            break;
        case SHOAL_GUEST_DESTROY:
            rc = driver->ops->destroy(driver, id, &error);
            if (rc == 0 && request->dir)
                shoal_transfer_files_remove(request->dir);
            break;
        case SHOAL_GUEST_PROBE:
            job->liveness = shoal_driver_probe(driver, id, &error);
            break;
        case SHOAL_GUEST_RECONCILE:
            job->liveness = driver->ops->alive(driver, id, &error) ? SHOAL_GUEST_RUNS : SHOAL_GUEST_GONE;
            if (job->liveness == SHOAL_GUEST_GONE && request->restart) {
                char *why = NULL;
                if (s_start(driver, id, request->paused, &why) == 0)
                    job->restarted = true;
                else {
                    free(error);
                    error = zsys_sprintf("restarting it failed: %s", why ? why : "no reason given");
                }
                free(why);
            }
            break;
        case SHOAL_GUEST_KV_PUT:
            if (!driver->ops->kv_put) {
                error = zsys_sprintf("driver %s's guests take no calls", driver->ops->name);
                rc = -1;
            }
            else
                rc = driver->ops->kv_put(driver, id, request->key, request->value, request->value_size, &error);
            break;
        case SHOAL_GUEST_KV_GET:
            if (!driver->ops->kv_get) {
                error = zsys_sprintf("driver %s's guests take no calls", driver->ops->name);
                rc = -1;
                break;
            }
            job->value = (uint8_t *) zmalloc(SHOAL_CALL_VALUE_MAX);
            rc = driver->ops->kv_get(driver, id, request->key, job->value, SHOAL_CALL_VALUE_MAX,
                                     &job->value_size, &job->found, &error);
            break;
        case SHOAL_GUEST_IMAGE_INFO: {
            if (!driver->ops->image_dir && driver->ops->migrate_capture) {
                //  Its manager captures it: no pages to count, but it must run.
                if (shoal_driver_probe(driver, id, &error) != SHOAL_GUEST_RUNS) {
                    char *why = zsys_sprintf("the guest does not run: %s", error ? error : "its manager cannot tell");
                    free(error);
                    error = why;
                    rc = -1;
                }
                break;
            }
            shoal_image_t *image = s_image_open(driver, id, &error);
            if (!image) {
                rc = -1;
                break;
            }
            job->memory_pages = shoal_image_pages(image, SHOAL_IMAGE_MEMORY);
            job->disk_blocks = shoal_image_pages(image, SHOAL_IMAGE_DISK);
            //  The guest's own measure of a move's downtime starts from here.
            shoal_image_reset_gap(image);
            shoal_image_destroy(&image);
            break;
        }
        case SHOAL_GUEST_ADOPT:
            s_adopt(job, driver, id);
            break;
        case SHOAL_GUEST_THROTTLE:
            if (!driver->ops->throttle) {
                error = zsys_sprintf("driver %s cannot throttle its guests (its manager's contract has no "
                                     "such call)", driver->ops->name);
                rc = -1;
            }
            else
                rc = driver->ops->throttle(driver, id, request->throttle, &error);
            break;
        case SHOAL_GUEST_CHECKPOINT:
        case SHOAL_GUEST_RESTORE:
            if (!request->path || (request->op == SHOAL_GUEST_RESTORE && !request->checksum)) {
                error = shoal_strdup("no object file to read or write");
                rc = -1;
            }
            else
                rc = s_checkpoint(job, driver, id, &error);
            break;
        case SHOAL_GUEST_MIGRATE_CAPTURE:
        case SHOAL_GUEST_MIGRATE_RECEIVE:
        case SHOAL_GUEST_MIGRATE_ABORT:
            if (!driver->ops->migrate_capture || !driver->ops->migrate_receive || !driver->ops->migrate_abort) {
                error = zsys_sprintf("driver %s's guests do not move through a manager", driver->ops->name);
                rc = -1;
            }
            else
            if (!request->dir || !*request->dir) {
                error = shoal_strdup("no directory for the move's files");
                rc = -1;
            }
            else
            if (request->op == SHOAL_GUEST_MIGRATE_CAPTURE) {
                if (zsys_dir_create("%s", request->dir)) {
                    error = zsys_sprintf("cannot make %s: %s", request->dir, strerror(errno));
                    rc = -1;
                    break;
                }
                rc = driver->ops->migrate_capture(driver, id, request->dir, request->round, request->final,
                                                  &job->files, &error);
                for (size_t i = 0; rc == 0 && i < job->files.count; i++)
                    job->files_bytes += job->files.items[i].size;
            }
            else
            if (request->op == SHOAL_GUEST_MIGRATE_RECEIVE)
                rc = s_receive(job, driver, id, &error);
            else {
                rc = driver->ops->migrate_abort(driver, id, &error);
                //  The files go whether the manager could end the series or not.
                shoal_transfer_files_remove(request->dir);
            }
            break;
    }
    if (rc)
        s_fail(job, "%s", error);
    else
    if (error && (request->op == SHOAL_GUEST_PROBE || request->op == SHOAL_GUEST_RECONCILE)) {
        //  A look's reason why the guest does not run, or a failed restart.
        job->error = error;
        error = NULL;
        if (request->op == SHOAL_GUEST_RECONCILE && job->liveness == SHOAL_GUEST_GONE && request->restart
        &&  !job->restarted)
            job->rc = -1;
    }
    free(error);
}

//  A worker's run of JOB (shoal_worker), timed.
static void
s_work(void *item)
{
    s_job_t *job = (s_job_t *) item;
    int64_t start = zclock_mono();
    s_run(job);
    job->took_ms = zclock_mono() - start;
}

// ---------------------------------------------------------------------------
//  Reactor side.

static void s_dispatch(shoal_guests_t *self);

//  Tells JOB's caller, then frees it.
static void
s_answer(s_job_t **job_p, bool cancelled)
{
    s_job_t *job = *job_p;
    shoal_guest_answer_t answer = {
        .rc = cancelled ? -1 : job->rc,
        .error = cancelled ? "the node is stopping" : job->error ? job->error : "",
        .cancelled = cancelled,
        .liveness = job->liveness, .restarted = job->restarted,
        .found = job->found, .value = job->value, .value_size = job->value_size,
        .memory_pages = job->memory_pages, .disk_blocks = job->disk_blocks,
        .guest_downtime_ms = job->guest_downtime_ms,
        .guest_switch_gap_ms = job->guest_switch_gap_ms, .started_ms = job->started_ms, .took_ms = job->took_ms,
        .files = &job->files, .files_bytes = job->files_bytes,
        .bytes = job->bytes, .checksum = &job->checksum, .memory_bytes = job->memory_bytes,
        .disk_bytes = job->disk_bytes, .mismatch = job->mismatch,
    };
    if (job->done)
        job->done(&job->request, &answer, job->arg);
    s_job_destroy(job_p);
}

static int
s_worker_readable(zloop_t *loop, zsock_t *pipe, void *arg)
{
    shoal_guests_t *self = (shoal_guests_t *) arg;
    void *pointer = NULL;
    if (zsock_recv(pipe, "p", &pointer) || !pointer)
        return 0;
    s_job_t *job = (s_job_t *) pointer;
    for (size_t i = 0; i < GUESTS_WORKERS; i++)
        if (self->workers[i].job == job)
            self->workers[i].job = NULL;
    zhashx_delete(self->running, job->request.claim_id);
    if (job->took_ms >= GUESTS_SLOW_MS)
        zsys_info("guests: %s of %s took %" PRId64 " ms", shoal_guest_op_name(job->request.op),
                  job->request.claim_id, job->took_ms);
    //  The next jobs first: the callback may submit more.
    s_dispatch(self);
    s_answer(&job, false);
    s_dispatch(self);
    return 0;
}

//  Hands waiting jobs to idle workers (DESIGN 2): the oldest job whose
//  guest runs nothing goes first.
static void
s_dispatch(shoal_guests_t *self)
{
    while (true) {
        s_worker_t *idle = NULL;
        for (size_t i = 0; i < GUESTS_WORKERS && !idle; i++)
            if (!self->workers[i].job)
                idle = &self->workers[i];
        if (!idle)
            return;
        s_job_t *job = (s_job_t *) zlistx_first(self->queue);
        while (job && zhashx_lookup(self->running, job->request.claim_id))
            job = (s_job_t *) zlistx_next(self->queue);
        if (!job)
            return;
        zlistx_delete(self->queue, zlistx_cursor(self->queue));
        idle->job = job;
        zhashx_insert(self->running, job->request.claim_id, job);
        shoal_worker_give(idle->actor, job);
    }
}

static void
s_cells_update(shoal_guests_t *self)
{
    __atomic_store_n(&self->stop_ms, self->settings->guest_stop_ms, __ATOMIC_RELAXED);
    __atomic_store_n(&self->exec_timeout_ms, self->settings->exec_timeout_ms, __ATOMIC_RELAXED);
    __atomic_store_n(&self->exec_migrate_ms, self->settings->exec_migrate_timeout_ms, __ATOMIC_RELAXED);
    __atomic_store_n(&self->exec_nice, self->settings->exec_nice, __ATOMIC_RELAXED);
    __atomic_store_n(&self->exec_idle, streq(self->settings->exec_sched, SHOAL_EXEC_SCHED_IDLE), __ATOMIC_RELAXED);
}

shoal_guests_t *
shoal_guests_new(const shoal_settings_t *settings)
{
    shoal_guests_t *self = (shoal_guests_t *) zmalloc(sizeof *self);
    self->settings = settings;
    s_cells_update(self);
    self->queue = zlistx_new();
    self->running = zhashx_new();
    char *program = *settings->guest_program ? shoal_strdup(settings->guest_program)
                                             : shoal_driver_proc_default_program();
    //  A node without a guest program still serves everything else; its
    //  claims answer with the reason.
    self->proc = shoal_driver_proc_new(settings->guest_dir, settings->guest_memory_dir, program, &self->stop_ms, &self->proc_failure);
    if (!self->proc)
        zsys_warning("guests: no proc driver: %s", self->proc_failure);
    free(program);
    if (*settings->exec_manager) {
        self->exec = shoal_driver_exec_new(settings->exec_manager, &self->exec_timeout_ms,
                                           &self->exec_migrate_ms, &self->exec_nice, &self->exec_idle,
                                           &self->exec_failure);
        if (!self->exec)
            zsys_warning("guests: no exec driver: %s", self->exec_failure);
    }
    else
        self->exec_failure = shoal_strdup("no VM manager is configured (set drivers/exec_manager)");
    for (size_t i = 0; i < GUESTS_WORKERS; i++)
        self->workers[i].actor = shoal_worker_new("shoal-guest", s_work);
    return self;
}

//  Runs what is queued to its end, within GUESTS_DRAIN_MS (DESIGN 4).
static void
s_drain(shoal_guests_t *self)
{
    zpoller_t *poller = zpoller_new(NULL);
    for (size_t i = 0; i < GUESTS_WORKERS; i++)
        zpoller_add(poller, self->workers[i].actor);
    int64_t deadline = zclock_mono() + GUESTS_DRAIN_MS;
    while (zhashx_size(self->running) && zclock_mono() < deadline) {
        zactor_t *ready = (zactor_t *) zpoller_wait(poller, (int) (deadline - zclock_mono()));
        if (ready)
            s_worker_readable(NULL, zactor_sock(ready), self);
        else
        if (zpoller_terminated(poller))
            break;
    }
    zpoller_destroy(&poller);
}

void
shoal_guests_destroy(shoal_guests_t **self_p)
{
    if (*self_p) {
        shoal_guests_t *self = *self_p;
        s_drain(self);
        //  The reactor's loop may be gone already: its readers of the
        //  workers' pipes are not touched, only never polled again.
        for (size_t i = 0; i < GUESTS_WORKERS; i++) {
            zactor_destroy(&self->workers[i].actor);
            //  Its answer, if it sent one, went with its pipe (DESIGN 4).
            if (self->workers[i].job)
                s_answer(&self->workers[i].job, true);
        }
        s_job_t *job;
        while ((job = (s_job_t *) zlistx_first(self->queue))) {
            zlistx_delete(self->queue, zlistx_cursor(self->queue));
            s_answer(&job, true);
        }
        zlistx_destroy(&self->queue);
        zhashx_destroy(&self->running);
        shoal_driver_destroy(&self->proc);
        shoal_driver_destroy(&self->exec);
        free(self->proc_failure);
        free(self->exec_failure);
        free(self);
        *self_p = NULL;
    }
}

int
shoal_guests_start(shoal_guests_t *self, zloop_t *loop)
{
    self->loop = loop;
    for (size_t i = 0; i < GUESTS_WORKERS; i++)
        if (zloop_reader(loop, zactor_sock(self->workers[i].actor), s_worker_readable, self))
            return -1;
    return 0;
}

void
shoal_guests_tick(shoal_guests_t *self)
{
    s_cells_update(self);
}

//  The driver NAME, or NULL with *WHY_P (the caller frees).
static shoal_driver_t *
s_driver(shoal_guests_t *self, const char *name, char **why_p)
{
    if (streq(name, GUESTS_DEFAULT_DRIVER) && self->proc)
        return self->proc;
    if (streq(name, GUESTS_EXEC_DRIVER) && self->exec)
        return self->exec;
    *why_p = streq(name, GUESTS_DEFAULT_DRIVER)
           ? zsys_sprintf("the proc driver cannot run here: %s", self->proc_failure)
           : streq(name, GUESTS_EXEC_DRIVER)
           ? zsys_sprintf("the exec driver cannot run here: %s", self->exec_failure)
           : zsys_sprintf("driver '%s' is not available on this node", name);
    return NULL;
}

void
shoal_guests_submit(shoal_guests_t *self, const shoal_guest_request_t *request, bool exclusive,
                    shoal_guests_done_fn *done, void *arg)
{
    s_job_t *job = (s_job_t *) zmalloc(sizeof *job);
    job->request = *request;
    job->request.claim_id = shoal_strdup(request->claim_id);
    job->request.driver = shoal_strdup(request->driver ? request->driver : "");
    job->request.key = s_strdup_or_null(request->key);
    job->request.dir = s_strdup_or_null(request->dir);
    job->request.path = s_strdup_or_null(request->path);
    job->request.checksum = NULL;
    if (request->checksum) {
        shoal_checksum_t *checksum = (shoal_checksum_t *) zmalloc(sizeof *checksum);
        *checksum = *request->checksum;
        job->request.checksum = checksum;
    }
    job->request.value = NULL;
    if (request->value && request->value_size) {
        uint8_t *value = (uint8_t *) zmalloc(request->value_size);
        memcpy(value, request->value, request->value_size);
        job->request.value = value;
    }
    job->exclusive = exclusive;
    job->done = done;
    job->arg = arg;
    job->driver = s_driver(self, job->request.driver, &job->missing);
    job->memory_dir = self->settings->guest_memory_dir;
    zlistx_add_end(self->queue, job);
    s_dispatch(self);
}

const char *
shoal_guests_busy(shoal_guests_t *self, const char *claim_id)
{
    s_job_t *job = (s_job_t *) zhashx_lookup(self->running, claim_id);
    if (job && job->exclusive)
        return shoal_guest_op_name(job->request.op);
    for (job = (s_job_t *) zlistx_first(self->queue); job; job = (s_job_t *) zlistx_next(self->queue))
        if (job->exclusive && streq(job->request.claim_id, claim_id))
            return shoal_guest_op_name(job->request.op);
    return NULL;
}

bool
shoal_guests_pending(shoal_guests_t *self, const char *claim_id)
{
    if (zhashx_lookup(self->running, claim_id))
        return true;
    for (s_job_t *job = (s_job_t *) zlistx_first(self->queue); job; job = (s_job_t *) zlistx_next(self->queue))
        if (streq(job->request.claim_id, claim_id))
            return true;
    return false;
}

char *
shoal_guests_driver_missing(shoal_guests_t *self, const char *name)
{
    char *why = NULL;
    s_driver(self, name, &why);
    return why;
}

bool
shoal_guests_take_calls(shoal_guests_t *self, const char *name)
{
    char *why = NULL;
    shoal_driver_t *driver = s_driver(self, name, &why);
    free(why);
    return driver && driver->ops->kv_put && driver->ops->kv_get;
}

char *
shoal_guests_image_dir(shoal_guests_t *self, const char *name, const char *id)
{
    char *why = NULL;
    shoal_driver_t *driver = s_driver(self, name, &why);
    free(why);
    return driver && driver->ops->image_dir ? driver->ops->image_dir(driver, id) : NULL;
}

bool
shoal_guests_throttles(shoal_guests_t *self, const char *name)
{
    char *why = NULL;
    shoal_driver_t *driver = s_driver(self, name, &why);
    free(why);
    return driver && driver->ops->throttle;
}

bool
shoal_guests_migrates(shoal_guests_t *self, const char *name)
{
    char *why = NULL;
    shoal_driver_t *driver = s_driver(self, name, &why);
    free(why);
    return driver && !driver->ops->image_dir && driver->ops->migrate_capture && driver->ops->migrate_receive
        && driver->ops->migrate_abort;
}
