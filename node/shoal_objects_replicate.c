/*  shoal_objects_replicate: an object replicated to other nodes over the
    transfer streams, an instance arriving here, and fetches of an object
    for a guest to start from.
*/
#include "shoal_objects_internal.h"
#include "shoal_alloc.h"

//  Holders of the locks the node takes itself.
#define S_HOLDER_RECEIVE "shoal:receive"
#define S_HOLDER_REPLICATE "shoal:replicate"
//  How long a source has to answer a fetch: its answer comes once the
//  copy is done (an arrival that is still under way ends the fetch itself).
#define S_FETCH_ANSWER_MS (10 * 60 * 1000)

typedef struct _s_replication_t s_replication_t;

//  A fetch of an object to this node, for a guest to start from. It ends
//  when its instance arrived (or failed to), or when the source's answer
//  says it will not come; it is freed once both the end and the answer
//  (which the mesh always gives, NULL at worst) are in.
typedef struct {
    shoal_objects_t *self;
    uint64_t sid;
    char *source;               //  the node asked to replicate it here
    shoal_objects_fetched_fn *done;
    void *arg;
    bool ended;                 //  DONE was told
    bool answered;              //  the source's answer came
} s_fetch_t;

//  One target of a replication.
typedef struct {
    s_replication_t *replication;   //  the one it belongs to
    char *node;                 //  the target
    uint64_t iid;               //  the instance it made (0: not yet)
    zactor_t *sender;           //  the stream, once the target prepared
    bool done;                  //  ended, well or not
    bool ok;
} s_target_t;

//  A replicate request being served.
struct _s_replication_t {
    shoal_objects_t *self;
    uint64_t sid;
    uint64_t source_iid;        //  the local instance read-locked while it is sent
    char *holder;               //  that lock's holder
    char *tenant;
    char *name;
    uint64_t size;
    shoal_checksum_t checksum;
    shoal_envelope_t *request;  //  for the late reply
    zframe_t *routing_id;       //  the caller
    s_target_t *targets;        //  COUNT
    size_t count;
    uint32_t had;               //  complete instances before it began
    char error[OBJECTS_ERROR_MAX];  //  the first failure
    //  Until its targets are chosen (its source hashed first, maybe).
    shoal_msg_object_info_t info;   //  the object
    uint32_t copies;            //  complete instances wanted
    char *to;                   //  the one node to copy to (NULL: any)
};

// ---------------------------------------------------------------------------
//  Replication

void
shoal_objects_replication_destroy(void **item_p)
{
    s_replication_t *replication = (s_replication_t *) *item_p;
    if (replication) {
        for (size_t i = 0; i < replication->count; i++) {
            s_target_t *target = &replication->targets[i];
            if (target->sender && replication->self->loop)
                zloop_reader_end(replication->self->loop, zactor_sock(target->sender));
            zactor_destroy(&target->sender);
            free(target->node);
        }
        free(replication->targets);
        shoal_msg_object_info_codec.clear(&replication->info);
        free(replication->to);
        free(replication->holder);
        free(replication->tenant);
        free(replication->name);
        shoal_envelope_destroy(&replication->request);
        zframe_destroy(&replication->routing_id);
        free(replication);
        *item_p = NULL;
    }
}

//  Ends REPLICATION once each target is done: the source's read lock goes
//  and the caller hears how many nodes hold the object now.
static void
s_replication_check(shoal_objects_t *self, s_replication_t *replication)
{
    uint32_t ok = 0;
    for (size_t i = 0; i < replication->count; i++) {
        if (!replication->targets[i].done)
            return;
        ok += replication->targets[i].ok;
    }
    shoal_objects_lock_release(self, replication->source_iid, replication->holder, NULL);
    uint32_t copies = replication->had + ok;
    shoal_envelope_t *reply;
    if (ok < replication->count)
        reply = shoal_envelope_reply(replication->request, SHOAL_STATUS_INTERNAL, "%u of %zu new instance(s) made: "
                                     "%s", ok, replication->count, replication->error);
    else {
        reply = shoal_envelope_reply(replication->request, SHOAL_STATUS_OK, "%u node(s) hold object %016" PRIx64,
                                     copies, replication->sid);
        shoal_msg_object_reply_t *answer = (shoal_msg_object_reply_t *) shoal_envelope_new_body(reply);
        answer->copies = copies;
        answer->storage_id = replication->sid;
    }
    shoal_objects_reply_later(self, replication->routing_id, &reply);
    void *cursor = zlistx_find(self->replications, replication);
    if (cursor)
        zlistx_delete(self->replications, cursor);
}

static void
s_target_failed(s_target_t *target, const char *why)
{
    s_replication_t *replication = target->replication;
    target->done = true;
    target->ok = false;
    if (!*replication->error)
        snprintf(replication->error, sizeof replication->error, "%s: %s", target->node, why);
    zsys_warning("objects: replication of object %016" PRIx64 " to %s failed: %s", replication->sid, target->node,
                 why);
}

static int
s_sender_readable(zloop_t *loop, zsock_t *reader, void *arg)
{
    s_target_t *target = (s_target_t *) arg;
    s_replication_t *replication = target->replication;
    shoal_objects_t *self = replication->self;
    shoal_sender_event_t event;
    if (shoal_sender_event(target->sender, &event))
        return 0;
    if (event.what == SHOAL_SENDER_DONE) {
        target->done = true;
        target->ok = true;
        zsys_info("objects: object %016" PRIx64 " replicated to %s: %" PRIu64 " bytes at %.1f MB/s", replication->sid,
                  target->node, event.bytes, (double) event.rate / 1e6);
    }
    else
    if (event.what == SHOAL_SENDER_FAILED)
        s_target_failed(target, event.error);
    else
        return 0;
    zloop_reader_end(loop, zactor_sock(target->sender));
    zactor_destroy(&target->sender);
    s_replication_check(self, replication);
    return 0;
}

static void
s_receive_answered(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    s_target_t *target = (s_target_t *) arg;
    s_replication_t *replication = target->replication;
    shoal_objects_t *self = replication->self;
    if (!reply || reply->status != SHOAL_STATUS_OK) {
        s_target_failed(target, reply ? reply->message : "no answer to the receive");
        s_replication_check(self, replication);
        return;
    }
    const shoal_msg_object_reply_t *answer = (const shoal_msg_object_reply_t *) reply->body;
    target->iid = answer->instance_id;
    char *source = shoal_objects_instance_path(self, replication->sid, replication->source_iid);
    char id[64];
    snprintf(id, sizeof id, "o-%016" PRIx64, answer->instance_id);
    shoal_sender_args_t args = {
        .move_id = id, .endpoint = answer->endpoint, .cluster = self->cluster,
        .server_key = zcert_public_txt(self->cluster), .object_path = source,
        .step_timeout_ms = self->settings->move_step_ms, .final_timeout_ms = self->settings->move_step_ms,
    };
    target->sender = shoal_sender_new(&args);
    free(source);
    if (!target->sender || zloop_reader(self->loop, zactor_sock(target->sender), s_sender_readable, target)) {
        zactor_destroy(&target->sender);
        s_target_failed(target, "cannot start the transfer");
        s_replication_check(self, replication);
    }
}

//  The nodes of INFO that hold a complete instance of it, in a new hash
//  (its keys borrowed from INFO).
static zhashx_t *
s_holding(const shoal_msg_object_info_t *info)
{
    zhashx_t *holding = zhashx_new();
    for (size_t i = 0; i < info->count; i++)
        if (info->instances[i].state == SHOAL_INSTANCE_COMPLETE)
            zhashx_update(holding, info->instances[i].node, (void *) info->instances[i].node);
    return holding;
}

//  REPLICATION's source is read-locked and good: its targets are chosen
//  and asked to receive. Returns NULL while it is under way (it is then
//  self's), or the reply that ends it, its source's lock released (the
//  caller destroys it).
static shoal_envelope_t *
s_replication_begin(shoal_objects_t *self, s_replication_t *replication)
{
    shoal_msg_object_info_t *info = &replication->info;
    zhashx_t *holding = s_holding(info);
    uint32_t had = replication->had, copies = replication->copies;
    const char *to = replication->to;
    //  Targets: alive peers without a complete instance, in name order.
    zlistx_t *alive = shoal_mesh_alive(self->mesh);
    zlistx_set_comparator(alive, (zlistx_comparator_fn *) strcmp);
    zlistx_sort(alive);
    replication->targets = (s_target_t *) zmalloc((copies + 1) * sizeof *replication->targets);
    for (const char *node = (const char *) zlistx_first(alive); node && had + replication->count < copies;
         node = (const char *) zlistx_next(alive))
        if (!zhashx_lookup(holding, node) && (!to || streq(node, to))) {
            s_target_t *target = &replication->targets[replication->count++];
            target->replication = replication;
            target->node = shoal_strdup(node);
        }
    zlistx_destroy(&alive);
    zhashx_destroy(&holding);
    if (had + replication->count < copies) {
        shoal_envelope_t *reply;
        if (to)
            reply = shoal_envelope_reply(replication->request, SHOAL_STATUS_CONFLICT, "node %s is not alive to take "
                                         "'%s'", to, info->name);
        else
            reply = shoal_envelope_reply(replication->request, SHOAL_STATUS_CONFLICT, "%u node(s) hold '%s' and %zu "
                                         "more are alive to take it: %u cannot hold it", had, info->name,
                                         replication->count, copies);
        shoal_objects_lock_release(self, replication->source_iid, replication->holder, NULL);
        return reply;
    }
    zlistx_add_end(self->replications, replication);
    for (size_t i = 0; i < replication->count; i++) {
        s_target_t *target = &replication->targets[i];
        shoal_envelope_t *receive = shoal_envelope_new(SHOAL_MSG_OBJECT_RECEIVE, 0);
        shoal_msg_object_request_t *ask = (shoal_msg_object_request_t *) shoal_envelope_new_body(receive);
        ask->op = SHOAL_OBJECT_ADD;
        ask->tenant = shoal_strdup(info->tenant);
        ask->name = shoal_strdup(info->name);
        ask->storage_id = info->storage_id;
        ask->size = info->size;
        ask->checksum = (uint8_t *) zmalloc(replication->checksum.size);
        memcpy(ask->checksum, replication->checksum.bytes, replication->checksum.size);
        ask->checksum_size = replication->checksum.size;
        if (shoal_mesh_send(self->mesh, target->node, &receive, OBJECTS_PEER_TIMEOUT_MS, s_receive_answered, target)) {
            shoal_envelope_destroy(&receive);
            s_target_failed(target, "no peer");
        }
    }
    shoal_msg_object_info_codec.clear(info);
    //  Every target may have failed at once.
    s_replication_check(self, replication);
    return NULL;
}

//  The reply to a replicate whose source (read-locked) is bad (WHY): its
//  lock goes and it is marked corrupt, as an open would.
static shoal_envelope_t *
s_replication_bad(shoal_objects_t *self, s_replication_t *replication, const char *why)
{
    shoal_objects_lock_release(self, replication->source_iid, replication->holder, NULL);
    for (size_t i = 0; i < replication->info.count; i++)
        if (replication->info.instances[i].instance_id == replication->source_iid)
            shoal_objects_instance_mark_corrupt(self, &replication->info.instances[i], why);
    return shoal_envelope_reply(replication->request, SHOAL_STATUS_CONFLICT, "the instance here cannot be sent: %s",
                                why);
}

//  The verifier hashed the source of a replicate (WAITER): it begins, or,
//  the source bad (WHY), ends.
static void
s_replicate_verified(shoal_objects_t *self, void *waiter, const char *why)
{
    s_replication_t *replication = (s_replication_t *) waiter;
    shoal_envelope_t *reply = !why ? s_replication_begin(self, replication)
                            : s_replication_bad(self, replication, why);
    if (reply) {
        shoal_objects_reply_later(self, replication->routing_id, &reply);
        void *item = replication;
        shoal_objects_replication_destroy(&item);
    }
}

shoal_envelope_t *
shoal_objects_replicate(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant,
            const shoal_msg_object_request_t *body, zframe_t *routing_id)
{
    shoal_msg_object_info_t info;
    shoal_envelope_t *reply = shoal_objects_resolve(self, request, tenant, body, &info);
    if (reply)
        return reply;
    uint32_t copies = body->copies ? body->copies : 2;
    //  The nodes that hold a complete instance, and one of this node's.
    zhashx_t *holding = s_holding(&info);
    const shoal_msg_object_instance_t *source = NULL;
    for (size_t i = 0; i < info.count && !source; i++)
        if (info.instances[i].state == SHOAL_INSTANCE_COMPLETE
        &&  streq(info.instances[i].node, self->settings->node_id))
            source = &info.instances[i];
    uint32_t had = (uint32_t) zhashx_size(holding);
    //  A copy asked for on one node: that node, whatever the count.
    const char *to = body->to && *body->to ? body->to : NULL;
    if (to)
        copies = zhashx_lookup(holding, to) ? had : had + 1;
    zhashx_destroy(&holding);
    if (had >= copies) {
        reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%u node(s) hold object '%s' already", had, info.name);
        shoal_msg_object_reply_t *answer = (shoal_msg_object_reply_t *) shoal_envelope_new_body(reply);
        answer->copies = had;
        answer->storage_id = info.storage_id;
        shoal_msg_object_info_codec.clear(&info);
        return reply;
    }
    if (!source) {
        shoal_msg_object_info_codec.clear(&info);
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "this node holds no complete instance of '%s': "
                                    "replicate from a node that does (%u hold one)", body->name, had);
    }
    char *holder = zsys_sprintf("%s#%" PRIu64, S_HOLDER_REPLICATE, ++self->holders);
    char why[OBJECTS_ERROR_MAX];
    if (shoal_objects_lock_take(self, source->instance_id, info.storage_id, holder, "read", false, why, sizeof why)
        != OBJECTS_GRANTED) {
        shoal_objects_lock_release(self, source->instance_id, holder, NULL);
        free(holder);
        shoal_msg_object_info_codec.clear(&info);
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "the instance here cannot be sent: %s", why);
    }
    s_replication_t *replication = (s_replication_t *) zmalloc(sizeof *replication);
    replication->self = self;
    replication->sid = info.storage_id;
    replication->source_iid = source->instance_id;
    replication->holder = holder;
    replication->tenant = shoal_strdup(info.tenant);
    replication->name = shoal_strdup(info.name);
    replication->size = info.size;
    shoal_checksum_set(&replication->checksum, source->checksum, source->checksum_size);
    //  What the late reply answers: the request's type and id.
    replication->request = shoal_envelope_new(request->type, request->request_id);
    replication->routing_id = zframe_dup(routing_id);
    replication->had = had;
    replication->copies = copies;
    replication->to = to ? shoal_strdup(to) : NULL;
    replication->info = info;
    //  The verifier looks at the source's file (and hashes it when it
    //  must) before anything is sent: s_replicate_verified goes on.
    shoal_objects_verify_give(self, source, false, replication, s_replicate_verified,
                              shoal_objects_replication_destroy);
    return NULL;
}

void
shoal_objects_incoming_destroy(void **item_p)
{
    shoal_objects_incoming_t *incoming = (shoal_objects_incoming_t *) *item_p;
    if (incoming) {
        free(incoming->id);
        free(incoming);
        *item_p = NULL;
    }
}

shoal_envelope_t *
shoal_objects_receive(shoal_objects_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_object_request_t *body = (const shoal_msg_object_request_t *) request->body;
    if (!streq(caller->role, SHOAL_ROLE_NODE))
        return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN, "receive is asked by nodes only");
    shoal_checksum_t checksum;
    if (!body->storage_id || shoal_checksum_set(&checksum, body->checksum, body->checksum_size) || !checksum.size)
        return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "a receive names the object and its checksum");
    char *error = NULL;
    uint64_t iid = shoal_objects_id_new(self, SHOAL_OBJECT_ID_INSTANCE, &error);
    if (!iid)
        return shoal_objects_failed(request, self, error);
    char *dir = zsys_sprintf("%s/%016" PRIx64, self->dir, body->storage_id);
    int made = zsys_dir_create("%s", dir);
    free(dir);
    if (made)
        return shoal_objects_failed(request, self, zsys_sprintf("cannot make the object's directory: %s", strerror(errno)));
    char why[OBJECTS_ERROR_MAX];
    if (shoal_objects_lock_take(self, iid, body->storage_id, S_HOLDER_RECEIVE, "write", false, why, sizeof why) != OBJECTS_GRANTED)
        return shoal_objects_failed(request, self, zsys_sprintf("cannot write-lock the new instance: %s", why));
    char *uri = shoal_objects_instance_uri(body->storage_id, iid);
    shoal_msg_object_instance_t instance = {
        .instance_id = iid, .storage_id = body->storage_id, .node = self->settings->node_id, .uri = uri,
        .size = body->size, .state = SHOAL_INSTANCE_WRITING, .modified_ms = shoal_objects_now_ms()
    };
    int rc = shoal_objects_instance_write(self, &instance, &error);
    free(uri);
    if (rc) {
        shoal_object_store_lock_remove(self->store, iid);
        return shoal_objects_failed(request, self, error);
    }
    shoal_objects_incoming_t *incoming = (shoal_objects_incoming_t *) zmalloc(sizeof *incoming);
    incoming->id = zsys_sprintf("o-%016" PRIx64, iid);
    incoming->sid = body->storage_id;
    incoming->iid = iid;
    incoming->size = body->size;
    incoming->checksum = checksum;
    incoming->heard_ms = zclock_mono();
    zhashx_update(self->incoming, incoming->id, incoming);
    char *path = shoal_objects_instance_path(self, body->storage_id, iid);
    shoal_receiver_prepare_object(self->receiver, incoming->id, path, body->size, &checksum);
    free(path);
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "OK");
    shoal_msg_object_reply_t *answer = (shoal_msg_object_reply_t *) shoal_envelope_new_body(reply);
    answer->instance_id = iid;
    answer->storage_id = body->storage_id;
    answer->endpoint = shoal_strdup(shoal_receiver_endpoint(self->receiver));
    answer->node = shoal_strdup(self->settings->node_id);
    return reply;
}

static void s_fetches_end(shoal_objects_t *self, uint64_t sid, const char *error_text);

void
shoal_objects_incoming_end(shoal_objects_t *self, shoal_objects_incoming_t *incoming, const char *error_text)
{
    char *error = NULL;
    shoal_receiver_forget(self->receiver, incoming->id, *error_text != '\0');
    if (*error_text) {
        zsys_warning("objects: instance %016" PRIx64 " of object %016" PRIx64 " did not arrive: %s", incoming->iid,
                     incoming->sid, error_text);
        if (shoal_objects_instance_remove(self, incoming->sid, incoming->iid, &error))
            zsys_warning("objects: and cannot be removed: %s", error);
    }
    else {
        char *uri = shoal_objects_instance_uri(incoming->sid, incoming->iid);
        shoal_msg_object_instance_t instance = {
            .instance_id = incoming->iid, .storage_id = incoming->sid, .node = self->settings->node_id, .uri = uri,
            .checksum = incoming->checksum.bytes, .checksum_size = incoming->checksum.size, .size = incoming->size,
            .state = SHOAL_INSTANCE_COMPLETE, .modified_ms = shoal_objects_now_ms()
        };
        if (shoal_objects_instance_write(self, &instance, &error) == 0 && shoal_objects_lock_release(self, incoming->iid, S_HOLDER_RECEIVE,
                                                                             NULL) >= 0) {
            zsys_info("objects: instance %016" PRIx64 " of object %016" PRIx64 " arrived whole (%" PRIu64 " bytes)",
                      incoming->iid, incoming->sid, incoming->size);
            //  A corrupt instance of the same object here is replaced now.
            shoal_msg_object_info_t info = { 0 };
            char *why = NULL;
            if (shoal_objects_instances_read(self, incoming->sid, &info, &why) == 0)
                for (size_t i = 0; i < info.count; i++)
                    if (streq(info.instances[i].node, self->settings->node_id)
                    &&  info.instances[i].state == SHOAL_INSTANCE_CORRUPT) {
                        char *failed = NULL;
                        if (shoal_objects_instance_remove(self, incoming->sid, info.instances[i].instance_id, &failed) == 0)
                            zsys_info("objects: corrupt instance %016" PRIx64 " replaced by %016" PRIx64,
                                      info.instances[i].instance_id, incoming->iid);
                        free(failed);
                    }
            free(why);
            shoal_msg_object_info_codec.clear(&info);
        }
        else
            zsys_error("objects: instance %016" PRIx64 " arrived but cannot be recorded: %s", incoming->iid,
                       error ? error : shoal_store_error(self->store));
        free(uri);
    }
    free(error);
    uint64_t sid = incoming->sid;
    zhashx_delete(self->incoming, incoming->id);
    s_fetches_end(self, sid, *error_text ? error_text : NULL);
}

int
shoal_objects_receiver_readable(zloop_t *loop, zsock_t *reader, void *arg)
{
    shoal_objects_t *self = (shoal_objects_t *) arg;
    shoal_receiver_event_t event;
    if (shoal_receiver_event(self->receiver, &event))
        return 0;
    shoal_objects_incoming_t *incoming = (shoal_objects_incoming_t *) zhashx_lookup(self->incoming, event.move_id);
    if (!incoming)
        return 0;
    incoming->heard_ms = zclock_mono();
    if (event.prepared && *event.error)
        shoal_objects_incoming_end(self, incoming, event.error);
    else
    if (!event.prepared && !event.progress && (event.final || *event.error))
        shoal_objects_incoming_end(self, incoming, event.error);
    return 0;
}

static void
s_fetch_destroy(s_fetch_t **fetch_p)
{
    if (*fetch_p) {
        free((*fetch_p)->source);
        free(*fetch_p);
        *fetch_p = NULL;
    }
}

//  Tells FETCH's caller how it ended (ERROR_TEXT NULL: well), once.
static void
s_fetch_end(s_fetch_t *fetch, const char *error_text, bool cancelled)
{
    if (fetch->ended)
        return;
    fetch->ended = true;
    void *cursor = zlistx_find(fetch->self->fetches, fetch);
    if (cursor)
        zlistx_detach_cur(fetch->self->fetches);
    fetch->done(error_text ? -1 : 0, error_text ? error_text : "", cancelled, fetch->arg);
}

//  An instance of SID arrived here (ERROR_TEXT NULL) or failed to: the
//  fetches waiting for it end.
static void
s_fetches_end(shoal_objects_t *self, uint64_t sid, const char *error_text)
{
    s_fetch_t *fetch = (s_fetch_t *) zlistx_first(self->fetches);
    while (fetch) {
        s_fetch_t *next = (s_fetch_t *) zlistx_next(self->fetches);
        if (fetch->sid == sid) {
            char *why = error_text ? zsys_sprintf("its copy from %s failed: %s", fetch->source, error_text) : NULL;
            s_fetch_end(fetch, why, false);
            free(why);
            if (fetch->answered)
                s_fetch_destroy(&fetch);
            //  The list changed: walk it again from the start.
            next = (s_fetch_t *) zlistx_first(self->fetches);
        }
        fetch = next;
    }
}

//  Whether an instance of SID is arriving here.
static bool
s_arriving(shoal_objects_t *self, uint64_t sid)
{
    for (shoal_objects_incoming_t *incoming = (shoal_objects_incoming_t *) zhashx_first(self->incoming); incoming;
         incoming = (shoal_objects_incoming_t *) zhashx_next(self->incoming))
        if (incoming->sid == sid)
            return true;
    return false;
}

//  Whether this node holds a complete instance of SID.
static bool
s_holds(shoal_objects_t *self, uint64_t sid)
{
    shoal_msg_object_info_t info = { 0 };
    char *error = NULL;
    bool holds = false;
    if (shoal_objects_instances_read(self, sid, &info, &error) == 0)
        for (size_t i = 0; i < info.count; i++)
            holds |= info.instances[i].state == SHOAL_INSTANCE_COMPLETE
                  && streq(info.instances[i].node, self->settings->node_id);
    free(error);
    shoal_msg_object_info_codec.clear(&info);
    return holds;
}

static void
s_fetch_answered(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    s_fetch_t *fetch = (s_fetch_t *) arg;
    shoal_objects_t *self = fetch->self;
    fetch->answered = true;
    if (!fetch->ended) {
        if (!reply && shoal_mesh_stopping(mesh))
            s_fetch_end(fetch, "the node is stopping", true);
        else
        if (s_holds(self, fetch->sid))
            s_fetch_end(fetch, NULL, false);
        else
        if (!s_arriving(self, fetch->sid)) {
            char *why = zsys_sprintf("%s did not copy it here: %s", node_id,
                                     reply ? reply->message : "no answer in time");
            s_fetch_end(fetch, why, false);
            free(why);
        }
        //  Otherwise its bytes are arriving still: the arrival ends it.
    }
    if (fetch->ended)
        s_fetch_destroy(&fetch);
}

int
shoal_objects_fetch(shoal_objects_t *self, const char *tenant, const shoal_objects_image_t *image,
                    shoal_objects_fetched_fn *done, void *arg, char **error_p)
{
    shoal_msg_object_info_t info = { 0 };
    if (shoal_objects_instances_read(self, image->storage_id, &info, error_p))
        return -1;
    zlistx_t *alive = shoal_mesh_alive(self->mesh);
    const char *source = NULL;
    for (size_t i = 0; i < info.count && !source; i++) {
        const shoal_msg_object_instance_t *instance = &info.instances[i];
        if (instance->state != SHOAL_INSTANCE_COMPLETE || streq(instance->node, self->settings->node_id))
            continue;
        for (const char *node = (const char *) zlistx_first(alive); node; node = (const char *) zlistx_next(alive))
            if (streq(node, instance->node))
                source = instance->node;
    }
    int rc = 0;
    if (!source) {
        *error_p = zsys_sprintf("no alive node holds a complete instance of object %016" PRIx64 " (%zu instance(s) "
                                "in the catalog)", image->storage_id, info.count);
        rc = -1;
    }
    else {
        s_fetch_t *fetch = (s_fetch_t *) zmalloc(sizeof *fetch);
        fetch->self = self;
        fetch->sid = image->storage_id;
        fetch->source = shoal_strdup(source);
        fetch->done = done;
        fetch->arg = arg;
        shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_OBJECT, 0);
        shoal_msg_object_request_t *body = (shoal_msg_object_request_t *) shoal_envelope_new_body(request);
        body->op = SHOAL_OBJECT_REPLICATE;
        body->tenant = shoal_strdup(tenant);
        body->storage_id = image->storage_id;
        body->to = shoal_strdup(self->settings->node_id);
        if (shoal_mesh_send(self->mesh, source, &request, S_FETCH_ANSWER_MS, s_fetch_answered, fetch)) {
            shoal_envelope_destroy(&request);
            *error_p = zsys_sprintf("cannot ask %s for object %016" PRIx64 ": no such peer", source,
                                    image->storage_id);
            s_fetch_destroy(&fetch);
            rc = -1;
        }
        else {
            zlistx_add_end(self->fetches, fetch);
            zsys_info("objects: object %016" PRIx64 " is copied here from %s", image->storage_id, source);
        }
    }
    zlistx_destroy(&alive);
    shoal_msg_object_info_codec.clear(&info);
    return rc;
}
