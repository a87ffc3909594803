/* The `cpu` platform: our own engine, running GGUF models on the host CPU. */
#ifndef PLATFORM_CPU_H
#define PLATFORM_CPU_H

#include "platform/platform.h"

extern const struct platform cpu_platform;

/* True when path is a GGUF file (by its magic bytes) or a directory holding exactly one
 * `.gguf` file besides multimodal projectors (`mmproj-*.gguf`). When gguf_path is not NULL,
 * the file's path is written there (truncated to cap). */
bool cpu_resolve_gguf(const char *path, char *gguf_path, size_t cap);

/* The projector beside a model: when path is a directory holding `mmproj-*.gguf` files,
 * writes the path of the first by name to out (truncated to cap) and returns how many there
 * are; 0 for a file or a directory without one. Cannot fail otherwise. */
int cpu_find_mmproj(const char *path, char *out, size_t cap);

/* True for a file name a directory's multimodal projector has (`mmproj-*.gguf`). */
bool cpu_is_mmproj_name(const char *name);

/* Fills why with the failure of a model whose file changed on disk (PLATFORM_MSG_FILE_CHANGED,
 * then the file). Cannot fail. */
void cpu_file_changed_msg(const char *file, struct errmsg *why);

#endif
