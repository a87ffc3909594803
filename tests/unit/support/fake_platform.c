/* Fake platform: load always "succeeds" on any path, instances are counters, submitted
 * requests wait in fake.running until fake_complete(). */
#include "fake_platform.h"

#include "util/mem.h"

#include <string.h>

struct fake_state fake;

struct platform_model {
    platform_done_fn on_done;
    void *owner;
};

static struct platform_model *the_model;

void fake_reset(void)
{
    memset(&fake, 0, sizeof fake);
    fake.max_instances = 64;
    fake.instance_bytes = 1 << 20;
}

static bool fake_available(void)
{
    return true;
}

static int fake_chips(struct platform_chip *out, int max)
{
    (void)out;
    (void)max;
    return 0;
}

static bool fake_claims(const char *path)
{
    (void)path;
    return true;
}

static int fake_load(const struct platform_load_args *a, struct platform_model **out,
                     struct errmsg *err)
{
    if (fake.fail_load) return errmsg_set(err, ERR_FORMAT, "fake: malformed model");
    struct platform_model *m = mem_calloc(1, sizeof *m);
    if (!m) return ERR_NOMEM;
    m->on_done = a->on_done;
    m->owner = a->owner;
    the_model = m;
    fake.n_loaded++;
    *out = m;
    return ERR_OK;
}

static void fake_describe(const struct platform_model *m, struct platform_model_desc *out)
{
    (void)m;
    memset(out, 0, sizeof *out);
    out->kind = MODEL_KIND_CHAT;
    out->n_ctx = 128;
    out->instance_bytes = fake.instance_bytes;
    out->chat_template_src = fake.chat_template_src;
}

static int fake_add(struct platform_model *m, int instance, struct errmsg *err)
{
    (void)m;
    (void)instance;
    if (fake.live_instances >= fake.max_instances)
        return errmsg_set(err, ERR_NOMEM, "fake: no memory for another instance");
    fake.live_instances++;
    return ERR_OK;
}

static void fake_remove(struct platform_model *m, int instance)
{
    (void)m;
    (void)instance;
    fake.live_instances--;
}

static void fake_submit(struct platform_model *m, int instance, struct request *r)
{
    (void)m;
    request_retain(r);
    request_mark_started(r);
    fake.running[instance] = r;
}

static int fake_cached_prefix(struct platform_model *m, int instance, const int32_t *tokens, int n)
{
    (void)m;
    int k = 0;
    while (k < n && k < fake.n_cache[instance] && fake.cache[instance][k] == tokens[k])
        k++;
    return k;
}

static void fake_unload(struct platform_model *m)
{
    fake.n_unloaded++;
    fake.live_instances = 0;
    if (the_model == m) the_model = NULL;
    mem_free(m);
}

void fake_complete(int instance, enum finish_reason reason)
{
    struct request *r = fake.running[instance];
    fake.running[instance] = NULL;
    int n = r->n_prompt < 8 ? r->n_prompt : 8;
    memcpy(fake.cache[instance], r->prompt, (size_t)n * sizeof(int32_t));
    fake.n_cache[instance] = n;
    request_finish(r, reason, 0, NULL);
    request_release(r);
    the_model->on_done(the_model->owner, instance);
}

const struct platform fake_platform = {
    .id = "fake",
    .display_name = "fake",
    .is_available = fake_available,
    .detect_chips = fake_chips,
    .claims = fake_claims,
    .load = fake_load,
    .describe = fake_describe,
    .add_instance = fake_add,
    .remove_instance = fake_remove,
    .submit = fake_submit,
    .cached_prefix = fake_cached_prefix,
    .unload = fake_unload,
};
