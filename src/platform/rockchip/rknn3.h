/* The `rknn3` platform: chat, embedding and rerank models on RK182X coprocessors through the RKNN3 runtime. */
#ifndef PLATFORM_RKNN3_H
#define PLATFORM_RKNN3_H

#include "platform/platform.h"

extern const struct platform rknn3_platform;

#endif
