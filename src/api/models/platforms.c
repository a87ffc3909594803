/* GET /v1/platforms: the compiled-in platforms, whether this host can run them, and the chips
 * each one detects. */
#include "api/handlers.h"

#include "api/errors.h"
#include "platform/platform.h"

#include <string.h>

#define MAX_CHIPS 16

static json_t *chips_json(const struct platform *p)
{
    struct platform_chip chips[MAX_CHIPS];
    int n = p->detect_chips(chips, MAX_CHIPS);
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++) {
        json_t *c =
            json_pack("{s:s, s:i}", "chip_type", chips[i].chip_type, "count", chips[i].count);
        if (!c || json_array_append_new(arr, c) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

/* Vendor platforms: why one is unavailable, its runtime library, the NPU driver version and
 * the runtime ABI, each when known. */
static int add_status(json_t *entry, const struct platform *p, bool is_available)
{
    struct platform_status st;
    memset(&st, 0, sizeof st);
    p->status(&st);
    int rc = 0;
    if (!is_available && st.reason[0])
        rc |= json_object_set_new(entry, "reason", json_string(st.reason));
    if (st.library[0]) rc |= json_object_set_new(entry, "library", json_string(st.library));
    if (st.driver_version[0])
        rc |= json_object_set_new(entry, "npu_driver_version", json_string(st.driver_version));
    if (st.abi[0]) rc |= json_object_set_new(entry, "abi", json_string(st.abi));
    return rc;
}

void api_platforms_list(const struct api_ctx *ctx, const struct api_request *req,
                        struct api_response *resp)
{
    (void)ctx;
    (void)req;
    size_t n;
    const struct platform *const *list = platform_list(&n);
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        const struct platform *p = list[i];
        bool is_available = p->is_available();
        json_t *entry =
            json_pack("{s:s, s:s, s:b, s:o?}", "id", p->id, "display_name", p->display_name,
                      "available", is_available, "detected_chips", chips_json(p));
        if (entry && p->status && add_status(entry, p, is_available) != 0) {
            json_decref(entry);
            entry = NULL;
        }
        if (!entry || json_array_append_new(arr, entry) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    api_respond_json(resp, 200, arr ? json_pack("{s:o}", "platforms", arr) : NULL);
}
