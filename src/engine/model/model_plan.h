/* The conversion plans of a model's weight products (model_plan.c). Internal to engine/. */
#ifndef ENGINE_MODEL_PLAN_H
#define ENGINE_MODEL_PLAN_H

#include "engine/model/model_internal.h"
#include "util/err.h"

/* Builds every layer's plans and the output's after the weights are loaded (and repacked), and
 * sets the slots' row capacity in m->sc. ERR_UNSUPPORTED (a weight type without an input
 * conversion; err names the type). */
int model_plan_all(struct engine_model *m, struct errmsg *err);

#endif
