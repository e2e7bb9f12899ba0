/*  shoal_admission: limits, counters and reservations. */
#include "shoal_admission.h"
#include "shoal_proto.h"
#include "shoal_metrics.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <sys/statvfs.h>

#define ADMISSION_MB (1024 * 1024)

struct _shoal_admission_t {
    const shoal_settings_t *settings;   //  the node's live settings (borrowed)
    shoal_claim_store_t *claims;        //  the stored counters (borrowed)
    shoal_counter_record_t reserved;    //  reservations of the whole node
    zhashx_t *tenants;                  //  tenant -> its shoal_counter_record_t of reservations
    shoal_metrics_t *metrics;           //  counts the refusals (borrowed; may be NULL)
    char *draining;                     //  why new claims and incoming moves are refused (NULL: they are not)
};

shoal_admission_t *
shoal_admission_new(const shoal_settings_t *settings, shoal_claim_store_t *claims)
{
    shoal_admission_t *self = (shoal_admission_t *) zmalloc(sizeof *self);
    self->settings = settings;
    self->claims = claims;
    self->tenants = zhashx_new();
    zhashx_set_destructor(self->tenants, shoal_free_item);
    return self;
}

void
shoal_admission_destroy(shoal_admission_t **self_p)
{
    if (*self_p) {
        shoal_admission_t *self = *self_p;
        zhashx_destroy(&self->tenants);
        free(self->draining);
        free(self);
        *self_p = NULL;
    }
}

void
shoal_admission_set_metrics(shoal_admission_t *self, shoal_metrics_t *metrics)
{
    self->metrics = metrics;
}

shoal_counter_record_t
shoal_admission_reserved(shoal_admission_t *self, const char *tenant)
{
    if (!tenant)
        return self->reserved;
    shoal_counter_record_t *held = (shoal_counter_record_t *) zhashx_lookup(self->tenants, tenant);
    shoal_counter_record_t none = { 0, 0, 0 };
    return held ? *held : none;
}

zlistx_t *
shoal_admission_reserved_tenants(shoal_admission_t *self)
{
    zlistx_t *tenants = zhashx_keys(self->tenants);
    zlistx_set_duplicator(tenants, (zlistx_duplicator_fn *) shoal_strdup);
    return tenants;
}

uint32_t
shoal_admission_check(shoal_admission_t *self, const char *tenant, uint64_t memory_bytes, bool new_claim,
                      char *message, size_t message_size)
{
    if (new_claim && self->draining) {
        snprintf(message, message_size, "%s", self->draining);
        return SHOAL_STATUS_UNAVAILABLE;
    }
    shoal_counter_record_t node, mine;
    if (shoal_claim_store_counters(self->claims, NULL, &node)
    ||  shoal_claim_store_counters(self->claims, tenant, &mine)) {
        snprintf(message, message_size, "cannot read the counters: %s", shoal_claim_store_error(self->claims));
        return SHOAL_STATUS_INTERNAL;
    }
    shoal_counter_record_t node_held = shoal_admission_reserved(self, NULL);
    shoal_counter_record_t mine_held = shoal_admission_reserved(self, tenant);
    const shoal_settings_t *settings = self->settings;
    uint64_t claims = node.claims + node_held.claims;
    uint64_t tenant_claims = mine.claims + mine_held.claims;
    uint64_t running = node.running + node_held.running;
    uint64_t memory = node.memory_bytes + node_held.memory_bytes;
    uint64_t memory_limit = (uint64_t) settings->memory_mb * ADMISSION_MB;
    if (new_claim && claims + 1 > (uint64_t) settings->max_claims) {
        snprintf(message, message_size, "limits/max_claims: the node holds %" PRIu64 " of %" PRId64
                 " claims (%" PRIu64 " reserved)", claims, settings->max_claims, node_held.claims);
        shoal_metrics_refused(self->metrics, SHOAL_REFUSED_MAX_CLAIMS);
        return SHOAL_STATUS_TOO_MANY;
    }
    if (new_claim && tenant_claims + 1 > (uint64_t) settings->tenant_max_claims) {
        snprintf(message, message_size, "limits/tenant_max_claims: tenant %s holds %" PRIu64 " of %" PRId64
                 " claims on this node (%" PRIu64 " reserved)", tenant, tenant_claims,
                 settings->tenant_max_claims, mine_held.claims);
        shoal_metrics_refused(self->metrics, SHOAL_REFUSED_TENANT_MAX_CLAIMS);
        return SHOAL_STATUS_TOO_MANY;
    }
    if (running + 1 > (uint64_t) settings->max_running) {
        snprintf(message, message_size, "limits/max_running: %" PRIu64 " of %" PRId64
                 " claims run on this node (%" PRIu64 " reserved)", running, settings->max_running,
                 node_held.running);
        shoal_metrics_refused(self->metrics, SHOAL_REFUSED_MAX_RUNNING);
        return SHOAL_STATUS_TOO_MANY;
    }
    if (memory + memory_bytes > memory_limit || memory + memory_bytes < memory) {
        snprintf(message, message_size, "limits/memory_mb: %" PRIu64 " bytes more would pass %" PRIu64
                 " of %" PRIu64 " bytes in use (%" PRIu64 " reserved)", memory_bytes, memory, memory_limit,
                 node_held.memory_bytes);
        shoal_metrics_refused(self->metrics, SHOAL_REFUSED_MEMORY);
        return SHOAL_STATUS_NO_SPACE;
    }
    return SHOAL_STATUS_OK;
}

uint32_t
shoal_admission_check_guest(shoal_admission_t *self, const char *guests_dir, uint64_t disk_bytes,
                            uint64_t rate, char *message, size_t message_size)
{
    const shoal_settings_t *settings = self->settings;
    uint64_t rate_limit = (uint64_t) settings->guest_rate_mb * ADMISSION_MB;
    if (rate > rate_limit) {
        snprintf(message, message_size, "limits/guest_rate_mb: a load of %" PRIu64 " bytes/s exceeds the cap of %"
                 PRId64 " MiB/s (%" PRIu64 " bytes/s)", rate, settings->guest_rate_mb, rate_limit);
        shoal_metrics_refused(self->metrics, SHOAL_REFUSED_GUEST_RATE);
        return SHOAL_STATUS_BAD_REQUEST;
    }
    if (disk_bytes == 0)
        return SHOAL_STATUS_OK;
    uint64_t disk_limit = (uint64_t) settings->disk_mb * ADMISSION_MB;
    if (disk_bytes > disk_limit) {
        snprintf(message, message_size, "limits/disk_mb: a disk of %" PRIu64 " bytes exceeds the limit of %"
                 PRId64 " MiB (%" PRIu64 " bytes)", disk_bytes, settings->disk_mb, disk_limit);
        shoal_metrics_refused(self->metrics, SHOAL_REFUSED_DISK);
        return SHOAL_STATUS_NO_SPACE;
    }
    //  The space is asked of the file system the guest's disk goes to; a
    //  disk that cannot fit would fail half made, and leave a claim in error.
    struct statvfs space;
    if (statvfs(guests_dir, &space) != 0) {
        snprintf(message, message_size, "cannot read the free space of %s: %s", guests_dir, strerror(errno));
        return SHOAL_STATUS_INTERNAL;
    }
    uint64_t free_bytes = (uint64_t) space.f_bavail * (uint64_t) space.f_frsize;
    if (disk_bytes > free_bytes) {
        snprintf(message, message_size, "no space: a disk of %" PRIu64 " bytes does not fit the %" PRIu64
                 " bytes free in %s", disk_bytes, free_bytes, guests_dir);
        shoal_metrics_refused(self->metrics, SHOAL_REFUSED_NO_SPACE);
        return SHOAL_STATUS_NO_SPACE;
    }
    return SHOAL_STATUS_OK;
}

//  Adds SIGN (1 or -1) reservations of MEMORY_BYTES to HELD.
static void
s_hold(shoal_counter_record_t *held, int sign, uint64_t memory_bytes)
{
    if (sign > 0) {
        held->claims++;
        held->running++;
        held->memory_bytes += memory_bytes;
    }
    else {
        held->claims -= held->claims ? 1 : 0;
        held->running -= held->running ? 1 : 0;
        held->memory_bytes -= held->memory_bytes >= memory_bytes ? memory_bytes : held->memory_bytes;
    }
}

//  Adds a reservation of TENANT for MEMORY_BYTES, unchecked.
static void
s_reserve(shoal_admission_t *self, const char *tenant, uint64_t memory_bytes)
{
    shoal_counter_record_t *held = (shoal_counter_record_t *) zhashx_lookup(self->tenants, tenant);
    if (!held) {
        held = (shoal_counter_record_t *) zmalloc(sizeof *held);
        zhashx_insert(self->tenants, tenant, held);
    }
    s_hold(held, 1, memory_bytes);
    s_hold(&self->reserved, 1, memory_bytes);
}

void
shoal_admission_hold(shoal_admission_t *self, const char *tenant, uint64_t memory_bytes)
{
    s_reserve(self, tenant, memory_bytes);
}

uint32_t
shoal_admission_recheck_memory(shoal_admission_t *self, const char *tenant, uint64_t memory_bytes,
                               char *message, size_t message_size)
{
    shoal_counter_record_t node;
    if (shoal_claim_store_counters(self->claims, NULL, &node)) {
        snprintf(message, message_size, "cannot read the counters: %s", shoal_claim_store_error(self->claims));
        return SHOAL_STATUS_INTERNAL;
    }
    //  The reservation being rechecked is in the held memory already.
    uint64_t memory = node.memory_bytes + self->reserved.memory_bytes;
    uint64_t memory_limit = (uint64_t) self->settings->memory_mb * ADMISSION_MB;
    if (memory > memory_limit) {
        snprintf(message, message_size, "limits/memory_mb: %" PRIu64 " bytes in use with this move's %" PRIu64
                 " pass the limit of %" PRIu64 " bytes", memory, memory_bytes, memory_limit);
        shoal_metrics_refused(self->metrics, SHOAL_REFUSED_MEMORY);
        return SHOAL_STATUS_NO_SPACE;
    }
    return SHOAL_STATUS_OK;
}

uint32_t
shoal_admission_reserve(shoal_admission_t *self, const char *tenant, uint64_t memory_bytes,
                        char *message, size_t message_size)
{
    uint32_t status = shoal_admission_check(self, tenant, memory_bytes, true, message, message_size);
    if (status != SHOAL_STATUS_OK)
        return status;
    s_reserve(self, tenant, memory_bytes);
    return SHOAL_STATUS_OK;
}

void
shoal_admission_unreserve(shoal_admission_t *self, const char *tenant, uint64_t memory_bytes)
{
    shoal_counter_record_t *held = (shoal_counter_record_t *) zhashx_lookup(self->tenants, tenant);
    //  Giving back what was never held is a caller's bug.
    assert(held && held->claims > 0);
    s_hold(held, -1, memory_bytes);
    s_hold(&self->reserved, -1, memory_bytes);
    if (held->claims == 0)
        zhashx_delete(self->tenants, tenant);
}

void
shoal_admission_set_draining(shoal_admission_t *self, const char *reason)
{
    free(self->draining);
    self->draining = reason ? shoal_strdup(reason) : NULL;
}

int
shoal_admission_capacity(shoal_admission_t *self, shoal_msg_capacity_t *capacity)
{
    shoal_counter_record_t node;
    if (shoal_claim_store_counters(self->claims, NULL, &node))
        return -1;
    const shoal_settings_t *settings = self->settings;
    capacity->draining = self->draining != NULL;
    capacity->max_claims = (uint64_t) settings->max_claims;
    capacity->max_running = (uint64_t) settings->max_running;
    capacity->memory_limit_bytes = (uint64_t) settings->memory_mb * ADMISSION_MB;
    capacity->claims = node.claims + self->reserved.claims;
    capacity->running = node.running + self->reserved.running;
    capacity->memory_bytes = node.memory_bytes + self->reserved.memory_bytes;
    return 0;
}
