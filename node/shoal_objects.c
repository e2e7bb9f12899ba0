/*  shoal_objects: storage objects, instances, their locks and their ids: the
    module's front, its requests (add, open, read, close, update, remove)
    and guest images for claims. See shoal_objects.h for the design of each
    operation and shoal_objects_internal.h for the files of the module.
*/
#include "shoal_objects_internal.h"
#include "shoal_alloc.h"

//  Holders of the locks the node takes itself.
#define S_HOLDER_ADD "shoal:add"
//  An add that wrote nothing for this long is given up.
#define S_UPLOAD_IDLE_MS (10 * 60 * 1000)

//  An open that tries this node's instances one after the other. While an
//  instance's bytes are hashed on the verifier it waits there, read lock
//  held; then it is answered, or it resolves the name again and goes on.
typedef struct {
    shoal_envelope_t *request;  //  the request's type and id, for a late reply
    zframe_t *routing_id;       //  the caller
    char *tenant;
    char *name;                 //  what the open names: a name,
    uint64_t storage_id;        //  or a storage id
    uint64_t instance_id;       //  one instance only (0: any)
    bool verify;                //  every instance taken is hashed
    char *holder;               //  the read lock's holder
    shoal_msg_object_info_t info;   //  the object as last resolved
    size_t index;               //  the instance of INFO being hashed
    zhashx_t *bad;              //  instance ids (text) found bad: never hashed again, even unmarked
} s_opening_t;

// ---------------------------------------------------------------------------
//  Requests

//  The tenant a request acts for: a tenant's own; an admin's or a node's
//  named one (REQUIRED: one must be named). NULL with *REPLY_P otherwise.
static const char *
s_tenant(const shoal_envelope_t *request, const shoal_caller_t *caller, const char *named, bool required,
         shoal_envelope_t **reply_p)
{
    if (shoal_caller_is_tenant(caller)) {
        if (*named && !streq(named, caller->tenant)) {
            *reply_p = shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "no object of tenant '%s' here", named);
            return NULL;
        }
        return caller->tenant;
    }
    if (!streq(caller->role, SHOAL_ROLE_ADMIN) && !streq(caller->role, SHOAL_ROLE_NODE)) {
        *reply_p = shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN, "role '%s' has no objects", caller->role);
        return NULL;
    }
    if (required && !*named) {
        *reply_p = shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "name the object's tenant (org/project)");
        return NULL;
    }
    return named;
}

//  A 200 reply with its (empty) body: every 200 of an object request
//  carries one.
static shoal_envelope_t * CHECK_PRINTF(2)
s_ok(const shoal_envelope_t *request, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *message = zsys_vprintf(format, args);
    va_end(args);
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", message);
    free(message);
    shoal_envelope_new_body(reply);
    return reply;
}

shoal_envelope_t *
shoal_objects_failed(const shoal_envelope_t *request, shoal_objects_t *self, char *error)
{
    uint32_t status = shoal_store_error_no_space(self->store) ? SHOAL_STATUS_NO_SPACE : SHOAL_STATUS_INTERNAL;
    shoal_envelope_t *reply = shoal_envelope_reply(request, status, "%s", error ? error : "failed");
    zsys_error("objects: %s: %s", shoal_msg_type_name(request->type), error ? error : "failed");
    free(error);
    return reply;
}

shoal_envelope_t *
shoal_objects_resolve(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant,
          const shoal_msg_object_request_t *body, shoal_msg_object_info_t *info)
{
    char *error = NULL;
    uint64_t sid = body->storage_id;
    memset(info, 0, sizeof *info);
    if (*body->name && shoal_objects_binding(self, tenant, body->name, &sid, &error))
        return shoal_objects_failed(request, self, error);
    if (!sid)
        return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "no object '%s' of tenant %s", body->name,
                                    tenant);
    bool found = false;
    if (shoal_objects_object_read(self, sid, info, &found, &error))
        return shoal_objects_failed(request, self, error);
    if (!found || (*tenant && !streq(info->tenant, tenant))) {
        shoal_msg_object_info_codec.clear(info);
        if (*body->name)
            return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "object '%s' of tenant %s is gone (its "
                                        "storage id %016" PRIx64 " has no record): resolve it again", body->name,
                                        tenant, sid);
        return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "no object %016" PRIx64, sid);
    }
    return NULL;
}

//  A 200 reply whose body carries INFO (taken).
static shoal_envelope_t *
s_info_reply(const shoal_envelope_t *request, shoal_msg_object_info_t *info, const char *message)
{
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", message);
    shoal_msg_object_reply_t *body = (shoal_msg_object_reply_t *) shoal_envelope_new_body(reply);
    body->objects = (shoal_msg_object_info_t *) zmalloc(sizeof *body->objects);
    body->objects[0] = *info;
    body->count = 1;
    body->storage_id = info->storage_id;
    memset(info, 0, sizeof *info);
    return reply;
}

void
shoal_objects_upload_destroy(void **item_p)
{
    shoal_objects_upload_t *upload = (shoal_objects_upload_t *) *item_p;
    *item_p = NULL;
    //  The worker still writes its file: the last answer frees it.
    if (upload && upload->pending) {
        upload->gone = true;
        return;
    }
    if (upload) {
        free(upload->failed);
        shoal_sink_destroy(&upload->sink);
        free(upload->tenant);
        free(upload->name);
        free(upload->comment);
        free(upload);
        *item_p = NULL;
    }
}

void
shoal_objects_upload_abort(shoal_objects_t *self, shoal_objects_upload_t *upload)
{
    char *error = NULL;
    uint64_t sid = upload->sid, iid = upload->iid;
    char id[32];
    snprintf(id, sizeof id, "%" PRIu64, iid);
    zhashx_delete(self->uploads, id);
    if (shoal_objects_instance_remove(self, sid, iid, &error)) {
        zsys_warning("objects: an abandoned add of instance %016" PRIx64 " left something behind: %s", iid, error);
        free(error);
    }
}

//  Step 1 of an add of NAME (with COMMENT) for TENANT, SIZE bytes, made
//  by REQUEST: a new object and its instance, under a write lock, whose
//  bytes come next. Returns NULL with *UPLOAD_P (kept in self->uploads),
//  or the reply that ends the request.
static shoal_envelope_t *
s_upload_begin(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant, const char *name,
               const char *comment, uint64_t size, bool update, shoal_checksum_algorithm_t algorithm,
               shoal_objects_upload_t **upload_p)
{
    if (!*name)
        return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "an add names its object");
    char *error = NULL;
    uint64_t bound = 0;
    if (shoal_objects_binding(self, tenant, name, &bound, &error))
        return shoal_objects_failed(request, self, error);
    if (bound && !update)
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "object '%s' of tenant %s exists: update it, or "
                                    "remove it first", name, tenant);
    uint64_t sid = shoal_objects_id_new(self, SHOAL_OBJECT_ID_STORAGE, &error);
    uint64_t iid = sid ? shoal_objects_id_new(self, SHOAL_OBJECT_ID_INSTANCE, &error) : 0;
    if (!iid)
        return shoal_objects_failed(request, self, error);
    //  1. The instance is made under a write lock, before any byte.
    char *dir = zsys_sprintf("%s/%016" PRIx64, self->dir, sid);
    char *path = shoal_objects_instance_path(self, sid, iid);
    shoal_sink_t *sink = zsys_dir_create("%s", dir) == 0 ? shoal_sink_new(path, true, size) : NULL;
    if (!sink)
        error = zsys_sprintf("cannot make %s: %s", path, strerror(errno));
    free(dir);
    free(path);
    if (!sink)
        return shoal_objects_failed(request, self, error);
    char why[OBJECTS_ERROR_MAX];
    if (shoal_objects_lock_take(self, iid, sid, S_HOLDER_ADD, "write", false, why, sizeof why) != OBJECTS_GRANTED) {
        shoal_sink_destroy(&sink);
        return shoal_objects_failed(request, self, zsys_sprintf("cannot write-lock the new instance: %s", why));
    }
    shoal_msg_object_info_t info = {
        .tenant = (char *) tenant, .name = (char *) name, .storage_id = sid, .size = size,
        .created_ms = shoal_objects_now_ms(), .comment = (char *) comment
    };
    char *uri = shoal_objects_instance_uri(sid, iid);
    shoal_msg_object_instance_t instance = {
        .instance_id = iid, .storage_id = sid, .node = self->settings->node_id, .uri = uri, .size = size,
        .state = SHOAL_INSTANCE_WRITING, .modified_ms = shoal_objects_now_ms()
    };
    int rc = shoal_objects_instance_write(self, &instance, &error);
    if (rc == 0)
        rc = shoal_objects_object_write(self, &info, &error);
    free(uri);
    shoal_objects_upload_t *upload = (shoal_objects_upload_t *) zmalloc(sizeof *upload);
    upload->sid = sid;
    upload->iid = iid;
    upload->sink = sink;
    upload->size = size;
    shoal_hasher_init(&upload->hash, algorithm);
    upload->tenant = shoal_strdup(tenant);
    upload->name = shoal_strdup(name);
    upload->comment = shoal_strdup(comment ? comment : "");
    upload->update = update;
    upload->heard_ms = zclock_mono();
    char id[32];
    snprintf(id, sizeof id, "%" PRIu64, iid);
    zhashx_update(self->uploads, id, upload);
    if (rc) {
        shoal_objects_upload_abort(self, upload);
        return shoal_objects_failed(request, self, error);
    }
    *upload_p = upload;
    return NULL;
}

static shoal_envelope_t *
s_add(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant,
      const shoal_msg_object_request_t *body)
{
    shoal_objects_upload_t *upload = NULL;
    //  An add that names no algorithm is an older client's: BLAKE2b.
    shoal_checksum_algorithm_t algorithm = body->algorithm ? body->algorithm : SHOAL_CHECKSUM_BLAKE2B;
    shoal_envelope_t *reply = s_upload_begin(self, request, tenant, body->name, body->comment, body->size,
                                             body->update, algorithm, &upload);
    if (reply)
        return reply;
    reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "send %" PRIu64 " bytes to instance %016" PRIx64,
                                 body->size, upload->iid);
    shoal_msg_object_reply_t *answer = (shoal_msg_object_reply_t *) shoal_envelope_new_body(reply);
    answer->storage_id = upload->sid;
    answer->instance_id = upload->iid;
    answer->node = shoal_strdup(self->settings->node_id);
    return reply;
}

//  The add of instance IID a client of TENANT makes (a checkpoint's is
//  the node's own: no client writes, commits or aborts it).
static shoal_objects_upload_t *
s_upload_find(shoal_objects_t *self, uint64_t iid, const char *tenant)
{
    char id[32];
    snprintf(id, sizeof id, "%" PRIu64, iid);
    shoal_objects_upload_t *upload = (shoal_objects_upload_t *) zhashx_lookup(self->uploads, id);
    if (upload && ((*tenant && !streq(upload->tenant, tenant)) || upload->local))
        return NULL;
    return upload;
}

//  A chunk of an add: checked here, written and hashed on the worker,
//  answered when it is back (NULL: later).
static shoal_envelope_t *
s_write(shoal_objects_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller, zframe_t *routing_id)
{
    shoal_msg_object_chunk_t *body = (shoal_msg_object_chunk_t *) request->body;
    shoal_envelope_t *refusal = NULL;
    const char *tenant = s_tenant(request, caller, "", false, &refusal);
    if (!tenant)
        return refusal;
    shoal_objects_upload_t *upload = s_upload_find(self, body->instance_id, tenant);
    if (!upload)
        return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "no add of instance %016" PRIx64 " is in flight "
                                    "here", body->instance_id);
    if (upload->failed)
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "instance %016" PRIx64 " lost a chunk (%s): "
                                    "abort the add", body->instance_id, upload->failed);
    if (upload->committing)
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "instance %016" PRIx64 " is being committed",
                                    body->instance_id);
    if (body->offset != upload->offset)
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "instance %016" PRIx64 " takes its bytes in "
                                    "order: the next is at offset %" PRIu64 ", not %" PRIu64, body->instance_id,
                                    upload->offset, body->offset);
    if (upload->offset + body->data_size > upload->size)
        return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "%zu bytes at offset %" PRIu64 " run past "
                                    "the %" PRIu64 " bytes the add announced", body->data_size, body->offset,
                                    upload->size);
    shoal_objects_io_t *io = (shoal_objects_io_t *) zmalloc(sizeof *io);
    io->kind = OBJECTS_IO_WRITE;
    io->upload = upload;
    io->instance_id = body->instance_id;
    io->offset = body->offset;
    //  The chunk's bytes go with the work rather than be copied: the node
    //  destroys the request once this returns, and it frees no NULL.
    io->data = body->data;
    io->size = body->data_size;
    body->data = NULL;
    body->data_size = 0;
    upload->offset += io->size;
    upload->heard_ms = zclock_mono();
    shoal_objects_io_give(self, io, request, routing_id);
    return NULL;
}

//  An add's commit: its bytes are hashed to the end and synced on the
//  worker, after every chunk handed to it; then steps 2 and 3 (NULL: the
//  answer comes later).
static shoal_envelope_t *
s_commit(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant,
         const shoal_msg_object_request_t *body, zframe_t *routing_id)
{
    shoal_objects_upload_t *upload = s_upload_find(self, body->instance_id, tenant);
    if (!upload)
        return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "no add of instance %016" PRIx64 " is in flight "
                                    "here", body->instance_id);
    if (upload->committing)
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "instance %016" PRIx64 " is being committed",
                                    body->instance_id);
    if (upload->failed)
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "instance %016" PRIx64 " lost a chunk (%s): "
                                    "abort the add", body->instance_id, upload->failed);
    if (upload->offset != upload->size)
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "instance %016" PRIx64 " has %" PRIu64 " of its %"
                                    PRIu64 " bytes: send the rest before the commit", body->instance_id,
                                    upload->offset, upload->size);
    shoal_objects_io_t *io = (shoal_objects_io_t *) zmalloc(sizeof *io);
    io->kind = OBJECTS_IO_COMMIT;
    io->upload = upload;
    io->instance_id = body->instance_id;
    shoal_checksum_set(&io->given, body->checksum, body->checksum_size);
    upload->committing = true;
    shoal_objects_io_give(self, io, request, routing_id);
    return NULL;
}

shoal_envelope_t *
shoal_objects_upload_commit(shoal_objects_t *self, const shoal_envelope_t *request, shoal_objects_upload_t *upload,
                const shoal_checksum_t *checksum)
{
    char *error = NULL;
    //  2. The bytes are complete and checksummed: the instance says so, and
    //  its write lock goes.
    char *uri = shoal_objects_instance_uri(upload->sid, upload->iid);
    shoal_msg_object_instance_t instance = {
        .instance_id = upload->iid, .storage_id = upload->sid, .node = self->settings->node_id, .uri = uri,
        .checksum = (uint8_t *) checksum->bytes, .checksum_size = checksum->size, .size = upload->size,
        .state = SHOAL_INSTANCE_COMPLETE, .modified_ms = shoal_objects_now_ms()
    };
    shoal_msg_object_info_t info = {
        .tenant = upload->tenant, .name = upload->name, .storage_id = upload->sid, .size = upload->size,
        .checksum = (uint8_t *) checksum->bytes, .checksum_size = checksum->size, .created_ms = shoal_objects_now_ms(),
        .comment = upload->comment, .memory_bytes = upload->memory_bytes, .disk_bytes = upload->disk_bytes
    };
    int rc = shoal_objects_instance_write(self, &instance, &error);
    if (rc == 0)
        rc = shoal_objects_object_write(self, &info, &error);
    free(uri);
    if (rc == 0 && shoal_objects_lock_release(self, upload->iid, S_HOLDER_ADD, NULL) < 0) {
        error = zsys_sprintf("cannot release the add's write lock: %s", shoal_store_error(self->store));
        rc = -1;
    }
    //  3. Only now is the name bound, or moved, in one write of its key.
    uint64_t old = 0;
    if (rc == 0)
        rc = shoal_objects_binding(self, upload->tenant, upload->name, &old, &error);
    if (rc == 0 && old && !upload->update) {
        //  Someone else bound the name meanwhile: this object is left unbound.
        char key[OBJECTS_KEY_MAX];
        shoal_objects_key_name(key, upload->tenant, upload->name);
        shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "object '%s' was added "
                                                       "meanwhile by another: update it instead", upload->name);
        shoal_objects_upload_abort(self, upload);
        return reply;
    }
    if (rc == 0) {
        char key[OBJECTS_KEY_MAX];
        shoal_objects_key_name(key, upload->tenant, upload->name);
        rc = shoal_objects_catalog_put(self, key, &shoal_msg_object_info_codec, &info, &error);
    }
    if (rc) {
        shoal_objects_upload_abort(self, upload);
        return shoal_objects_failed(request, self, error);
    }
    uint64_t sid = upload->sid, iid = upload->iid;
    char message[2 * OBJECTS_ERROR_MAX] = "committed";
    //  An update's old object goes as a removal does; readers holding it
    //  open keep reading it whole until they close.
    if (old && old != sid) {
        shoal_msg_object_info_t previous = { 0 };
        bool found = false;
        if (shoal_objects_object_read(self, old, &previous, &found, &error) == 0 && found) {
            char removed[OBJECTS_ERROR_MAX];
            if (shoal_objects_object_remove(self, &previous, removed, sizeof removed, &error) == 0)
                snprintf(message, sizeof message, "committed; the name moved from object %016" PRIx64 " (%s)", old,
                         removed);
        }
        if (error) {
            zsys_warning("objects: the old object %016" PRIx64 " of '%s' is left to the sweep: %s", old, info.name,
                         error);
            free(error);
            error = NULL;
        }
        shoal_msg_object_info_codec.clear(&previous);
    }
    //  INFO borrowed the upload's strings until here.
    char id[32];
    snprintf(id, sizeof id, "%" PRIu64, iid);
    zhashx_delete(self->uploads, id);
    shoal_msg_object_info_t committed = { 0 };
    bool found = false;
    if (shoal_objects_object_read(self, sid, &committed, &found, &error) || !found)
        return shoal_objects_failed(request, self, error ? error : zsys_sprintf("object %016" PRIx64 " vanished", sid));
    shoal_envelope_t *reply = s_info_reply(request, &committed, message);
    ((shoal_msg_object_reply_t *) reply->body)->instance_id = iid;
    return reply;
}

static shoal_envelope_t *
s_abort(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant,
        const shoal_msg_object_request_t *body)
{
    shoal_objects_upload_t *upload = s_upload_find(self, body->instance_id, tenant);
    if (!upload)
        return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "no add of instance %016" PRIx64 " is in flight "
                                    "here", body->instance_id);
    shoal_objects_upload_abort(self, upload);
    return s_ok(request, "the add of instance %016" PRIx64 " was given up",
                                body->instance_id);
}

static shoal_envelope_t *
s_get(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant,
      const shoal_msg_object_request_t *body)
{
    shoal_msg_object_info_t info;
    shoal_envelope_t *reply = shoal_objects_resolve(self, request, tenant, body, &info);
    return reply ? reply : s_info_reply(request, &info, "OK");
}

static shoal_envelope_t *
s_list(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant,
       const shoal_msg_object_request_t *body)
{
    char prefix[OBJECTS_KEY_MAX], after[OBJECTS_KEY_MAX] = "";
    snprintf(prefix, sizeof prefix, *tenant ? "name/%s/" : "name/", tenant);
    if (*body->start_after)
        snprintf(after, sizeof after, "%s%s", prefix, body->start_after);
    size_t limit = body->limit ? body->limit : SHOAL_SCAN_LIMIT_DEFAULT;
    shoal_kv_list_t list = { 0 };
    if (shoal_oplog_kv_scan(self->oplog, SHOAL_OBJECTS_DATASET, prefix, after, limit + 1, &list))
        return shoal_objects_failed(request, self, zsys_sprintf("cannot scan the catalog: %s", shoal_oplog_error(self->oplog)));
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "OK");
    shoal_msg_object_reply_t *answer = (shoal_msg_object_reply_t *) shoal_envelope_new_body(reply);
    size_t wanted = list.count > limit ? limit : list.count;
    answer->objects = (shoal_msg_object_info_t *) zmalloc((wanted + 1) * sizeof *answer->objects);
    char *error = NULL;
    size_t bytes = 0;
    for (size_t i = 0; i < wanted && !error; i++) {
        shoal_msg_object_info_t binding = { 0 };
        char why[OBJECTS_ERROR_MAX];
        if (shoal_msg_object_info_codec.decode(list.items[i].record.value, list.items[i].record.value_size, &binding,
                                               why, sizeof why)) {
            error = zsys_sprintf("catalog key %s holds no binding: %s", list.items[i].key, why);
            break;
        }
        shoal_msg_object_info_t *info = &answer->objects[answer->count];
        bool found = false;
        if (shoal_objects_object_read(self, binding.storage_id, info, &found, &error) == 0 && found) {
            //  The name it is listed under is the binding's.
            shoal_objects_text_set(&info->name, binding.name);
            uint8_t *encoded = NULL;
            size_t size = 0;
            if (shoal_msg_object_info_codec.encode(info, &encoded, &size, why, sizeof why) == 0)
                bytes += size + SHOAL_PAGE_ELEMENT_OVERHEAD;
            free(encoded);
            if (answer->count && bytes > SHOAL_PAGE_BYTES_MAX) {
                shoal_msg_object_info_codec.clear(info);
                shoal_msg_object_info_codec.clear(&binding);
                wanted = i;
                break;
            }
            answer->count++;
        }
        shoal_msg_object_info_codec.clear(&binding);
    }
    answer->more = list.count > wanted;
    shoal_kv_list_clear(&list);
    if (error) {
        shoal_envelope_destroy(&reply);
        return shoal_objects_failed(request, self, error);
    }
    return reply;
}

static shoal_envelope_t *
s_remove(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant,
         const shoal_msg_object_request_t *body)
{
    shoal_msg_object_info_t info;
    shoal_envelope_t *reply = shoal_objects_resolve(self, request, tenant, body, &info);
    if (reply)
        return reply;
    char message[OBJECTS_ERROR_MAX];
    char *error = NULL;
    if (shoal_objects_object_remove(self, &info, message, sizeof message, &error))
        reply = shoal_objects_failed(request, self, error);
    else
        reply = s_ok(request, "%s", message);
    shoal_msg_object_info_codec.clear(&info);
    return reply;
}

//  A node's drop of its instances of an object another node removes.
static shoal_envelope_t *
s_drop(shoal_objects_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller,
       const shoal_msg_object_request_t *body)
{
    if (!streq(caller->role, SHOAL_ROLE_NODE))
        return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN, "drop is asked by nodes only");
    shoal_objects_drop_t drop;
    char *error = NULL;
    if (shoal_objects_drop_local(self, body->storage_id, &drop, &error))
        return shoal_objects_failed(request, self, error);
    return s_ok(request, "%zu instance(s) removed, %zu waiting for readers",
                                drop.removed, drop.waiting);
}

//  Finishes the removal a remover waits for, once the last reader left.
static void
s_removal_resume(shoal_objects_t *self, const shoal_msg_object_lock_t *lock)
{
    if (lock->readers || !streq(lock->waiter, OBJECTS_HOLDER_REMOVE))
        return;
    char why[OBJECTS_ERROR_MAX];
    char *error = NULL;
    if (shoal_objects_lock_take(self, lock->instance_id, lock->storage_id, OBJECTS_HOLDER_REMOVE, "write", true, why, sizeof why)
        != OBJECTS_GRANTED)
        zsys_warning("objects: the removal of instance %016" PRIx64 " waits on: %s", lock->instance_id, why);
    else
    if (shoal_objects_instance_remove(self, lock->storage_id, lock->instance_id, &error)) {
        zsys_warning("objects: cannot remove instance %016" PRIx64 " after its last reader: %s", lock->instance_id,
                     error);
        free(error);
    }
}

static void
s_opening_destroy(void **item_p)
{
    s_opening_t *opening = (s_opening_t *) *item_p;
    if (opening) {
        shoal_envelope_destroy(&opening->request);
        zframe_destroy(&opening->routing_id);
        free(opening->tenant);
        free(opening->name);
        free(opening->holder);
        shoal_msg_object_info_codec.clear(&opening->info);
        zhashx_destroy(&opening->bad);
        free(opening);
        *item_p = NULL;
    }
}

//  Local INSTANCE of OPENING's object is bad (WHY): its lock goes, it is
//  marked corrupt, and the open never takes it again.
static void
s_opening_bad(shoal_objects_t *self, s_opening_t *opening, const shoal_msg_object_instance_t *instance,
              const char *why)
{
    shoal_objects_lock_release(self, instance->instance_id, opening->holder, NULL);
    shoal_objects_instance_mark_corrupt(self, instance, why);
    char id[32];
    snprintf(id, sizeof id, "%" PRIu64, instance->instance_id);
    zhashx_update(opening->bad, id, (void *) 1);
}

//  The reply to OPENING once it holds INSTANCE (of its object) read-locked.
static shoal_envelope_t *
s_opening_granted(shoal_objects_t *self, s_opening_t *opening, uint64_t iid)
{
    shoal_envelope_t *reply = s_info_reply(opening->request, &opening->info, "opened");
    shoal_msg_object_reply_t *answer = (shoal_msg_object_reply_t *) reply->body;
    answer->instance_id = iid;
    answer->holder = shoal_strdup(opening->holder);
    answer->node = shoal_strdup(self->settings->node_id);
    answer->endpoint = shoal_strdup(self->endpoint);
    answer->granted = true;
    return reply;
}

static void s_open_verified(shoal_objects_t *self, void *waiter, const char *why);

//  Resolves OPENING's object (again) and tries this node's instances of it
//  that are not known bad. Returns the reply that ends the open, or NULL
//  while an instance's bytes are hashed on the verifier (s_open_verified
//  goes on).
static shoal_envelope_t *
s_opening_try(shoal_objects_t *self, s_opening_t *opening)
{
    shoal_msg_object_request_t body = { .name = opening->name, .storage_id = opening->storage_id };
    shoal_msg_object_info_t *info = &opening->info;
    shoal_msg_object_info_codec.clear(info);
    shoal_envelope_t *reply = shoal_objects_resolve(self, opening->request, opening->tenant, &body, info);
    if (reply)
        return reply;
    size_t locked = 0, corrupt = 0, elsewhere = 0;
    const shoal_msg_object_instance_t *granted = NULL;
    char last_why[OBJECTS_ERROR_MAX] = "";
    for (size_t i = 0; i < info->count && !granted && !reply; i++) {
        const shoal_msg_object_instance_t *instance = &info->instances[i];
        if (opening->instance_id && instance->instance_id != opening->instance_id)
            continue;
        if (!streq(instance->node, self->settings->node_id)) {
            elsewhere += instance->state == SHOAL_INSTANCE_COMPLETE;
            continue;
        }
        char id[32];
        snprintf(id, sizeof id, "%" PRIu64, instance->instance_id);
        if (instance->state != SHOAL_INSTANCE_COMPLETE || zhashx_lookup(opening->bad, id)) {
            corrupt += instance->state == SHOAL_INSTANCE_CORRUPT || zhashx_lookup(opening->bad, id);
            continue;
        }
        char why[OBJECTS_ERROR_MAX];
        shoal_objects_lock_result_t taken = shoal_objects_lock_take(self, instance->instance_id, info->storage_id, opening->holder, "read",
                                            false, why, sizeof why);
        if (taken == OBJECTS_FAILED)
            reply = shoal_objects_failed(opening->request, self, zsys_sprintf("cannot read-lock: %s", why));
        else
        if (taken == OBJECTS_REFUSED) {
            locked++;
            snprintf(last_why, sizeof last_why, "%s", why);
        }
        else {
            //  Held now: the file is checked under the lock, so that no
            //  writer changes it between the check and the read; the
            //  verifier looks at it (and hashes it when it must).
            opening->index = i;
            shoal_objects_verify_give(self, instance, opening->verify, opening, s_open_verified, s_opening_destroy);
            return NULL;
        }
    }
    if (!reply && granted)
        reply = s_opening_granted(self, opening, granted->instance_id);
    else
    if (!reply && locked)
        reply = shoal_envelope_reply(opening->request, SHOAL_STATUS_CONFLICT, "object '%s': %s: it is being removed "
                                     "or replaced; resolve its name again rather than spin on it", opening->name,
                                     last_why);
    else
    if (!reply && elsewhere) {
        reply = s_info_reply(opening->request, info, "no good instance here: open it at a node that holds one");
        shoal_msg_object_reply_t *answer = (shoal_msg_object_reply_t *) reply->body;
        answer->node = shoal_strdup(self->settings->node_id);
    }
    else
    if (!reply)
        reply = shoal_envelope_reply(opening->request, SHOAL_STATUS_NOT_FOUND, "object '%s' has no good instance "
                                     "(%zu corrupt here)", opening->name, corrupt);
    return reply;
}

//  The verifier hashed the instance an open (WAITER) waits on: the open
//  is answered, or, the instance bad (WHY), it goes on with the others.
static void
s_open_verified(shoal_objects_t *self, void *waiter, const char *why)
{
    s_opening_t *opening = (s_opening_t *) waiter;
    const shoal_msg_object_instance_t *instance = &opening->info.instances[opening->index];
    shoal_envelope_t *reply;
    if (!why)
        reply = s_opening_granted(self, opening, instance->instance_id);
    else {
        s_opening_bad(self, opening, instance, why);
        //  The name may have moved meanwhile: it is resolved again.
        reply = s_opening_try(self, opening);
        if (!reply)
            return;
    }
    shoal_objects_reply_later(self, opening->routing_id, &reply);
    s_opening_destroy(&waiter);
}

//  Open: answered now, or once the bytes of the instance it takes are
//  hashed (NULL: later).
static shoal_envelope_t *
s_open(shoal_objects_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller, const char *tenant,
       const shoal_msg_object_request_t *body, zframe_t *routing_id)
{
    s_opening_t *opening = (s_opening_t *) zmalloc(sizeof *opening);
    opening->request = shoal_envelope_new(request->type, request->request_id);
    opening->routing_id = zframe_dup(routing_id);
    opening->tenant = shoal_strdup(tenant);
    opening->name = shoal_strdup(body->name);
    opening->storage_id = body->storage_id;
    opening->instance_id = body->instance_id;
    opening->verify = body->verify;
    opening->holder = *body->holder ? shoal_strdup(body->holder)
                    : zsys_sprintf("%s#%" PRIu64, *caller->name ? caller->name : "reader", ++self->holders);
    opening->bad = zhashx_new();
    shoal_envelope_t *reply = s_opening_try(self, opening);
    if (reply) {
        void *item = opening;
        s_opening_destroy(&item);
    }
    return reply;
}

//  Sets *READER_P to whether HOLDER holds a read lock of instance IID here.
//  Returns 0, or -1 when the lock record cannot be read (the store says why).
static int
s_reads(shoal_objects_t *self, uint64_t iid, const char *holder, bool *reader_p)
{
    shoal_msg_object_lock_record_t record = { 0 };
    bool found = false;
    if (shoal_object_store_record_get(self->store, iid, holder, &record, &found))
        return -1;
    *reader_p = found && streq(record.mode, "read");
    shoal_msg_object_lock_record_codec.clear(&record);
    return 0;
}

static shoal_envelope_t *
s_close(shoal_objects_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller,
        const shoal_msg_object_request_t *body)
{
    if (!body->instance_id || !*body->holder)
        return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "a close names the instance and the holder "
                                    "its open gave");
    bool reader = false;
    if (s_reads(self, body->instance_id, body->holder, &reader))
        return shoal_objects_failed(request, self, shoal_strdup(shoal_store_error(self->store)));
    if (!reader)
        return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "%s has instance %016" PRIx64 " not open here",
                                    body->holder, body->instance_id);
    shoal_msg_object_lock_t after = { 0 };
    if (shoal_objects_lock_release(self, body->instance_id, body->holder, &after) < 0)
        return shoal_objects_failed(request, self, shoal_strdup(shoal_store_error(self->store)));
    s_removal_resume(self, &after);
    shoal_msg_object_lock_codec.clear(&after);
    return s_ok(request, "closed");
}

//  A read under a read lock: checked here, read on the worker, answered
//  when it is back (NULL: later).
static shoal_envelope_t *
s_read(shoal_objects_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller, zframe_t *routing_id)
{
    const shoal_msg_object_chunk_t *body = (const shoal_msg_object_chunk_t *) request->body;
    bool reader = false;
    if (s_reads(self, body->instance_id, body->holder, &reader))
        return shoal_objects_failed(request, self, shoal_strdup(shoal_store_error(self->store)));
    if (!reader)
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "'%s' holds no read lock of instance %016" PRIx64
                                    " here: open the object first", body->holder, body->instance_id);
    shoal_msg_object_lock_t lock;
    if (shoal_objects_lock_read_state(self, body->instance_id, 0, &lock))
        return shoal_objects_failed(request, self, shoal_strdup(shoal_store_error(self->store)));
    shoal_objects_io_t *io = (shoal_objects_io_t *) zmalloc(sizeof *io);
    io->kind = OBJECTS_IO_READ;
    io->instance_id = body->instance_id;
    io->offset = body->offset;
    io->size = body->length ? body->length : SHOAL_OBJECT_CHUNK_MAX;
    io->path = shoal_objects_instance_path(self, lock.storage_id, lock.instance_id);
    shoal_msg_object_lock_codec.clear(&lock);
    shoal_objects_io_give(self, io, request, routing_id);
    return NULL;
}

// ---------------------------------------------------------------------------
//  Ids over the protocol

static shoal_envelope_t *
s_ids(shoal_objects_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_object_ids_t *body = (const shoal_msg_object_ids_t *) request->body;
    if (shoal_caller_is_tenant(caller))
        return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN, "ids are allocated for admins");
    size_t count = body->count ? body->count : 1;
    uint64_t *ids = (uint64_t *) zmalloc(count * sizeof *ids);
    char *error = NULL;
    if (shoal_objects_ids(self, body->kind, count, ids, &error)) {
        free(ids);
        return shoal_objects_failed(request, self, error);
    }
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "OK");
    shoal_msg_object_ids_t *answer = (shoal_msg_object_ids_t *) shoal_envelope_new_body(reply);
    answer->kind = body->kind;
    answer->count = (uint32_t) count;
    answer->ids = ids;
    answer->ids_count = count;
    return reply;
}

// ---------------------------------------------------------------------------
//  Guest images, for claims

shoal_envelope_t *
shoal_objects_image_open(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant,
                         const char *name, const char *holder, shoal_objects_image_t *image)
{
    memset(image, 0, sizeof *image);
    shoal_msg_object_request_t body = { .name = (char *) name };
    shoal_msg_object_info_t info;
    shoal_envelope_t *reply = shoal_objects_resolve(self, request, tenant, &body, &info);
    if (reply)
        return reply;
    if (!info.memory_bytes || shoal_checksum_set(&image->checksum, info.checksum, info.checksum_size)
    ||  !image->checksum.size) {
        reply = shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "object '%s' of tenant %s is not a guest "
                                     "image (claim checkpoint makes those): no guest starts from it", name, tenant);
        shoal_msg_object_info_codec.clear(&info);
        return reply;
    }
    image->storage_id = info.storage_id;
    image->size = info.size;
    image->memory_bytes = info.memory_bytes;
    image->disk_bytes = info.disk_bytes;
    image->holder = shoal_strdup(holder);
    size_t complete = 0, locked = 0;
    char why[OBJECTS_ERROR_MAX] = "";
    //  No checksum here: the guest actor checks every byte as it reads.
    for (size_t i = 0; i < info.count && !image->instance_id && !reply; i++) {
        const shoal_msg_object_instance_t *instance = &info.instances[i];
        if (instance->state != SHOAL_INSTANCE_COMPLETE)
            continue;
        complete++;
        if (!streq(instance->node, self->settings->node_id))
            continue;
        shoal_objects_lock_result_t taken = shoal_objects_lock_take(self, instance->instance_id, info.storage_id, holder, "read", false,
                                            why, sizeof why);
        if (taken == OBJECTS_FAILED)
            reply = shoal_objects_failed(request, self, zsys_sprintf("cannot read-lock: %s", why));
        else
        if (taken == OBJECTS_REFUSED)
            locked++;
        else {
            image->instance_id = instance->instance_id;
            image->path = shoal_objects_instance_path(self, info.storage_id, instance->instance_id);
        }
    }
    if (!reply && !image->instance_id && locked)
        reply = shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "object '%s': %s: it is being removed or "
                                     "replaced; resolve its name again", name, why);
    else
    if (!reply && !complete)
        reply = shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "object '%s' of tenant %s has no good instance "
                                     "anywhere", name, tenant);
    shoal_msg_object_info_codec.clear(&info);
    if (reply)
        shoal_objects_image_close(self, image, NULL);
    return reply;
}

void
shoal_objects_image_close(shoal_objects_t *self, shoal_objects_image_t *image, const char *corrupt)
{
    if (image->instance_id && corrupt) {
        shoal_msg_object_info_t info = { 0 };
        char *error = NULL;
        if (shoal_objects_instances_read(self, image->storage_id, &info, &error) == 0) {
            for (size_t i = 0; i < info.count; i++)
                if (info.instances[i].instance_id == image->instance_id)
                    shoal_objects_instance_mark_corrupt(self, &info.instances[i], corrupt);
        }
        free(error);
        shoal_msg_object_info_codec.clear(&info);
    }
    if (image->instance_id) {
        shoal_msg_object_lock_t after = { 0 };
        if (shoal_objects_lock_release(self, image->instance_id, image->holder, &after) >= 0)
            s_removal_resume(self, &after);
        shoal_msg_object_lock_codec.clear(&after);
    }
    free(image->holder);
    free(image->path);
    memset(image, 0, sizeof *image);
}

shoal_envelope_t *
shoal_objects_image_add(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant,
                        const char *name, const char *comment, uint64_t *iid_p, char **path_p)
{
    shoal_objects_upload_t *upload = NULL;
    //  The guest actor hashes the file (shoal_checkpoint_write): not this module.
    shoal_envelope_t *reply = s_upload_begin(self, request, tenant, name, comment, 0, false, SHOAL_CHECKSUM_DEFAULT,
                                             &upload);
    if (reply)
        return reply;
    //  The guest actor writes the file: nothing goes through this module.
    upload->local = true;
    shoal_sink_destroy(&upload->sink);
    *iid_p = upload->iid;
    *path_p = shoal_objects_instance_path(self, upload->sid, upload->iid);
    return NULL;
}

static shoal_objects_upload_t *
s_upload_local(shoal_objects_t *self, uint64_t iid)
{
    char id[32];
    snprintf(id, sizeof id, "%" PRIu64, iid);
    shoal_objects_upload_t *upload = (shoal_objects_upload_t *) zhashx_lookup(self->uploads, id);
    return upload && upload->local ? upload : NULL;
}

shoal_envelope_t *
shoal_objects_image_commit(shoal_objects_t *self, const shoal_envelope_t *request, uint64_t iid, uint64_t size,
                           const shoal_checksum_t *checksum, uint64_t memory_bytes, uint64_t disk_bytes)
{
    shoal_objects_upload_t *upload = s_upload_local(self, iid);
    if (!upload)
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "the add of instance %016" PRIx64 " is gone", iid);
    upload->size = size;
    upload->offset = size;
    upload->memory_bytes = memory_bytes;
    upload->disk_bytes = disk_bytes;
    return shoal_objects_upload_commit(self, request, upload, checksum);
}

void
shoal_objects_image_abort(shoal_objects_t *self, uint64_t iid)
{
    shoal_objects_upload_t *upload = s_upload_local(self, iid);
    if (upload)
        shoal_objects_upload_abort(self, upload);
}

void
shoal_objects_reply_later(shoal_objects_t *self, zframe_t *routing_id, shoal_envelope_t **reply_p)
{
    char error[OBJECTS_ERROR_MAX];
    zmsg_t *msg = shoal_envelope_encode(*reply_p, error, sizeof error);
    if (msg && self->router) {
        zframe_t *to = zframe_dup(routing_id);
        zmsg_prepend(msg, &to);
        zmsg_send(&msg, self->router);
    }
    else
        zsys_error("objects: cannot send a late reply: %s", msg ? "no router" : error);
    zmsg_destroy(&msg);
    shoal_envelope_destroy(reply_p);
}

// ---------------------------------------------------------------------------
//  The module

shoal_objects_t *
shoal_objects_new(const shoal_settings_t *settings, const char *endpoint, zcert_t *cluster, shoal_store_t *store,
                  shoal_oplog_t *oplog, shoal_mesh_t *mesh, shoal_data_written_fn *written, void *arg,
                  char **error_p)
{
    char *dir = zsys_sprintf("%s/%s", settings->data_dir, OBJECTS_DIR);
    if (zsys_dir_create("%s", dir)) {
        *error_p = zsys_sprintf("cannot make %s: %s", dir, strerror(errno));
        free(dir);
        return NULL;
    }
    uint64_t reserved[3] = { 0 };
    for (int kind = SHOAL_OBJECT_ID_STORAGE; kind <= SHOAL_OBJECT_ID_INSTANCE; kind++)
        if (shoal_object_store_ids_reserved(store, (shoal_object_id_kind_t) kind, &reserved[kind])) {
            *error_p = zsys_sprintf("cannot read the ids reserved: %s", shoal_store_error(store));
            free(dir);
            return NULL;
        }
    const char *colon = strrchr(settings->bind, ':');
    char *bind = zsys_sprintf("%.*s:*", (int) (colon - settings->bind), settings->bind);
    shoal_gate_options_t gate = shoal_gate_options(settings);
    shoal_receiver_t *receiver = shoal_receiver_new(bind, endpoint, cluster, &gate, error_p);
    free(bind);
    if (!receiver) {
        free(dir);
        return NULL;
    }
    shoal_objects_t *self = (shoal_objects_t *) zmalloc(sizeof *self);
    self->settings = settings;
    self->endpoint = shoal_strdup(endpoint);
    self->cluster = zcert_dup(cluster);
    self->store = store;
    self->oplog = oplog;
    self->mesh = mesh;
    self->written = written;
    self->written_arg = arg;
    self->receiver = receiver;
    self->dir = dir;
    self->number = shoal_objects_node_number(settings->node_id);
    for (int kind = SHOAL_OBJECT_ID_STORAGE; kind <= SHOAL_OBJECT_ID_INSTANCE; kind++) {
        //  What was reserved may have been given out before a crash: the
        //  counter starts above all of it (1 when nothing was).
        self->reserved[kind] = reserved[kind];
        self->next[kind] = reserved[kind] ? reserved[kind] : 1;
        if (self->reserved[kind] < self->next[kind])
            self->reserved[kind] = self->next[kind];
    }
    self->uploads = zhashx_new();
    zhashx_set_destructor(self->uploads, shoal_objects_upload_destroy);
    self->incoming = zhashx_new();
    zhashx_set_destructor(self->incoming, shoal_objects_incoming_destroy);
    self->replications = zlistx_new();
    zlistx_set_destructor(self->replications, shoal_objects_replication_destroy);
    self->fetches = zlistx_new();
    self->ios = zlistx_new();
    zlistx_set_destructor(self->ios, shoal_objects_io_destroy);
    self->endpoints = zhashx_new();
    zhashx_set_destructor(self->endpoints, (zhashx_destructor_fn *) zstr_free);
    zhashx_set_duplicator(self->endpoints, (zhashx_duplicator_fn *) shoal_strdup);
    return self;
}

void
shoal_objects_destroy(shoal_objects_t **self_p)
{
    if (*self_p) {
        shoal_objects_t *self = *self_p;
        zlistx_destroy(&self->replications);
        if (self->worker && self->loop)
            zloop_reader_end(self->loop, zactor_sock(self->worker));
        if (self->verifier && self->loop)
            zloop_reader_end(self->loop, zactor_sock(self->verifier));
        //  The workers end first (the work in hand finished): then the
        //  work they never sent back, and the adds written, are freed here.
        zactor_destroy(&self->worker);
        zactor_destroy(&self->verifier);
        zhashx_destroy(&self->uploads);
        zlistx_destroy(&self->ios);
        zhashx_destroy(&self->incoming);
        zhashx_destroy(&self->endpoints);
        //  Each fetch is its answer's to free: the mesh, gone before this,
        //  told them all.
        zlistx_destroy(&self->fetches);
        if (self->loop)
            zloop_reader_end(self->loop, shoal_receiver_sock(self->receiver));
        shoal_receiver_destroy(&self->receiver);
        zcert_destroy(&self->cluster);
        free(self->endpoint);
        free(self->dir);
        free(self);
        *self_p = NULL;
    }
}

int
shoal_objects_start(shoal_objects_t *self, zloop_t *loop, zsock_t *router)
{
    self->loop = loop;
    self->router = router;
    self->worker = shoal_worker_new("shoal-objects", shoal_objects_io_run);
    if (!self->worker)
        return -1;
    if (zloop_reader(loop, zactor_sock(self->worker), shoal_objects_worker_readable, self))
        return -1;
    self->verifier = shoal_worker_new("shoal-verify", shoal_objects_io_run);
    if (!self->verifier || zloop_reader(loop, zactor_sock(self->verifier), shoal_objects_worker_readable, self))
        return -1;
    shoal_objects_discard_leftovers(self);
    return zloop_reader(loop, shoal_receiver_sock(self->receiver), shoal_objects_receiver_readable, self);
}

void
shoal_objects_stop(shoal_objects_t *self)
{
    if (!self->loop)
        return;
    zlistx_purge(self->replications);
    zloop_reader_end(self->loop, shoal_receiver_sock(self->receiver));
    if (self->worker)
        zloop_reader_end(self->loop, zactor_sock(self->worker));
    if (self->verifier)
        zloop_reader_end(self->loop, zactor_sock(self->verifier));
    self->loop = NULL;
    self->router = NULL;
}

//  Gives up adds and arrivals nobody spoke of for too long. Called from
//  the node's tick.
void
shoal_objects_tick(shoal_objects_t *self)
{
    int64_t now = zclock_mono();
    zlistx_t *stale = zlistx_new();
    for (shoal_objects_upload_t *upload = (shoal_objects_upload_t *) zhashx_first(self->uploads); upload;
         upload = (shoal_objects_upload_t *) zhashx_next(self->uploads))
        if (!upload->local && now - upload->heard_ms > S_UPLOAD_IDLE_MS)
            zlistx_add_end(stale, upload);
    for (shoal_objects_upload_t *upload = (shoal_objects_upload_t *) zlistx_first(stale); upload; upload = (shoal_objects_upload_t *) zlistx_next(stale)) {
        zsys_warning("objects: the add of instance %016" PRIx64 " sent nothing for %d s: given up", upload->iid,
                     S_UPLOAD_IDLE_MS / 1000);
        shoal_objects_upload_abort(self, upload);
    }
    zlistx_purge(stale);
    int64_t limit = self->settings->move_step_ms > 0 ? self->settings->move_step_ms : OBJECTS_PEER_TIMEOUT_MS;
    for (shoal_objects_incoming_t *incoming = (shoal_objects_incoming_t *) zhashx_first(self->incoming); incoming;
         incoming = (shoal_objects_incoming_t *) zhashx_next(self->incoming))
        if (now - incoming->heard_ms > limit)
            zlistx_add_end(stale, incoming);
    for (shoal_objects_incoming_t *incoming = (shoal_objects_incoming_t *) zlistx_first(stale); incoming;
         incoming = (shoal_objects_incoming_t *) zlistx_next(stale))
        shoal_objects_incoming_end(self, incoming, "its source sent nothing for move/step_timeout_ms");
    zlistx_destroy(&stale);
}

bool
shoal_objects_handles(shoal_msg_type_t type)
{
    return type >= SHOAL_MSG_OBJECT && type <= SHOAL_MSG_OBJECT_IDS;
}

void
shoal_objects_mesh_event(shoal_mesh_event_t event, const char *node_id, const char *endpoint, void *arg)
{
    shoal_objects_t *self = (shoal_objects_t *) arg;
    if (endpoint && *endpoint && (event == SHOAL_MESH_JOINED || event == SHOAL_MESH_ALIVE
                                  || event == SHOAL_MESH_REJOINED))
        zhashx_update(self->endpoints, node_id, (void *) endpoint);
}

shoal_envelope_t *
shoal_objects_handle(shoal_objects_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller,
                     zframe_t *routing_id)
{
    switch (request->type) {
        case SHOAL_MSG_OBJECT_WRITE:
            return s_write(self, request, caller, routing_id);
        case SHOAL_MSG_OBJECT_READ:
            return s_read(self, request, caller, routing_id);
        case SHOAL_MSG_OBJECT_RECEIVE:
            return shoal_objects_receive(self, request, caller);
        case SHOAL_MSG_OBJECT_IDS:
            return s_ids(self, request, caller);
        case SHOAL_MSG_OBJECT:
            break;
        default:
            return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "%s is no object request",
                                        shoal_msg_type_name(request->type));
    }
    const shoal_msg_object_request_t *body = (const shoal_msg_object_request_t *) request->body;
    if (body->op == SHOAL_OBJECT_DROP)
        return s_drop(self, request, caller, body);
    if (body->op == SHOAL_OBJECT_CLOSE)
        return s_close(self, request, caller, body);
    if (body->op == SHOAL_OBJECT_CHECK)
        return shoal_objects_check_request(self, request, caller, body);
    bool required = body->op != SHOAL_OBJECT_LIST && body->op != SHOAL_OBJECT_COMMIT && body->op != SHOAL_OBJECT_ABORT
                 && !(body->storage_id && !*body->name);
    shoal_envelope_t *refusal = NULL;
    const char *tenant = s_tenant(request, caller, body->tenant, required, &refusal);
    if (!tenant)
        return refusal;
    switch (body->op) {
        case SHOAL_OBJECT_ADD: return s_add(self, request, tenant, body);
        case SHOAL_OBJECT_COMMIT: return s_commit(self, request, tenant, body, routing_id);
        case SHOAL_OBJECT_ABORT: return s_abort(self, request, tenant, body);
        case SHOAL_OBJECT_GET: return s_get(self, request, tenant, body);
        case SHOAL_OBJECT_LIST: return s_list(self, request, tenant, body);
        case SHOAL_OBJECT_REMOVE: return s_remove(self, request, tenant, body);
        case SHOAL_OBJECT_OPEN: return s_open(self, request, caller, tenant, body, routing_id);
        case SHOAL_OBJECT_REPLICATE: return shoal_objects_replicate(self, request, tenant, body, routing_id);
        default:
            return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "op %s is not asked this way",
                                        shoal_object_op_name(body->op));
    }
}
