/* The `rknn3` platform: discovery (the runtime library, chips, which model directories are
 * its). Model loading is not built yet: a load says so. */
#include "platform/rknn3.h"

#include "platform/vendor.h"
#include "util/log.h"

#include <stddef.h>

/* The runtime functions this platform calls, resolved at start-up. */
struct rknn3_fns {
    int (*rknn3_find_devices)(void); // resolved for the availability check
    int (*rknn3_init)(void);         // resolved for the availability check
    int (*rknn3_destroy)(void);      // resolved for the availability check
};

static const struct vendor_sym syms[] = {
    {"rknn3_find_devices", offsetof(struct rknn3_fns, rknn3_find_devices)},
    {"rknn3_init", offsetof(struct rknn3_fns, rknn3_init)},
    {"rknn3_destroy", offsetof(struct rknn3_fns, rknn3_destroy)},
};

static struct vendor_lib lib;
static struct rknn3_fns fns;

static void rknn3_start(void)
{
    const char *path = vendor_config_get()->rknn3_lib;
    if (vendor_lib_open(&lib, path, syms, sizeof syms / sizeof syms[0], &fns, sizeof fns) != ERR_OK)
        log_info("platform rknn3 unavailable: %s", lib.reason);
}

static void rknn3_stop(void)
{
    vendor_lib_close(&lib);
}

static bool rknn3_is_available(void)
{
    return lib.is_available;
}

static void rknn3_status(struct platform_status *out)
{
    vendor_status_fill(&lib, out);
}

/* RK182X coprocessors come from the runtime's device enumeration (rknn3_find_devices); it has
 * no chip-type field, so the type comes from the models' target. To be filled in with the
 * platform's loading. */
static int rknn3_detect_chips(struct platform_chip *out, int max)
{
    (void)out;
    (void)max;
    return 0;
}

static bool rknn3_claims(const char *path)
{
    return vendor_claims(path, "rknn3");
}

static int rknn3_load(const struct platform_load_args *a, struct platform_model **out,
                      struct errmsg *err)
{
    (void)out;
    return errmsg_set(err, ERR_UNSUPPORTED, "the rknn3 platform cannot load models yet ('%s')",
                      a->path);
}

static void rknn3_describe(const struct platform_model *m, struct platform_model_desc *out)
{
    (void)m;
    (void)out;
}

static int rknn3_add_instance(struct platform_model *m, int instance, struct errmsg *err)
{
    (void)m;
    (void)instance;
    return errmsg_set(err, ERR_UNSUPPORTED, "the rknn3 platform cannot load models yet");
}

static void rknn3_remove_instance(struct platform_model *m, int instance)
{
    (void)m;
    (void)instance;
}

static void rknn3_submit(struct platform_model *m, int instance, struct request *r)
{
    (void)m;
    (void)instance;
    (void)r;
}

static void rknn3_unload(struct platform_model *m)
{
    (void)m;
}

const struct platform rknn3_platform = {
    .id = "rknn3",
    .display_name = "RKNN3",
    .start = rknn3_start,
    .stop = rknn3_stop,
    .is_available = rknn3_is_available,
    .status = rknn3_status,
    .detect_chips = rknn3_detect_chips,
    .claims = rknn3_claims,
    .load = rknn3_load,
    .describe = rknn3_describe,
    .add_instance = rknn3_add_instance,
    .remove_instance = rknn3_remove_instance,
    .submit = rknn3_submit,
    .unload = rknn3_unload,
};
