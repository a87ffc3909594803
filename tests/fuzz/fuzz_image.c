/* libFuzzer target: image_decode() on arbitrary bytes, with and without kept pixels.
 * Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc -D_POSIX_C_SOURCE=200809L \
 *   tests/fuzz/fuzz_image.c src/media/image.c src/util/{mem,err,log}.c \
 *   $(pkg-config --libs libpng libjpeg libwebp) -o fuzz_image */
#include "media/image.h"
#include "util/mem.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    // Small limits keep each run fast; the decoders' paths are the same.
    struct image_limits lim = {.width_max = 1024, .height_max = 1024, .pixels_max = 1u << 20};
    struct image_input in = {.data = data, .len = len, .limits = &lim};
    struct image_info info;
    struct errmsg e;
    unsigned char *rgb = NULL;
    int rc = image_decode(&in, &info, (len & 1) ? &rgb : NULL, &e);
    if (rc == ERR_OK && rgb) {
        volatile unsigned char sink = rgb[(size_t)info.width * info.height * 3 - 1];
        (void)sink;
    }
    mem_free(rgb);
    return 0;
}
