/* Which RKLLM runtime release an opened librkllmrt.so is, told from how it behaves rather than
 * from its name: the layout rkllm_createDefaultParam writes, and whether it exports
 * rkllm_get_kv_cache_size (added in 1.2.1). Not a loader: the caller opens the library. Facts
 * from rknn-llm's rkllm.h at releases 1.1.4, 1.2.0, 1.2.1b1, 1.2.1-1.2.3 and 1.3.0. */
#ifndef PLATFORM_ROCKCHIP_RKLLM_PROBE_H
#define PLATFORM_ROCKCHIP_RKLLM_PROBE_H

#include "platform/rockchip/rkllm_abi.h"

#include <stdbool.h>
#include <stddef.h>

/* What the probe saw. */
struct rkllm_probe_facts {
    const unsigned char *bytes; // the default param as written: sizeof(struct rkllm_param_room)
    size_t written_end;         // one past the last byte written; 0 when it cannot be seen
    bool has_kv_cache_size;     // the library exports rkllm_get_kv_cache_size
};

/* The probe's verdict: an ABI we speak, or a refusal saying what was found. */
struct rkllm_abi_verdict {
    int abi;          // 12 (1.2.1-1.2.3), 13 (1.3.0), 0: refused
    char found[48];   // the release(s) the facts point to: "1.3.0", "1.2.0 or 1.2.1b1", ...
    char reason[320]; // why it is refused ("" when accepted)
};

/* Reads the verdict from facts. Cannot fail. */
void rkllm_abi_classify(const struct rkllm_probe_facts *f, struct rkllm_abi_verdict *out);

/* Calls create (the runtime's rkllm_createDefaultParam, resolved by dlsym) so that it writes
 * straight into room, once over each of two fill patterns, and sets *written_end to one past
 * the last byte it wrote in either call (0 on a machine where the result slot cannot be passed
 * directly and the call goes through a C temporary instead). room keeps the second call's
 * bytes: the runtime's defaults within its own size. Cannot fail; create must be the real
 * function (it is called). */
void rkllm_default_param(void (*create)(void), struct rkllm_param_room *room, size_t *written_end);

#endif
