/* libFuzzer target for ct_checkpoint_parse (tools/fuzz.sh builds and runs it). By hand:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I engine -I . tests/fuzz/fuzz_checkpoint.c \
 *       engine/checkpoint/checkpoint.c engine/base/file.c engine/base/status.c -o /tmp/fuzz_ck -lz
 *   /tmp/fuzz_ck -max_total_time=60 tests/fuzz/corpus/checkpoint
 * The seeds are version 1 files (SGD, Adam, a truncated one) and a version 3 file with a training
 * set's record (index hash, three class names), so the mutations start inside that record too.
 * Each input is parsed twice: as given, and with its last 4 bytes replaced by the right CRC, so
 * the fuzzer also reaches the validation behind the CRC (what a CRC collision would expose).
 * Anything accepted must serialize back to exactly the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "checkpoint/checkpoint.h"

static void parse_one(const uint8_t *data, size_t size)
{
    ct_checkpoint ck;
    ct_err err;
    if (ct_checkpoint_parse(data, size, "fuzz", &ck, &err) != CT_OK)
        return;
    size_t len = ct_checkpoint_size(&ck);
    if (len != size)
        __builtin_trap();
    uint8_t *again = malloc(len);
    if (again) {
        ct_checkpoint_serialize(&ck, again);
        if (memcmp(again, data, len) != 0)
            __builtin_trap();
        free(again);
    }
    ct_checkpoint_free(&ck);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    parse_one(data, size);
    if (size < 4)
        return 0;
    /* An exact-size copy, so ASan catches a read one byte past the end. */
    uint8_t *fixed = malloc(size);
    if (!fixed)
        return 0;
    memcpy(fixed, data, size);
    uint32_t crc = (uint32_t)crc32(0L, fixed, (uInt)(size - 4));
    for (int i = 0; i < 4; i++)
        fixed[size - 4 + (size_t)i] = (uint8_t)(crc >> (8 * i));
    parse_one(fixed, size);
    free(fixed);
    return 0;
}
