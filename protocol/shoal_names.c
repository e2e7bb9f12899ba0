/*  shoal_names: name checks shared by the node, the client and the tools. */
#include "shoal_names.h"
#include "shoal_alloc.h"

#include <ctype.h>
#include <stdlib.h>
#include <stdint.h>
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

bool
shoal_dataset_valid(const char *dataset)
{
    if (!dataset)
        return false;
    size_t size = strlen(dataset);
    if (size == 0 || size > SHOAL_DATASET_MAX)
        return false;
    const char *part = dataset;
    while (true) {
        const char *slash = strchr(part, '/');
        size_t part_size = slash ? (size_t) (slash - part) : strlen(part);
        //  A part is as long as the whole name allows.
        if (part_size == 0 || part[0] == '.')
            return false;
        for (size_t i = 0; i < part_size; i++)
            if (!isalnum((unsigned char) part[i]) && part[i] != '.' && part[i] != '_' && part[i] != '-')
                return false;
        if (!slash)
            return true;
        part = slash + 1;
    }
}

bool
shoal_claim_id_scoped(const char *id)
{
    const char *first = id ? strchr(id, '/') : NULL;
    const char *second = first ? strchr(first + 1, '/') : NULL;
    return second && !strchr(second + 1, '/')
        && s_valid_part(id, (size_t) (first - id))
        && s_valid_part(first + 1, (size_t) (second - first - 1))
        && s_valid_part(second + 1, strlen(second + 1));
}

bool
shoal_claim_id_valid(const char *id)
{
    return shoal_name_valid(id) || shoal_claim_id_scoped(id);
}

//  Lowest code point each length of UTF-8 sequence may encode: anything
//  below is an overlong form.
#define UTF8_MIN_2 0x80
#define UTF8_MIN_3 0x800
#define UTF8_MIN_4 0x10000
#define UTF8_MAX 0x10FFFF
#define UTF8_SURROGATE_FIRST 0xD800
#define UTF8_SURROGATE_LAST 0xDFFF

bool
shoal_utf8_valid(const char *text, size_t size)
{
    const unsigned char *bytes = (const unsigned char *) text;
    size_t at = 0;
    while (at < size) {
        unsigned char lead = bytes[at];
        size_t follow;
        uint32_t point, min;
        if (lead < 0x80) {
            at++;
            continue;
        }
        if ((lead & 0xE0) == 0xC0) {
            follow = 1;
            point = lead & 0x1F;
            min = UTF8_MIN_2;
        }
        else
        if ((lead & 0xF0) == 0xE0) {
            follow = 2;
            point = lead & 0x0F;
            min = UTF8_MIN_3;
        }
        else
        if ((lead & 0xF8) == 0xF0) {
            follow = 3;
            point = lead & 0x07;
            min = UTF8_MIN_4;
        }
        else
            return false;
        if (follow > size - at - 1)
            return false;
        for (size_t i = 1; i <= follow; i++) {
            if ((bytes[at + i] & 0xC0) != 0x80)
                return false;
            point = (point << 6) | (bytes[at + i] & 0x3F);
        }
        if (point < min || point > UTF8_MAX
        ||  (point >= UTF8_SURROGATE_FIRST && point <= UTF8_SURROGATE_LAST))
            return false;
        at += follow + 1;
    }
    return true;
}

char *
shoal_claim_id_file_name(const char *id)
{
    char *name = shoal_strdup(id);
    for (char *c = name; *c; c++)
        if (*c == '/')
            *c = '+';
    return name;
}
