/*  shoal_names: what a node id, a tenant and a client name may look like.

    Names travel in keys, ZAP metadata, file names and log lines, so they are
    held to one small alphabet everywhere: letters, digits, '.', '_' and '-'.
*/
#ifndef SHOAL_NAMES_H_INCLUDED
#define SHOAL_NAMES_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>

#define SHOAL_NAME_MAX 64

//  1 to SHOAL_NAME_MAX letters, digits, '.', '_' or '-', not starting with '.'.
bool shoal_name_valid(const char *name);

//  "org/project", each part a valid name.
bool shoal_tenant_valid(const char *tenant);

#endif
