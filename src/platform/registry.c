/* The compiled-in platform table. Vendor platforms add an entry here (or, later, are loaded
 * with dlopen and appended). */
#include "platform/platform.h"

#include "platform/cpu.h"

#include <string.h>

static const struct platform *const platforms[] = {
    &cpu_platform,
};

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
    for (size_t i = 0; i < sizeof platforms / sizeof platforms[0]; i++)
        if (platforms[i]->claims(path)) return platforms[i];
    return NULL;
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
