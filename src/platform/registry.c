/* The compiled-in platform table. Vendor platforms are compiled in too; their runtimes are
 * opened with dlopen at start-up (platform_start_all), so a host without them lists them as
 * unavailable. */
#include "platform/platform.h"

#include "platform/cpu/cpu.h"
#include "platform/detect.h"
#include "platform/rockchip/rkllm.h"
#include "platform/rockchip/rknn2.h"
#include "platform/rockchip/rknn3.h"
#include "util/mem.h"

#include <string.h>

static const struct platform *const platforms[] = {
    &cpu_platform,
    &rkllm_platform,
    &rknn2_platform,
    &rknn3_platform,
};

void platform_start_all(void)
{
    for (size_t i = 0; i < sizeof platforms / sizeof platforms[0]; i++)
        if (platforms[i]->start) platforms[i]->start();
}

void platform_stop_all(void)
{
    for (size_t i = 0; i < sizeof platforms / sizeof platforms[0]; i++)
        if (platforms[i]->stop) platforms[i]->stop();
}

const struct platform *const *platform_list(size_t *n_platforms)
{
    *n_platforms = sizeof platforms / sizeof platforms[0];
    return platforms;
}

const struct platform *platform_find(const char *id)
{
    for (size_t i = 0; i < sizeof platforms / sizeof platforms[0]; i++)
        if (strcmp(platforms[i]->id, id) == 0) return platforms[i];
    return NULL;
}

const struct platform *platform_detect(const char *path)
{
    struct platform_detection *d = mem_alloc(sizeof *d);
    if (!d) return NULL;
    struct errmsg err;
    errmsg_clear(&err);
    const struct platform *p = platform_detect_model(path, d, &err) == ERR_OK ? d->platform : NULL;
    mem_free(d);
    return p;
}

void platform_desc_detect_formats(struct platform_model_desc *d)
{
    d->tool_format = toolcall_format_detect(d->chat_template_src);
    d->reasoning_format = reasoning_format_detect(d->chat_template_src);
}

int platform_pooling_parse(const char *name, enum platform_pooling *out)
{
    static const char *const names[] = {"none", "mean", "cls", "last", "rank"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(name, names[i]) == 0) {
            *out = (enum platform_pooling)(PLATFORM_POOLING_NONE + (int)i);
            return ERR_OK;
        }
    }
    return ERR_INVALID;
}
