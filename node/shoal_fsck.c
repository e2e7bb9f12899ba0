/*  shoal_fsck: runs of the consistency sweep, a slice at a time. See
    shoal_fsck.h for the design.
*/
#include "shoal_fsck.h"
#include "shoal_worker.h"
#include "shoal_alloc.h"

#include <czmq.h>

//  How long of each 20 ms tick a run an operator waits for may take.
#define FSCK_OPERATOR_MS 8
//  Most checks a node registers.
#define FSCK_CHECKS_MAX 16
//  A reply's findings stop at this many bytes of text, well inside a frame.
#define FSCK_REPLY_BYTES (768 * 1024)
//  What each finding costs a reply beyond its text (tags and lengths).
#define FSCK_FINDING_OVERHEAD 32
//  A run keeps (and logs) this many findings; past it, it counts them only:
//  a store damaged throughout must not take the node's memory or its log.
#define FSCK_FINDINGS_KEPT 100000
#define FSCK_FINDINGS_LOGGED 100
#define FSCK_TRIGGER_OPERATOR "operator"
#define FSCK_TRIGGER_PERIODIC "periodic"
#define MS_PER_S 1000

//  A check as registered.
typedef struct {
    const shoal_fsck_check_t *check;
    void *arg;
} s_registered_t;

//  One finding of a run.
typedef struct {
    size_t check;               //  index of the check that found it
    char *where;
    char *key;
    char *problem;
    bool repairable;
    char *repaired;             //  what the repair did, or NULL
} s_finding_t;

//  A run: its snapshot, where its checks are, what they found.
typedef struct {
    uint64_t id;                //  numbered from 1 on this node
    bool repair;                //  mends what is safe once the look is over
    bool operator;              //  an operator waits for it (else periodic)
    bool done;
    shoal_store_t *snapshot;    //  the point in time it reads; NULL once done
    size_t current;             //  index of the check at work
    void *states[FSCK_CHECKS_MAX];  //  each check's state from its begin to the run's end (its repair reads it)
    uint64_t keys;              //  keys and files looked at
    uint64_t started_ms, finished_ms;
    s_finding_t *findings;      //  COUNT findings, in order
    size_t count, capacity;
    uint64_t dropped;           //  findings past FSCK_FINDINGS_KEPT, counted only
    zhashx_t *seen;             //  "where\tkey" of every finding: a key is named once
    char *error;                //  what failed, or NULL
    void (*end_fns[FSCK_CHECKS_MAX]) (void **state_p);  //  how each state is freed
    bool repaired;              //  every check's repair ran
    size_t mending;             //  index of the check whose repair_step is at work
    bool finishing;             //  its repairs are over: it waits for the work it deferred
    size_t deferred;            //  work handed to the worker, not back yet
} s_run_t;

//  Work a repair deferred to the worker (DESIGN 3): made and freed on the
//  reactor, the worker writes only its result.
typedef struct {
    uint64_t run;               //  the run's id: a run gone meanwhile is not told
    size_t check;
    char *where, *key, *action, *path;
    shoal_fsck_work_fn *fn;
    int rc;                     //  the result
    char *error;
} s_work_t;

struct _shoal_fsck_t {
    const shoal_settings_t *settings;   //  live settings (borrowed)
    char *node_id;              //  for reports
    shoal_store_t *store;       //  the node's store (borrowed)
    s_registered_t checks[FSCK_CHECKS_MAX]; //  in run order
    size_t check_count;
    s_run_t *run;               //  the run in progress, or NULL
    s_run_t *last;              //  the last run that ended, or NULL
    uint64_t runs;              //  runs started
    int64_t next_periodic_ms;   //  monotonic time of the next periodic run (0: not yet set)
    zactor_t *worker;           //  runs deferred work (made at the first)
    zlistx_t *works;            //  s_work_t handed to it and not back yet
};

// ---------------------------------------------------------------------------
//  Runs

static void
s_run_destroy(s_run_t **run_p)
{
    s_run_t *run = *run_p;
    if (!run)
        return;
    for (size_t c = 0; c < FSCK_CHECKS_MAX; c++)
        if (run->states[c])
            run->end_fns[c](&run->states[c]);
    shoal_store_destroy(&run->snapshot);
    for (size_t i = 0; i < run->count; i++) {
        free(run->findings[i].where);
        free(run->findings[i].key);
        free(run->findings[i].problem);
        free(run->findings[i].repaired);
    }
    free(run->findings);
    zhashx_destroy(&run->seen);
    free(run->error);
    free(run);
    *run_p = NULL;
}

//  The findings of a run that are left after its repair.
static uint64_t
s_run_remaining(const s_run_t *run)
{
    uint64_t remaining = run->dropped;
    for (size_t i = 0; i < run->count; i++)
        if (!run->findings[i].repaired)
            remaining++;
    return remaining;
}

//  What a check tells of one finding: kept once per (where, key).
typedef struct {
    shoal_fsck_t *self;
    s_run_t *run;
} s_sink_t;

static void
s_found(const shoal_finding_t *finding, void *arg)
{
    s_sink_t *sink = (s_sink_t *) arg;
    s_run_t *run = sink->run;
    if (run->count >= FSCK_FINDINGS_KEPT) {
        run->dropped++;
        return;
    }
    char *seen = zsys_sprintf("%s\t%s", finding->where, finding->key);
    if (zhashx_lookup(run->seen, seen)) {
        free(seen);
        return;
    }
    zhashx_insert(run->seen, seen, (void *) 1);
    free(seen);
    if (run->count == run->capacity) {
        run->capacity = run->capacity ? 2 * run->capacity : 16;
        run->findings = (s_finding_t *) shoal_realloc(run->findings, run->capacity * sizeof *run->findings);
    }
    s_finding_t *kept = &run->findings[run->count++];
    memset(kept, 0, sizeof *kept);
    kept->check = run->current;
    kept->where = shoal_strdup(finding->where);
    kept->key = shoal_strdup(finding->key);
    kept->problem = shoal_strdup(finding->problem);
    kept->repairable = finding->repairable;
    if (run->count <= FSCK_FINDINGS_LOGGED)
        zsys_warning("fsck: %s: %s %s: %s%s", sink->self->checks[run->current].check->name, finding->where,
                 finding->key, finding->problem, finding->repairable ? " (repair mends it)" : "");
}

static void
s_run_fail(s_run_t *run, const char *check, char *error)
{
    char *text = zsys_sprintf("%s%s%s: %s", run->error ? run->error : "", run->error ? "; " : "", check,
                              error ? error : "failed");
    free(run->error);
    run->error = text;
    zsys_error("fsck: %s: %s", check, error ? error : "failed");
    free(error);
}

//  Moves to the next check; the state stays for the repair.
static void
s_run_next_check(shoal_fsck_t *self, s_run_t *run)
{
    (void) self;
    run->current++;
}

//  What a repair tells of a finding it mended.
typedef struct {
    shoal_fsck_t *self;
    s_run_t *run;
    size_t check;
} s_mender_t;

static void
s_repaired(const char *where, const char *key, const char *action, void *arg)
{
    s_mender_t *mender = (s_mender_t *) arg;
    for (size_t i = 0; i < mender->run->count; i++) {
        s_finding_t *finding = &mender->run->findings[i];
        if (finding->check == mender->check && !finding->repaired && streq(finding->where, where)
        &&  streq(finding->key, key)) {
            finding->repaired = shoal_strdup(action);
            zsys_info("fsck: repaired %s %s: %s", where, key, action);
            return;
        }
    }
}

//  Once every check has looked: each mends its repairable findings, with
//  what its look kept (its state), through the live node.
static void
s_run_repair(shoal_fsck_t *self, s_run_t *run)
{
    for (size_t c = 0; c < self->check_count; c++) {
        const shoal_fsck_check_t *check = self->checks[c].check;
        size_t count = 0;
        for (size_t i = 0; i < run->count; i++)
            if (run->findings[i].check == c)
                count++;
        if (!count || !check->repair || !run->states[c])
            continue;
        shoal_fsck_item_t *items = (shoal_fsck_item_t *) zmalloc(count * sizeof *items);
        size_t n = 0;
        for (size_t i = 0; i < run->count; i++)
            if (run->findings[i].check == c)
                items[n++] = (shoal_fsck_item_t) { run->findings[i].where, run->findings[i].key,
                                                   run->findings[i].problem, run->findings[i].repairable };
        char *error = NULL;
        s_mender_t mender = { self, run, c };
        if (check->repair(run->states[c], items, count, s_repaired, &mender, &error))
            s_run_fail(run, check->name, error);
        else
            free(error);
        free(items);
    }
}

//  The run is over: its states and snapshot go.
static void
s_run_complete(shoal_fsck_t *self, s_run_t *run)
{
    for (size_t c = 0; c < self->check_count; c++)
        if (run->states[c])
            run->end_fns[c](&run->states[c]);
    shoal_store_destroy(&run->snapshot);
    run->done = true;
    run->finished_ms = (uint64_t) zclock_time();
    zsys_info("fsck: run %" PRIu64 " (%s%s) looked at %" PRIu64 " keys and files in %" PRIu64 " ms: %" PRIu64
              " finding(s) (the first %d logged), %" PRIu64 " left for an operator%s%s", run->id, run->operator
              ? FSCK_TRIGGER_OPERATOR : FSCK_TRIGGER_PERIODIC, run->repair ? ", repair" : "", run->keys,
              run->finished_ms - run->started_ms, run->count + run->dropped, FSCK_FINDINGS_LOGGED,
              s_run_remaining(run), run->error ? "; failed: " : "", run->error ? run->error : "");
}

//  Every check has looked: a run that repairs mends now, its long repairs
//  up to BUDGET keys a slice, and is over once they and the work it
//  deferred are done. Returns the keys visited.
static size_t
s_run_finish(shoal_fsck_t *self, s_run_t *run, size_t budget)
{
    if (run->repair && !run->repaired) {
        s_run_repair(self, run);
        run->repaired = true;
    }
    while (run->repair && run->mending < self->check_count) {
        const shoal_fsck_check_t *check = self->checks[run->mending].check;
        void *state = run->states[run->mending];
        if (!check->repair_step || !state) {
            run->mending++;
            continue;
        }
        bool done = false;
        char *error = NULL;
        s_mender_t mender = { self, run, run->mending };
        int64_t did = check->repair_step(state, budget, &done, s_repaired, &mender, &error);
        if (did < 0) {
            s_run_fail(run, check->name, error);
            done = true;
        }
        else
            free(error);
        if (done)
            run->mending++;
        //  One step a slice: the next comes at the next.
        return did > 0 ? (size_t) did : 1;
    }
    run->finishing = true;
    if (!run->deferred)
        s_run_complete(self, run);
    return 0;
}

// ---------------------------------------------------------------------------
//  The worker: deferred repairs (DESIGN 3)

static void
s_work_destroy(void **item_p)
{
    s_work_t *work = (s_work_t *) *item_p;
    if (work) {
        free(work->where);
        free(work->key);
        free(work->action);
        free(work->path);
        free(work->error);
        free(work);
        *item_p = NULL;
    }
}

//  The worker's run of one work (shoal_worker).
static void
s_work_run(void *item)
{
    s_work_t *work = (s_work_t *) item;
    work->rc = work->fn(work->path, &work->error);
}

void
shoal_fsck_defer(void *repaired_arg, const char *where, const char *key, const char *action,
                 shoal_fsck_work_fn *fn, const char *path)
{
    s_mender_t *mender = (s_mender_t *) repaired_arg;
    shoal_fsck_t *self = mender->self;
    if (!self->worker)
        self->worker = shoal_worker_new("shoal-fsck", s_work_run);
    s_work_t *work = (s_work_t *) zmalloc(sizeof *work);
    work->run = mender->run->id;
    work->check = mender->check;
    work->where = shoal_strdup(where);
    work->key = shoal_strdup(key);
    work->action = shoal_strdup(action);
    work->path = shoal_strdup(path);
    work->fn = fn;
    zlistx_add_end(self->works, work);
    mender->run->deferred++;
    assert(self->worker);
    shoal_worker_give(self->worker, work);
}

//  Reads the work the worker is done with (WAIT: at least one, blocking:
//  a run without a reactor); each is told to its run.
static void
s_works_read(shoal_fsck_t *self, bool wait)
{
    while (self->worker && zlistx_size(self->works)
       &&  (wait || (zsock_events(self->worker) & ZMQ_POLLIN))) {
        wait = false;
        void *pointer = NULL;
        if (zsock_recv(self->worker, "p", &pointer) || !pointer)
            break;
        s_work_t *work = (s_work_t *) pointer;
        s_run_t *run = self->run && self->run->id == work->run ? self->run : NULL;
        if (run) {
            if (work->rc == 0) {
                s_mender_t mender = { self, run, work->check };
                s_repaired(work->where, work->key, work->action, &mender);
            }
            else
                s_run_fail(run, self->checks[work->check].check->name, work->error ? shoal_strdup(work->error) : NULL);
            if (run->deferred && --run->deferred == 0 && run->finishing && !run->done)
                s_run_complete(self, run);
        }
        void *cursor = zlistx_find(self->works, work);
        if (cursor)
            zlistx_delete(self->works, cursor);
    }
}

// ---------------------------------------------------------------------------
//  Slices

//  Looks at up to BUDGET keys of the run. Returns the keys looked at.
static size_t
s_run_slice(shoal_fsck_t *self, s_run_t *run, size_t budget)
{
    size_t looked = 0;
    s_sink_t sink = { self, run };
    while (!run->done && looked < budget) {
        if (run->current >= self->check_count) {
            if (!run->finishing)
                looked += s_run_finish(self, run, budget - looked);
            break;
        }
        const shoal_fsck_check_t *check = self->checks[run->current].check;
        char *error = NULL;
        void **state = &run->states[run->current];
        if (!*state) {
            *state = check->begin(self->checks[run->current].arg, run->snapshot, run->repair, &error);
            if (!*state) {
                s_run_fail(run, check->name, error);
                s_run_next_check(self, run);
                continue;
            }
            run->end_fns[run->current] = check->end;
        }
        bool done = false;
        int64_t did = check->step(*state, budget - looked, &done, s_found, &sink, &error);
        if (did < 0) {
            s_run_fail(run, check->name, error);
            done = true;
        }
        else {
            looked += (size_t) did;
            run->keys += (uint64_t) did;
        }
        if (done)
            s_run_next_check(self, run);
        //  A step that looked at nothing and is not done would spin.
        if (did == 0 && !done)
            break;
    }
    return looked;
}

static s_run_t *
s_run_new(shoal_fsck_t *self, bool repair, bool operator)
{
    s_run_t *run = (s_run_t *) zmalloc(sizeof *run);
    run->id = ++self->runs;
    run->repair = repair;
    run->operator = operator;
    run->snapshot = shoal_store_snapshot(self->store);
    run->started_ms = (uint64_t) zclock_time();
    run->seen = zhashx_new();
    zsys_info("fsck: run %" PRIu64 " starts (%s%s)", run->id, operator ? FSCK_TRIGGER_OPERATOR
              : FSCK_TRIGGER_PERIODIC, repair ? ", repair" : "");
    return run;
}

//  A run that is over becomes the last.
static void
s_run_retire(shoal_fsck_t *self)
{
    if (self->run && self->run->done) {
        s_run_destroy(&self->last);
        self->last = self->run;
        self->run = NULL;
    }
}

// ---------------------------------------------------------------------------
//  Reports

static char *
s_cut(const char *text, size_t *budget)
{
    size_t length = strlen(text);
    *budget = *budget > length ? *budget - length : 0;
    return shoal_strdup(text);
}

//  RUN (NULL: none ever ran) as a report, with as many findings as a reply holds.
static void
s_report(shoal_fsck_t *self, const s_run_t *run, shoal_msg_fsck_report_t *report)
{
    memset(report, 0, sizeof *report);
    report->node_id = shoal_strdup(self->node_id);
    report->trigger = shoal_strdup(run ? run->operator ? FSCK_TRIGGER_OPERATOR : FSCK_TRIGGER_PERIODIC : "");
    report->error = shoal_strdup(run && run->error ? run->error : "");
    bool at_work = run && !run->done && run->current < self->check_count;
    report->check = shoal_strdup(at_work ? self->checks[run->current].check->name : "");
    if (!run)
        return;
    report->run = run->id;
    report->done = run->done;
    report->repair = run->repair;
    report->keys = run->keys;
    report->started_ms = run->started_ms;
    report->finished_ms = run->finished_ms;
    report->finding_count = run->count + run->dropped;
    report->remaining = s_run_remaining(run);
    size_t count = run->count < SHOAL_FSCK_FINDINGS_MAX ? run->count : SHOAL_FSCK_FINDINGS_MAX;
    report->findings = (shoal_msg_fsck_finding_t *) zmalloc((count + 1) * sizeof *report->findings);
    size_t budget = FSCK_REPLY_BYTES;
    for (size_t i = 0; i < count && budget > FSCK_FINDING_OVERHEAD; i++) {
        const s_finding_t *from = &run->findings[i];
        shoal_msg_fsck_finding_t *to = &report->findings[report->count++];
        budget -= FSCK_FINDING_OVERHEAD;
        to->check = s_cut(self->checks[from->check].check->name, &budget);
        to->where = s_cut(from->where, &budget);
        to->key = s_cut(from->key, &budget);
        to->problem = s_cut(from->problem, &budget);
        to->repairable = from->repairable;
        to->repaired = s_cut(from->repaired ? from->repaired : "", &budget);
    }
}

// ---------------------------------------------------------------------------
//  The module

shoal_fsck_t *
shoal_fsck_new(const shoal_settings_t *settings, const char *node_id, shoal_store_t *store)
{
    shoal_fsck_t *self = (shoal_fsck_t *) zmalloc(sizeof *self);
    self->settings = settings;
    self->node_id = shoal_strdup(node_id);
    self->store = store;
    self->works = zlistx_new();
    zlistx_set_destructor(self->works, s_work_destroy);
    return self;
}

void
shoal_fsck_destroy(shoal_fsck_t **self_p)
{
    if (*self_p) {
        shoal_fsck_t *self = *self_p;
        //  The worker ends first (work in hand is finished): then no one
        //  holds the work not read back.
        zactor_destroy(&self->worker);
        zlistx_destroy(&self->works);
        s_run_destroy(&self->run);
        s_run_destroy(&self->last);
        free(self->node_id);
        free(self);
        *self_p = NULL;
    }
}

void
shoal_fsck_register(shoal_fsck_t *self, const shoal_fsck_check_t *check, void *arg)
{
    assert(self->check_count < FSCK_CHECKS_MAX);
    assert(!self->run);
    self->checks[self->check_count++] = (s_registered_t) { check, arg };
}

bool
shoal_fsck_handles(shoal_msg_type_t type)
{
    return type == SHOAL_MSG_FSCK;
}

shoal_envelope_t *
shoal_fsck_handle(shoal_fsck_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    if (!streq(caller->role, SHOAL_ROLE_ADMIN))
        return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN, "fsck is for operators (role %s)", caller->role);
    const shoal_msg_fsck_request_t *body = (const shoal_msg_fsck_request_t *) request->body;
    s_run_retire(self);
    if (body->op == SHOAL_FSCK_START) {
        //  A periodic run only reports: an operator's repair takes its place.
        if (self->run && !self->run->operator && body->repair) {
            zsys_info("fsck: periodic run %" PRIu64 " gives way to an operator's repair", self->run->id);
            s_run_destroy(&self->run);
        }
        if (self->run && self->run->repair != body->repair)
            return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "fsck run %" PRIu64 " (%s%s) is in progress "
                                        "(%" PRIu64 " keys looked at): ask again once it is over", self->run->id,
                                        self->run->operator ? FSCK_TRIGGER_OPERATOR : FSCK_TRIGGER_PERIODIC,
                                        self->run->repair ? ", repair" : "", self->run->keys);
        if (!self->run)
            self->run = s_run_new(self, body->repair, true);
        //  Joined: a periodic run is now one an operator waits for.
        self->run->operator = true;
    }
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "OK");
    shoal_msg_fsck_report_t *report = (shoal_msg_fsck_report_t *) shoal_envelope_new_body(reply);
    s_report(self, self->run ? self->run : self->last, report);
    return reply;
}

void
shoal_fsck_tick(shoal_fsck_t *self)
{
    s_works_read(self, false);
    int64_t now = zclock_mono();
    int64_t interval = self->settings->fsck_interval_s * MS_PER_S;
    //  A new interval counts from now, a shorter one at once.
    if (!interval)
        self->next_periodic_ms = 0;
    else
    if (!self->next_periodic_ms || self->next_periodic_ms > now + interval)
        self->next_periodic_ms = now + interval;
    if (!self->run && interval && now >= self->next_periodic_ms) {
        self->run = s_run_new(self, false, false);
        self->next_periodic_ms = now + interval;
    }
    if (!self->run || self->run->done)
        return;
    size_t slice = (size_t) self->settings->fsck_slice_keys;
    if (!self->run->operator) {
        s_run_slice(self, self->run, slice);
        return;
    }
    int64_t until = now + FSCK_OPERATOR_MS;
    while (!self->run->done && zclock_mono() < until)
        if (s_run_slice(self, self->run, slice) == 0 && !self->run->done)
            break;
}

int
shoal_fsck_run(shoal_fsck_t *self, bool repair, shoal_msg_fsck_report_t *report)
{
    s_run_retire(self);
    if (self->run)
        return -1;
    self->run = s_run_new(self, repair, true);
    size_t slice = self->settings ? (size_t) self->settings->fsck_slice_keys : 1000;
    while (!self->run->done) {
        s_run_slice(self, self->run, slice);
        if (self->run->finishing && !self->run->done)
            s_works_read(self, true);
    }
    s_report(self, self->run, report);
    s_run_retire(self);
    return 0;
}
