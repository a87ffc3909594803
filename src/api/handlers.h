/* Every endpoint handler, grouped by the file that implements it. The server's route table
 * (server/routes.c) is the one place that maps paths to these. */
#ifndef API_HANDLERS_H
#define API_HANDLERS_H

#include "api/api.h"

/* health.c */
void api_health(const struct api_ctx *ctx, const struct api_request *req,
                struct api_response *resp);

/* platforms.c */
void api_platforms_list(const struct api_ctx *ctx, const struct api_request *req,
                        struct api_response *resp);

/* models.c */
void api_models_list(const struct api_ctx *ctx, const struct api_request *req,
                     struct api_response *resp);
void api_models_get(const struct api_ctx *ctx, const struct api_request *req,
                    struct api_response *resp);

/* models_admin.c */
void api_models_load(const struct api_ctx *ctx, const struct api_request *req,
                     struct api_response *resp);
void api_models_resize(const struct api_ctx *ctx, const struct api_request *req,
                       struct api_response *resp);
void api_models_unload(const struct api_ctx *ctx, const struct api_request *req,
                       struct api_response *resp);

/* openai_chat.c */
void api_chat_completions(const struct api_ctx *ctx, const struct api_request *req,
                          struct api_response *resp);

/* native.c (llama.cpp server) */
void api_native_completion(const struct api_ctx *ctx, const struct api_request *req,
                           struct api_response *resp);
void api_native_infill(const struct api_ctx *ctx, const struct api_request *req,
                       struct api_response *resp);

/* native_oai.c: POST /v1/completions */
void api_completions(const struct api_ctx *ctx, const struct api_request *req,
                     struct api_response *resp);

/* native_info.c */
void api_native_tokenize(const struct api_ctx *ctx, const struct api_request *req,
                         struct api_response *resp);
void api_native_detokenize(const struct api_ctx *ctx, const struct api_request *req,
                           struct api_response *resp);
void api_native_apply_template(const struct api_ctx *ctx, const struct api_request *req,
                               struct api_response *resp);
void api_native_props(const struct api_ctx *ctx, const struct api_request *req,
                      struct api_response *resp);
void api_native_slots(const struct api_ctx *ctx, const struct api_request *req,
                      struct api_response *resp);
/* native_slots.c: POST /slots/{id}?action=save|restore|erase (needs --slot-save-path). */
void api_native_slot_action(const struct api_ctx *ctx, const struct api_request *req,
                            struct api_response *resp);
void api_native_metrics(const struct api_ctx *ctx, const struct api_request *req,
                        struct api_response *resp);

/* native_router.c */
void api_router_models(const struct api_ctx *ctx, const struct api_request *req,
                       struct api_response *resp);
void api_router_load(const struct api_ctx *ctx, const struct api_request *req,
                     struct api_response *resp);
void api_router_unload(const struct api_ctx *ctx, const struct api_request *req,
                       struct api_response *resp);
/* anthropic.c */
void api_anthropic_messages(const struct api_ctx *ctx, const struct api_request *req,
                            struct api_response *resp);
void api_anthropic_count_tokens(const struct api_ctx *ctx, const struct api_request *req,
                                struct api_response *resp);

/* responses.c */
void api_responses_create(const struct api_ctx *ctx, const struct api_request *req,
                          struct api_response *resp);
void api_responses_input_tokens(const struct api_ctx *ctx, const struct api_request *req,
                                struct api_response *resp);

/* input_tokens.c */
void api_chat_input_tokens(const struct api_ctx *ctx, const struct api_request *req,
                           struct api_response *resp);
/* openai_embed.c */
void api_embeddings(const struct api_ctx *ctx, const struct api_request *req,
                    struct api_response *resp);
/* native_embed.c: llama.cpp's /embedding and /embeddings */
void api_native_embeddings(const struct api_ctx *ctx, const struct api_request *req,
                           struct api_response *resp);

/* rerank.c: /rerank, /reranking, /v1/rerank, /v1/reranking */
void api_rerank(const struct api_ctx *ctx, const struct api_request *req,
                struct api_response *resp);

#endif
