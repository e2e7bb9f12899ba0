/*  shoal_throttle: at most one log line per interval (see shoal_throttle.h).
*/
#include "shoal_throttle.h"

void
shoal_throttle_init(shoal_throttle_t *self, int64_t interval_ms)
{
    self->interval_ms = interval_ms;
    self->last_ms = 0;
    self->held = 0;
}

bool
shoal_throttle_flush(shoal_throttle_t *self, int64_t now_ms, uint64_t *count)
{
    if (self->held == 0 || (self->last_ms && now_ms - self->last_ms < self->interval_ms))
        return false;
    *count = self->held;
    self->held = 0;
    self->last_ms = now_ms;
    return true;
}

bool
shoal_throttle_event(shoal_throttle_t *self, int64_t now_ms, uint64_t *count)
{
    self->held++;
    return shoal_throttle_flush(self, now_ms, count);
}
