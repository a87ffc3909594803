/* Ollama's API (/api/…) on llamapi's machinery: the handlers the route table maps. Follows
 * Ollama's API reference (docs/api.md of its repository): its request fields, its answer
 * shapes, NDJSON streaming and its error object {"error": "…"}. */
#ifndef API_OLLAMA_HANDLERS_H
#define API_OLLAMA_HANDLERS_H

#include "api/api.h"

/* models.c: GET /api/version, GET /api/tags, GET /api/ps, POST /api/show; pull.c: POST /api/pull */
void api_ollama_version(const struct api_ctx *ctx, const struct api_request *req,
                        struct api_response *resp);
void api_ollama_tags(const struct api_ctx *ctx, const struct api_request *req,
                     struct api_response *resp);
void api_ollama_ps(const struct api_ctx *ctx, const struct api_request *req,
                   struct api_response *resp);
void api_ollama_show(const struct api_ctx *ctx, const struct api_request *req,
                     struct api_response *resp);
void api_ollama_pull(const struct api_ctx *ctx, const struct api_request *req,
                     struct api_response *resp);

/* chat.c: POST /api/chat, POST /api/generate */
void api_ollama_chat(const struct api_ctx *ctx, const struct api_request *req,
                     struct api_response *resp);
void api_ollama_generate(const struct api_ctx *ctx, const struct api_request *req,
                         struct api_response *resp);

/* embed.c: POST /api/embed, POST /api/embeddings */
void api_ollama_embed(const struct api_ctx *ctx, const struct api_request *req,
                      struct api_response *resp);
void api_ollama_embeddings(const struct api_ctx *ctx, const struct api_request *req,
                           struct api_response *resp);

#endif
