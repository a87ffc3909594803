/* The cpu platform's model lifecycle on our engine: load (engine model, tokenizer, chat
 * template, kernel thread pool), instances (engine sequences with their KV caches) and one
 * scheduler thread per model that runs continuous batching over every busy instance.
 * Function contracts are those of struct platform (platform/platform.h). */
#ifndef PLATFORM_CPU_MODEL_H
#define PLATFORM_CPU_MODEL_H

#include "platform/platform.h"

int cpu_model_load(const struct platform_load_args *a, struct platform_model **out,
                   struct errmsg *err);
void cpu_model_describe(const struct platform_model *m, struct platform_model_desc *out);
int cpu_model_add_instance(struct platform_model *m, int instance, struct errmsg *err);
void cpu_model_remove_instance(struct platform_model *m, int instance);
void cpu_model_submit(struct platform_model *m, int instance, struct request *r);
/* The platform's cached_prefix: the tokens of an idle instance's cache that start `tokens`. */
int cpu_model_cached_prefix(struct platform_model *m, int instance, const int32_t *tokens, int n);
void cpu_model_unload(struct platform_model *m);
/* The platform's is_failed: the model's GGUF changed on disk (engine/gguf/gguf.h,
 * gguf_is_changed). One fstat per call. */
bool cpu_model_is_failed(struct platform_model *m, struct errmsg *why);

#endif
