/*  shoal_gate: closes connections to a CURVE server that do not
    authenticate in time, or that are more than the caps allow.

    DESIGN

    libzmq accepts every TCP connection and holds its descriptor until the
    handshake ends; nothing in its API bounds how many wait. The gate is an
    actor beside the socket's owner that reads the socket's monitor events
    over inproc, and never touches the socket itself: it acts on the
    accepted descriptors, with shutdown(), which libzmq sees as the peer
    going away and answers by closing the connection its usual way.

    1. Deadline. libzmq closes a connection whose handshake has not ended
       after ZMQ_HANDSHAKE_IVL, which the gate sets to
       security/handshake_timeout_ms (libzmq's default is 30 s). The gate
       also closes what it still holds as unauthenticated past the deadline,
       should libzmq not have (a handshake stalled inside the ZAP exchange).
    2. Pending table. ZMQ_EVENT_ACCEPTED names the descriptor; the gate
       records it with its peer (getpeername) and the time.
       ZMQ_EVENT_DISCONNECTED names it too and removes it.
    3. Authenticated. ZMQ_EVENT_HANDSHAKE_SUCCEEDED names no descriptor
       (libzmq 4.3 sends 0), so the gate asks the kernel instead: a CURVE
       server sends at most its greeting and WELCOME (S_HANDSHAKE_SENT_MAX
       bytes) before the handshake ends, and READY when it ends. A
       connection whose peer acknowledged more than that has authenticated
       (or was refused with ERROR, and is about to close). The table is
       re-checked so at each success event, before each refusal and at each
       sweep; a peer cannot pass for authenticated without the server
       having sent READY.
    4. Caps. A new connection from an address that already holds
       security/max_handshakes_per_address unauthenticated ones is closed at
       once: one address cannot take everyone's room. When the table holds
       security/max_handshakes in all, the oldest is closed to make room: a
       real client's handshake takes milliseconds, so it is never the oldest
       unless the flood is as fast as that, and new clients keep getting in.
    5. Reused descriptors. Between libzmq's close of a descriptor and the
       gate reading of it, the number may be given to a new connection. The
       gate reads events in batches and ignores an ACCEPTED whose
       DISCONNECTED is in the same batch, and before it shuts a descriptor
       down it checks that the peer is still the one it recorded.
    6. Log. Refusals are counted by cause and told in one line per
       log/throttle_ms (shoal_throttle), never one line per connection.
*/
#include "shoal_gate.h"

#include "shoal_tcp.h"
#include "shoal_throttle.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>

//  What a CURVE server sends before the handshake ends: its greeting (64
//  bytes) and WELCOME (a 168-byte command in a 2-byte frame header).
#define S_HANDSHAKE_SENT_MAX (64 + 2 + 168)
//  How often the table is swept for deadlines and the throttled line told.
#define S_SWEEP_MS 250
//  Most events read before they are acted on, as one batch.
#define S_BATCH_MAX 1024
//  A monitor event's first frame: the event (16 bits) and its value (32).
#define S_EVENT_SIZE 6
#define S_EVENTS (ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
#define S_ENDPOINT_MAX 64
#define S_NAME_MAX 64

//  One accepted connection not known to be authenticated.
typedef struct {
    int fd;                             //  its descriptor, as libzmq accepted it
    struct sockaddr_storage peer;       //  its peer when accepted
    socklen_t peer_size;                //  how much of PEER is used
    char address[INET6_ADDRSTRLEN];     //  the peer's address, the per-address cap's key
    int64_t accepted_ms;                //  monotonic time of the accept event
} s_pending_t;

//  One monitor event.
typedef struct {
    uint16_t event;                     //  ZMQ_EVENT_*
    uint32_t value;                     //  the descriptor, for the events the gate reads
} s_event_t;

typedef struct {
    zsock_t *pipe;                      //  to the socket's owner
    zsock_t *monitor;                   //  PAIR the socket's monitor sends events to
    char name[S_NAME_MAX];              //  whose door, for log lines
    shoal_gate_options_t options;       //  deadline, caps, throttle
    s_pending_t *pending;               //  the table, COUNT entries of MAX_HANDSHAKES
    size_t count;
    shoal_throttle_t throttle;          //  paces the lines about refusals
    uint64_t refused_address;           //  closed over the per-address cap, since the last line
    uint64_t refused_total;             //  closed over the cap in all, since the last line
    uint64_t refused_deadline;          //  closed past the deadline, since the last line
    char last_address[INET6_ADDRSTRLEN];    //  the peer of the last refusal, for the line
    bool terminated;                    //  $TERM received
} s_gate_t;

typedef struct {
    const char *name;
    const char *endpoint;
    const shoal_gate_options_t *options;
} s_args_t;

//  The peer of FD into *PEER. Returns 0, or -1 when FD has none.
static int
s_peer(int fd, struct sockaddr_storage *peer, socklen_t *size)
{
    *size = sizeof *peer;
    memset(peer, 0, sizeof *peer);
    return getpeername(fd, (struct sockaddr *) peer, size);
}

//  The text of PEER's address (no port).
static void
s_peer_address(const struct sockaddr_storage *peer, char *text, size_t size)
{
    const void *address = peer->ss_family == AF_INET6
                        ? (const void *) &((const struct sockaddr_in6 *) peer)->sin6_addr
                        : (const void *) &((const struct sockaddr_in *) peer)->sin_addr;
    if (!inet_ntop(peer->ss_family, address, text, (socklen_t) size))
        snprintf(text, size, "?");
}

//  True while ENTRY's descriptor is still the connection it recorded.
static bool
s_same_connection(const s_pending_t *entry)
{
    struct sockaddr_storage peer;
    socklen_t size;
    return s_peer(entry->fd, &peer, &size) == 0 && size == entry->peer_size
        && memcmp(&peer, &entry->peer, size) == 0;
}

static void
s_remove(s_gate_t *self, size_t index)
{
    self->pending[index] = self->pending[--self->count];
}

//  Closes ENTRY's connection, if it still is that one, and forgets it.
static void
s_close(s_gate_t *self, size_t index)
{
    s_pending_t *entry = &self->pending[index];
    if (s_same_connection(entry) && shutdown(entry->fd, SHUT_RDWR) != 0 && errno != ENOTCONN)
        zsys_warning("gate (%s): cannot close the connection from %s: %s", self->name, entry->address,
                     strerror(errno));
    snprintf(self->last_address, sizeof self->last_address, "%s", entry->address);
    s_remove(self, index);
}

//  True when ENTRY has no business in the table any more: its descriptor
//  is another connection's or none, or its handshake ended (step 3).
static bool
s_settled(const s_pending_t *entry)
{
    uint64_t acked;
    if (!s_same_connection(entry) || shoal_tcp_bytes_acked(entry->fd, &acked) != 0)
        return true;
    return acked > S_HANDSHAKE_SENT_MAX;
}

//  Forgets every entry that settled.
static void
s_refresh(s_gate_t *self)
{
    for (size_t i = 0; i < self->count; )
        if (s_settled(&self->pending[i]))
            s_remove(self, i);
        else
            i++;
}

//  Tells the refusals since the last line, when the throttle lets it.
static void
s_report(s_gate_t *self, bool refused_now)
{
    uint64_t count;
    int64_t now = zclock_mono();
    bool tell = refused_now ? shoal_throttle_event(&self->throttle, now, &count)
                            : shoal_throttle_flush(&self->throttle, now, &count);
    if (!tell)
        return;
    zsys_warning("gate (%s): closed %" PRIu64 " connection(s) that had not authenticated, the last from %s: "
                 "%" PRIu64 " over the cap of %" PRId64 " from one address, %" PRIu64 " over the cap of %"
                 PRId64 " in all, %" PRIu64 " past the %" PRId64 " ms handshake deadline",
                 self->name, count, self->last_address, self->refused_address,
                 self->options.max_per_address, self->refused_total, self->options.max_handshakes,
                 self->refused_deadline, self->options.handshake_timeout_ms);
    self->refused_address = self->refused_total = self->refused_deadline = 0;
}

//  Closes what is still unauthenticated past the deadline (step 1).
static void
s_sweep(s_gate_t *self)
{
    int64_t now = zclock_mono();
    for (size_t i = 0; i < self->count; ) {
        s_pending_t *entry = &self->pending[i];
        if (now - entry->accepted_ms < self->options.handshake_timeout_ms)
            i++;
        else
        if (s_settled(entry))
            s_remove(self, i);
        else {
            s_close(self, i);
            self->refused_deadline++;
            s_report(self, true);
        }
    }
    s_report(self, false);
}

static size_t
s_count_address(s_gate_t *self, const char *address)
{
    size_t count = 0;
    for (size_t i = 0; i < self->count; i++)
        count += streq(self->pending[i].address, address);
    return count;
}

//  A connection accepted on FD (step 2, step 4).
static void
s_accepted(s_gate_t *self, int fd)
{
    s_pending_t entry = { .fd = fd, .accepted_ms = zclock_mono() };
    if (s_peer(fd, &entry.peer, &entry.peer_size) != 0)
        return;
    s_peer_address(&entry.peer, entry.address, sizeof entry.address);
    //  A descriptor number the table still holds was closed and reused.
    for (size_t i = 0; i < self->count; i++)
        if (self->pending[i].fd == fd) {
            s_remove(self, i);
            break;
        }
    if (s_count_address(self, entry.address) >= (size_t) self->options.max_per_address) {
        s_refresh(self);
        if (s_count_address(self, entry.address) >= (size_t) self->options.max_per_address) {
            if (shutdown(fd, SHUT_RDWR) != 0 && errno != ENOTCONN)
                zsys_warning("gate (%s): cannot close the connection from %s: %s", self->name,
                             entry.address, strerror(errno));
            snprintf(self->last_address, sizeof self->last_address, "%s", entry.address);
            self->refused_address++;
            s_report(self, true);
            return;
        }
    }
    if (self->count >= (size_t) self->options.max_handshakes) {
        s_refresh(self);
        if (self->count >= (size_t) self->options.max_handshakes) {
            size_t oldest = 0;
            for (size_t i = 1; i < self->count; i++)
                if (self->pending[i].accepted_ms < self->pending[oldest].accepted_ms)
                    oldest = i;
            s_close(self, oldest);
            self->refused_total++;
            s_report(self, true);
        }
    }
    self->pending[self->count++] = entry;
}

//  A connection closed. One still pending at the deadline was closed by
//  libzmq's handshake deadline (step 1), and is told as the gate's own.
static void
s_disconnected(s_gate_t *self, int fd)
{
    for (size_t i = 0; i < self->count; i++)
        if (self->pending[i].fd == fd) {
            bool late = zclock_mono() - self->pending[i].accepted_ms >= self->options.handshake_timeout_ms;
            if (late) {
                snprintf(self->last_address, sizeof self->last_address, "%s", self->pending[i].address);
                self->refused_deadline++;
            }
            s_remove(self, i);
            if (late)
                s_report(self, true);
            return;
        }
}

//  Reads one event. Returns 0, or -1 when none could be read.
static int
s_event_recv(s_gate_t *self, s_event_t *event)
{
    zmsg_t *msg = zmsg_recv(self->monitor);
    if (!msg)
        return -1;
    zframe_t *frame = zmsg_first(msg);
    int rc = -1;
    if (frame && zframe_size(frame) == S_EVENT_SIZE) {
        memcpy(&event->event, zframe_data(frame), sizeof event->event);
        memcpy(&event->value, zframe_data(frame) + sizeof event->event, sizeof event->value);
        rc = 0;
    }
    zmsg_destroy(&msg);
    return rc;
}

//  Reads what events are waiting and acts on them (step 5).
static void
s_handle_events(s_gate_t *self, s_event_t *batch)
{
    size_t size = 0;
    while (size < S_BATCH_MAX && (size == 0 || zsock_events(self->monitor) & ZMQ_POLLIN))
        if (s_event_recv(self, &batch[size]) == 0)
            size++;
        else
            break;
    bool success = false;
    for (size_t i = 0; i < size; i++) {
        int fd = (int) batch[i].value;
        if (batch[i].event == ZMQ_EVENT_ACCEPTED) {
            bool closed_since = false;
            for (size_t j = i + 1; j < size && !closed_since; j++)
                closed_since = batch[j].event == ZMQ_EVENT_DISCONNECTED && (int) batch[j].value == fd;
            if (!closed_since)
                s_accepted(self, fd);
        }
        else
        if (batch[i].event == ZMQ_EVENT_DISCONNECTED)
            s_disconnected(self, fd);
        else
        if (batch[i].event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
            success = true;
    }
    if (success)
        s_refresh(self);
}

static void
s_gate_actor(zsock_t *pipe, void *args_v)
{
    s_args_t *args = (s_args_t *) args_v;
    pthread_setname_np(pthread_self(), "shoal-gate");
    s_gate_t self = { .pipe = pipe, .options = *args->options };
    snprintf(self.name, sizeof self.name, "%s", args->name);
    self.monitor = zsock_new(ZMQ_PAIR);
    self.pending = (s_pending_t *) calloc((size_t) self.options.max_handshakes, sizeof *self.pending);
    s_event_t *batch = (s_event_t *) calloc(S_BATCH_MAX, sizeof *batch);
    shoal_throttle_init(&self.throttle, self.options.throttle_ms);
    int rc = self.monitor && self.pending && batch ? zsock_connect(self.monitor, "%s", args->endpoint) : -1;
    //  ARGS is the caller's and gone after this signal.
    zsock_signal(pipe, rc == 0 ? 0 : 1);
    if (rc == 0) {
        zpoller_t *poller = zpoller_new(pipe, self.monitor, NULL);
        int64_t next_sweep = zclock_mono() + S_SWEEP_MS;
        while (!self.terminated) {
            int64_t wait = next_sweep - zclock_mono();
            void *which = zpoller_wait(poller, wait > 0 ? (int) wait : 0);
            if (which == pipe) {
                char *command = zstr_recv(pipe);
                self.terminated = !command || streq(command, "$TERM");
                free(command);
            }
            else
            if (which == self.monitor)
                s_handle_events(&self, batch);
            else
            if (zpoller_terminated(poller))
                break;
            if (zclock_mono() >= next_sweep) {
                s_sweep(&self);
                next_sweep = zclock_mono() + S_SWEEP_MS;
            }
        }
        zpoller_destroy(&poller);
    }
    zsock_destroy(&self.monitor);
    free(self.pending);
    free(batch);
}

//  zactor_new waits for one signal; the actor sends a second one that says
//  whether it reached the monitor.
static void
s_gate_start(zsock_t *pipe, void *args)
{
    zsock_signal(pipe, 0);
    s_gate_actor(pipe, args);
}

shoal_gate_options_t
shoal_gate_options(const shoal_settings_t *settings)
{
    shoal_gate_options_t options = {
        .handshake_timeout_ms = settings->handshake_timeout_ms,
        .max_handshakes = settings->max_handshakes,
        .max_per_address = settings->max_handshakes_per_address,
        .throttle_ms = settings->throttle_ms,
    };
    return options;
}

zactor_t *
shoal_gate_new(zsock_t *socket, const char *name, const shoal_gate_options_t *options)
{
    zsock_set_handshake_ivl(socket, (int) options->handshake_timeout_ms);
    char endpoint[S_ENDPOINT_MAX];
    snprintf(endpoint, sizeof endpoint, "inproc://shoal-gate-%p", (void *) socket);
    if (zmq_socket_monitor(zsock_resolve(socket), endpoint, S_EVENTS) != 0) {
        zsys_error("gate (%s): cannot monitor the socket: %s", name, zmq_strerror(zmq_errno()));
        return NULL;
    }
    s_args_t args = { name, endpoint, options };
    zactor_t *actor = zactor_new(s_gate_start, &args);
    if (actor && zsock_wait(actor) != 0) {
        zsys_error("gate (%s): cannot reach the socket's monitor", name);
        zactor_destroy(&actor);
    }
    if (!actor)
        zmq_socket_monitor(zsock_resolve(socket), NULL, 0);
    return actor;
}
