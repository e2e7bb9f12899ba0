/*  shoal_auth: a ZAP handler actor with shoal's roles.

    czmq's zauth admits keys from a directory but cannot add the cluster key
    beside them, nor refuse a client certificate that claims the node role;
    this handler does both and logs why it refused whom. Anyone can make a
    node refuse handshakes as fast as they can connect, so those lines are
    throttled (log/throttle_ms): one at once, then one per interval saying
    how many were refused meanwhile.

    Client certificates are read with zconfig_str_load from the file's text,
    not with zcert_load, which leaks on every file that is not a
    certificate: the directory is re-read at every change, and a stray file
    in it would cost memory at each reload.
*/
#include "shoal_auth.h"

#include "shoal_names.h"
#include "shoal_throttle.h"
#include "shoal_alloc.h"

#include <pthread.h>

#define S_ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define S_ZAP_VERSION "1.0"
#define S_CURVE_KEY_BYTES 32
#define S_METADATA_MAX 1024
//  A certificate's public key as Z85 text.
#define S_CURVE_KEY_TEXT 40
//  A client certificate is a few hundred bytes; a larger file is none.
#define S_CERT_FILE_MAX (64 * 1024)
//  Room for the count of refusals a throttled line stands for.
#define S_HELD_TEXT_MAX 96

//  What one admitted key may do.
typedef struct {
    char *role;                 //  node, admin or tenant
    char *tenant;               //  org/project for a tenant, else empty
    char *name;                 //  the certificate's name, for logs
} s_client_t;

typedef struct {
    zsock_t *pipe;              //  to the node
    zsock_t *handler;           //  REP socket libzmq sends ZAP requests to
    char *cluster_public;       //  Z85 public cluster key: role node
    char *clients_dir;          //  where client certificates live
    zhashx_t *clients;          //  public key text -> s_client_t
    time_t dir_modified;        //  directory signature at the last load,
    size_t dir_count;           //  so that a change triggers a reload
    off_t dir_size;
    bool verbose;               //  log each decision
    bool terminated;            //  $TERM received
    shoal_throttle_t refusals;  //  paces the lines about refused handshakes
} s_auth_t;

typedef struct {
    const char *cluster_public;
    const char *clients_dir;
    bool verbose;
    int64_t throttle_ms;
} s_args_t;

static void
s_client_destroy(s_client_t **self_p)
{
    if (*self_p) {
        s_client_t *self = *self_p;
        free(self->role);
        free(self->tenant);
        free(self->name);
        free(self);
        *self_p = NULL;
    }
}

//  The text of the file at PATH, NUL-terminated, or NULL when it cannot
//  be read or is larger than any certificate.
static char *
s_file_text(const char *path)
{
    FILE *file = fopen(path, "rb");
    if (!file)
        return NULL;
    char *text = (char *) malloc(S_CERT_FILE_MAX + 1);
    size_t size = text ? fread(text, 1, S_CERT_FILE_MAX + 1, file) : 0;
    bool complete = text && !ferror(file) && size <= S_CERT_FILE_MAX;
    fclose(file);
    if (!complete) {
        free(text);
        return NULL;
    }
    text[size] = 0;
    return text;
}

//  Reads one client certificate. Returns NULL, with one warning naming the
//  file, when it cannot be admitted.
static s_client_t *
s_client_load(const char *path, char **public_p)
{
    char *text = s_file_text(path);
    //  zconfig_str_load reads up to a NUL: a file holding one is no
    //  certificate either.
    zconfig_t *root = text && strlen(text) > 0 ? zconfig_str_load(text) : NULL;
    const char *public_text = root ? zconfig_get(root, "curve/public-key", NULL) : NULL;
    uint8_t public_key[S_CURVE_KEY_BYTES];
    if (!public_text || strlen(public_text) != S_CURVE_KEY_TEXT
    ||  !zmq_z85_decode(public_key, public_text)) {
        zsys_warning("auth: %s is not a certificate; ignored", path);
        zconfig_destroy(&root);
        free(text);
        return NULL;
    }
    const char *role = zconfig_get(root, "metadata/" SHOAL_META_ROLE, NULL);
    const char *tenant = zconfig_get(root, "metadata/" SHOAL_META_TENANT, NULL);
    const char *name = zconfig_get(root, "metadata/" SHOAL_META_NAME, NULL);
    s_client_t *client = NULL;
    if (!role || (!streq(role, SHOAL_ROLE_ADMIN) && !streq(role, SHOAL_ROLE_TENANT)))
        zsys_warning("auth: %s: role '%s' is not admin or tenant; ignored", path, role ? role : "");
    else
    if (streq(role, SHOAL_ROLE_TENANT) && !shoal_tenant_valid(tenant))
        zsys_warning("auth: %s: tenant '%s' is not org/project; ignored", path, tenant ? tenant : "");
    else {
        client = (s_client_t *) zmalloc(sizeof *client);
        client->role = shoal_strdup(role);
        client->tenant = shoal_strdup(streq(role, SHOAL_ROLE_TENANT) ? tenant : "");
        client->name = shoal_strdup(name ? name : path);
        *public_p = shoal_strdup(public_text);
    }
    zconfig_destroy(&root);
    free(text);
    return client;
}

//  Reloads the clients directory if it changed since the last load.
static void
s_clients_refresh(s_auth_t *self)
{
    zdir_t *dir = zdir_new(self->clients_dir, NULL);
    if (!dir) {
        if (zhashx_size(self->clients))
            zsys_warning("auth: clients directory %s is gone; no client is admitted", self->clients_dir);
        zhashx_purge(self->clients);
        self->dir_count = 0;
        return;
    }
    if (zdir_modified(dir) == self->dir_modified && zdir_count(dir) == self->dir_count
    &&  zdir_cursize(dir) == self->dir_size) {
        zdir_destroy(&dir);
        return;
    }
    zhashx_purge(self->clients);
    zfile_t **files = zdir_flatten(dir);
    for (size_t i = 0; files[i]; i++) {
        const char *path = zfile_filename(files[i], NULL);
        size_t size = strlen(path);
        const char *suffix = "_secret";
        if (!zfile_is_regular(files[i])
        ||  (size >= strlen(suffix) && streq(path + size - strlen(suffix), suffix)))
            continue;
        char *public_key = NULL;
        s_client_t *client = s_client_load(path, &public_key);
        if (client) {
            if (zhashx_insert(self->clients, public_key, client) != 0) {
                zsys_warning("auth: %s repeats a key already admitted; ignored", path);
                s_client_destroy(&client);
            }
        }
        free(public_key);
    }
    zdir_flatten_free(&files);
    self->dir_modified = zdir_modified(dir);
    self->dir_count = zdir_count(dir);
    self->dir_size = zdir_cursize(dir);
    zdir_destroy(&dir);
    zsys_info("auth: %zu client key(s) admitted from %s", zhashx_size(self->clients), self->clients_dir);
}

//  Appends one ZMTP metadata property (name length, name, value length, value).
static size_t
s_metadata_add(uint8_t *buffer, size_t used, const char *name, const char *value)
{
    size_t name_size = strlen(name), value_size = strlen(value);
    if (used + 1 + name_size + 4 + value_size > S_METADATA_MAX)
        return used;
    buffer[used++] = (uint8_t) name_size;
    memcpy(buffer + used, name, name_size);
    used += name_size;
    buffer[used++] = (uint8_t) (value_size >> 24);
    buffer[used++] = (uint8_t) (value_size >> 16);
    buffer[used++] = (uint8_t) (value_size >> 8);
    buffer[used++] = (uint8_t) value_size;
    memcpy(buffer + used, value, value_size);
    return used + value_size;
}

//  Answers one ZAP request.
static void
s_handle_request(s_auth_t *self)
{
    zmsg_t *request = zmsg_recv(self->handler);
    if (!request)
        return;
    char *version = zmsg_popstr(request);
    char *request_id = zmsg_popstr(request);
    char *domain = zmsg_popstr(request);
    char *address = zmsg_popstr(request);
    char *identity = zmsg_popstr(request);
    char *mechanism = zmsg_popstr(request);
    zframe_t *credentials = zmsg_pop(request);

    const char *status = "400";
    const char *reason = "No access";
    const char *user = "";
    uint8_t metadata[S_METADATA_MAX];
    size_t metadata_size = 0;
    char key_text[41] = "";
    if (!version || !streq(version, S_ZAP_VERSION))
        reason = "ZAP version not supported";
    else
    if (!mechanism || !streq(mechanism, "CURVE"))
        reason = "CURVE required";
    else
    if (!credentials || zframe_size(credentials) != S_CURVE_KEY_BYTES)
        reason = "bad CURVE credentials";
    else {
        zmq_z85_encode(key_text, zframe_data(credentials), S_CURVE_KEY_BYTES);
        s_clients_refresh(self);
        s_client_t *client = (s_client_t *) zhashx_lookup(self->clients, key_text);
        if (streq(key_text, self->cluster_public)) {
            status = "200", reason = "OK", user = SHOAL_ROLE_NODE;
            metadata_size = s_metadata_add(metadata, metadata_size, SHOAL_META_ROLE, SHOAL_ROLE_NODE);
            metadata_size = s_metadata_add(metadata, metadata_size, SHOAL_META_NAME, SHOAL_ROLE_NODE);
        }
        else
        if (client) {
            status = "200", reason = "OK", user = client->name;
            metadata_size = s_metadata_add(metadata, metadata_size, SHOAL_META_ROLE, client->role);
            metadata_size = s_metadata_add(metadata, metadata_size, SHOAL_META_TENANT, client->tenant);
            metadata_size = s_metadata_add(metadata, metadata_size, SHOAL_META_NAME, client->name);
        }
        else
            reason = "unknown key";
    }
    uint64_t refused = 0;
    bool admitted = streq(status, "200");
    if (admitted ? self->verbose : shoal_throttle_event(&self->refusals, zclock_mono(), &refused)) {
        char held[S_HELD_TEXT_MAX] = "";
        if (refused > 1)
            snprintf(held, sizeof held, " (one of %" PRIu64 " handshakes refused since the last such line)",
                     refused);
        zsys_info("auth: %s %s from %s key %s%s%s%s", admitted ? "admitted" : "refused",
                  mechanism ? mechanism : "?", address ? address : "?", *key_text ? key_text : "(none)",
                  admitted ? " as " : ": ", admitted ? user : reason, held);
    }

    zmsg_t *reply = zmsg_new();
    zmsg_addstr(reply, S_ZAP_VERSION);
    zmsg_addstr(reply, request_id ? request_id : "");
    zmsg_addstr(reply, status);
    zmsg_addstr(reply, reason);
    zmsg_addstr(reply, user);
    zmsg_addmem(reply, metadata, metadata_size);
    zmsg_send(&reply, self->handler);

    free(version);
    free(request_id);
    free(domain);
    free(address);
    free(identity);
    free(mechanism);
    zframe_destroy(&credentials);
    zmsg_destroy(&request);
}

static void
s_handle_pipe(s_auth_t *self)
{
    zmsg_t *msg = zmsg_recv(self->pipe);
    if (!msg) {
        self->terminated = true;
        return;
    }
    char *command = zmsg_popstr(msg);
    if (!command || streq(command, "$TERM"))
        self->terminated = true;
    else
    if (streq(command, "VERBOSE")) {
        char *value = zmsg_popstr(msg);
        self->verbose = value && streq(value, "1");
        free(value);
        zsock_signal(self->pipe, 0);
    }
    else
    if (streq(command, "COUNT")) {
        s_clients_refresh(self);
        zstr_sendf(self->pipe, "%zu", zhashx_size(self->clients));
    }
    else
        zsys_error("auth: unknown command '%s' on the pipe", command);
    free(command);
    zmsg_destroy(&msg);
}

static void
s_auth_actor(zsock_t *pipe, void *args_v)
{
    s_args_t *args = (s_args_t *) args_v;
    s_auth_t self = {
        .pipe = pipe,
        .handler = zsock_new(ZMQ_REP),
        .cluster_public = shoal_strdup(args->cluster_public),
        .clients_dir = shoal_strdup(args->clients_dir),
        .clients = zhashx_new(),
        .verbose = args->verbose,
    };
    zhashx_set_destructor(self.clients, (zhashx_destructor_fn *) s_client_destroy);
    shoal_throttle_init(&self.refusals, args->throttle_ms);
    //  Refusals held back by the throttle are told when it lets a line
    //  through again, whether or not another one comes. ARGS is the
    //  caller's and gone after the signal below.
    int wait_ms = args->throttle_ms > 0 ? (int) args->throttle_ms : -1;
    int rc = self.handler ? zsock_bind(self.handler, S_ZAP_ENDPOINT) : -1;
    //  The parent learns whether the handler is up from the first signal.
    zsock_signal(pipe, rc == 0 ? 0 : 1);
    if (rc == 0) {
        s_clients_refresh(&self);
        zpoller_t *poller = zpoller_new(pipe, self.handler, NULL);
        while (!self.terminated) {
            void *which = zpoller_wait(poller, wait_ms);
            uint64_t refused;
            if (shoal_throttle_flush(&self.refusals, zclock_mono(), &refused))
                zsys_info("auth: %" PRIu64 " more handshake(s) refused since the last such line", refused);
            if (which == pipe)
                s_handle_pipe(&self);
            else
            if (which == self.handler)
                s_handle_request(&self);
            else
            if (zpoller_terminated(poller))
                break;
        }
        zpoller_destroy(&poller);
    }
    zsock_destroy(&self.handler);
    zhashx_destroy(&self.clients);
    free(self.cluster_public);
    free(self.clients_dir);
}

//  zactor_new waits for one signal; the actor sends a second one that says
//  whether it bound the ZAP endpoint.
static void
s_auth_start(zsock_t *pipe, void *args)
{
    pthread_setname_np(pthread_self(), "shoal-auth");
    zsock_signal(pipe, 0);
    s_auth_actor(pipe, args);
}

zactor_t *
shoal_auth_new(const char *cluster_public, const char *clients_dir, bool verbose, int64_t throttle_ms)
{
    s_args_t args = { cluster_public, clients_dir, verbose, throttle_ms };
    zactor_t *actor = zactor_new(s_auth_start, &args);
    if (actor && zsock_wait(actor) != 0) {
        zsys_error("auth: cannot bind %s: another handler runs in this process", S_ZAP_ENDPOINT);
        zactor_destroy(&actor);
    }
    return actor;
}

bool
shoal_dataset_is_system(const char *dataset)
{
    return streq(dataset, "registry") || streq(dataset, "objects");
}

bool
shoal_caller_is_tenant(const shoal_caller_t *caller)
{
    return streq(caller->role, SHOAL_ROLE_TENANT);
}

//  A tenant's datasets are "org/project/..." with something after the slash.
static bool
s_tenant_owns(const shoal_caller_t *caller, const char *dataset)
{
    size_t size = strlen(caller->tenant);
    return size > 0 && strncmp(dataset, caller->tenant, size) == 0
        && dataset[size] == '/' && dataset[size + 1] != 0;
}

bool
shoal_caller_may_read(const shoal_caller_t *caller, const char *dataset)
{
    if (streq(caller->role, SHOAL_ROLE_NODE) || streq(caller->role, SHOAL_ROLE_ADMIN))
        return true;
    return shoal_caller_is_tenant(caller) && s_tenant_owns(caller, dataset);
}

bool
shoal_caller_may_write(const shoal_caller_t *caller, const char *dataset)
{
    if (streq(caller->role, SHOAL_ROLE_NODE))
        return true;
    if (streq(caller->role, SHOAL_ROLE_ADMIN))
        return !shoal_dataset_is_system(dataset);
    return shoal_caller_is_tenant(caller) && s_tenant_owns(caller, dataset);
}
