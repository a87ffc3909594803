/* Telling RKLLM runtime releases apart. The one number every release from 1.2.0 on documents
 * as a default, extend_param.enabled_cpus_num = 4, sits at a different byte in each parameter
 * layout (65 in 1.3.0's 184-byte RKLLMParam, 93 in 1.2.x's 208-byte one; 1.1.x has no such
 * field), and 1.2.0 / 1.2.1b1, whose RKLLMInput and RKLLMResult differ from 1.2.1's while
 * their RKLLMParam does not, lack rkllm_get_kv_cache_size. */
#include "platform/rockchip/rkllm_probe.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define CPUS_AT_12                                                                                 \
    (offsetof(struct rkllm12_param, extend_param) + offsetof(struct rkllm_extend, enabled_cpus_num))
#define CPUS_AT_13                                                                                 \
    (offsetof(struct rkllm13_param, extend_param) + offsetof(struct rkllm_extend, enabled_cpus_num))
#define DEFAULT_CPUS 4
#define FILL_A       0xA5
#define FILL_B       0x5A

#if defined(__LP64__)
_Static_assert(CPUS_AT_12 == 93, "enabled_cpus_num in 1.2.x RKLLMParam");
_Static_assert(CPUS_AT_13 == 65, "enabled_cpus_num in 1.3.0 RKLLMParam");
#endif

/* Why facts fit no release we speak (written into why), or NULL with *abi set when they do. */
static const char *judge(const struct rkllm_probe_facts *f, int *abi, const char **found, char *why,
                         size_t why_cap)
{
    const size_t size12 = sizeof(struct rkllm12_param), size13 = sizeof(struct rkllm13_param);
    *found = "an unknown release";
    if (f->written_end > size12) {
        snprintf(why, why_cap,
                 "rkllm_createDefaultParam wrote %zu bytes; 1.3.0 writes %zu and 1.2.x %zu",
                 f->written_end, size13, size12);
        return why;
    }
    bool at12 = f->bytes[CPUS_AT_12] == DEFAULT_CPUS;
    bool at13 = f->bytes[CPUS_AT_13] == DEFAULT_CPUS;
    if (at12 && at13) return "its default parameters fit both the 1.2.x and the 1.3.0 layout";
    if (!at12 && !at13)
        return "its default enabled_cpus_num is at neither byte 65 (1.3.0) nor byte 93 (1.2.x)";
    if (at13 && f->written_end > size13) {
        snprintf(why, why_cap,
                 "1.3.0's defaults, but rkllm_createDefaultParam wrote %zu bytes, not %zu",
                 f->written_end, size13);
        return why;
    }
    if (at13 && !f->has_kv_cache_size)
        return "1.3.0's parameter layout without rkllm_get_kv_cache_size";
    if (at13) {
        *found = "1.3.0";
        *abi = 13;
        return NULL;
    }
    // The 1.2.0 and 1.2.1b1 parameter structs equal 1.2.1's: only the symbol tells them apart,
    // and nothing tells 1.2.0 from 1.2.1b1.
    if (!f->has_kv_cache_size) {
        *found = "1.2.0 or 1.2.1b1";
        return "1.2.x parameters without rkllm_get_kv_cache_size; its input and result layouts "
               "differ from 1.2.1's";
    }
    *found = "1.2.1-1.2.3";
    *abi = 12;
    return NULL;
}

void rkllm_abi_classify(const struct rkllm_probe_facts *f, struct rkllm_abi_verdict *out)
{
    char why[160];
    const char *found;
    int abi = 0;
    const char *no = judge(f, &abi, &found, why, sizeof why);
    out->abi = no ? 0 : abi;
    snprintf(out->found, sizeof out->found, "%s", found);
    out->reason[0] = '\0';
    if (no)
        snprintf(out->reason, sizeof out->reason,
                 "the RKLLM runtime looks like %s (%s); llamapi speaks 1.2.1-1.2.3 and 1.3.0 "
                 "(--rkllm-abi forces one)",
                 found, no);
}

/* Runs create with its result slot at room: how each machine's C calling convention returns a
 * struct too large for registers, so the call is the one the runtime was built for. */
#if defined(__x86_64__) || defined(__arm__)
/* SysV AMD64 psABI 3.2.3 and AAPCS32 5.4: the caller passes the slot's address as a hidden
 * first argument (rdi / r0), exactly as for a function taking one pointer. */
static bool call_into(void (*create)(void), void *slot)
{
    void *(*as_pointer_arg)(void *) = (void *(*)(void *))create;
    as_pointer_arg(slot);
    return true;
}
#elif defined(__aarch64__)
/* AAPCS64 6.9: the slot's address goes in x8, which no C parameter can name, so the call is
 * made by hand; the clobbers are every register the callee may change. */
static bool call_into(void (*create)(void), void *slot)
{
    register void *x8 __asm__("x8") = slot;
    register void (*x16)(void) __asm__("x16") = create;
    __asm__ volatile("blr %1"
                     : "+r"(x8), "+r"(x16)
                     :
                     : "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x9", "x10", "x11", "x12",
                       "x13", "x14", "x15", "x17", "x18", "x30", "v0", "v1", "v2", "v3", "v4", "v5",
                       "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15", "v16",
                       "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v24", "v25", "v26", "v27",
                       "v28", "v29", "v30", "v31", "cc", "memory");
    return true;
}
#else
/* Elsewhere the call goes through a C temporary, which hides how much was written. */
static bool call_into(void (*create)(void), void *slot)
{
    struct rkllm_param_room (*by_value)(void) = (struct rkllm_param_room(*)(void))create;
    struct rkllm_param_room r = by_value();
    memcpy(slot, &r, sizeof r);
    return false;
}
#endif

void rkllm_default_param(void (*create)(void), struct rkllm_param_room *room, size_t *written_end)
{
    unsigned char first[sizeof(struct rkllm_param_room)];
    // Two fills: a byte the runtime wrote differs from at least one of them.
    memset(room, FILL_A, sizeof *room);
    bool is_direct = call_into(create, room);
    memcpy(first, room, sizeof first);
    memset(room, FILL_B, sizeof *room);
    call_into(create, room);
    size_t end = 0;
    for (size_t i = 0; is_direct && i < sizeof first; i++)
        if (first[i] != FILL_A || room->u.bytes[i] != FILL_B) end = i + 1;
    *written_end = end;
}
