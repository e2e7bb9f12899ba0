/*  shoal_limits: every size limit of shoal, derived from one number.

    The frame limit is the one fixed number: no message frame is larger
    (decode refuses it, and so does the socket). Every other size follows
    from it, so that whatever a node accepts can be read back, listed a
    page at a time, replicated to its peers and moved with its claim:

    1. A kv value leaves room for its dataset, its key, the entry's fixed
       fields and the envelope around it: a get reply, a push of the entry
       and a page of one entry all fit a frame.
    2. A page (a scan reply, a sync pull, chain, snapshot or bulk page) is
       filled up to SHOAL_PAGE_BYTES_MAX bytes of encoded items. Its first
       item always goes in; by 1 it fits whatever it is.
    3. A kv key and a dataset name fit the store's composite keys with the
       other elements of the longest of them (store/shoal_key.h checks it).

    Changing a number here changes what nodes accept: a node never refuses
    less than the nodes it talks to, so raise limits on every node before
    anyone writes up to them.
*/
#ifndef SHOAL_LIMITS_H_INCLUDED
#define SHOAL_LIMITS_H_INCLUDED

//  Largest encoded message frame (the envelope with its body).
#define SHOAL_FRAME_MAX (1024 * 1024)

//  Room kept for what surrounds a body's items: the envelope's header and
//  message, the body's own fields and the framing of its payload.
#define SHOAL_ENVELOPE_RESERVE (4 * 1024)

//  Most encoded bytes of the items of one page.
#define SHOAL_PAGE_BYTES_MAX (SHOAL_FRAME_MAX - SHOAL_ENVELOPE_RESERVE)

//  Longest dataset name, kv key, and node or name part (shoal_names.h).
#define SHOAL_DATASET_MAX 256
#define SHOAL_KV_KEY_MAX 1024
#define SHOAL_NAME_MAX 64
//  A watch's kinds: "claims,moves,members" and room to spare.
#define SHOAL_WATCH_KINDS_MAX 64

//  Most bytes an encoded entry or kv item holds besides its value, dataset,
//  key and node: clock, op, flags, two hashes, epoch, and the tags and
//  lengths of every field, with the element's own tag and length in a page.
#define SHOAL_ITEM_FIXED_MAX 256

//  Most bytes a page spends on each element besides the element's own
//  encoding: its field tag and length.
#define SHOAL_PAGE_ELEMENT_OVERHEAD 8

//  Most bytes an encoded entry or kv item holds besides its value.
#define SHOAL_ITEM_NAMES_MAX \
    (SHOAL_DATASET_MAX + SHOAL_KV_KEY_MAX + SHOAL_NAME_MAX + SHOAL_ITEM_FIXED_MAX)

//  Largest kv value: 1 MiB less 16 KiB, a round number under what rule 1
//  leaves.
#define SHOAL_KV_VALUE_MAX (SHOAL_FRAME_MAX - 16 * 1024)

_Static_assert(SHOAL_KV_VALUE_MAX + SHOAL_ITEM_NAMES_MAX <= SHOAL_PAGE_BYTES_MAX,
               "a kv value with the largest names must fit one page");

//  Bytes of a composite store key a kv key and dataset name need at most:
//  each string element is a tag, its bytes and a terminator (names hold no
//  NUL, so nothing is escaped), beside up to two u64s, a node name and a
//  hash whose every byte may be escaped.
#define SHOAL_STORE_KEY_NEEDED \
    ((SHOAL_DATASET_MAX + 2) + (SHOAL_KV_KEY_MAX + 2) + 2 * 9 + (SHOAL_NAME_MAX + 2) + (2 * 32 + 2))

#endif
