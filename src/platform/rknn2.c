/* The `rknn2` platform: discovery (the runtime library, chips, which model directories are
 * its). Model loading is not built yet: a load says so. */
#include "platform/rknn2.h"

#include "platform/vendor.h"
#include "util/log.h"

#include <stddef.h>

/* The runtime functions this platform calls, resolved at start-up. */
struct rknn2_fns {
    int (*rknn_init)(void);            // resolved for the availability check
    int (*rknn_query)(void);           // resolved for the availability check
    int (*rknn_inputs_set)(void);      // resolved for the availability check
    int (*rknn_run)(void);             // resolved for the availability check
    int (*rknn_outputs_get)(void);     // resolved for the availability check
    int (*rknn_outputs_release)(void); // resolved for the availability check
    int (*rknn_destroy)(void);         // resolved for the availability check
};

static const struct vendor_sym syms[] = {
    {"rknn_init", offsetof(struct rknn2_fns, rknn_init)},
    {"rknn_query", offsetof(struct rknn2_fns, rknn_query)},
    {"rknn_inputs_set", offsetof(struct rknn2_fns, rknn_inputs_set)},
    {"rknn_run", offsetof(struct rknn2_fns, rknn_run)},
    {"rknn_outputs_get", offsetof(struct rknn2_fns, rknn_outputs_get)},
    {"rknn_outputs_release", offsetof(struct rknn2_fns, rknn_outputs_release)},
    {"rknn_destroy", offsetof(struct rknn2_fns, rknn_destroy)},
};

static struct vendor_lib lib;
static struct rknn2_fns fns;

static void rknn2_start(void)
{
    const char *path = vendor_config_get()->rknn_lib;
    if (vendor_lib_open(&lib, path, syms, sizeof syms / sizeof syms[0], &fns, sizeof fns) != ERR_OK)
        log_info("platform rknn2 unavailable: %s", lib.reason);
}

static void rknn2_stop(void)
{
    vendor_lib_close(&lib);
}

static bool rknn2_is_available(void)
{
    return lib.is_available;
}

static void rknn2_status(struct platform_status *out)
{
    vendor_status_fill(&lib, out);
}

static int rknn2_detect_chips(struct platform_chip *out, int max)
{
    return vendor_soc_chips(out, max);
}

static bool rknn2_claims(const char *path)
{
    return vendor_claims(path, "rknn2");
}

static int rknn2_load(const struct platform_load_args *a, struct platform_model **out,
                      struct errmsg *err)
{
    (void)out;
    return errmsg_set(err, ERR_UNSUPPORTED, "the rknn2 platform cannot load models yet ('%s')",
                      a->path);
}

static void rknn2_describe(const struct platform_model *m, struct platform_model_desc *out)
{
    (void)m;
    (void)out;
}

static int rknn2_add_instance(struct platform_model *m, int instance, struct errmsg *err)
{
    (void)m;
    (void)instance;
    return errmsg_set(err, ERR_UNSUPPORTED, "the rknn2 platform cannot load models yet");
}

static void rknn2_remove_instance(struct platform_model *m, int instance)
{
    (void)m;
    (void)instance;
}

static void rknn2_submit(struct platform_model *m, int instance, struct request *r)
{
    (void)m;
    (void)instance;
    (void)r;
}

static void rknn2_unload(struct platform_model *m)
{
    (void)m;
}

const struct platform rknn2_platform = {
    .id = "rknn2",
    .display_name = "RKNN2 (Rockchip NPU embeddings)",
    .start = rknn2_start,
    .stop = rknn2_stop,
    .is_available = rknn2_is_available,
    .status = rknn2_status,
    .detect_chips = rknn2_detect_chips,
    .claims = rknn2_claims,
    .load = rknn2_load,
    .describe = rknn2_describe,
    .add_instance = rknn2_add_instance,
    .remove_instance = rknn2_remove_instance,
    .submit = rknn2_submit,
    .unload = rknn2_unload,
};
