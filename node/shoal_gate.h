/*  shoal_gate: keeps connections that never authenticate from holding a
    CURVE server's door shut.

    A TCP connection costs the node a file descriptor from accept() on,
    long before the CurveZMQ handshake says who is there; a client that
    connects and sends nothing holds it as long as it likes. The gate
    watches a bound CURVE server (the node's ROUTER, the move receiver's)
    through libzmq's socket monitor and closes connections that are not
    authenticated in time, or that are more than the caps allow. See the
    design note in shoal_gate.c.
*/
#ifndef SHOAL_GATE_H_INCLUDED
#define SHOAL_GATE_H_INCLUDED

#include <czmq.h>
#include <stdint.h>

#include "shoal_config.h"

typedef struct {
    int64_t handshake_timeout_ms;   //  a connection not authenticated by then is closed
    int64_t max_handshakes;         //  connections not yet authenticated, in all
    int64_t max_per_address;        //  the same, from one source address
    int64_t throttle_ms;            //  one log line per this long about refusals (0: each)
} shoal_gate_options_t;

//  The gate's options from a node's settings (security/handshake_timeout_ms,
//  security/max_handshakes, security/max_handshakes_per_address,
//  log/throttle_ms).
shoal_gate_options_t shoal_gate_options(const shoal_settings_t *settings);

//  Sets SOCKET's handshake deadline and starts watching it. NAME says whose
//  door it is in log lines ("node", "move receiver"). Call it from the
//  thread that owns SOCKET, before SOCKET binds, so that no connection
//  passes unseen. Returns NULL (with a log line) when the monitor cannot
//  be started. Destroy the gate before SOCKET.
zactor_t *shoal_gate_new(zsock_t *socket, const char *name, const shoal_gate_options_t *options);

#endif
