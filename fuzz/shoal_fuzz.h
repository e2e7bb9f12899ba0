/*  shoal_fuzz: what every libFuzzer harness of shoal shares.

    A harness feeds bytes to one family of decoders and checks, beyond "no
    crash", the promise each decoder makes: what decodes encodes again, and
    decodes again to the same shape; two readers of one format agree. A
    broken promise aborts, which libFuzzer reports as a finding with the
    input that broke it.
*/
#ifndef SHOAL_FUZZ_H_INCLUDED
#define SHOAL_FUZZ_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

//  Room for a decoder's error message.
#define SHOAL_FUZZ_ERROR_MAX 512

//  Reports a broken promise and aborts.
#define SHOAL_FUZZ_ASSERT(cond, ...) do { \
    if (!(cond)) { \
        fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond); \
        fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); \
        abort(); \
    } } while (0)

#define SHOAL_FUZZ_COUNT(array) (sizeof (array) / sizeof (array)[0])

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
