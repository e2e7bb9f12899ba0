/*  shoal_names: name checks shared by the node, the client and the tools. */
#include "shoal_names.h"

#include <ctype.h>
#include <string.h>

static bool
s_valid_part(const char *start, size_t size)
{
    if (size == 0 || size > SHOAL_NAME_MAX || start[0] == '.')
        return false;
    for (size_t i = 0; i < size; i++)
        if (!isalnum((unsigned char) start[i]) && start[i] != '.' && start[i] != '_' && start[i] != '-')
            return false;
    return true;
}

bool
shoal_name_valid(const char *name)
{
    return name && s_valid_part(name, strlen(name));
}

bool
shoal_tenant_valid(const char *tenant)
{
    const char *slash = tenant ? strchr(tenant, '/') : NULL;
    return slash && s_valid_part(tenant, (size_t) (slash - tenant))
        && s_valid_part(slash + 1, strlen(slash + 1));
}
