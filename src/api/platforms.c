/* GET /v1/platforms: the compiled-in platforms, whether this host can run them, and the chips
 * each one detects. */
#include "api/handlers.h"

#include "api/errors.h"
#include "platform/platform.h"

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
        json_t *entry =
            json_pack("{s:s, s:s, s:b, s:o?}", "id", p->id, "display_name", p->display_name,
                      "available", p->is_available(), "detected_chips", chips_json(p));
        if (!entry || json_array_append_new(arr, entry) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    api_respond_json(resp, 200, arr ? json_pack("{s:o}", "platforms", arr) : NULL);
}
