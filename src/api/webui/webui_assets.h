/* The chat page's files (web/), compiled into the binary: tools/embed-web.sh writes them as
 * byte arrays into a generated C file (build/<kind>/gen/webui_assets.c) that defines
 * webui_assets(). Immutable; no locks needed. */
#ifndef API_WEBUI_WEBUI_ASSETS_H
#define API_WEBUI_WEBUI_ASSETS_H

#include <stddef.h>

struct webui_asset {
    const char *name;          // file name in web/ ("index.html"), no directories
    const char *content_type;  // from the extension, with charset for text
    const unsigned char *data; // the file's bytes (static storage)
    size_t len;                // bytes
};

/* The embedded files in name order; *n_assets gets their count. Cannot fail. */
const struct webui_asset *webui_assets(size_t *n_assets);

#endif
