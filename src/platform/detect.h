/* Which platform runs a model, from its path: a file by its extension or magic, a directory by
 * the files in it, or by its model.json manifest, which may name the platform and settings.
 *
 * Directory rules (files named in the manifest's "file" take precedence):
 *   X.rknn + X.weight + X.tokenizer.gguf + X.embed.bin  → rknn3
 *   one *.rkllm                                          → rkllm
 *   one *.rknn (other than the above) + tokenizer.json or tokenizer_config.json → rknn2
 *   one *.gguf (not X.tokenizer.gguf, an rknn3 set's tokenizer) → cpu
 * More than one match, or none, is a detection failure that says what was found. */
#ifndef PLATFORM_DETECT_H
#define PLATFORM_DETECT_H

#include "platform/platform.h"

#include <stdbool.h>

#define PLATFORM_MANIFEST_NAME "model.json"

/* model.json: every field optional. */
struct platform_manifest {
    bool is_present;
    char platform[32]; // a platform id
    char file[256];    // the model file, relative to the directory
    char abi[16];      // rkllm: "1.2" or "1.3"
    int seq_len;       // rknn2: the static sequence length (0: from the model)
    char pooling[16];  // embeddings: "cls", "mean", …
    char chip[32];     // what the model was built for ("rk3588", "RK1828")
};

/* Reads dir/model.json. ERR_OK (is_present false when there is none) or ERR_FORMAT (err says
 * which field is wrong). */
int platform_manifest_read(const char *dir, struct platform_manifest *out, struct errmsg *err);

struct platform_detection {
    const struct platform *platform;
    char dir[4096];  // the model's directory (a file's parent)
    char file[4096]; // the main model file (the .rknn of an rknn3 set)
    char chip[32];   // the chip the model was built for, lower case ("" when unknown): the
                     // manifest's, else an rkNNNN part of the file name
    struct platform_manifest manifest;
};

/* Detects the platform of the model at path (a file or a directory). ERR_OK, or
 * ERR_UNSUPPORTED / ERR_FORMAT with err saying what was found (nothing, several candidates,
 * an unknown platform in model.json, a bad manifest). */
int platform_detect_model(const char *path, struct platform_detection *out, struct errmsg *err);

#endif
