/*  shoal_events: the event stream. See shoal_events.h.

    DESIGN
    1.  An event is made where the claim store says a claim or a move record
        was written (its observer), or where the mesh tells of a member: so
        every state a claim or a move passes through on this node is an
        event, in the order the node wrote them, whoever wrote them.
    2.  The number comes from one counter, raised by one per event. The last
        events/kept events stay in memory for replay, and are appended to
        DATA_DIR/events.log (length-prefixed Event bodies), which the next
        start reads back: the counter goes on where it stopped and a
        watcher that was away can be told what it missed. Each event is
        written (write(2), into the kernel's page cache) before any watcher
        is sent it. The file is rewritten with the kept events once it
        holds twice as many, and at start.
    3.  Crashes. The log is not fsynced per event (a synced write costs
        ~0.2-1 ms, more than the rest of an event); instead numbers are
        reserved ahead, as a block of SHOAL_EVENTS_RESERVE: before the
        counter passes the reserved number, the log is fsynced and
        DATA_DIR/events.seq ("reserved N", and the kernel's boot id) is
        replaced by a synced write of the next reservation. That is one
        pair of fsyncs per SHOAL_EVENTS_RESERVE events on the reactor, a
        fraction of a microsecond per event. At start:
        a.  same boot id: only the process died (kill -9, an abort). The
            page cache kept every write, so the log holds every event
            that was numbered (a torn last record was never sent: it is
            dropped and its number given again, to no one's confusion).
            The counter goes on after the log's last event: a returning
            watcher is told exactly what it missed.
        b.  another boot id: the machine restarted. Events after the last
            fsync may be lost from the log though watchers saw them, so
            no number up to the reservation may be given again: the
            counter goes on after the reservation, and the kept events are
            dropped, so that everything up to the reservation is "no
            longer kept", one range, which a returning watcher is told
            (some of those numbers may never have been given out; the
            node cannot tell which). A clean stop fsyncs the log and
            writes its last number as the reservation, so a reboot after
            it drops nothing.
        A log that cannot be written (a full disk) is logged; a crash of
        the machine then costs at most what case b says.
    4.  A watcher is a routing id with a filter. Each event that passes
        the filter goes out at once, as a reply of type MSG_EVENT to the
        watcher's last MSG_WATCH, with previous_seq, the number of the event
        the same watcher was sent before. The router drops what a gone or
        slow watcher cannot take, and the reactor never waits for it; the
        watcher sees the gap in previous_seq and asks again after its last
        number.
    5.  A MSG_WATCH with after_seq below what the node last sent that
        watcher (or from a watcher the node does not know, as after its
        restart) is answered with the kept events after it, and with the
        numbers that are no longer kept, if any (missed_from..missed_to,
        also said in words in the reply's message). One with after_seq
        past the node's last number is refused (409): it names a number
        this node never gave, so nothing it could be sent would be right.
*/
#include "shoal_events.h"
#include "shoal_names.h"
#include "shoal_alloc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#define EVENTS_FILE "events.log"
#define EVENTS_FILE_NEW "events.log.new"
#define EVENTS_SEQ_FILE "events.seq"
#define EVENTS_SEQ_FILE_NEW "events.seq.new"
//  The kernel's id of this boot: another one means the machine restarted.
#define EVENTS_BOOT_ID "/proc/sys/kernel/random/boot_id"
#define EVENTS_BOOT_ID_MAX 64
#define EVENTS_SEQ_TEXT_MAX 256
#define EVENTS_LENGTH_BYTES 4
//  An encoded event is small; a length past this is a torn or foreign file.
#define EVENTS_RECORD_MAX (64 * 1024)
#define EVENTS_MESSAGE_MAX 512

//  A watcher's filter.
#define S_KIND_CLAIMS 1
#define S_KIND_MOVES 2
#define S_KIND_MEMBERS 4
#define S_KIND_ALL (S_KIND_CLAIMS | S_KIND_MOVES | S_KIND_MEMBERS)

typedef struct {
    zframe_t *routing_id;       //  where it is
    uint64_t request_id;        //  its last watch: events answer it
    int kinds;                  //  S_KIND_* bits it asked for
    char *tenant;               //  a tenant's key sees only this tenant's claims and moves; NULL: all
    uint64_t last_sent;         //  the seq of the last event it was sent (0: none)
    int64_t expires;            //  monotonic ms its lease ends at
} s_watcher_t;

struct _shoal_events_t {
    char *node_id;              //  this node, in every event
    char *path;                 //  DATA_DIR/events.log
    char *path_new;             //  where a rewrite is made before it replaces the file
    char *seq_path;             //  DATA_DIR/events.seq: the reservation
    char *seq_path_new;         //  where a reservation is made before it replaces the last
    char *data_dir;             //  fsynced after a rename in it
    char boot_id[EVENTS_BOOT_ID_MAX];   //  this boot's, written with each reservation ("" unknown)
    FILE *file;                 //  the log, appended to
    size_t file_records;        //  events in the file
    zsock_t *router;            //  where watchers are (borrowed)
    shoal_msg_event_t *kept;    //  ring of the last kept_max events
    size_t kept_max;            //  events/kept
    size_t kept_first;          //  index of the oldest in the ring
    size_t kept_count;          //  events in the ring
    uint64_t last_seq;          //  the last number given out
    uint64_t reserved;          //  numbers up to this one are reserved in events.seq, synced
    uint64_t lost_through;      //  numbers up to this one were dropped at a start after a machine restart (0: none)
    zhashx_t *watchers;         //  routing id (hex) -> s_watcher_t
    zhashx_t *moves;            //  "role/claim" -> last state seen + 1, to tell a change of state
};

static void
s_watcher_destroy(void **item_p)
{
    s_watcher_t *watcher = (s_watcher_t *) *item_p;
    if (watcher) {
        zframe_destroy(&watcher->routing_id);
        free(watcher->tenant);
        free(watcher);
        *item_p = NULL;
    }
}

//  The event at POSITION from the oldest kept one.
static shoal_msg_event_t *
s_kept(shoal_events_t *self, size_t position)
{
    return &self->kept[(self->kept_first + position) % self->kept_max];
}

//  Keeps EVENT (taken: its strings now belong to the ring).
static void
s_keep(shoal_events_t *self, shoal_msg_event_t *event)
{
    if (self->kept_count == self->kept_max) {
        shoal_msg_event_codec.clear(s_kept(self, 0));
        self->kept_first = (self->kept_first + 1) % self->kept_max;
        self->kept_count--;
    }
    *s_kept(self, self->kept_count) = *event;
    self->kept_count++;
    memset(event, 0, sizeof *event);
}

//  Appends EVENT to FILE. Returns 0 or -1.
static int
s_write(FILE *file, const shoal_msg_event_t *event)
{
    uint8_t *bytes = NULL;
    size_t size = 0;
    char error[EVENTS_MESSAGE_MAX];
    if (shoal_msg_event_codec.encode(event, &bytes, &size, error, sizeof error)) {
        zsys_error("events: cannot encode event %" PRIu64 ": %s", event->seq, error);
        return -1;
    }
    uint32_t length = htonl((uint32_t) size);
    int rc = fwrite(&length, EVENTS_LENGTH_BYTES, 1, file) == 1 && fwrite(bytes, size, 1, file) == 1 ? 0 : -1;
    free(bytes);
    return rc;
}

//  Makes a rename in DIR durable. Returns 0 or -1 (errno set).
static int
s_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

//  Writes the kept events to a new file that replaces the log. Returns 0
//  or -1 with *ERROR_P.
static int
s_rewrite(shoal_events_t *self, char **error_p)
{
    if (self->file)
        fclose(self->file);
    self->file = NULL;
    FILE *fresh = fopen(self->path_new, "wb");
    int rc = fresh ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < self->kept_count; i++)
        rc = s_write(fresh, s_kept(self, i));
    //  Durable before it replaces the log: a rename that outlives a power
    //  loss its data did not would leave an empty log.
    if (rc == 0 && (fflush(fresh) != 0 || fdatasync(fileno(fresh)) != 0))
        rc = -1;
    if (fresh && fclose(fresh) != 0)
        rc = -1;
    if (rc == 0 && (rename(self->path_new, self->path) != 0 || s_sync_dir(self->data_dir) != 0))
        rc = -1;
    if (rc == 0)
        self->file = fopen(self->path, "ab");
    if (!self->file) {
        *error_p = zsys_sprintf("cannot write the events to %s: %s", self->path, strerror(errno));
        return -1;
    }
    self->file_records = self->kept_count;
    return 0;
}

//  Reads this boot's id into BOOT_ID ("" when the kernel does not say).
static void
s_boot_id(char *boot_id, size_t size)
{
    *boot_id = 0;
    FILE *file = fopen(EVENTS_BOOT_ID, "r");
    if (!file)
        return;
    if (!fgets(boot_id, (int) size, file))
        *boot_id = 0;
    boot_id[strcspn(boot_id, "\n")] = 0;
    fclose(file);
}

//  Replaces events.seq by a synced write reserving numbers up to RESERVED,
//  after an fsync of the log (the events numbered so far are durable
//  before the next block is). Returns 0 or -1 with *ERROR_P.
static int
s_reserve(shoal_events_t *self, uint64_t reserved, char **error_p)
{
    const char *what = self->path;
    int rc = self->file && (fflush(self->file) != 0 || fdatasync(fileno(self->file)) != 0) ? -1 : 0;
    if (rc == 0) {
        what = self->seq_path;
        FILE *fresh = fopen(self->seq_path_new, "w");
        rc = fresh && fprintf(fresh, "reserved %" PRIu64 "\nboot %s\nlost %" PRIu64 "\n", reserved,
                              *self->boot_id ? self->boot_id : "-", self->lost_through) > 0 ? 0 : -1;
        if (rc == 0 && (fflush(fresh) != 0 || fdatasync(fileno(fresh)) != 0))
            rc = -1;
        if (fresh && fclose(fresh) != 0)
            rc = -1;
        if (rc == 0 && (rename(self->seq_path_new, self->seq_path) != 0 || s_sync_dir(self->data_dir) != 0))
            rc = -1;
    }
    if (rc) {
        *error_p = zsys_sprintf("cannot make %s durable: %s", what, strerror(errno));
        return -1;
    }
    self->reserved = reserved;
    return 0;
}

//  Reads events.seq: *RESERVED_P, BOOT_ID and *LOST_P (0, "" and 0 when
//  there is no file: a new node). Returns 0, or -1 with *ERROR_P naming
//  what is wrong.
static int
s_reservation_read(shoal_events_t *self, uint64_t *reserved_p, char *boot_id, size_t size, uint64_t *lost_p,
                   char **error_p)
{
    *reserved_p = *lost_p = 0;
    *boot_id = 0;
    FILE *file = fopen(self->seq_path, "r");
    if (!file) {
        if (errno == ENOENT)
            return 0;
        *error_p = zsys_sprintf("cannot read %s: %s", self->seq_path, strerror(errno));
        return -1;
    }
    char text[EVENTS_SEQ_TEXT_MAX] = "";
    size_t length = fread(text, 1, sizeof text - 1, file);
    text[length] = 0;
    fclose(file);
    //  "reserved N\nboot ID\nlost N\n", nothing else.
    unsigned long long reserved = 0, lost = 0;
    int boot_from = 0, boot_to = 0, end = 0;
    int matched = sscanf(text, "reserved %llu\nboot %n%*[0-9a-fA-F-]%n\nlost %llu\n%n", &reserved, &boot_from,
                         &boot_to, &lost, &end);
    if (matched != 2 || !end || (size_t) end != length || (size_t) (boot_to - boot_from) >= size) {
        *error_p = zsys_sprintf("%s does not read as the lines 'reserved N', 'boot ID' and 'lost N': the file is "
                                "damaged; remove it to start (event numbers given out before a crash of the "
                                "machine may then be given again)", self->seq_path);
        return -1;
    }
    *reserved_p = reserved;
    *lost_p = lost;
    memcpy(boot_id, text + boot_from, (size_t) (boot_to - boot_from));
    boot_id[boot_to - boot_from] = 0;
    return 0;
}

//  Reads the kept events back. A torn last record (a crash mid-append) is
//  dropped; a record that does not decode ends the reading, named.
static void
s_load(shoal_events_t *self)
{
    FILE *file = fopen(self->path, "rb");
    if (!file)
        return;
    uint8_t *bytes = (uint8_t *) zmalloc(EVENTS_RECORD_MAX);
    size_t loaded = 0;
    while (true) {
        uint32_t length = 0;
        if (fread(&length, EVENTS_LENGTH_BYTES, 1, file) != 1)
            break;
        size_t size = ntohl(length);
        if (size == 0 || size > EVENTS_RECORD_MAX || fread(bytes, size, 1, file) != 1)
            break;
        shoal_msg_event_t event;
        char error[EVENTS_MESSAGE_MAX];
        if (shoal_msg_event_codec.decode(bytes, size, &event, error, sizeof error)) {
            zsys_warning("events: %s: record %zu does not read (%s); the events after it are dropped", self->path,
                         loaded + 1, error);
            break;
        }
        if (event.seq > self->last_seq)
            self->last_seq = event.seq;
        s_keep(self, &event);
        loaded++;
    }
    free(bytes);
    fclose(file);
}

shoal_events_t *
shoal_events_new(const char *data_dir, const char *node_id, size_t kept, zsock_t *router, char **error_p)
{
    assert(kept > 0);
    shoal_events_t *self = (shoal_events_t *) zmalloc(sizeof *self);
    self->node_id = shoal_strdup(node_id);
    self->data_dir = shoal_strdup(data_dir);
    self->path = zsys_sprintf("%s/%s", data_dir, EVENTS_FILE);
    self->path_new = zsys_sprintf("%s/%s", data_dir, EVENTS_FILE_NEW);
    self->seq_path = zsys_sprintf("%s/%s", data_dir, EVENTS_SEQ_FILE);
    self->seq_path_new = zsys_sprintf("%s/%s", data_dir, EVENTS_SEQ_FILE_NEW);
    self->router = router;
    self->kept_max = kept;
    self->kept = (shoal_msg_event_t *) zmalloc(kept * sizeof *self->kept);
    self->watchers = zhashx_new();
    zhashx_set_destructor(self->watchers, s_watcher_destroy);
    self->moves = zhashx_new();
    s_boot_id(self->boot_id, sizeof self->boot_id);
    uint64_t reserved = 0;
    char boot_id[EVENTS_BOOT_ID_MAX];
    if (s_reservation_read(self, &reserved, boot_id, sizeof boot_id, &self->lost_through, error_p)) {
        shoal_events_destroy(&self);
        return NULL;
    }
    s_load(self);
    //  The DESIGN note's 3b: the machine restarted since the reservation,
    //  so numbers up to it may have been sent and lost from the log.
    bool same_boot = *self->boot_id && streq(boot_id, self->boot_id);
    if (reserved > self->last_seq && !same_boot) {
        zsys_warning("events: the machine restarted since numbers up to %" PRIu64 " were reserved (the log ends at "
                     "%" PRIu64 "): numbering goes on after %" PRIu64 ", and events up to it are no longer kept",
                     reserved, self->last_seq, reserved);
        for (size_t i = 0; i < self->kept_count; i++)
            shoal_msg_event_codec.clear(s_kept(self, i));
        self->kept_first = self->kept_count = 0;
        self->last_seq = reserved;
        self->lost_through = reserved;
    }
    if (s_rewrite(self, error_p) || s_reserve(self, self->last_seq + SHOAL_EVENTS_RESERVE, error_p)) {
        shoal_events_destroy(&self);
        return NULL;
    }
    if (self->last_seq)
        zsys_info("events: %zu kept, the last numbered %" PRIu64, self->kept_count, self->last_seq);
    return self;
}

void
shoal_events_destroy(shoal_events_t **self_p)
{
    if (*self_p) {
        shoal_events_t *self = *self_p;
        //  A clean stop: the log is durable and reserves nothing more, so
        //  a reboot after it drops no event (the DESIGN note's 3b).
        if (self->file && self->reserved) {
            char *error = NULL;
            if (s_reserve(self, self->last_seq, &error)) {
                zsys_warning("events: %s", error);
                free(error);
            }
        }
        if (self->file)
            fclose(self->file);
        for (size_t i = 0; i < self->kept_count; i++)
            shoal_msg_event_codec.clear(s_kept(self, i));
        free(self->kept);
        zhashx_destroy(&self->watchers);
        zhashx_destroy(&self->moves);
        free(self->node_id);
        free(self->data_dir);
        free(self->path);
        free(self->path_new);
        free(self->seq_path);
        free(self->seq_path_new);
        free(self);
        *self_p = NULL;
    }
}

uint64_t
shoal_events_last_seq(shoal_events_t *self)
{
    return self->last_seq;
}

static int
s_kind_bit(const char *kind)
{
    return streq(kind, "claim") ? S_KIND_CLAIMS : streq(kind, "move") ? S_KIND_MOVES : S_KIND_MEMBERS;
}

static bool
s_passes(const s_watcher_t *watcher, const shoal_msg_event_t *event)
{
    if (!(watcher->kinds & s_kind_bit(event->kind)))
        return false;
    if (watcher->tenant)
        return streq(event->kind, "member") ? false : streq(watcher->tenant, event->tenant ? event->tenant : "");
    return true;
}

//  Sends EVENT to WATCHER as the next of its stream.
static void
s_send(shoal_events_t *self, s_watcher_t *watcher, const shoal_msg_event_t *event)
{
    shoal_envelope_t *message = shoal_envelope_new(SHOAL_MSG_EVENT, watcher->request_id);
    message->status = SHOAL_STATUS_OK;
    shoal_msg_event_t *body = (shoal_msg_event_t *) shoal_envelope_new_body(message);
    *body = *event;
    body->previous_seq = watcher->last_sent;
    char error[EVENTS_MESSAGE_MAX];
    zmsg_t *msg = shoal_envelope_encode(message, error, sizeof error);
    //  The strings are the ring's: the envelope must not free them.
    memset(body, 0, sizeof *body);
    shoal_envelope_destroy(&message);
    if (!msg) {
        zsys_error("events: cannot encode event %" PRIu64 ": %s", event->seq, error);
        return;
    }
    zframe_t *to = zframe_dup(watcher->routing_id);
    zmsg_prepend(msg, &to);
    if (zmsg_send(&msg, self->router) != 0)
        zmsg_destroy(&msg);
    watcher->last_sent = event->seq;
}

//  Numbers EVENT (taken), keeps it, logs it and sends it to every watcher
//  it concerns.
static void
s_emit(shoal_events_t *self, shoal_msg_event_t *event)
{
    //  The DESIGN note's 3: a number past the reservation waits for the
    //  next one to be durable.
    if (self->last_seq + 1 > self->reserved) {
        char *error = NULL;
        if (s_reserve(self, self->last_seq + SHOAL_EVENTS_RESERVE, &error)) {
            zsys_error("events: %s: event numbers past %" PRIu64 " may be given again after a crash of the "
                       "machine", error, self->reserved);
            free(error);
        }
    }
    event->seq = ++self->last_seq;
    event->node_id = shoal_strdup(self->node_id);
    event->time_ms = (uint64_t) zclock_time();
    if (self->file && (s_write(self->file, event) || fflush(self->file) != 0))
        zsys_warning("events: cannot append event %" PRIu64 " to %s: %s", event->seq, self->path, strerror(errno));
    self->file_records++;
    for (s_watcher_t *watcher = (s_watcher_t *) zhashx_first(self->watchers); watcher;
         watcher = (s_watcher_t *) zhashx_next(self->watchers))
        if (s_passes(watcher, event))
            s_send(self, watcher, event);
    s_keep(self, event);
    if (self->file_records >= 2 * self->kept_max) {
        char *error = NULL;
        if (s_rewrite(self, &error)) {
            zsys_warning("events: %s", error);
            free(error);
        }
    }
}

static char *
s_text(const char *text)
{
    return shoal_strdup(text ? text : "");
}

void
shoal_events_store_changed(const shoal_claim_record_t *previous, const shoal_claim_record_t *record,
                           const shoal_move_t *move, shoal_move_role_t deleted_role, const char *deleted_claim,
                           void *arg)
{
    shoal_events_t *self = (shoal_events_t *) arg;
    if (!self)
        return;
    //  A claim's: a new state, or it left this node.
    const shoal_claim_record_t *claim = record ? record : previous;
    if (claim && (!previous || !record || previous->state != record->state)) {
        shoal_msg_event_t event = { 0 };
        event.kind = shoal_strdup("claim");
        event.what = shoal_strdup(record ? shoal_claim_state_name(record->state) : "left");
        event.claim_id = s_text(claim->id);
        event.tenant = s_text(claim->tenant);
        event.detail = s_text(record && record->error ? record->error : "");
        event.epoch = claim->epoch;
        s_emit(self, &event);
    }
    //  A move's: a new state of its record here.
    if (move && move->claim_id) {
        char key[SHOAL_KV_KEY_MAX + 16];
        snprintf(key, sizeof key, "%d/%s", (int) move->role, move->claim_id);
        uintptr_t was = (uintptr_t) zhashx_lookup(self->moves, key);
        if (was != (uintptr_t) move->state + 1) {
            zhashx_update(self->moves, key, (void *) ((uintptr_t) move->state + 1));
            shoal_msg_event_t event = { 0 };
            event.kind = shoal_strdup("move");
            event.what = shoal_strdup(shoal_move_state_name(move->state) ? shoal_move_state_name(move->state) : "unknown");
            event.claim_id = s_text(move->claim_id);
            event.tenant = s_text(move->tenant);
            event.peer = s_text(move->role == SHOAL_MOVE_SOURCE ? move->to : move->from);
            event.detail = s_text(move->error);
            event.round = move->round;
            event.bytes_sent = move->bytes_sent;
            event.epoch = move->epoch;
            s_emit(self, &event);
        }
    }
    if (deleted_claim) {
        char key[SHOAL_KV_KEY_MAX + 16];
        snprintf(key, sizeof key, "%d/%s", (int) deleted_role, deleted_claim);
        zhashx_delete(self->moves, key);
    }
}

void
shoal_events_mesh_event(shoal_mesh_event_t kind, const char *node_id, const char *endpoint, void *arg)
{
    shoal_events_t *self = (shoal_events_t *) arg;
    if (!self)
        return;
    shoal_msg_event_t event = { 0 };
    event.kind = shoal_strdup("member");
    event.what = shoal_strdup(shoal_mesh_event_name(kind));
    event.peer = s_text(node_id);
    event.detail = s_text(endpoint);
    s_emit(self, &event);
}

bool
shoal_events_handles(shoal_msg_type_t type)
{
    return type == SHOAL_MSG_WATCH;
}

//  The kinds in TEXT as S_KIND_* bits, or -1 when a word is none of them.
static int
s_kinds_parse(const char *text)
{
    if (!text || !*text)
        return S_KIND_ALL;
    int kinds = 0;
    char *copy = shoal_strdup(text);
    char *rest = copy;
    for (char *word = strsep(&rest, ","); word; word = strsep(&rest, ",")) {
        if (streq(word, "claims") || streq(word, "claim"))
            kinds |= S_KIND_CLAIMS;
        else
        if (streq(word, "moves") || streq(word, "move"))
            kinds |= S_KIND_MOVES;
        else
        if (streq(word, "members") || streq(word, "member"))
            kinds |= S_KIND_MEMBERS;
        else
        if (*word) {
            kinds = -1;
            break;
        }
    }
    free(copy);
    return kinds;
}

static void
s_reply_send(shoal_events_t *self, shoal_envelope_t **reply_p, zframe_t *routing_id)
{
    char error[EVENTS_MESSAGE_MAX];
    zmsg_t *msg = shoal_envelope_encode(*reply_p, error, sizeof error);
    shoal_envelope_destroy(reply_p);
    if (!msg) {
        zsys_error("events: cannot encode a watch's reply: %s", error);
        return;
    }
    zframe_t *to = zframe_dup(routing_id);
    zmsg_prepend(msg, &to);
    if (zmsg_send(&msg, self->router) != 0)
        zmsg_destroy(&msg);
}

shoal_envelope_t *
shoal_events_handle(shoal_events_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller,
                    zframe_t *routing_id)
{
    const shoal_msg_watch_t *body = (const shoal_msg_watch_t *) request->body;
    int kinds = s_kinds_parse(body->kinds);
    if (kinds < 0)
        return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST,
                                    "kinds '%s': expected claims, moves or members, comma-separated", body->kinds);
    bool tenant = shoal_caller_is_tenant(caller);
    if (tenant && kinds == S_KIND_MEMBERS)
        return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN, "%s", "the mesh is shown to admins only");
    if (!routing_id)
        return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "%s", "a watch needs a connection");
    if (body->after_seq > self->last_seq)
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT,
                                    "after_seq %" PRIu64 " is past node %s's last event, %" PRIu64 ": that number is "
                                    "not this node's (another node's, or from before its data directory was "
                                    "replaced); watch with after_seq 0 to follow it from now on",
                                    body->after_seq, self->node_id, self->last_seq);
    char *id = zframe_strhex(routing_id);
    s_watcher_t *watcher = (s_watcher_t *) zhashx_lookup(self->watchers, id);
    bool known = watcher != NULL;
    if (!watcher) {
        watcher = (s_watcher_t *) zmalloc(sizeof *watcher);
        watcher->routing_id = zframe_dup(routing_id);
        zhashx_insert(self->watchers, id, watcher);
    }
    free(id);
    watcher->request_id = request->request_id;
    watcher->kinds = kinds;
    free(watcher->tenant);
    watcher->tenant = tenant ? shoal_strdup(caller->tenant) : NULL;
    watcher->expires = zclock_mono() + SHOAL_WATCH_LEASE_MS;

    //  What to replay: the kept events after after_seq, when the watcher
    //  names an earlier number than it was last sent (or is new here).
    uint64_t after = body->after_seq;
    bool replay = after && after < self->last_seq && (!known || after < watcher->last_sent);
    uint64_t first_kept = self->kept_count ? s_kept(self, 0)->seq : 0;
    uint64_t missed_from = 0, missed_to = 0, replayed = 0;
    size_t start = self->kept_count;
    if (replay) {
        if (!first_kept || after + 1 < first_kept) {
            missed_from = after + 1;
            missed_to = first_kept ? first_kept - 1 : self->last_seq;
        }
        start = 0;
        while (start < self->kept_count && s_kept(self, start)->seq <= after)
            start++;
        for (size_t i = start; i < self->kept_count; i++)
            if (s_passes(watcher, s_kept(self, i)))
                replayed++;
    }
    shoal_envelope_t *reply = NULL;
    if (missed_to)
        reply = shoal_envelope_reply(request, SHOAL_STATUS_OK,
                                     "events %" PRIu64 " to %" PRIu64 " are no longer kept (%s): they are lost to "
                                     "this watch; %" PRIu64 " kept event(s) after them follow",
                                     missed_from, missed_to, self->lost_through >= missed_from ? "the node's "
                                     "machine restarted before they were all made durable, and some of those "
                                     "numbers may never have been given out" : "the node keeps its last events "
                                     "only, events/kept", replayed);
    else
        reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    shoal_msg_watch_reply_t *answer = (shoal_msg_watch_reply_t *) shoal_envelope_new_body(reply);
    answer->node_id = shoal_strdup(self->node_id);
    answer->last_seq = self->last_seq;
    answer->first_kept_seq = first_kept;
    answer->missed_from = missed_from;
    answer->missed_to = missed_to;
    answer->replayed = replayed;
    if (!replay && !known)
        watcher->last_sent = after && after < self->last_seq ? after : self->last_seq;
    s_reply_send(self, &reply, routing_id);
    if (replay) {
        watcher->last_sent = after;
        for (size_t i = start; i < self->kept_count; i++)
            if (s_passes(watcher, s_kept(self, i)))
                s_send(self, watcher, s_kept(self, i));
    }
    return NULL;
}

void
shoal_events_tick(shoal_events_t *self)
{
    int64_t now = zclock_mono();
    zlistx_t *gone = zlistx_new();
    for (s_watcher_t *watcher = (s_watcher_t *) zhashx_first(self->watchers); watcher;
         watcher = (s_watcher_t *) zhashx_next(self->watchers))
        if (now > watcher->expires)
            zlistx_add_end(gone, (void *) zhashx_cursor(self->watchers));
    for (const char *id = (const char *) zlistx_first(gone); id; id = (const char *) zlistx_next(gone))
        zhashx_delete(self->watchers, id);
    zlistx_destroy(&gone);
}
