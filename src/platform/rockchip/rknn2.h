/* The `rknn2` platform: embedding models (.rknn plus Hugging Face tokenizer files) on the Rockchip NPU through librknnrt.so. */
#ifndef PLATFORM_RKNN2_H
#define PLATFORM_RKNN2_H

#include "platform/platform.h"

extern const struct platform rknn2_platform;

#endif
