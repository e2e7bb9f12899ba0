/*  shoal_throttle: at most one log line per interval for events a peer can
    cause at will (refused handshakes, refused connections).

    A hostile or broken client can make a node refuse it thousands of times
    a second; a line for each would fill the disk and bury everything else.
    The first event of a quiet spell is logged at once; those that follow
    within the interval are only counted, and the next line says how many
    there were. A value type: it lives inside the struct of whoever logs.
*/
#ifndef SHOAL_THROTTLE_H_INCLUDED
#define SHOAL_THROTTLE_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    int64_t interval_ms;        //  the shortest time between two lines (0: a line per event)
    int64_t last_ms;            //  monotonic time of the last line, 0 before the first
    uint64_t held;              //  events counted since the last line
} shoal_throttle_t;

void shoal_throttle_init(shoal_throttle_t *self, int64_t interval_ms);

//  Counts one event at NOW_MS (a monotonic clock). True when a line may be
//  logged now; *COUNT is then the number of events it stands for, this one
//  included, and the count starts again.
bool shoal_throttle_event(shoal_throttle_t *self, int64_t now_ms, uint64_t *count);

//  For a periodic check: true when events were held back and the interval
//  has passed since the last line; *COUNT as above.
bool shoal_throttle_flush(shoal_throttle_t *self, int64_t now_ms, uint64_t *count);

#endif
