/*  shoal_config: shoald's settings, from defaults, a ZPL file and the environment.

    Every key has one row in the defaults table (shoal_config.c): its type,
    default, allowed range and whether a running node may reload it. A value is
    taken from, in rising precedence, the table, the ZPL file, and the
    environment variable SHOAL_<PATH> (node/data_dir -> SHOAL_NODE_DATA_DIR).
    Every value is checked; a bad one is refused with a message naming the key,
    the value and what is allowed, and shoald exits 2.
*/
#ifndef SHOAL_CONFIG_H_INCLUDED
#define SHOAL_CONFIG_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SHOAL_DEFAULT_PORT 7400
//  drivers/exec_sched: the manager at a niceness, or under SCHED_IDLE.
#define SHOAL_EXEC_SCHED_NORMAL "normal"
#define SHOAL_EXEC_SCHED_IDLE "idle"

//  The settings a node runs with. Strings are owned by the settings.
typedef struct {
    char *node_id;              //  node/id: unique in the mesh
    char *data_dir;             //  node/data_dir: RocksDB, keys, guests
    char *bind;                 //  node/bind: ROUTER endpoint for peers and clients
    char *advertise;            //  node/advertise: endpoint others reach this node at
    char *cluster_cert;         //  security/cluster_cert: the cluster key (secret cert)
    char *clients_dir;          //  security/clients_dir: admitted client public certs
    bool generate_keys;         //  security/generate_keys: create missing keys at start
    bool store_sync;            //  store/sync: fsync acknowledged writes
    int64_t cache_mb;           //  store/cache_mb: RocksDB block cache
    int64_t reserve_mb;         //  store/reserve_mb: free space below which writes answer 507
    int64_t max_message_mb;     //  limits/max_message_mb: largest message accepted
    int64_t max_clock_ahead_ms; //  oplog/max_clock_ahead_ms: refuse entries from clocks further ahead
    bool reconcile_always;      //  oplog/reconcile_always: reconcile the log at every start, not only after a torn write
    char *join;                 //  mesh/join: seed endpoints, comma-separated ("" : none)
    int64_t probe_interval_ms;  //  mesh/probe_interval_ms: how often one peer is probed
    int64_t probe_timeout_ms;   //  mesh/probe_timeout_ms: an ack later than this is missed
    int64_t suspect_timeout_ms; //  mesh/suspect_timeout_ms: suspect this long -> dead
    int64_t sync_interval_ms;   //  mesh/sync_interval_ms: anti-entropy round period
    int64_t sync_bulk_min;      //  mesh/sync_bulk_min: entries waiting that make a pull a catch-up in bulk (0: never; reloadable)
    int64_t retention_ms;       //  oplog/retention_ms: entries older are pruned (0: never)
    bool verbose;               //  log/verbose: log every request and every handshake (reloadable)
    int64_t max_claims;         //  limits/max_claims: claims this node holds (reloadable)
    int64_t tenant_max_claims;  //  limits/tenant_max_claims: claims one tenant holds here (reloadable)
    int64_t max_running;        //  limits/max_running: claims holding a guest here (reloadable)
    int64_t memory_mb;          //  limits/memory_mb: guest memory this node gives out (reloadable)
    int64_t disk_mb;            //  limits/disk_mb: largest guest disk one claim may have here (reloadable)
    int64_t guest_rate_mb;      //  limits/guest_rate_mb: fastest load (MiB/s) a claim may ask of its guest (reloadable)
    char *guest_program;        //  guest/program: the shoal-guest to run ("" : the one beside shoald)
    char *guest_dir;            //  guest/dir: where guest directories live ("": DATA/guests)
    char *guest_memory_dir;     //  guest/memory_dir: where the guests' memory files live ("": in their directories)
    int64_t guest_stop_ms;      //  guest/stop_timeout_ms: SIGTERM to SIGKILL (reloadable)
    int64_t guest_watch_ms;     //  guest/watch_interval_ms: rest between two walks of the death watch (0: off; reloadable)
    bool guest_restart;         //  guest/restart_at_start: start again the guests a node's start finds gone
    char *exec_manager;         //  drivers/exec_manager: the exec driver's VM manager ("": no exec driver)
    int64_t exec_timeout_ms;    //  drivers/exec_timeout_ms: longest manager call (reloadable)
    int64_t exec_migrate_timeout_ms;    //  drivers/exec_migrate_timeout_ms: longest capture or receive (reloadable)
    int64_t exec_nice;          //  drivers/exec_nice: the manager's CPU niceness (reloadable)
    char *exec_sched;           //  drivers/exec_sched: the manager's scheduling policy, normal or idle (reloadable)
    char *move_bind;            //  move/bind: the move receiver's endpoint ("": node/bind's host, any port)
    int64_t move_concurrency;   //  move/concurrency: moves in flight, both directions (reloadable)
    int64_t move_downtime_ms;   //  move/max_downtime_ms: a move's final-round budget by default (reloadable)
    int64_t move_step_ms;       //  move/step_timeout_ms: longest silence of a move's other side (reloadable)
    int64_t move_final_ms;      //  move/final_timeout_ms: the same while the guest is paused (reloadable)
    int64_t move_record_ttl_ms; //  move/record_ttl_ms: a move record left this long is swept (reloadable)
    int64_t handshake_timeout_ms;   //  security/handshake_timeout_ms: a connection not authenticated by then is closed
    int64_t max_handshakes;     //  security/max_handshakes: connections not yet authenticated, in all
    int64_t max_handshakes_per_address; //  security/max_handshakes_per_address: the same, from one address
    int64_t throttle_ms;        //  log/throttle_ms: one line per this long about refusals a peer can cause at will
    bool salvage;               //  store/salvage, or shoald --salvage: open a damaged store
    char *metrics_bind;         //  metrics/bind: HOST:PORT serving Prometheus' text format ("": off)
    int64_t events_kept;        //  events/kept: the last events kept for watchers to replay
    int64_t fsck_interval_s;    //  fsck/interval_s: a report-only sweep this often (0: never; reloadable)
    int64_t fsck_slice_keys;    //  fsck/slice_keys: keys a sweep looks at per slice (reloadable)
} shoal_settings_t;

//  Loads settings from PATH (NULL: defaults and environment only). Returns 0,
//  or -1 with ERROR filled ("store/cache_mb = 'lots': expected an integer
//  from 1 to 65536"). On error SETTINGS is left empty.
int shoal_config_load(const char *path, shoal_settings_t *settings, char *error, size_t error_size);

//  Frees what SETTINGS owns and zeroes it.
void shoal_settings_clear(shoal_settings_t *settings);

//  Copies into LIVE the reloadable keys of FRESH (a freshly loaded set).
//  Keys that differ but cannot be reloaded are named in one log warning each.
//  Returns the number of keys changed.
int shoal_config_apply_reload(shoal_settings_t *live, const shoal_settings_t *fresh);

//  Writes one line per key ("node/id = a") to a new string (caller frees).
char *shoal_config_describe(const shoal_settings_t *settings);

#endif
