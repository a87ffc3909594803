/* The `rkllm` platform: discovery (the runtime library, chips, which model directories are
 * its). Model loading is not built yet: a load says so. */
#include "platform/rkllm.h"

#include "platform/vendor.h"
#include "util/log.h"

#include <stddef.h>
#include <stdio.h>

/* The runtime functions this platform calls, resolved at start-up; their struct arguments
 * are the ABI mirrors of rkllm_abi.h. */
struct rkllm_fns {
    void *(*rkllm_createDefaultParam)(void); // returns the param struct by value (see load)
    int (*rkllm_init)(void **handle, void *param, void *callback);
    int (*rkllm_run)(void *handle, void *input, void *infer_param, void *userdata);
    int (*rkllm_abort)(void *handle);
    int (*rkllm_destroy)(void *handle);
    int (*rkllm_set_chat_template)(void *handle, const char *system, const char *prefix,
                                   const char *postfix);
};

static const struct vendor_sym syms[] = {
    {"rkllm_createDefaultParam", offsetof(struct rkllm_fns, rkllm_createDefaultParam)},
    {"rkllm_init", offsetof(struct rkllm_fns, rkllm_init)},
    {"rkllm_run", offsetof(struct rkllm_fns, rkllm_run)},
    {"rkllm_abort", offsetof(struct rkllm_fns, rkllm_abort)},
    {"rkllm_destroy", offsetof(struct rkllm_fns, rkllm_destroy)},
    {"rkllm_set_chat_template", offsetof(struct rkllm_fns, rkllm_set_chat_template)},
};

static struct vendor_lib lib;
static struct rkllm_fns fns;

static void rkllm_start(void)
{
    const char *path = vendor_config_get()->rkllm_lib;
    if (vendor_lib_open(&lib, path, syms, sizeof syms / sizeof syms[0], &fns, sizeof fns) != ERR_OK)
        log_info("platform rkllm unavailable: %s", lib.reason);
}

static void rkllm_stop(void)
{
    vendor_lib_close(&lib);
}

static bool rkllm_is_available(void)
{
    return lib.is_available;
}

static void rkllm_status(struct platform_status *out)
{
    vendor_status_fill(&lib, out);
    snprintf(out->abi, sizeof out->abi, "%s", vendor_config_get()->rkllm_abi);
}

static int rkllm_detect_chips(struct platform_chip *out, int max)
{
    return vendor_soc_chips(out, max);
}

static bool rkllm_claims(const char *path)
{
    return vendor_claims(path, "rkllm");
}

static int rkllm_load(const struct platform_load_args *a, struct platform_model **out,
                      struct errmsg *err)
{
    (void)out;
    return errmsg_set(err, ERR_UNSUPPORTED, "the rkllm platform cannot load models yet ('%s')",
                      a->path);
}

static void rkllm_describe(const struct platform_model *m, struct platform_model_desc *out)
{
    (void)m;
    (void)out;
}

static int rkllm_add_instance(struct platform_model *m, int instance, struct errmsg *err)
{
    (void)m;
    (void)instance;
    return errmsg_set(err, ERR_UNSUPPORTED, "the rkllm platform cannot load models yet");
}

static void rkllm_remove_instance(struct platform_model *m, int instance)
{
    (void)m;
    (void)instance;
}

static void rkllm_submit(struct platform_model *m, int instance, struct request *r)
{
    (void)m;
    (void)instance;
    (void)r;
}

static void rkllm_unload(struct platform_model *m)
{
    (void)m;
}

const struct platform rkllm_platform = {
    .id = "rkllm",
    .display_name = "RKLLM (Rockchip NPU)",
    .start = rkllm_start,
    .stop = rkllm_stop,
    .is_available = rkllm_is_available,
    .status = rkllm_status,
    .detect_chips = rkllm_detect_chips,
    .claims = rkllm_claims,
    .load = rkllm_load,
    .describe = rkllm_describe,
    .add_instance = rkllm_add_instance,
    .remove_instance = rkllm_remove_instance,
    .submit = rkllm_submit,
    .unload = rkllm_unload,
};
