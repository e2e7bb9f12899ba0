/*  shoal_client_objects: storage objects, their bytes and their ids. */
#include "shoal_client_internal.h"
#include "shoal_alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

//  How often an open resolves the name again when every instance it found
//  was locked for writing, and how long it pauses at first and at most.
#define S_RESOLVE_TRIES 30
#define S_RESOLVE_PAUSE_MS 5
#define S_RESOLVE_PAUSE_MAX_MS 200
//  Chunks of an add sent before the first of them is answered.
#define S_ADD_WINDOW 8

static shoal_msg_object_request_t *
s_request(shoal_envelope_t **request_p, shoal_object_op_t op, const char *tenant, const char *name)
{
    *request_p = shoal_envelope_new(SHOAL_MSG_OBJECT, 0);
    shoal_msg_object_request_t *body = (shoal_msg_object_request_t *) shoal_envelope_new_body(*request_p);
    body->op = op;
    body->tenant = shoal_strdup(tenant ? tenant : "");
    body->name = shoal_strdup(name ? name : "");
    return body;
}

static void
s_instance_copy(shoal_object_instance_t *to, const shoal_msg_object_instance_t *from)
{
    to->instance_id = from->instance_id;
    to->storage_id = from->storage_id;
    to->node = shoal_strdup(from->node);
    to->uri = shoal_strdup(from->uri);
    to->endpoint = shoal_strdup(from->endpoint);
    shoal_checksum_text(from->checksum, from->checksum_size, to->checksum);
    to->size = from->size;
    to->state = shoal_strdup(shoal_instance_state_name(from->state));
    to->modified_ms = from->modified_ms;
    to->readers = from->readers;
    to->writer = shoal_strdup(from->writer);
    to->waiter = shoal_strdup(from->waiter);
}

static void
s_object_copy(shoal_object_t *to, const shoal_msg_object_info_t *from)
{
    memset(to, 0, sizeof *to);
    to->tenant = shoal_strdup(from->tenant);
    to->name = shoal_strdup(from->name);
    to->storage_id = from->storage_id;
    to->size = from->size;
    shoal_checksum_text(from->checksum, from->checksum_size, to->checksum);
    to->created_ms = from->created_ms;
    to->comment = shoal_strdup(from->comment);
    to->memory_bytes = from->memory_bytes;
    to->disk_bytes = from->disk_bytes;
    to->instances = (shoal_object_instance_t *) shoal_calloc(from->count + 1, sizeof *to->instances);
    to->count = from->count;
    for (size_t i = 0; i < from->count; i++)
        s_instance_copy(&to->instances[i], &from->instances[i]);
}

void
shoal_object_clear(shoal_object_t *object)
{
    for (size_t i = 0; object->instances && i < object->count; i++) {
        shoal_object_instance_t *instance = &object->instances[i];
        free(instance->node);
        free(instance->uri);
        free(instance->endpoint);
        free(instance->state);
        free(instance->writer);
        free(instance->waiter);
    }
    free(object->instances);
    free(object->tenant);
    free(object->name);
    free(object->comment);
    memset(object, 0, sizeof *object);
}

void
shoal_objects_clear(shoal_object_t **objects, size_t count)
{
    for (size_t i = 0; *objects && i < count; i++)
        shoal_object_clear(&(*objects)[i]);
    free(*objects);
    *objects = NULL;
}

void
shoal_object_open_clear(shoal_object_open_t *open)
{
    free(open->holder);
    free(open->node);
    free(open->endpoint);
    memset(open, 0, sizeof *open);
}

//  Copies the first object of a 200 REPLY into OBJECT (may be NULL).
static void
s_reply_object(const shoal_envelope_t *reply, shoal_object_t *object)
{
    const shoal_msg_object_reply_t *body = (const shoal_msg_object_reply_t *) reply->body;
    if (object && body->count)
        s_object_copy(object, &body->objects[0]);
}

int
shoal_client_claim_checkpoint(shoal_client_t *self, const char *id, const char *name, const char *comment,
                              shoal_object_t *object)
{
    if (object)
        memset(object, 0, sizeof *object);
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_CLAIM_CHECKPOINT, 0);
    shoal_msg_claim_checkpoint_t *body = (shoal_msg_claim_checkpoint_t *) shoal_envelope_new_body(request);
    body->id = shoal_strdup(id ? id : "");
    body->name = shoal_strdup(name ? name : "");
    body->comment = shoal_strdup(comment ? comment : "");
    shoal_envelope_t *reply;
    //  The answer waits for the guest's image to be written.
    int rc = shoal_client_call_objects(self, id ? id : "", &request, &reply);
    if (rc == SHOAL_STATUS_OK)
        s_reply_object(reply, object);
    shoal_envelope_destroy(&reply);
    return rc;
}

//  Waits for the answer to one of the add's chunks in flight (IDS, the
//  first *INFLIGHT of them) and takes it off. Answers to earlier calls that
//  timed out are dropped. Returns the answer's status (a refusal is the
//  client's error when TELL), or a negative shoal_error_t when none came.
static int
s_add_answer(shoal_client_t *self, uint64_t *ids, size_t *inflight, bool tell)
{
    while (true) {
        shoal_envelope_t *reply = NULL;
        int rc = shoal_client_receive(self, shoal_client_timeout(self), &reply);
        if (rc == SHOAL_E_TIMEOUT)
            return tell ? shoal_client_no_reply(self, "a chunk of the add") : rc;
        if (rc)
            return rc;
        size_t found = *inflight;
        for (size_t i = 0; i < *inflight && found == *inflight; i++)
            if (ids[i] == reply->request_id)
                found = i;
        //  Id 0 answers a request the node could not decode: the oldest.
        if (found == *inflight && reply->request_id == 0 && *inflight)
            found = 0;
        if (found == *inflight) {
            shoal_envelope_destroy(&reply);
            continue;
        }
        memmove(&ids[found], &ids[found + 1], (*inflight - found - 1) * sizeof *ids);
        (*inflight)--;
        rc = (int) reply->status;
        if (rc != SHOAL_STATUS_OK && tell)
            shoal_client_set_error(self, "%u %s%s%s", reply->status, shoal_status_text(reply->status),
                                   reply->message && *reply->message ? ": " : "", reply->message ? reply->message : "");
        shoal_envelope_destroy(&reply);
        return rc;
    }
}

int
shoal_client_object_add(shoal_client_t *self, const char *tenant, const char *name, uint64_t size,
                        shoal_object_source_fn *source, void *arg, bool update, const char *comment,
                        shoal_object_t *object)
{
    if (object)
        memset(object, 0, sizeof *object);
    shoal_envelope_t *request, *reply;
    shoal_msg_object_request_t *body = s_request(&request, SHOAL_OBJECT_ADD, tenant, name);
    body->size = size;
    body->update = update;
    body->comment = shoal_strdup(comment ? comment : "");
    //  The node hashes the chunks as they arrive, with the algorithm named.
    body->algorithm = SHOAL_CHECKSUM_DEFAULT;
    int rc = shoal_client_call(self, &request, &reply);
    if (rc != SHOAL_STATUS_OK) {
        shoal_envelope_destroy(&reply);
        return rc;
    }
    uint64_t iid = ((const shoal_msg_object_reply_t *) reply->body)->instance_id;
    shoal_envelope_destroy(&reply);
    shoal_hasher_t hash;
    shoal_hasher_init(&hash, SHOAL_CHECKSUM_DEFAULT);
    //  Up to S_ADD_WINDOW chunks go out before the first is answered: the
    //  node writes an add's chunks in the order they came, and answers
    //  each once it is written and hashed. Each answer is still checked;
    //  after a refusal no more go out, and those in flight are waited for.
    uint64_t ids[S_ADD_WINDOW];         //  the chunks in flight, oldest first
    size_t inflight = 0;
    uint64_t offset = 0;
    while ((offset < size && rc == SHOAL_STATUS_OK) || inflight) {
        if (offset < size && rc == SHOAL_STATUS_OK && inflight < S_ADD_WINDOW) {
            size_t chunk = size - offset < SHOAL_OBJECT_CHUNK_MAX ? (size_t) (size - offset) : SHOAL_OBJECT_CHUNK_MAX;
            uint8_t *buffer = (uint8_t *) shoal_malloc(chunk);
            if (source(buffer, chunk, offset, arg)) {
                free(buffer);
                shoal_client_set_error(self, "cannot read the object's bytes at offset %" PRIu64, offset);
                rc = SHOAL_E_INVALID;
                continue;
            }
            shoal_hasher_update(&hash, buffer, chunk);
            request = shoal_envelope_new(SHOAL_MSG_OBJECT_WRITE, 0);
            shoal_msg_object_chunk_t *piece = (shoal_msg_object_chunk_t *) shoal_envelope_new_body(request);
            piece->instance_id = iid;
            piece->offset = offset;
            //  The request takes the buffer with it.
            piece->data = buffer;
            piece->data_size = chunk;
            int sent = shoal_client_send(self, &request, &ids[inflight]);
            if (sent)
                rc = sent;
            else {
                inflight++;
                offset += chunk;
            }
            continue;
        }
        int answered = s_add_answer(self, ids, &inflight, rc == SHOAL_STATUS_OK);
        if (answered != SHOAL_STATUS_OK && rc == SHOAL_STATUS_OK)
            rc = answered;
        //  Nothing more will come: those still in flight are not waited for.
        if (answered < 0)
            inflight = 0;
    }
    shoal_checksum_t checksum;
    shoal_hasher_final(&hash, &checksum);
    if (rc != SHOAL_STATUS_OK) {
        //  The node gives the add up; the error of the failed step stays.
        char *error = shoal_strdup(shoal_client_error(self));
        body = s_request(&request, SHOAL_OBJECT_ABORT, tenant, name);
        body->instance_id = iid;
        shoal_client_call(self, &request, &reply);
        shoal_envelope_destroy(&reply);
        shoal_client_set_error(self, "%s", error);
        free(error);
        return rc;
    }
    body = s_request(&request, SHOAL_OBJECT_COMMIT, tenant, name);
    body->instance_id = iid;
    body->checksum = (uint8_t *) shoal_malloc(checksum.size);
    memcpy(body->checksum, checksum.bytes, checksum.size);
    body->checksum_size = checksum.size;
    rc = shoal_client_call(self, &request, &reply);
    if (rc == SHOAL_STATUS_OK)
        s_reply_object(reply, object);
    shoal_envelope_destroy(&reply);
    return rc;
}

static int
s_file_source(void *buffer, size_t size, uint64_t offset, void *arg)
{
    int fd = *(int *) arg;
    size_t got = 0;
    while (got < size) {
        ssize_t count = pread(fd, (uint8_t *) buffer + got, size - got, (off_t) (offset + got));
        if (count < 0 && errno == EINTR)
            continue;
        if (count <= 0)
            return -1;
        got += (size_t) count;
    }
    return 0;
}

int
shoal_client_object_add_file(shoal_client_t *self, const char *tenant, const char *name, const char *path,
                             bool update, const char *comment, shoal_object_t *object)
{
    if (object)
        memset(object, 0, sizeof *object);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat info;
    if (fd < 0 || fstat(fd, &info) != 0) {
        shoal_client_set_error(self, "cannot read %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return SHOAL_E_INVALID;
    }
    int rc = shoal_client_object_add(self, tenant, name, (uint64_t) info.st_size, s_file_source, &fd, update,
                                     comment, object);
    close(fd);
    return rc;
}

int
shoal_client_object_get(shoal_client_t *self, const char *tenant, const char *name, shoal_object_t *object)
{
    memset(object, 0, sizeof *object);
    shoal_envelope_t *request, *reply;
    s_request(&request, SHOAL_OBJECT_GET, tenant, name);
    int rc = shoal_client_call(self, &request, &reply);
    if (rc == SHOAL_STATUS_OK)
        s_reply_object(reply, object);
    shoal_envelope_destroy(&reply);
    return rc;
}

int
shoal_client_object_list(shoal_client_t *self, const char *tenant, shoal_object_t **objects, size_t *count)
{
    *objects = NULL;
    *count = 0;
    char *after = shoal_strdup("");
    int rc = SHOAL_STATUS_OK;
    bool more = true;
    while (more && rc == SHOAL_STATUS_OK) {
        shoal_envelope_t *request, *reply;
        shoal_msg_object_request_t *body = s_request(&request, SHOAL_OBJECT_LIST, tenant, NULL);
        free(body->start_after);
        body->start_after = after;
        after = NULL;
        rc = shoal_client_call(self, &request, &reply);
        more = false;
        if (rc == SHOAL_STATUS_OK) {
            const shoal_msg_object_reply_t *answer = (const shoal_msg_object_reply_t *) reply->body;
            *objects = (shoal_object_t *) shoal_realloc(*objects, (*count + answer->count + 1) * sizeof **objects);
            for (size_t i = 0; i < answer->count; i++)
                s_object_copy(&(*objects)[(*count)++], &answer->objects[i]);
            more = answer->more && answer->count;
            if (more)
                after = shoal_strdup(answer->objects[answer->count - 1].name);
        }
        shoal_envelope_destroy(&reply);
    }
    free(after);
    if (rc != SHOAL_STATUS_OK)
        shoal_objects_clear(objects, *count), *count = 0;
    return rc;
}

int
shoal_client_object_remove(shoal_client_t *self, const char *tenant, const char *name)
{
    shoal_envelope_t *request, *reply;
    s_request(&request, SHOAL_OBJECT_REMOVE, tenant, name);
    int rc = shoal_client_call(self, &request, &reply);
    shoal_envelope_destroy(&reply);
    return rc;
}

int
shoal_client_object_replicate(shoal_client_t *self, const char *tenant, const char *name, uint32_t copies,
                              uint32_t *held_p)
{
    shoal_envelope_t *request, *reply;
    shoal_msg_object_request_t *body = s_request(&request, SHOAL_OBJECT_REPLICATE, tenant, name);
    body->copies = copies;
    int rc = shoal_client_call_objects(self, NULL, &request, &reply);
    if (rc == SHOAL_STATUS_OK && held_p)
        *held_p = ((const shoal_msg_object_reply_t *) reply->body)->copies;
    shoal_envelope_destroy(&reply);
    return rc;
}

//  Asks CLIENT to open NAME (INSTANCE_ID 0: any good one there). Returns
//  the status, with OPEN filled when granted and *REPLY_P the reply.
static int
s_open_at(shoal_client_t *client, const char *tenant, const char *name, uint64_t instance_id, const char *holder,
          bool verify, shoal_envelope_t **reply_p)
{
    shoal_envelope_t *request;
    shoal_msg_object_request_t *body = s_request(&request, SHOAL_OBJECT_OPEN, tenant, name);
    body->instance_id = instance_id;
    body->holder = shoal_strdup(holder ? holder : "");
    body->verify = verify;
    return shoal_client_call(client, &request, reply_p);
}

static void
s_open_fill(shoal_object_open_t *open, const shoal_msg_object_reply_t *answer)
{
    memset(open, 0, sizeof *open);
    const shoal_msg_object_info_t *info = &answer->objects[0];
    open->storage_id = info->storage_id;
    open->instance_id = answer->instance_id;
    open->size = info->size;
    shoal_checksum_text(info->checksum, info->checksum_size, open->checksum);
    open->holder = shoal_strdup(answer->holder);
    open->node = shoal_strdup(answer->node);
    open->endpoint = shoal_strdup(answer->endpoint);
}

int
shoal_client_object_open(shoal_client_t *self, const char *tenant, const char *name, const char *holder, bool verify,
                         shoal_object_open_t *open)
{
    memset(open, 0, sizeof *open);
    int pause_ms = S_RESOLVE_PAUSE_MS;
    int rc = SHOAL_STATUS_CONFLICT;
    for (int attempt = 0; attempt < S_RESOLVE_TRIES; attempt++) {
        if (attempt) {
            //  Each try resolves the name again: an instance refused for a
            //  writer may be going, and the name may be bound elsewhere now.
            zclock_sleep(pause_ms);
            pause_ms = pause_ms * 2 > S_RESOLVE_PAUSE_MAX_MS ? S_RESOLVE_PAUSE_MAX_MS : pause_ms * 2;
        }
        shoal_envelope_t *reply = NULL;
        rc = s_open_at(self, tenant, name, 0, holder, verify, &reply);
        if (rc != SHOAL_STATUS_OK) {
            shoal_envelope_destroy(&reply);
            if (rc == SHOAL_STATUS_CONFLICT)
                continue;
            return rc;
        }
        const shoal_msg_object_reply_t *answer = (const shoal_msg_object_reply_t *) reply->body;
        if (answer->granted) {
            s_open_fill(open, answer);
            shoal_envelope_destroy(&reply);
            return SHOAL_STATUS_OK;
        }
        //  No good instance at this node: the nodes that hold one.
        const shoal_msg_object_info_t *info = &answer->objects[0];
        for (size_t i = 0; i < info->count && !open->holder; i++) {
            const shoal_msg_object_instance_t *instance = &info->instances[i];
            if (instance->state != SHOAL_INSTANCE_COMPLETE || !*instance->endpoint)
                continue;
            shoal_client_t *there = shoal_client_at(self, instance->endpoint);
            if (!there)
                continue;
            shoal_envelope_t *opened = NULL;
            rc = s_open_at(there, tenant, name, instance->instance_id, holder, verify, &opened);
            if (rc == SHOAL_STATUS_OK && ((const shoal_msg_object_reply_t *) opened->body)->granted) {
                s_open_fill(open, (const shoal_msg_object_reply_t *) opened->body);
                free(open->endpoint);
                open->endpoint = shoal_strdup(instance->endpoint);
            }
            else
                shoal_client_set_error(self, "%s", shoal_client_error(there));
            shoal_envelope_destroy(&opened);
        }
        shoal_envelope_destroy(&reply);
        if (open->holder)
            return SHOAL_STATUS_OK;
        rc = SHOAL_STATUS_CONFLICT;
    }
    return rc;
}

int
shoal_client_object_read(shoal_client_t *self, const shoal_object_open_t *open, uint64_t offset, void *buffer,
                         size_t size, size_t *got_p)
{
    *got_p = 0;
    shoal_client_t *there = open->endpoint && *open->endpoint ? shoal_client_at(self, open->endpoint) : self;
    if (!there)
        return SHOAL_E_UNREACHABLE;
    int rc = SHOAL_STATUS_OK;
    while (*got_p < size && rc == SHOAL_STATUS_OK) {
        shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_OBJECT_READ, 0), *reply;
        shoal_msg_object_chunk_t *body = (shoal_msg_object_chunk_t *) shoal_envelope_new_body(request);
        body->instance_id = open->instance_id;
        body->holder = shoal_strdup(open->holder);
        body->offset = offset + *got_p;
        size_t want = size - *got_p;
        body->length = (uint32_t) (want < SHOAL_OBJECT_CHUNK_MAX ? want : SHOAL_OBJECT_CHUNK_MAX);
        rc = shoal_client_call(there, &request, &reply);
        if (rc == SHOAL_STATUS_OK) {
            const shoal_msg_object_chunk_t *chunk = (const shoal_msg_object_chunk_t *) reply->body;
            if (chunk->data_size)
                memcpy((uint8_t *) buffer + *got_p, chunk->data, chunk->data_size);
            *got_p += chunk->data_size;
            if (chunk->last || !chunk->data_size) {
                shoal_envelope_destroy(&reply);
                break;
            }
        }
        else
        if (there != self)
            shoal_client_set_error(self, "%s", shoal_client_error(there));
        shoal_envelope_destroy(&reply);
    }
    return rc;
}

int
shoal_client_object_close_instance(shoal_client_t *self, const char *endpoint, uint64_t instance_id,
                                   const char *holder)
{
    shoal_client_t *there = endpoint && *endpoint ? shoal_client_at(self, endpoint) : self;
    if (!there)
        return SHOAL_E_UNREACHABLE;
    shoal_envelope_t *request, *reply;
    shoal_msg_object_request_t *body = s_request(&request, SHOAL_OBJECT_CLOSE, NULL, NULL);
    body->instance_id = instance_id;
    body->holder = shoal_strdup(holder ? holder : "");
    int rc = shoal_client_call(there, &request, &reply);
    if (there != self)
        shoal_client_set_error(self, "%s", shoal_client_error(there));
    shoal_envelope_destroy(&reply);
    return rc;
}

int
shoal_client_object_close(shoal_client_t *self, shoal_object_open_t *open)
{
    int rc = shoal_client_object_close_instance(self, open->endpoint, open->instance_id, open->holder);
    if (rc == SHOAL_STATUS_OK)
        shoal_object_open_clear(open);
    return rc;
}

int
shoal_client_object_ids(shoal_client_t *self, const char *kind, size_t count, uint64_t *ids)
{
    shoal_object_id_kind_t which = kind && streq(kind, "storage") ? SHOAL_OBJECT_ID_STORAGE
                                 : kind && streq(kind, "instance") ? SHOAL_OBJECT_ID_INSTANCE : 0;
    if (!which || count == 0 || count > SHOAL_OBJECT_IDS_MAX) {
        shoal_client_set_error(self, "ids: kind '%s' (storage or instance) and a count of 1 to %d", kind ? kind : "",
                               SHOAL_OBJECT_IDS_MAX);
        return SHOAL_E_INVALID;
    }
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_OBJECT_IDS, 0), *reply;
    shoal_msg_object_ids_t *body = (shoal_msg_object_ids_t *) shoal_envelope_new_body(request);
    body->kind = which;
    body->count = (uint32_t) count;
    int rc = shoal_client_call(self, &request, &reply);
    if (rc == SHOAL_STATUS_OK) {
        const shoal_msg_object_ids_t *answer = (const shoal_msg_object_ids_t *) reply->body;
        if (answer->ids_count != count) {
            shoal_client_set_error(self, "ids: %zu came for %zu asked", answer->ids_count, count);
            rc = SHOAL_E_BAD_REPLY;
        }
        else
            memcpy(ids, answer->ids, count * sizeof *ids);
    }
    shoal_envelope_destroy(&reply);
    return rc;
}

int
shoal_client_object_check(shoal_client_t *self, bool repair, shoal_object_finding_t **findings, size_t *count)
{
    *findings = NULL;
    *count = 0;
    shoal_envelope_t *request, *reply;
    shoal_msg_object_request_t *body = s_request(&request, SHOAL_OBJECT_CHECK, NULL, NULL);
    body->repair = repair;
    int rc = shoal_client_call(self, &request, &reply);
    if (rc == SHOAL_STATUS_OK) {
        const shoal_msg_object_reply_t *answer = (const shoal_msg_object_reply_t *) reply->body;
        *findings = (shoal_object_finding_t *) shoal_calloc(answer->findings_count + 1, sizeof **findings);
        for (size_t i = 0; i < answer->findings_count; i++) {
            (*findings)[i].key = shoal_strdup(answer->findings[i].key);
            (*findings)[i].what = shoal_strdup(answer->findings[i].what);
            (*findings)[i].repaired = answer->findings[i].repaired;
        }
        *count = answer->findings_count;
    }
    shoal_envelope_destroy(&reply);
    return rc;
}

void
shoal_object_findings_clear(shoal_object_finding_t **findings, size_t count)
{
    for (size_t i = 0; *findings && i < count; i++) {
        free((*findings)[i].key);
        free((*findings)[i].what);
    }
    free(*findings);
    *findings = NULL;
}
