/*  shoal_names: what a node id, a tenant and a client name may look like.

    Names travel in keys, ZAP metadata, file names and log lines, so they are
    held to one small alphabet everywhere: letters, digits, '.', '_' and '-'.
*/
#ifndef SHOAL_NAMES_H_INCLUDED
#define SHOAL_NAMES_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>

#include "shoal_limits.h"

//  1 to SHOAL_NAME_MAX letters, digits, '.', '_' or '-', not starting with '.'.
bool shoal_name_valid(const char *name);

//  "org/project", each part a valid name.
bool shoal_tenant_valid(const char *tenant);

//  A dataset name: 1 to SHOAL_DATASET_MAX bytes of parts separated by '/',
//  each part letters, digits, '.', '_' or '-', not starting with '.'
//  ("app", "acme/web/config").
bool shoal_dataset_valid(const char *dataset);

//  The rule shoal_dataset_valid applies, in words, for error messages.
#define SHOAL_DATASET_RULE "'/'-separated parts of letters, digits, '.', '_' or '-' " \
                           "(not starting with '.'), 256 bytes at most"

//  A claim id: a valid name made by an operator ("web-1"), or a tenant's
//  "org/project/name" whose org/project is the claim's tenant.
bool shoal_claim_id_valid(const char *id);

//  Whether ID is a tenant-scoped claim id ("org/project/name").
bool shoal_claim_id_scoped(const char *id);

//  The rule shoal_claim_id_valid applies, in words, for error messages.
#define SHOAL_CLAIM_ID_RULE "a name of 1 to 64 letters, digits, '.', '_' or '-' (not starting " \
                            "with '.'), or org/project/name of three such names"

//  A file name for claim ID: its slashes become '+', which no name part
//  holds, so two ids never share a file name. The caller frees it.
char *shoal_claim_id_file_name(const char *id);

//  Whether TEXT (SIZE bytes, NULL only when SIZE is 0) is valid UTF-8:
//  no overlong form, no surrogate, nothing above U+10FFFF.
bool shoal_utf8_valid(const char *text, size_t size);

#endif
