/* Mixture-of-experts pieces of the decoder: the experts' 3-D tensors seen as one weight matrix
 * per expert, and the router's choice (softmax gate, top-k, optional renormalization and scale)
 * as the reference computes it, and the expert FFN step of the forward pass: one product per
 * expert over every token of the step routed to it. Internal to engine/. */
#ifndef ENGINE_MODEL_MOE_H
#define ENGINE_MODEL_MOE_H

#include "engine/gguf/gguf.h"
#include "engine/model/model_fwd.h"
#include "engine/model/model_internal.h"
#include "engine/threadpool.h"
#include "util/err.h"

#include <stdint.h>

/* Views of the n_expert (n_out, n_in) matrices of the 3-D tensor blk.<il>.<name> [n_in, n_out,
 * n_expert] into out[0..n_expert). ERR_FORMAT (missing, wrong shape), ERR_UNSUPPORTED (a type
 * without kernels or rows that are not whole blocks); err names the tensor. */
int moe_load_experts(const struct gguf *g, const char *name, int il, int64_t n_in, int64_t n_out,
                     int n_expert, struct wmat *out, struct errmsg *err);

/* The (n_expert, n) F32 bias rows of blk.<il>.<name> [n, n_expert], used in place. ERR_FORMAT
 * (missing, wrong shape), ERR_UNSUPPORTED (not aligned F32); err names the tensor. */
int moe_load_bias(const struct gguf *g, const char *name, int il, int64_t n, int n_expert,
                  const float **out, struct errmsg *err);

/* One token's routing: probabilities softmax(logits[0..n_expert)), the n_used most probable
 * experts into sel (best first, lower index first on ties), their probabilities into w,
 * divided by their sum when norm (the sum clamped below at 2^-14 as the reference does), then
 * times scale when scale is neither 0 nor 1. Cannot fail. */
void moe_route(const float *logits, int n_expert, int n_used, bool norm, float scale, int32_t *sel,
               float *w);

/* Sigmoid routing (lfm2moe): gate g = sigmoid(logits); the n_used experts with the largest
 * g + bias (bias may be NULL; best first, lower index first on ties) into sel, their g into w,
 * divided by their sum when norm (clamped as moe_route), then times scale when it is neither 0
 * nor 1. logits is overwritten with g. Cannot fail. */
void moe_route_sigmoid(float *logits, const float *bias, int n_expert, int n_used, bool norm,
                       float scale, int32_t *sel, float *w);

/* gpt-oss's routing: the n_used largest logits (best first), their weights the softmax over
 * those n_used logits alone. Cannot fail. */
void moe_route_selected(const float *logits, int n_expert, int n_used, int32_t *sel, float *w);

/* The mixture-of-experts FFN of layer L over the step's normed rows in sc.xn, whose
 * quantization for the router's plan is in the slots, into sc.proj: the router's choice per
 * token, each chosen expert once over every row routed to it, the weighted slots summed in
 * rank order, plus the shared expert's (gated) output when the family has one. */
void moe_run(struct threadpool *tp, struct fwd *f, const struct layer *L);

#endif
