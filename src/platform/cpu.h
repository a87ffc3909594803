/* The `cpu` platform: our own engine, running GGUF models on the host CPU. */
#ifndef PLATFORM_CPU_H
#define PLATFORM_CPU_H

#include "platform/platform.h"

extern const struct platform cpu_platform;

/* True when path is a GGUF file (by its magic bytes) or a directory holding exactly one
 * `.gguf` file. When gguf_path is not NULL, the file's path is written there (truncated to
 * cap). */
bool cpu_resolve_gguf(const char *path, char *gguf_path, size_t cap);

#endif
