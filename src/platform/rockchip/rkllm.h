/* The `rkllm` platform: chat models (.rkllm) on the Rockchip NPU through librkllmrt.so (RKLLM runtime, ABI 1.2.x or 1.3.0). */
#ifndef PLATFORM_RKLLM_H
#define PLATFORM_RKLLM_H

#include "platform/platform.h"

extern const struct platform rkllm_platform;

#endif
