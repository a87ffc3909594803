/* Constant-time API-key comparison. */
#include "server/auth.h"

#include <string.h>
#include <strings.h>

bool auth_key_equal(const char *candidate, size_t candidate_len, const char *key, size_t key_len)
{
    /* Walk the key's length every time; a length mismatch is folded into the result instead
     * of returning early. */
    volatile unsigned char diff = (unsigned char)(candidate_len != key_len);
    for (size_t i = 0; i < key_len; i++) {
        unsigned char c = i < candidate_len ? (unsigned char)candidate[i] : 0;
        diff |= (unsigned char)(c ^ (unsigned char)key[i]);
    }
    return diff == 0;
}

static bool any_key_matches(char *const *keys, int n_keys, const char *candidate)
{
    size_t len = strlen(candidate);
    // RFC 9110 5.5: optional whitespace around a field value is not part of it.
    while (len > 0 && (candidate[len - 1] == ' ' || candidate[len - 1] == '\t'))
        len--;
    bool ok = false;
    for (int i = 0; i < n_keys; i++)
        ok |= auth_key_equal(candidate, len, keys[i], strlen(keys[i]));
    return ok;
}

bool auth_request_allowed(char *const *keys, int n_keys, const char *authorization,
                          const char *x_api_key)
{
    if (n_keys == 0) return true;
    bool ok = false;
    if (authorization && strncasecmp(authorization, "Bearer ", 7) == 0) {
        const char *token = authorization + 7;
        while (*token == ' ' || *token == '\t')
            token++;
        ok |= any_key_matches(keys, n_keys, token);
    }
    if (x_api_key) ok |= any_key_matches(keys, n_keys, x_api_key);
    return ok;
}
