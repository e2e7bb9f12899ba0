/*  shoal_node: one shoal node, run as a czmq actor with one zloop.

    shoal_node_new does everything that can fail at start (data directory,
    keys, store, ZAP handler, bind) in the caller's thread, so that shoald can
    report a failure and exit with a clear message. shoal_node_actor then takes
    the node over and runs its reactor until $TERM.
*/
#ifndef SHOAL_NODE_H_INCLUDED
#define SHOAL_NODE_H_INCLUDED

#include <czmq.h>

#include "shoal_config.h"

typedef struct _shoal_node_t shoal_node_t;

//  Prepares a node with SETTINGS (taken: its contents move into the node and
//  it is left zeroed). CONFIG_PATH, when not NULL, is re-read on reload.
//  Returns NULL on failure with *ERROR_P (caller frees) saying what failed.
shoal_node_t *shoal_node_new(shoal_settings_t *settings, const char *config_path, char **error_p);

void shoal_node_destroy(shoal_node_t **self_p);

//  The endpoint the node is reachable at (its advertised endpoint with the
//  bound port).
const char *shoal_node_endpoint(shoal_node_t *self);

//  The admin client certificate kept in the data directory (made at first
//  start when keys are generated), or NULL when there is none.
const char *shoal_node_admin_cert(shoal_node_t *self);

//  The actor body: ARGS is a shoal_node_t that the actor takes over and
//  destroys when it ends. Commands on the pipe:
//    RELOAD  re-read the configuration and apply its reloadable keys
//            (answers a signal: 0 applied, 1 refused)
//    $TERM   stop: the store is closed cleanly before the actor returns
void shoal_node_actor(zsock_t *pipe, void *args);

#endif
