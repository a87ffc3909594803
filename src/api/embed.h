/* Embedding requests shared by POST /v1/embeddings and llama.cpp's /embedding(s): inputs
 * (a string, an array of strings, an array of token ids or an array of such arrays) tokenized
 * against the model's context, one request through the model's pool, vectors as JSON. */
#ifndef API_EMBED_H
#define API_EMBED_H

#include "api/validate.h"
#include "core/model.h"
#include "text/tokenizer/tokenizer.h"

/* A call's inputs, tokenized and concatenated. */
struct embed_inputs {
    struct tok_ids ids; // every input's tokens, back to back
    int *lens;          // (n) tokens per input
    int n;
};

/* Frees the inputs; a zeroed struct is a no-op. */
void embed_inputs_deinit(struct embed_inputs *in);

/* encoding_format (float | base64), dimensions (accepted, not applied), user, truncate. */
bool embed_parse_options(const json_t *body, bool *is_base64, bool *is_truncate,
                         struct api_fail *f);

/* Tokenizes the inputs given in the request field `name` for model m (text gets the
 * vocabulary's special tokens; ids are used as given). An input over the context is 400
 * context_length_exceeded naming its index, unless is_truncate keeps its head. Free out with
 * embed_inputs_deinit either way. */
bool embed_parse_inputs(const struct model *m, const json_t *inputs, const char *name,
                        bool is_truncate, struct embed_inputs *out, struct api_fail *f);

/* Submits the inputs as one request and waits for the vectors (L2-normalized, n_embd each, in
 * input order; for a reranker n_cls_out scores each, see embed_width; with the model's
 * is_per_token one unnormalized vector per token of every input, in order). On success *out is the finished request (the caller releases it); 429
 * queue_full, 404 while unloading, or the platform's error otherwise. */
bool embed_run(struct model *m, const struct embed_inputs *in, struct request **out,
               struct api_fail *f);

/* Floats per input in a finished request of model m: n_embd, or a reranker's n_cls_out. */
int embed_width(const struct model *m);

/* True when m is a reranker (an embedding model with pooling rank). */
bool embed_is_reranker(const struct model *m);

/* One vector as a JSON array of numbers, or a base64 string of its little-endian f32 bytes. */
json_t *embed_vector_json(const float *v, int n, bool is_base64);

#endif
