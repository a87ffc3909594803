/* NPU memory domains for rkllm handles (RKLLMExtendParam.base_domain_id). The rknpu driver
 * 0.9.8 has 16 IOMMU domains (RKNPU_MAX_IOMMU_DOMAIN_NUM in rknpu_drv.h), each a 4 GiB address
 * space, and attaches one at a time; rknn2 contexts never name one and live in domain 0. Not
 * a memory budget: it only hands out ids. Process-wide, thread-safe. */
#ifndef PLATFORM_ROCKCHIP_RKLLM_DOMAIN_H
#define PLATFORM_ROCKCHIP_RKLLM_DOMAIN_H

#include "util/err.h"

#include <stdbool.h>
#include <stdint.h>

#define RKLLM_DOMAIN_CAP   16           // ids 0..15: the driver refuses 16 and above
#define RKLLM_DOMAIN_BYTES (4ull << 30) // one domain's address space

/* Whether the SoC's rkllm handles get domains of their own (RK3588, RK3588S, RK3576: the
 * vendor's multimodal demo moves the LLM to domain 1 there) rather than all sharing domain 0
 * (RK3562, RV1126B and anything else: the same demo keeps 0). Cannot fail. */
bool rkllm_domain_soc_has_many(const char *soc);

/* How many consecutive domains a model of model_bytes starts in and continues into (at least
 * 1; a model over 4 GiB spills into the next id). Cannot fail. */
int rkllm_domain_span(uint64_t model_bytes);

/* The first id for a new handle: with is_many, the lowest run of span free ids within 1..15,
 * marked used; else 0, shared. ERR_LIMIT with err saying so when no run is free (or span is
 * more than 15 ids). */
int rkllm_domain_take(bool is_many, int span, int *first, struct errmsg *err);

/* Frees what rkllm_domain_take(is_many, span) gave (a no-op for the shared 0). */
void rkllm_domain_give(bool is_many, int first, int span);

#endif
