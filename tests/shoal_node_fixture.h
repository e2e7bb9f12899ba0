/*  shoal_node_fixture: one real shoald for a test, started and reached as a
    user would: its own data directory under the test directory, a loopback
    port, the cluster and admin keys it generates at first start.
*/
#ifndef SHOAL_NODE_FIXTURE_H_INCLUDED
#define SHOAL_NODE_FIXTURE_H_INCLUDED

#include <stdbool.h>
#include <sys/types.h>

#include "shoal.h"

//  Room for a directory under the test directory, and for a file below it.
#define SHOAL_FIXTURE_DIR_MAX 4200
#define SHOAL_FIXTURE_PATH_MAX 4300

typedef struct {
    pid_t pid;                                  //  the running shoald, or the last one
    char name[64];                              //  its node id
    char endpoint[64];                          //  tcp://127.0.0.1:PORT
    char data_dir[SHOAL_FIXTURE_DIR_MAX];        //  TESTDIR/NAME
    char log_path[SHOAL_FIXTURE_DIR_MAX];        //  TESTDIR/NAME.log, appended across restarts
    char config_path[SHOAL_FIXTURE_PATH_MAX];   //  passed with -c when the file exists
    char admin_cert[SHOAL_FIXTURE_PATH_MAX];    //  the admin key the node generated
    char cluster_cert[SHOAL_FIXTURE_PATH_MAX];  //  the cluster key the node generated
} shoal_node_fixture_t;

//  Lays out node NAME under the test directory on PORT (0: a free one). The
//  config path defaults to TESTDIR/NAME.cfg; nothing is started.
void shoal_node_fixture_init(shoal_node_fixture_t *node, const char *name, int port);

//  Starts shoald (again, on the same port and directory, after a stop) with
//  EXTRA ("K=V" strings, NULL-terminated, may be NULL) in its environment,
//  and waits until it answers status to its admin key. False when it exits
//  or does not answer within 15 s.
bool shoal_node_fixture_start(shoal_node_fixture_t *node, char *const extra[]);

//  A key NAME of tenant TENANT in the test's directory (NAME.cert), its public
//  half in NODE's clients directory; returned (the caller frees) once the
//  running node admits it, or NULL when it cannot be made or is not admitted
//  within 15 s.
char *shoal_node_fixture_tenant_key(const shoal_node_fixture_t *node, const char *name, const char *tenant);

//  Ends the guest processes NODE started, by the pids their pid files name:
//  the test's own guests, and no other process.
void shoal_node_fixture_guests_kill(const shoal_node_fixture_t *node);

//  A client of NODE holding CERT, waiting TIMEOUT_MS per call; NULL when
//  CERT cannot be read.
shoal_client_t *shoal_node_fixture_client(const shoal_node_fixture_t *node, const char *cert, int timeout_ms);

#endif
