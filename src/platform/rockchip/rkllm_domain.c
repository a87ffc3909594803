/* Handing out base_domain_id. Facts from rknn-llm rknpu-driver/rknpu_driver_0.9.8_20241009
 * (rknpu_drv.h: RKNPU_MAX_IOMMU_DOMAIN_NUM 16; rknpu_iommu.c: a 4 GiB IOVA space per domain,
 * one domain attached at a time) and examples/multimodal_model_demo/deploy/src/main.cpp at
 * v1.3.0 (the LLM in domain 1 on RK3588/RK3576, 0 on RK3562/RV1126B, beside an rknn encoder
 * in domain 0). */
#include "platform/rockchip/rkllm_domain.h"

#include "util/thread.h"

#include <string.h>

static struct mutex mu = {PTHREAD_MUTEX_INITIALIZER};
static bool is_used[RKLLM_DOMAIN_CAP]; // guarded by mu; [0] never: it is rknn2's

bool rkllm_domain_soc_has_many(const char *soc)
{
    return strcmp(soc, "RK3588") == 0 || strcmp(soc, "RK3588S") == 0 || strcmp(soc, "RK3576") == 0;
}

int rkllm_domain_span(uint64_t model_bytes)
{
    uint64_t n = model_bytes / RKLLM_DOMAIN_BYTES + (model_bytes % RKLLM_DOMAIN_BYTES ? 1 : 0);
    if (n < 1) return 1;
    return n > RKLLM_DOMAIN_CAP ? RKLLM_DOMAIN_CAP : (int)n;
}

/* Whether ids first..first+span-1 are all free. Called under mu. */
static bool is_run_free(int first, int span)
{
    for (int k = first; k < first + span; k++)
        if (is_used[k]) return false;
    return true;
}

int rkllm_domain_take(bool is_many, int span, int *first, struct errmsg *err)
{
    if (!is_many) {
        *first = 0;
        return ERR_OK;
    }
    int found = -1;
    mutex_lock(&mu);
    for (int d = 1; d + span <= RKLLM_DOMAIN_CAP && found < 0; d++)
        if (is_run_free(d, span)) found = d;
    for (int k = found; found > 0 && k < found + span; k++)
        is_used[k] = true;
    mutex_unlock(&mu);
    if (found < 0)
        return errmsg_set(err, ERR_LIMIT,
                          "no NPU memory domain left for another rkllm instance: it needs %d "
                          "free consecutive id(s) within 1-%d (the rknpu driver has %d, and 0 "
                          "stays with rknn2)",
                          span, RKLLM_DOMAIN_CAP - 1, RKLLM_DOMAIN_CAP);
    *first = found;
    return ERR_OK;
}

void rkllm_domain_give(bool is_many, int first, int span)
{
    if (!is_many || first < 1) return;
    mutex_lock(&mu);
    for (int k = first; k < first + span && k < RKLLM_DOMAIN_CAP; k++)
        is_used[k] = false;
    mutex_unlock(&mu);
}
