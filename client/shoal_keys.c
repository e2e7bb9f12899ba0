/*  shoal_keys: making the CurveZMQ certificates a cluster runs on.

    A certificate is czmq's ZPL cert file pair: NAME (public key and metadata)
    and NAME_secret (both keys). The secret file is written first with mode
    0600 so that a secret is never readable by others, even for a moment.
*/
#include "shoal.h"
#include "shoal_names.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <errno.h>
#include <sys/stat.h>

static int
s_fail(char **error_p, const char *format, const char *a, const char *b)
{
    if (error_p)
        *error_p = zsys_sprintf(format, a, b);
    return -1;
}

//  Saves CERT at PATH and PATH_secret, refusing to overwrite either.
static int
s_cert_save(zcert_t *cert, const char *path, char **error_p)
{
    char *secret = zsys_sprintf("%s_secret", path);
    int rc = -1;
    if (access(path, F_OK) == 0 || access(secret, F_OK) == 0) {
        s_fail(error_p, "%s already exists; refusing to overwrite it", access(path, F_OK) == 0 ? path : secret, NULL);
        goto cleanup;
    }
    char *dir = shoal_strdup(path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = 0;
        zsys_dir_create("%s", dir);
    }
    free(dir);
    mode_t old_mask = umask(077);
    int saved = zcert_save_secret(cert, secret);
    umask(old_mask);
    if (saved != 0) {
        s_fail(error_p, "cannot write %s: %s", secret, strerror(errno));
        goto cleanup;
    }
    if (zcert_save_public(cert, path) != 0) {
        s_fail(error_p, "cannot write %s: %s", path, strerror(errno));
        remove(secret);
        goto cleanup;
    }
    rc = 0;
cleanup:
    free(secret);
    return rc;
}

int
shoal_keygen_cluster(const char *cert_path, char **error_p)
{
    zcert_t *cert = zcert_new();
    if (!cert)
        return s_fail(error_p, "cannot generate a keypair", NULL, NULL);
    zcert_set_meta(cert, "name", "cluster");
    zcert_set_meta(cert, "role", "node");
    int rc = s_cert_save(cert, cert_path, error_p);
    zcert_destroy(&cert);
    return rc;
}

int
shoal_keygen_client(const char *cert_path, const char *name, const char *role,
                    const char *tenant, char **error_p)
{
    if (!shoal_name_valid(name))
        return s_fail(error_p, "client name '%s' is not valid: use 1 to 64 letters, digits, '.', '_' or '-'", name ? name : "", NULL);
    if (!role || (strcmp(role, "admin") != 0 && strcmp(role, "tenant") != 0))
        return s_fail(error_p, "role '%s' is not valid: use admin or tenant", role ? role : "", NULL);
    if (strcmp(role, "tenant") == 0 && !shoal_tenant_valid(tenant))
        return s_fail(error_p, "a tenant key needs --tenant org/project (got '%s')", tenant ? tenant : "", NULL);
    if (strcmp(role, "admin") == 0 && tenant)
        return s_fail(error_p, "an admin key has no tenant (got '%s')", tenant, NULL);
    zcert_t *cert = zcert_new();
    if (!cert)
        return s_fail(error_p, "cannot generate a keypair", NULL, NULL);
    zcert_set_meta(cert, "name", "%s", name);
    zcert_set_meta(cert, "role", "%s", role);
    if (tenant)
        zcert_set_meta(cert, "tenant", "%s", tenant);
    int rc = s_cert_save(cert, cert_path, error_p);
    zcert_destroy(&cert);
    return rc;
}
