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

/* openai_embed.c */
void api_embeddings(const struct api_ctx *ctx, const struct api_request *req,
                    struct api_response *resp);

#endif
