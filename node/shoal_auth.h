/*  shoal_auth: the ZAP handler that decides who may talk to a node.

    Every connection to the node's ROUTER passes a CurveZMQ handshake, and
    libzmq asks this handler (ZAP, RFC 27) whether the client's public key is
    admitted. Admitted are the cluster key, with role "node", and the public
    certificates in the clients directory, each with the role its metadata
    names: "admin", or "tenant" with a "tenant" of the form org/project. The
    role, tenant and name travel as ZAP metadata and reach the node on every
    frame (zframe_meta), so a request carries who sent it. Anything else is
    refused at the handshake, before a single request is read.

    The clients directory is re-read whenever it changes, so adding or
    removing a client takes effect without a restart.
*/
#ifndef SHOAL_AUTH_H_INCLUDED
#define SHOAL_AUTH_H_INCLUDED

#include <czmq.h>

//  Metadata property names carried on every admitted frame.
#define SHOAL_META_ROLE "role"
#define SHOAL_META_TENANT "tenant"
#define SHOAL_META_NAME "name"

#define SHOAL_ROLE_NODE "node"
#define SHOAL_ROLE_ADMIN "admin"
#define SHOAL_ROLE_TENANT "tenant"

//  Who sent a request, from the ZAP metadata on its frame. Borrowed strings.
typedef struct {
    const char *role;           //  node, admin or tenant
    const char *tenant;         //  org/project for a tenant, else empty
    const char *name;           //  the certificate's name, for logs
} shoal_caller_t;

//  Datasets whose entries only nodes write (the claim registry, the storage
//  catalog): clients may read them, never write them through kv.
bool shoal_dataset_is_system(const char *dataset);

//  Whether CALLER may read, or write, DATASET. A tenant reaches only datasets
//  under its own "org/project/" prefix; an admin reads everything and writes
//  all but system datasets; a node does everything.
bool shoal_caller_may_read(const shoal_caller_t *caller, const char *dataset);
bool shoal_caller_may_write(const shoal_caller_t *caller, const char *dataset);

bool shoal_caller_is_tenant(const shoal_caller_t *caller);

//  Starts the handler for this process's ZeroMQ context. CLUSTER_PUBLIC is the
//  cluster key's public key (Z85 text). Returns NULL when another handler is
//  already bound in this process. Refused handshakes are logged at most
//  once per THROTTLE_MS (0: each), with how many were refused meanwhile.
//  Commands on the actor's pipe:
//    VERBOSE 0|1  log every decision (answers a signal)
//    COUNT        answers the number of admitted client keys as a string
zactor_t *shoal_auth_new(const char *cluster_public, const char *clients_dir, bool verbose,
                         int64_t throttle_ms);

#endif
