/*  test_key: the order-preserving key codec.

    The property at the heart of shoal_key is that memcmp on encoded keys gives
    tuple order, and that the encoding of a tuple prefix is a byte prefix. The
    property tests check both against a plain reference comparator on many
    random tuples built to collide: tiny alphabets holding 0x00 and 0xFF, empty
    strings, tuples that extend or cut other tuples. The seed is printed, and
    SHOAL_TEST_SEED repeats a run.
*/
#include <stdlib.h>
#include <time.h>

#include "shoal_key.h"
#include "shoal_store.h"
#include "shoal_test.h"

//  How many random tuples the property tests build.
#define TUPLE_COUNT 20000
//  How many random pairs are compared on top of the sorted neighbours.
#define PAIR_COUNT 200000
//  How many random prefixes are scanned through the store.
#define SCAN_COUNT 400
//  Largest number of elements in a random tuple.
#define TUPLE_ELEMENTS_MAX 4
//  Largest string or byte string element in a random tuple.
#define ELEMENT_BYTES_MAX 6
//  Puts per batch when loading the tuples into the store.
#define LOAD_BATCH 1000

//  Element kinds, numbered in the order the reference comparator sorts them.
typedef enum {
    ELEMENT_BYTES,
    ELEMENT_STRING,
    ELEMENT_U64,
    ELEMENT_KINDS
} element_kind_t;

typedef struct {
    element_kind_t kind;
    uint64_t number;                        //  for ELEMENT_U64
    uint8_t data[ELEMENT_BYTES_MAX + 1];    //  for strings and byte strings
    size_t size;                            //  bytes used in data
} element_t;

typedef struct {
    element_t elements[TUPLE_ELEMENTS_MAX];
    size_t count;
    shoal_key_t key;                        //  the encoding under test
} tuple_t;

//  Alphabets small enough that random elements often share prefixes, holding
//  the bytes the escaping has to get right. Strings cannot hold 0x00.
static const uint8_t s_string_alphabet[] = { 0x01, 'a', 'b', 0x7F, 0xFE, 0xFF };
static const uint8_t s_bytes_alphabet[] = { 0x00, 0x01, 'a', 0xFE, 0xFF };
//  Integers at the edges of each byte, plus random ones.
static const uint64_t s_u64_edges[] = {
    0, 1, 0xFF, 0x100, 0xFFFF, 0x10000, UINT64_C(1) << 56, UINT64_MAX - 1, UINT64_MAX
};

#define COUNT_OF(array) (sizeof (array) / sizeof (array)[0])

static size_t
s_random_below(uint64_t *state, size_t limit)
{
    return (size_t) (shoal_test_random(state) % limit);
}

static void
s_element_random(element_t *element, uint64_t *state)
{
    memset(element, 0, sizeof *element);
    element->kind = (element_kind_t) s_random_below(state, ELEMENT_KINDS);
    if (element->kind == ELEMENT_U64) {
        bool edge = s_random_below(state, 2) == 0;
        element->number = edge ? s_u64_edges[s_random_below(state, COUNT_OF(s_u64_edges))]
                                : shoal_test_random(state) >> s_random_below(state, 64);
        return;
    }
    element->size = s_random_below(state, ELEMENT_BYTES_MAX + 1);
    for (size_t i = 0; i < element->size; i++)
        element->data[i] = element->kind == ELEMENT_STRING
            ? s_string_alphabet[s_random_below(state, COUNT_OF(s_string_alphabet))]
            : s_bytes_alphabet[s_random_below(state, COUNT_OF(s_bytes_alphabet))];
}

//  Appends ELEMENT to KEY the way a caller would.
static void
s_key_add_element(shoal_key_t *key, const element_t *element)
{
    if (element->kind == ELEMENT_U64)
        shoal_key_add_u64(key, element->number);
    else
    if (element->kind == ELEMENT_STRING)
        shoal_key_add_str(key, (const char *) element->data);
    else
        shoal_key_add_bytes(key, element->data, element->size);
}

static void
s_tuple_encode(tuple_t *tuple)
{
    shoal_key_init(&tuple->key);
    for (size_t i = 0; i < tuple->count; i++)
        s_key_add_element(&tuple->key, &tuple->elements[i]);
}

//  Fills TUPLES with random tuples; a third of them extend or cut an earlier
//  one, so that prefixes of one another are common.
static void
s_tuples_random(tuple_t *tuples, size_t count, uint64_t *state)
{
    for (size_t t = 0; t < count; t++) {
        tuple_t *tuple = &tuples[t];
        tuple->count = 0;
        if (t > 0 && s_random_below(state, 3) == 0) {
            const tuple_t *other = &tuples[s_random_below(state, t)];
            tuple->count = s_random_below(state, other->count + 1);
            memcpy(tuple->elements, other->elements, tuple->count * sizeof(element_t));
        }
        size_t target = s_random_below(state, TUPLE_ELEMENTS_MAX + 1);
        while (tuple->count < target)
            s_element_random(&tuple->elements[tuple->count++], state);
        s_tuple_encode(tuple);
    }
}

static int
s_sign(long long value)
{
    return (value > 0) - (value < 0);
}

//  The reference order: by kind, then bytes lexicographically with the
//  shorter first, integers as numbers; a tuple before the tuples it prefixes.
static int
s_element_compare(const element_t *a, const element_t *b)
{
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    if (a->kind == ELEMENT_U64)
        return (a->number > b->number) - (a->number < b->number);
    size_t common = a->size < b->size ? a->size : b->size;
    int rc = memcmp(a->data, b->data, common);
    if (rc != 0)
        return s_sign(rc);
    return (a->size > b->size) - (a->size < b->size);
}

static int
s_tuple_compare(const tuple_t *a, const tuple_t *b)
{
    size_t common = a->count < b->count ? a->count : b->count;
    for (size_t i = 0; i < common; i++) {
        int rc = s_element_compare(&a->elements[i], &b->elements[i]);
        if (rc != 0)
            return rc;
    }
    return (a->count > b->count) - (a->count < b->count);
}

//  Byte order of encodings: memcmp, the shorter first on a tie.
static int
s_bytes_compare(const uint8_t *a, size_t a_size, const uint8_t *b, size_t b_size)
{
    size_t common = a_size < b_size ? a_size : b_size;
    int rc = memcmp(a, b, common);
    if (rc != 0)
        return s_sign(rc);
    return (a_size > b_size) - (a_size < b_size);
}

static int
s_encoded_compare(const tuple_t *a, const tuple_t *b)
{
    return s_bytes_compare(a->key.bytes, a->key.size, b->key.bytes, b->key.size);
}

static int
s_qsort_encoded(const void *a, const void *b)
{
    return s_encoded_compare(*(tuple_t *const *) a, *(tuple_t *const *) b);
}

static int
s_qsort_reference(const void *a, const void *b)
{
    return s_tuple_compare(*(tuple_t *const *) a, *(tuple_t *const *) b);
}

//  Pointers to TUPLES, sorted by COMPARE. The caller frees the array.
static tuple_t **
s_tuples_sorted(tuple_t *tuples, size_t count, int (*compare) (const void *, const void *))
{
    tuple_t **sorted = malloc(count * sizeof(tuple_t *));
    for (size_t i = 0; sorted && i < count; i++)
        sorted[i] = &tuples[i];
    if (sorted)
        qsort(sorted, count, sizeof(tuple_t *), compare);
    return sorted;
}

static void
test_key_layout(void)
{
    shoal_key_t key;
    shoal_key_init(&key);
    shoal_key_add_str(&key, "kv");
    shoal_key_add_u64(&key, 42);
    uint8_t data[] = { 0x00, 0xFF };
    shoal_key_add_bytes(&key, data, sizeof data);
    const uint8_t expected[] = {
        0x02, 'k', 'v', 0x00,
        0x15, 0, 0, 0, 0, 0, 0, 0, 42,
        0x01, 0x00, 0xFF, 0xFF, 0x00
    };
    CHECK_INT(key.size, sizeof expected);
    CHECK(memcmp(key.bytes, expected, sizeof expected) == 0);
    CHECK(!key.overflow);

    //  A string prefix is the string's encoding without its terminator.
    shoal_key_init(&key);
    shoal_key_add_str_prefix(&key, "ap");
    CHECK_INT(key.size, 3);
    CHECK(memcmp(key.bytes, "\x02" "ap", 3) == 0);
}

static void
test_key_order_property(void)
{
    uint64_t state = shoal_test_seed();
    tuple_t *tuples = malloc(TUPLE_COUNT * sizeof(tuple_t));
    CHECK(tuples);
    s_tuples_random(tuples, TUPLE_COUNT, &state);

    //  Sorted by encoding, neighbours must agree with the reference, ties
    //  included: then the two orders are the same. Random pairs check the
    //  same without relying on the sort.
    tuple_t **sorted = s_tuples_sorted(tuples, TUPLE_COUNT, s_qsort_encoded);
    const tuple_t *a = NULL, *b = NULL;
    for (size_t i = 1; sorted && !a && i < TUPLE_COUNT; i++)
        if (s_tuple_compare(sorted[i - 1], sorted[i]) != s_encoded_compare(sorted[i - 1], sorted[i])) {
            a = sorted[i - 1];
            b = sorted[i];
        }
    for (size_t p = 0; sorted && !a && p < PAIR_COUNT; p++) {
        const tuple_t *x = &tuples[s_random_below(&state, TUPLE_COUNT)];
        const tuple_t *y = &tuples[s_random_below(&state, TUPLE_COUNT)];
        if (s_tuple_compare(x, y) != s_encoded_compare(x, y)) {
            a = x;
            b = y;
        }
    }
    char *first = a ? shoal_key_format(a->key.bytes, a->key.size) : NULL;
    char *second = b ? shoal_key_format(b->key.bytes, b->key.size) : NULL;
    bool sorted_ok = sorted != NULL;
    free(sorted);
    free(tuples);
    CHECK(sorted_ok);
    CHECK_MSG(!a, "byte order and tuple order differ on %s and %s", first, second);
}

//  Reads TUPLE's encoding back element by element.
static bool
s_tuple_reads_back(const tuple_t *tuple)
{
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, tuple->key.bytes, tuple->key.size);
    for (size_t i = 0; i < tuple->count; i++) {
        const element_t *element = &tuple->elements[i];
        uint64_t number;
        char text[ELEMENT_BYTES_MAX + 1];
        uint8_t data[ELEMENT_BYTES_MAX];
        size_t size;
        if (shoal_key_reader_done(&reader))
            return false;
        if (element->kind == ELEMENT_U64) {
            if (shoal_key_read_u64(&reader, &number) || number != element->number)
                return false;
        }
        else
        if (element->kind == ELEMENT_STRING) {
            if (shoal_key_read_str(&reader, text, sizeof text)
            ||  strcmp(text, (const char *) element->data) != 0)
                return false;
        }
        else
        if (shoal_key_read_bytes(&reader, data, sizeof data, &size)
        ||  size != element->size || memcmp(data, element->data, size) != 0)
            return false;
    }
    return shoal_key_reader_done(&reader);
}

static void
test_key_round_trip(void)
{
    uint64_t state = shoal_test_seed();
    tuple_t *tuples = malloc(TUPLE_COUNT * sizeof(tuple_t));
    CHECK(tuples);
    s_tuples_random(tuples, TUPLE_COUNT, &state);
    size_t failed = TUPLE_COUNT;
    for (size_t i = 0; i < TUPLE_COUNT && failed == TUPLE_COUNT; i++)
        if (!s_tuple_reads_back(&tuples[i]))
            failed = i;
    char *text = failed < TUPLE_COUNT
               ? shoal_key_format(tuples[failed].key.bytes, tuples[failed].key.size) : NULL;
    free(tuples);
    CHECK_MSG(!text, "%s does not read back", text);
}

static void
test_key_reader_errors(void)
{
    shoal_key_t key;
    shoal_key_init(&key);
    shoal_key_add_str(&key, "node-7");
    shoal_key_add_u64(&key, 7);

    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, key.bytes, key.size);
    uint64_t number;
    uint8_t data[16];
    size_t size;
    char small[4];
    char text[16];
    //  Each failure leaves the reader where it was, so the right call works next.
    CHECK_INT(shoal_key_read_u64(&reader, &number), -1);
    CHECK_INT(shoal_key_read_bytes(&reader, data, sizeof data, &size), -1);
    CHECK_INT(shoal_key_read_str(&reader, small, sizeof small), -1);
    CHECK_INT(shoal_key_read_str(&reader, text, sizeof text), 0);
    CHECK_STR(text, "node-7");
    CHECK_INT(shoal_key_read_str(&reader, text, sizeof text), -1);
    CHECK_INT(shoal_key_read_u64(&reader, &number), 0);
    CHECK_INT(number, 7);
    CHECK(shoal_key_reader_done(&reader));
    CHECK_INT(shoal_key_read_u64(&reader, &number), -1);

    //  A truncated integer and a string without its terminator.
    shoal_key_reader_init(&reader, key.bytes, key.size - 1);
    CHECK_INT(shoal_key_read_str(&reader, text, sizeof text), 0);
    CHECK_INT(shoal_key_read_u64(&reader, &number), -1);
    shoal_key_reader_init(&reader, key.bytes, 4);
    CHECK_INT(shoal_key_read_str(&reader, text, sizeof text), -1);

    //  A byte string too big for the buffer still says how big it is.
    shoal_key_init(&key);
    shoal_key_add_bytes(&key, "\x00\x01\x02", 3);
    shoal_key_reader_init(&reader, key.bytes, key.size);
    CHECK_INT(shoal_key_read_bytes(&reader, data, 2, &size), -1);
    CHECK_INT(size, 3);
    CHECK_INT(shoal_key_read_bytes(&reader, data, sizeof data, &size), 0);
    CHECK(memcmp(data, "\x00\x01\x02", 3) == 0);

    //  A string element holding an escaped zero cannot be a C string.
    const uint8_t zero_inside[] = { SHOAL_KEY_TAG_STRING, 'a', 0x00, 0xFF, 'b', 0x00 };
    shoal_key_reader_init(&reader, zero_inside, sizeof zero_inside);
    CHECK_INT(shoal_key_read_str(&reader, text, sizeof text), -1);
}

static void
test_key_prefix_end(void)
{
    //  After whole elements the next byte is a tag, below 0xFF.
    shoal_key_t prefix, upper;
    shoal_key_init(&prefix);
    shoal_key_add_str(&prefix, "a");
    CHECK_INT(shoal_key_prefix_end(&prefix, &upper), 0);
    CHECK_INT(upper.size, 4);
    CHECK(memcmp(upper.bytes, "\x02" "a" "\x00" "\xff", 4) == 0);

    //  (x'00') is a byte prefix of (x'0000') but not a tuple prefix: its end
    //  falls between its own extensions and that key.
    shoal_key_t under, beside;
    shoal_key_init(&prefix);
    shoal_key_add_bytes(&prefix, "\x00", 1);
    shoal_key_init(&under);
    shoal_key_add_bytes(&under, "\x00", 1);
    shoal_key_add_u64(&under, UINT64_MAX);
    shoal_key_init(&beside);
    shoal_key_add_bytes(&beside, "\x00\x00", 2);
    CHECK_INT(shoal_key_prefix_end(&prefix, &upper), 0);
    CHECK(s_bytes_compare(under.bytes, under.size, upper.bytes, upper.size) < 0);
    CHECK(s_bytes_compare(beside.bytes, beside.size, upper.bytes, upper.size) >= 0);

    //  A string prefix matches by bytes: its last byte is raised.
    shoal_key_init(&prefix);
    shoal_key_add_str_prefix(&prefix, "ap");
    CHECK_INT(shoal_key_prefix_end(&prefix, &upper), 0);
    CHECK_INT(upper.size, 3);
    CHECK(memcmp(upper.bytes, "\x02" "aq", 3) == 0);

    //  A full-size key has no room for the 0xFF; nothing but itself is under it.
    uint8_t big[SHOAL_KEY_MAX - 2];
    memset(big, 'x', sizeof big);
    shoal_key_init(&prefix);
    shoal_key_add_bytes(&prefix, big, sizeof big);
    CHECK_INT(prefix.size, SHOAL_KEY_MAX);
    CHECK_INT(shoal_key_prefix_end(&prefix, &upper), 0);
    CHECK_INT(upper.size, SHOAL_KEY_MAX);
    CHECK(s_bytes_compare(prefix.bytes, prefix.size, upper.bytes, upper.size) < 0);

    //  Trailing 0xFF bytes cannot be raised: the byte before them is.
    const uint8_t raw[] = { 0x01, 0x41, 0xFF, 0xFF };
    shoal_key_init(&prefix);
    memcpy(prefix.bytes, raw, sizeof raw);
    prefix.size = sizeof raw;
    CHECK_INT(shoal_key_prefix_end(&prefix, &upper), 0);
    CHECK_INT(upper.size, 2);
    CHECK(upper.bytes[0] == 0x01 && upper.bytes[1] == 0x42);

    //  In place works too.
    CHECK_INT(shoal_key_prefix_end(&prefix, &prefix), 0);
    CHECK_INT(prefix.size, 2);
    CHECK(prefix.bytes[1] == 0x42);

    //  No end: empty, all 0xFF, or overflowed (which the end inherits).
    shoal_key_init(&prefix);
    CHECK_INT(shoal_key_prefix_end(&prefix, &upper), -1);
    memset(prefix.bytes, 0xFF, 3);
    prefix.size = 3;
    CHECK_INT(shoal_key_prefix_end(&prefix, &upper), -1);
    shoal_key_init(&prefix);
    prefix.overflow = true;
    CHECK_INT(shoal_key_prefix_end(&prefix, &upper), -1);
    CHECK(upper.overflow);
}

static void
test_key_overflow(void)
{
    //  A byte string fills the key exactly: tag, 1022 bytes, terminator.
    uint8_t big[SHOAL_KEY_MAX];
    memset(big, 'x', sizeof big);
    shoal_key_t key;
    shoal_key_init(&key);
    shoal_key_add_bytes(&key, big, SHOAL_KEY_MAX - 2);
    CHECK(!key.overflow);
    CHECK_INT(key.size, SHOAL_KEY_MAX);
    shoal_key_add_u64(&key, 1);
    CHECK(key.overflow);
    CHECK_INT(key.size, SHOAL_KEY_MAX);

    //  Escaping counts: 1200 zero bytes take 2400.
    uint8_t zeros[1200] = { 0 };
    shoal_key_init(&key);
    shoal_key_add_str(&key, "kv");
    shoal_key_add_bytes(&key, zeros, sizeof zeros);
    CHECK(key.overflow);
    //  Once overflowed, the key stays so: a later small element is dropped.
    shoal_key_add_str(&key, "z");
    CHECK(key.overflow);
    CHECK_INT(key.size, 4);

    //  Every store call refuses the key and says why.
    shoal_store_options_t options;
    shoal_store_options_default(&options);
    options.sync = false;
    shoal_store_t *store = shoal_store_new(shoal_test_dir, &options, NULL);
    CHECK(store);
    uint8_t *value = NULL;
    size_t size = 0;
    bool found = true;
    shoal_claim_record_t record = { 0 };
    bool refused = shoal_store_put(store, SHOAL_CF_KV, &key, "v", 1, false) == -1
                && shoal_test_contains(shoal_store_error(store), "kv: refused a key longer than 2048 bytes")
                && shoal_test_contains(shoal_store_error(store), "(it starts (\"kv\"))")
                && shoal_store_get(store, SHOAL_CF_KV, &key, &value, &size) == -1
                && shoal_store_delete(store, SHOAL_CF_KV, &key, false) == -1
                && shoal_store_get_record(store, SHOAL_CF_CLAIMS, &key, &shoal_claim_codec,
                                          &record, &found) == -1
                && !found
                && shoal_iter_new(store, SHOAL_CF_KV, &key, NULL) == NULL
                && shoal_iter_new(store, SHOAL_CF_KV, NULL, &key) == NULL
                && shoal_iter_prefix(store, SHOAL_CF_KV, &key) == NULL
                && shoal_store_count(store, SHOAL_CF_KV, &key) == -1;

    //  An iterator handed an overflowed key stops and reports it.
    shoal_iter_t *iter = shoal_iter_new(store, SHOAL_CF_KV, NULL, NULL);
    bool iter_refused = iter && !shoal_iter_seek(iter, &key) && !shoal_iter_valid(iter)
                     && shoal_iter_status(iter) == -1
                     && !shoal_iter_seek_prev(iter, &key);
    shoal_iter_destroy(&iter);

    //  A batch holding it writes nothing, not even its valid operations.
    shoal_key_t good;
    shoal_key_init(&good);
    shoal_key_add_str(&good, "good");
    shoal_batch_t *batch = shoal_batch_new(store);
    shoal_batch_put(batch, SHOAL_CF_KV, &good, "v", 1);
    shoal_batch_put(batch, SHOAL_CF_KV, &key, "v", 1);
    bool batch_refused = shoal_store_write(store, batch, false) == -1
                      && shoal_test_contains(shoal_store_error(store), "batch refused, nothing written")
                      && shoal_store_get(store, SHOAL_CF_KV, &good, &value, &size) == 0
                      && value == NULL;
    shoal_batch_destroy(&batch);
    shoal_store_destroy(&store);
    CHECK(refused);
    CHECK(iter_refused);
    CHECK(batch_refused);
}

static void
test_key_format(void)
{
    shoal_key_t key;
    shoal_key_init(&key);
    shoal_key_add_str(&key, "kv");
    shoal_key_add_str(&key, "a/b");
    shoal_key_add_u64(&key, 42);
    shoal_key_add_bytes(&key, "\x0a\xff", 2);
    char *text = shoal_key_format(key.bytes, key.size);
    CHECK_STR(text, "(\"kv\", \"a/b\", 42, x'0aff')");
    free(text);

    //  Quotes, backslashes and bytes outside printable ASCII are escaped.
    shoal_key_init(&key);
    shoal_key_add_str(&key, "a\"b\\c\x01\xff");
    shoal_key_add_bytes(&key, "\x00", 1);
    shoal_key_add_bytes(&key, "", 0);
    text = shoal_key_format(key.bytes, key.size);
    CHECK_STR(text, "(\"a\\\"b\\\\c\\x01\\xff\", x'00', x'')");
    free(text);

    text = shoal_key_format("", 0);
    CHECK_STR(text, "()");
    free(text);

    //  What does not decode is shown as hex after what does: a string prefix
    //  (no terminator), a truncated integer, an unknown tag.
    shoal_key_init(&key);
    shoal_key_add_str(&key, "kv");
    shoal_key_add_str_prefix(&key, "app");
    text = shoal_key_format(key.bytes, key.size);
    CHECK_STR(text, "(\"kv\") + x'02617070'");
    free(text);
    text = shoal_key_format("\x15\x00\x01", 3);
    CHECK_STR(text, "() + x'150001'");
    free(text);
    text = shoal_key_format("\x99", 1);
    CHECK_STR(text, "() + x'99'");
    free(text);
}

//  True when TUPLE starts with the first PREFIX_COUNT elements of PREFIX and,
//  when STR_PREFIX is not NULL, then has a string element starting with it.
static bool
s_tuple_has_prefix(const tuple_t *tuple, const tuple_t *prefix, size_t prefix_count,
                   const char *str_prefix)
{
    if (tuple->count < prefix_count)
        return false;
    for (size_t i = 0; i < prefix_count; i++)
        if (s_element_compare(&tuple->elements[i], &prefix->elements[i]) != 0)
            return false;
    if (!str_prefix)
        return true;
    if (tuple->count <= prefix_count)
        return false;
    const element_t *next = &tuple->elements[prefix_count];
    size_t length = strlen(str_prefix);
    return next->kind == ELEMENT_STRING && next->size >= length
        && memcmp(next->data, str_prefix, length) == 0;
}

//  Scans one prefix through STORE and compares with the reference: the
//  tuples of SORTED (unique, in order) under it. Returns true when they match.
static bool
s_prefix_scan_matches(shoal_store_t *store, tuple_t **sorted, size_t count,
                      const tuple_t *prefix, size_t prefix_count, const char *str_prefix)
{
    shoal_key_t key;
    shoal_key_init(&key);
    for (size_t i = 0; i < prefix_count; i++)
        s_key_add_element(&key, &prefix->elements[i]);
    if (str_prefix)
        shoal_key_add_str_prefix(&key, str_prefix);

    shoal_iter_t *iter = shoal_iter_prefix(store, SHOAL_CF_KV, &key);
    if (!iter)
        return false;
    bool matches = true;
    size_t expected = 0;
    bool on_key = shoal_iter_first(iter);
    for (size_t i = 0; matches && i < count; i++) {
        if (!s_tuple_has_prefix(sorted[i], prefix, prefix_count, str_prefix))
            continue;
        size_t size;
        const uint8_t *bytes = shoal_iter_key(iter, &size);
        matches = on_key && s_bytes_compare(bytes, size, sorted[i]->key.bytes,
                                            sorted[i]->key.size) == 0;
        on_key = shoal_iter_next(iter);
        expected++;
    }
    matches = matches && !on_key && shoal_iter_status(iter) == 0
           && shoal_store_count(store, SHOAL_CF_KV, &key) == (int64_t) expected;
    shoal_iter_destroy(&iter);
    return matches;
}

static void
test_key_prefix_scan(void)
{
    uint64_t state = shoal_test_seed();
    tuple_t *tuples = malloc(TUPLE_COUNT * sizeof(tuple_t));
    CHECK(tuples);
    s_tuples_random(tuples, TUPLE_COUNT, &state);

    //  The store keeps one copy of equal keys; so does the reference.
    tuple_t **sorted = s_tuples_sorted(tuples, TUPLE_COUNT, s_qsort_reference);
    size_t unique = 0;
    for (size_t i = 0; sorted && i < TUPLE_COUNT; i++)
        if (unique == 0 || s_tuple_compare(sorted[unique - 1], sorted[i]) != 0)
            sorted[unique++] = sorted[i];

    shoal_store_options_t options;
    shoal_store_options_default(&options);
    options.sync = false;
    shoal_store_t *store = shoal_store_new(shoal_test_dir, &options, NULL);
    shoal_batch_t *batch = store ? shoal_batch_new(store) : NULL;
    bool loaded = sorted && batch;
    for (size_t i = 0; loaded && i < TUPLE_COUNT; i++) {
        shoal_batch_put(batch, SHOAL_CF_KV, &tuples[i].key, &i, sizeof i);
        if (shoal_batch_count(batch) == LOAD_BATCH || i == TUPLE_COUNT - 1) {
            loaded = shoal_store_write(store, batch, false) == 0;
            shoal_batch_clear(batch);
        }
    }
    shoal_batch_destroy(&batch);

    //  Prefixes are cut from stored tuples (so most match something), some
    //  ending in the start of a string; a few are fresh and may match nothing.
    char *failed = NULL;
    for (size_t scan = 0; loaded && !failed && scan < SCAN_COUNT; scan++) {
        tuple_t fresh;
        const tuple_t *prefix = &tuples[s_random_below(&state, TUPLE_COUNT)];
        if (scan % 10 == 0) {
            s_tuples_random(&fresh, 1, &state);
            prefix = &fresh;
        }
        size_t prefix_count = s_random_below(&state, prefix->count + 1);
        char str_prefix[ELEMENT_BYTES_MAX + 1] = "";
        bool use_str_prefix = prefix_count < prefix->count
                           && prefix->elements[prefix_count].kind == ELEMENT_STRING
                           && s_random_below(&state, 2) == 0;
        if (use_str_prefix) {
            const element_t *next = &prefix->elements[prefix_count];
            size_t length = s_random_below(&state, next->size + 1);
            memcpy(str_prefix, next->data, length);
            str_prefix[length] = 0;
        }
        if (!s_prefix_scan_matches(store, sorted, unique, prefix, prefix_count,
                                   use_str_prefix ? str_prefix : NULL)) {
            shoal_key_t key;
            shoal_key_init(&key);
            for (size_t i = 0; i < prefix_count; i++)
                s_key_add_element(&key, &prefix->elements[i]);
            if (use_str_prefix)
                shoal_key_add_str_prefix(&key, str_prefix);
            failed = shoal_key_format(key.bytes, key.size);
        }
    }
    shoal_store_destroy(&store);
    free(sorted);
    free(tuples);
    CHECK(loaded);
    CHECK_MSG(!failed, "scan of prefix %s differs from the reference", failed);
}

//  A key built from parts laid out apart (shoal_key_add_key) is the key
//  built element by element, for every cut of every random tuple; an
//  overflowed part overflows the key.
static void
test_key_add_key(void)
{
    uint64_t state = shoal_test_seed();
    tuple_t *tuples = malloc(TUPLE_COUNT * sizeof(tuple_t));
    CHECK(tuples);
    s_tuples_random(tuples, TUPLE_COUNT, &state);
    size_t differ = 0;
    for (size_t t = 0; t < TUPLE_COUNT; t++) {
        const tuple_t *tuple = &tuples[t];
        for (size_t cut = 0; cut <= tuple->count; cut++) {
            shoal_key_t head, tail, joined;
            shoal_key_init(&head);
            shoal_key_init(&tail);
            for (size_t i = 0; i < tuple->count; i++)
                s_key_add_element(i < cut ? &head : &tail, &tuple->elements[i]);
            shoal_key_init(&joined);
            shoal_key_add_key(&joined, &head);
            shoal_key_add_key(&joined, &tail);
            if (joined.overflow || joined.size != tuple->key.size
            ||  memcmp(joined.bytes, tuple->key.bytes, joined.size) != 0)
                differ++;
        }
    }
    free(tuples);
    CHECK_MSG(differ == 0, "%zu keys joined from parts differ from the same keys built whole", differ);

    shoal_key_t big, key;
    shoal_key_init(&big);
    uint8_t filler[SHOAL_KEY_MAX / 4] = { 0 };
    while (!big.overflow)
        shoal_key_add_bytes(&big, filler, sizeof filler);
    shoal_key_init(&key);
    shoal_key_add_key(&key, &big);
    CHECK(key.overflow);
    shoal_key_init(&big);
    shoal_key_add_bytes(&big, filler, sizeof filler);
    shoal_key_init(&key);
    for (int i = 0; i < 8 && !key.overflow; i++)
        shoal_key_add_key(&key, &big);
    CHECK_MSG(key.overflow && key.size <= SHOAL_KEY_MAX, "a key joined past SHOAL_KEY_MAX is %zu bytes "
              "and %s", key.size, key.overflow ? "overflowed" : "not overflowed");
}

int
main(void)
{
    SHOAL_TEST(test_key_layout);
    SHOAL_TEST(test_key_order_property);
    SHOAL_TEST(test_key_round_trip);
    SHOAL_TEST(test_key_reader_errors);
    SHOAL_TEST(test_key_prefix_end);
    SHOAL_TEST(test_key_overflow);
    SHOAL_TEST(test_key_format);
    SHOAL_TEST(test_key_prefix_scan);
    SHOAL_TEST(test_key_add_key);
    return shoal_test_finish();
}
