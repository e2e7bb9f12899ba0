/*  shoal_loader: the bulk catch-up threads that shoal_loader.h describes.

    DESIGN

    Three threads, each with one job: the reactor passes pages on and reads
    events; the loader's actor checks pages into a batch; the writer writes
    a full batch. The actor keeps two batches: one fills while the other is
    written. When the one filling is full and the other is still being
    written, the actor hands it over all the same and waits for the writer,
    and the pages wait in the pipe: the reactor, which counts the pages it
    has handed over and not heard back about, stops asking peers for more.

    The writer holds up to two batches so: once it has made the table files
    of the first, it takes the second, if it was handed over, and starts
    making its log families' files (shoal_oplog_bulk_prepare) while the
    first one's files are ingested; that ingest is mostly waiting for the
    disk. The second one's kv file is made only after the first is
    ingested, since it is chosen against the kv state the first one wrote.
    Nothing of the second is in the store before the first is done, so a
    kill at any moment leaves what a kill of one batch at a time would,
    plus table files that the next start sweeps.

    While batches follow one another, the writer holds back the automatic
    compaction of the families they go into: a batch's table files overlap
    the last one's (kv and oplog_by_hash are keyed by hash and key), so
    they stay in level 0, and compacting them while the next ones are
    made took a fifth of a catch-up's CPU time and rewrote files about to
    be joined by more. Level 0 is bounded, since every read looks at each
    of its files: past S_LOADER_LEVEL0_MAX in a family compaction is let
    go, and held again once level 0 has emptied to half that. It is let
    go for good when no batch has come for S_LOADER_IDLE_MS, and when the
    loader stops; a process killed meanwhile opens its store with
    compaction on.

    Every page gets exactly one answer (taken or refused), so that count
    always comes back to zero. A stream's head moves only when a batch
    holding its entries is written, and always to the last of them, so a
    chain never has a hole behind its head: after a write fails, the batch
    being filled is dropped and every stream is told it failed, since its
    next entries would follow ones that are not written. A batch handed
    over before the actor heard of a failure is refused unwritten: each
    WRITE carries the failures the actor has heard of, and the writer
    refuses one that carries fewer than it has had.

    Messages (inproc, pointers handed over with their ownership):
        reactor -> actor    "PAGE" s_job_t*, "END" stream, "STOP"
        actor -> reactor    "EVENT" shoal_loader_event_t*, "STOPPED"
        actor -> writer     "WRITE" shoal_oplog_bulk_t*, failures heard of
        writer -> actor     "DONE" status, error text, shoal_oplog_bulk_t*
                            (one per WRITE, in order)
*/
#include "shoal_loader.h"
#include "shoal_fault.h"
#include "shoal_alloc.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

//  Room for a table file directory's path.
#define S_DIR_MAX 4096

//  The loader's threads run this much nicer than the reactor: checking and
//  writing a catch-up take whole cores, and a probe answered late is a
//  false suspicion. Table files are made on threads the writer starts,
//  which inherit it.
#define S_LOADER_NICE 5
//  Compaction of the families a load writes is held back while batches
//  come, as long as level 0 of each holds fewer than this many table files
//  (RocksDB slows writes down at 20 once compaction runs), and let go
//  when no batch has come for S_LOADER_IDLE_MS.
#define S_LOADER_LEVEL0_MAX 16
#define S_LOADER_IDLE_MS 1000

//  A page handed to the actor.
typedef struct {
    char *stream;               //  the stream's key
    char *dataset;              //  its dataset
    char *node;                 //  its origin
    bool has_base;              //  the stream's first page: BASE is what it links to
    shoal_oplog_tip_t base;     //  where the stream starts
    uint8_t *bytes;             //  the entries, one after another
    size_t *sizes;              //  COUNT sizes
    size_t count;               //  entries
} s_job_t;

//  A stream as the actor knows it.
typedef struct {
    char *key;                  //  the stream's key (the zhashx item key too)
    char *dataset;              //  its dataset
    char *node;                 //  its origin
    shoal_oplog_tip_t tip;      //  its last entry taken
    char *refused;              //  why it takes no more pages; NULL while it does
    bool ending;                //  no more pages come: say ended once all is written
    size_t filling;             //  entries of it in the batch being filled
    shoal_oplog_tip_t filled;   //  the last of them
    size_t writing;             //  entries of it in the batch being written
    shoal_oplog_tip_t written;  //  the last of them
    size_t queued;              //  entries of it in the batch handed over after that one
    shoal_oplog_tip_t queued_tip;   //  the last of them
} s_stream_t;

typedef struct {
    shoal_oplog_t *oplog;       //  the log (borrowed)
    char dir[S_DIR_MAX];        //  where table files go
    uint64_t max_clock_ahead_ms;    //  the clock bound entries are checked against
    bool started;               //  the actor runs
} s_args_t;

typedef struct {
    zsock_t *pipe;              //  to the reactor
    zactor_t *writer;           //  writes a batch
    shoal_store_t *store;       //  the writer's handle on the store
    shoal_oplog_bulk_t *filling;    //  the batch pages go into; NULL while the writer holds both
    shoal_oplog_bulk_t *spare;  //  the other batch while the writer holds none; else NULL
    int writing;                //  batches the writer holds (0 to 2)
    int failures;               //  writes the writer said failed
    zhashx_t *streams;          //  key -> s_stream_t
    uint32_t ingested;          //  table files ingested or about to be: the writer's alone
} s_actor_t;

struct _shoal_loader_t {
    zactor_t *actor;            //  the loader's actor
};

// ---------------------------------------------------------------------------
//  Jobs, streams and events

static void
s_job_destroy(s_job_t **self_p)
{
    if (*self_p) {
        s_job_t *self = *self_p;
        free(self->stream);
        free(self->dataset);
        free(self->node);
        free(self->bytes);
        free(self->sizes);
        free(self);
        *self_p = NULL;
    }
}

static void
s_stream_destroy(void **item)
{
    s_stream_t *stream = (s_stream_t *) *item;
    if (stream) {
        free(stream->key);
        free(stream->dataset);
        free(stream->node);
        free(stream->refused);
        free(stream);
        *item = NULL;
    }
}

//  Sends an event to the reactor. ERROR may be NULL.
static void
s_emit(s_actor_t *self, shoal_loader_event_type_t type, const char *stream, size_t entries,
       const shoal_oplog_tip_t *tip, const char *error)
{
    shoal_loader_event_t *event = (shoal_loader_event_t *) zmalloc(sizeof *event);
    event->type = type;
    event->stream = shoal_strdup(stream);
    event->entries = entries;
    if (tip)
        event->tip = *tip;
    event->error = error ? shoal_strdup(error) : NULL;
    zsock_send(self->pipe, "sp", "EVENT", event);
}

//  Names the calling thread NAME and lowers its priority by S_LOADER_NICE.
static void
s_thread_setup(const char *name)
{
    pthread_setname_np(pthread_self(), name);
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, (id_t) gettid());
    if (errno == 0 && setpriority(PRIO_PROCESS, (id_t) gettid(), nice + S_LOADER_NICE))
        zsys_warning("loader: cannot lower the priority of %s: %s", name, strerror(errno));
}

// ---------------------------------------------------------------------------
//  The writer

//  The writer's state of compaction of the families a load writes.
typedef struct {
    shoal_store_t *store;       //  the writer's handle on the store
    bool held;                  //  their compaction is held back
} s_compaction_t;

//  Holds back the compaction of the families a load writes while LOADING
//  (batches follow one another) and level 0 of each has room, else lets it
//  go, for the reason WHY when not LOADING (see DESIGN). Room is fewer than
//  S_LOADER_LEVEL0_MAX table files to stay held, half as many to be held
//  again, so that a compaction let go has time to empty level 0 first.
static void
s_compaction_set(s_compaction_t *self, bool loading, const char *why)
{
    bool hold = false;
    uint64_t most = 0;
    if (loading) {
        if (shoal_oplog_bulk_level0_files(self->store, &most) == 0)
            hold = most < (self->held ? S_LOADER_LEVEL0_MAX : S_LOADER_LEVEL0_MAX / 2);
        else
            zsys_warning("loader: %s", shoal_store_error(self->store));
    }
    if (hold == self->held)
        return;
    //  Held or not, as far as it went: letting go tries every family again.
    self->held = hold;
    if (shoal_oplog_bulk_pause_compaction(self->store, hold))
        zsys_warning("loader: %s", shoal_store_error(self->store));
    else
    if (hold)
        zsys_info("loader: compaction of the log's families held while batches come in");
    else
    if (loading)
        zsys_info("loader: compaction of the log's families let go: level 0 holds %" PRIu64 " table files",
                  most);
    else
        zsys_info("loader: compaction of the log's families let go: %s", why);
}

//  Reads the next WRITE into *BULK_P and the failures it carries into
//  *FAILURES. Returns -1 on $TERM. While compaction is held back, a wait of
//  S_LOADER_IDLE_MS for the next lets it go.
static int
s_writer_take(zsock_t *pipe, s_compaction_t *compaction, shoal_oplog_bulk_t **bulk_p, int *failures)
{
    if (compaction->held && !(zsock_events(pipe) & ZMQ_POLLIN)) {
        zmq_pollitem_t item = { zsock_resolve(pipe), 0, ZMQ_POLLIN, 0 };
        if (zmq_poll(&item, 1, S_LOADER_IDLE_MS) == 0) {
            char why[64];
            snprintf(why, sizeof why, "no batch came for %d ms", S_LOADER_IDLE_MS);
            s_compaction_set(compaction, false, why);
        }
    }
    char *command = NULL;
    void *pointer = NULL;
    *bulk_p = NULL;
    if (zsock_recv(pipe, "spi", &command, &pointer, failures) || !command || !streq(command, "WRITE")) {
        free(command);
        return -1;
    }
    free(command);
    *bulk_p = (shoal_oplog_bulk_t *) pointer;
    return 0;
}

//  ARG is a handle on the store (borrowed).
static void
s_writer_actor(zsock_t *pipe, void *arg)
{
    s_thread_setup("shoal-writer");
    s_compaction_t compaction = { shoal_store_share((shoal_store_t *) arg), false };
    zsock_signal(pipe, 0);
    uint32_t batches = 0;
    int failures = 0;               //  batches that failed: one handed over before the actor heard is refused
    shoal_oplog_bulk_t *next = NULL;    //  a batch taken while the one before it was ingested
    int next_failures = 0;          //  the failures it carries
    bool stopping = false;          //  $TERM came while a batch was being written
    while (true) {
        shoal_oplog_bulk_t *bulk = next;
        int heard = next_failures;
        next = NULL;
        if (!bulk && (stopping || s_writer_take(pipe, &compaction, &bulk, &heard)))
            break;
        if (heard < failures) {
            //  It follows a batch that failed (see DESIGN).
            zsock_send(pipe, "sisp", "DONE", -1, "a batch before it could not be written", bulk);
            continue;
        }
        shoal_fault_point("loader", "write", ++batches);
        s_compaction_set(&compaction, true, NULL);
        int rc = shoal_oplog_bulk_make(bulk);
        //  The next batch's log families' files are made while this one's
        //  go in (see DESIGN).
        if (rc == 0 && !stopping && (zsock_events(pipe) & ZMQ_POLLIN)) {
            if (s_writer_take(pipe, &compaction, &next, &next_failures))
                stopping = true;
            else
            if (next_failures == failures)
                shoal_oplog_bulk_prepare(next);
        }
        shoal_oplog_bulk_result_t result;
        if (rc == 0)
            rc = shoal_oplog_bulk_ingest(bulk, &result);
        if (rc)
            failures++;
        zsock_send(pipe, "sisp", "DONE", rc, rc ? shoal_oplog_bulk_error(bulk) : "", bulk);
    }
    s_compaction_set(&compaction, false, "the loader stops");
    shoal_store_destroy(&compaction.store);
}

// ---------------------------------------------------------------------------
//  The actor

//  Ends the streams that asked to, once nothing of theirs waits to be written.
static void
s_actor_end_streams(s_actor_t *self)
{
    zlistx_t *done = zlistx_new();
    for (s_stream_t *stream = (s_stream_t *) zhashx_first(self->streams); stream;
         stream = (s_stream_t *) zhashx_next(self->streams))
        if (stream->ending && stream->filling == 0 && stream->writing == 0 && stream->queued == 0)
            zlistx_add_end(done, stream->key);
    for (const char *key = (const char *) zlistx_first(done); key;
         key = (const char *) zlistx_next(done)) {
        s_emit(self, SHOAL_LOADER_ENDED, key, 0, NULL, NULL);
        zhashx_delete(self->streams, key);
    }
    zlistx_destroy(&done);
    //  Loads are over for now: the memory kept for the next batch (a few
    //  hundred MB after a large catch-up) goes back.
    if (zhashx_size(self->streams) == 0 && self->writing == 0) {
        shoal_oplog_bulk_release(self->filling);
        shoal_oplog_bulk_release(self->spare);
    }
}

//  Waits for the writer's answer about the oldest batch it holds, tells
//  each stream of that batch what came of it, and takes the batch back.
static void
s_actor_written(s_actor_t *self)
{
    char *command = NULL, *error = NULL;
    void *pointer = NULL;
    int rc = -1;
    //  Every WRITE is answered, and the writer's answer is the only way the
    //  batch comes back: a read interrupted by a signal is read again.
    while (zsock_recv(self->writer, "sisp", &command, &rc, &error, &pointer) && zmq_errno() == EINTR) {
        free(command);
        free(error);
        command = error = NULL;
    }
    shoal_oplog_bulk_t *batch = (shoal_oplog_bulk_t *) pointer;
    assert(batch);
    self->writing--;
    if (rc == 0) {
        for (s_stream_t *stream = (s_stream_t *) zhashx_first(self->streams); stream;
             stream = (s_stream_t *) zhashx_next(self->streams)) {
            if (stream->writing)
                s_emit(self, SHOAL_LOADER_WRITTEN, stream->key, stream->writing, &stream->written,
                       NULL);
            stream->writing = stream->queued;
            stream->written = stream->queued_tip;
            stream->queued = 0;
        }
    }
    else {
        //  Nothing after the failed batch may be written: its entries would
        //  follow ones that are not (see DESIGN).
        const char *why = error && *error ? error : "the writer did not answer";
        zsys_warning("loader: a batch could not be written: %s", why);
        shoal_oplog_bulk_clear(batch);
        if (self->filling)
            shoal_oplog_bulk_clear(self->filling);
        //  A batch handed over meanwhile comes back refused, its streams
        //  told already.
        self->failures++;
        for (s_stream_t *stream = (s_stream_t *) zhashx_first(self->streams); stream;
             stream = (s_stream_t *) zhashx_next(self->streams)) {
            size_t lost = stream->writing + stream->queued + stream->filling;
            if (lost || !stream->refused)
                s_emit(self, SHOAL_LOADER_FAILED, stream->key, lost, NULL, why);
            stream->writing = stream->queued = stream->filling = 0;
            if (!stream->refused)
                stream->refused = shoal_strdup(why);
        }
    }
    if (!self->filling)
        self->filling = batch;
    else
        self->spare = batch;
    free(command);
    free(error);
    s_actor_end_streams(self);
}

//  Hands the batch being filled to the writer. When the writer then holds
//  both, waits for the oldest to come back to be filled. Nothing to do
//  when the batch is empty.
static void
s_actor_flush(s_actor_t *self)
{
    if (shoal_oplog_bulk_count(self->filling) == 0)
        return;
    for (s_stream_t *stream = (s_stream_t *) zhashx_first(self->streams); stream;
         stream = (s_stream_t *) zhashx_next(self->streams)) {
        if (self->writing == 0) {
            stream->writing = stream->filling;
            stream->written = stream->filled;
        }
        else {
            stream->queued = stream->filling;
            stream->queued_tip = stream->filled;
        }
        stream->filling = 0;
    }
    shoal_oplog_bulk_t *batch = self->filling;
    self->filling = self->spare;
    self->spare = NULL;
    self->writing++;
    zsock_send(self->writer, "spi", "WRITE", batch, self->failures);
    if (!self->filling)
        s_actor_written(self);
}

static s_stream_t *
s_actor_stream(s_actor_t *self, const s_job_t *job)
{
    s_stream_t *stream = (s_stream_t *) zhashx_lookup(self->streams, job->stream);
    if (!stream) {
        stream = (s_stream_t *) zmalloc(sizeof *stream);
        stream->key = shoal_strdup(job->stream);
        stream->dataset = shoal_strdup(job->dataset);
        stream->node = shoal_strdup(job->node);
        zhashx_insert(self->streams, job->stream, stream);
    }
    if (job->has_base)
        stream->tip = job->base;
    return stream;
}

static void
s_actor_page(s_actor_t *self, s_job_t *job)
{
    s_stream_t *stream = s_actor_stream(self, job);
    if (stream->refused) {
        s_emit(self, SHOAL_LOADER_REFUSED, job->stream, 0, NULL, stream->refused);
        return;
    }
    const uint8_t **entries = (const uint8_t **) zmalloc((job->count + 1) * sizeof *entries);
    size_t offset = 0;
    for (size_t i = 0; i < job->count; i++) {
        entries[i] = job->bytes + offset;
        offset += job->sizes[i];
    }
    size_t accepted = 0;
    int rc = shoal_oplog_bulk_add(self->filling, job->dataset, job->node, &stream->tip, entries,
                                  job->sizes, job->count, &accepted);
    free(entries);
    if (accepted) {
        stream->filling += accepted;
        stream->filled = stream->tip;
    }
    if (rc) {
        stream->refused = shoal_strdup(shoal_oplog_bulk_error(self->filling));
        s_emit(self, SHOAL_LOADER_REFUSED, job->stream, accepted, NULL, stream->refused);
    }
    else
        s_emit(self, SHOAL_LOADER_TAKEN, job->stream, accepted, NULL, NULL);
    size_t filled = shoal_oplog_bulk_count(self->filling);
    if ((self->writing == 0 && filled >= SHOAL_LOADER_BATCH_MIN_ENTRIES)
    ||  filled >= SHOAL_LOADER_BATCH_ENTRIES
    ||  shoal_oplog_bulk_bytes(self->filling) >= SHOAL_LOADER_BATCH_BYTES)
        s_actor_flush(self);
}

static void
s_actor_end(s_actor_t *self, const char *key)
{
    s_stream_t *stream = (s_stream_t *) zhashx_lookup(self->streams, key);
    if (!stream) {
        //  Never heard of (its pages were all empty): ended already.
        s_emit(self, SHOAL_LOADER_ENDED, key, 0, NULL, NULL);
        return;
    }
    stream->ending = true;
    //  Its last entries need not wait for others to fill the batch; but
    //  while the writer is busy they go when it is free (s_loader_actor),
    //  and the pages of other streams are checked meanwhile rather than
    //  waiting behind a write.
    if (stream->filling && self->writing == 0)
        s_actor_flush(self);
    s_actor_end_streams(self);
}

//  Whether the batch being filled goes as soon as the writer is free: it
//  holds enough entries, or the last ones of a stream that ended.
static bool
s_actor_flush_due(s_actor_t *self)
{
    if (shoal_oplog_bulk_count(self->filling) >= SHOAL_LOADER_BATCH_MIN_ENTRIES)
        return true;
    for (s_stream_t *stream = (s_stream_t *) zhashx_first(self->streams); stream;
         stream = (s_stream_t *) zhashx_next(self->streams))
        if (stream->ending && stream->filling)
            return true;
    return false;
}

//  Reads one command from the reactor. Returns -1 on STOP or $TERM.
static int
s_actor_command(s_actor_t *self)
{
    char *command = NULL;
    void *pointer = NULL;
    zmsg_t *msg = zmsg_recv(self->pipe);
    if (!msg)
        return -1;
    command = zmsg_popstr(msg);
    int rc = 0;
    if (!command || streq(command, "$TERM") || streq(command, "STOP"))
        rc = -1;
    else
    if (streq(command, "PAGE")) {
        zframe_t *frame = zmsg_pop(msg);
        if (frame && zframe_size(frame) == sizeof pointer) {
            memcpy(&pointer, zframe_data(frame), sizeof pointer);
            s_job_t *job = (s_job_t *) pointer;
            s_actor_page(self, job);
            s_job_destroy(&job);
        }
        zframe_destroy(&frame);
    }
    else
    if (streq(command, "END")) {
        char *key = zmsg_popstr(msg);
        if (key)
            s_actor_end(self, key);
        free(key);
    }
    free(command);
    zmsg_destroy(&msg);
    return rc;
}

//  A fault point before each table file a write ingests; ARG counts them
//  (the writer's thread alone calls it).
static void
s_loader_ingesting(shoal_cf_t cf, void *arg)
{
    (void) cf;
    uint32_t *ingested = (uint32_t *) arg;
    shoal_fault_point("loader", "ingest", ++*ingested);
}

static void
s_loader_actor(zsock_t *pipe, void *arg)
{
    s_args_t *args = (s_args_t *) arg;
    s_actor_t self = { .pipe = pipe };
    s_thread_setup("shoal-loader");
    self.store = shoal_store_share(shoal_oplog_store(args->oplog));
    //  Large: a batch holds SHOAL_LOADER_BATCH_MIN_ENTRIES entries or more
    //  but a stream's last.
    shoal_oplog_bulk_options_t options = {
        args->max_clock_ahead_ms, NULL, NULL, s_loader_ingesting, &self.ingested, true
    };
    self.filling = shoal_oplog_bulk_new(args->oplog, self.store, args->dir, &options);
    self.spare = shoal_oplog_bulk_new(args->oplog, self.store, args->dir, &options);
    self.writer = zactor_new(s_writer_actor, self.store);
    self.streams = zhashx_new();
    zhashx_set_destructor(self.streams, s_stream_destroy);
    //  ARGS live on the starter's stack, which is gone once signalled.
    bool started = self.filling && self.spare && self.writer;
    args->started = started;
    zsock_signal(pipe, 0);
    //  The writer's answer comes first: a poller says only the first of its
    //  sockets that is ready, and while pages kept coming the writer's
    //  answer waited behind them, the writer idle, until the batch being
    //  filled was full (bench_sync: a second at the start of a catch-up).
    zpoller_t *poller = started ? zpoller_new(zactor_sock(self.writer), pipe, NULL) : NULL;
    while (poller) {
        void *which = zpoller_wait(poller, -1);
        if (which == pipe) {
            if (s_actor_command(&self))
                break;
        }
        else
        if (which == zactor_sock(self.writer) && self.writing > 0) {
            s_actor_written(&self);
            //  The writer is free: what has filled meanwhile goes now.
            if (s_actor_flush_due(&self))
                s_actor_flush(&self);
        }
        else
        if (zpoller_terminated(poller))
            break;
    }
    //  A batch being written is finished: its table files must not be cut.
    //  Its events are the last; the reactor reads up to STOPPED and frees
    //  them, then ends the actor.
    while (self.writing > 0)
        s_actor_written(&self);
    zstr_send(pipe, "STOPPED");
    zpoller_destroy(&poller);
    zactor_destroy(&self.writer);
    zhashx_destroy(&self.streams);
    shoal_oplog_bulk_destroy(&self.filling);
    shoal_oplog_bulk_destroy(&self.spare);
    shoal_store_destroy(&self.store);
}

// ---------------------------------------------------------------------------
//  The reactor's side

shoal_loader_t *
shoal_loader_new(shoal_oplog_t *oplog, const char *dir, uint64_t max_clock_ahead_ms)
{
    s_args_t args = { .oplog = oplog, .max_clock_ahead_ms = max_clock_ahead_ms };
    snprintf(args.dir, sizeof args.dir, "%s", dir);
    size_t swept = shoal_oplog_bulk_sweep(dir);
    if (swept)
        zsys_info("loader: removed %zu table file(s) a stopped load left in %s", swept, dir);
    zactor_t *actor = zactor_new(s_loader_actor, &args);
    if (!args.started) {
        zsys_error("loader: cannot start in %s", dir);
        zactor_destroy(&actor);
        return NULL;
    }
    shoal_loader_t *self = (shoal_loader_t *) zmalloc(sizeof *self);
    self->actor = actor;
    return self;
}

void
shoal_loader_destroy(shoal_loader_t **self_p)
{
    if (*self_p) {
        shoal_loader_t *self = *self_p;
        //  Events not read yet own memory: they are read and dropped.
        zstr_send(self->actor, "STOP");
        while (true) {
            zmsg_t *msg = zmsg_recv(self->actor);
            char *kind = msg ? zmsg_popstr(msg) : NULL;
            bool stopped = !kind || streq(kind, "STOPPED");
            zframe_t *frame = kind && streq(kind, "EVENT") ? zmsg_pop(msg) : NULL;
            if (frame && zframe_size(frame) == sizeof(void *)) {
                shoal_loader_event_t *event;
                memcpy(&event, zframe_data(frame), sizeof event);
                shoal_loader_event_clear(event);
                free(event);
            }
            zframe_destroy(&frame);
            free(kind);
            zmsg_destroy(&msg);
            if (stopped)
                break;
        }
        zactor_destroy(&self->actor);
        free(self);
        *self_p = NULL;
    }
}

zsock_t *
shoal_loader_sock(shoal_loader_t *self)
{
    return zactor_sock(self->actor);
}

void
shoal_loader_page(shoal_loader_t *self, const char *stream, const char *dataset, const char *node,
                  const shoal_oplog_tip_t *base, const shoal_msg_bulk_t *page)
{
    s_job_t *job = (s_job_t *) zmalloc(sizeof *job);
    job->stream = shoal_strdup(stream);
    job->dataset = shoal_strdup(dataset);
    job->node = shoal_strdup(node);
    job->has_base = base != NULL;
    if (base)
        job->base = *base;
    size_t total = 0;
    for (size_t i = 0; i < page->count; i++)
        total += page->sizes[i];
    //  Not zeroed first, as zmalloc would: every byte is copied over, and a
    //  catch-up hands its whole size over in pages, on the reactor. Out of
    //  memory aborts with a message, as zmalloc does (see shoal_alloc.h).
    job->bytes = (uint8_t *) shoal_malloc(total);
    job->sizes = (size_t *) shoal_malloc((page->count + 1) * sizeof *job->sizes);
    job->count = page->count;
    if (total)
        memcpy(job->bytes, page->bytes, total);
    if (page->count)
        memcpy(job->sizes, page->sizes, page->count * sizeof *job->sizes);
    zmsg_t *msg = zmsg_new();
    zmsg_addstr(msg, "PAGE");
    zmsg_addmem(msg, &job, sizeof job);
    if (zmsg_send(&msg, self->actor)) {
        zmsg_destroy(&msg);
        s_job_destroy(&job);
    }
}

void
shoal_loader_end(shoal_loader_t *self, const char *stream)
{
    zstr_sendx(self->actor, "END", stream, NULL);
}

int
shoal_loader_event(shoal_loader_t *self, shoal_loader_event_t *event)
{
    memset(event, 0, sizeof *event);
    char *kind = NULL;
    void *pointer = NULL;
    if (zsock_recv(self->actor, "sp", &kind, &pointer) || !kind || !pointer) {
        free(kind);
        return -1;
    }
    shoal_loader_event_t *sent = (shoal_loader_event_t *) pointer;
    *event = *sent;
    free(sent);
    free(kind);
    return 0;
}

void
shoal_loader_event_clear(shoal_loader_event_t *event)
{
    free(event->stream);
    free(event->error);
    memset(event, 0, sizeof *event);
}
