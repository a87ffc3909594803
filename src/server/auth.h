/* API-key checks. Keys are compared in constant time so response timing does not reveal how
 * much of a guessed key was right. */
#ifndef SERVER_AUTH_H
#define SERVER_AUTH_H

#include <stdbool.h>
#include <stddef.h>

/* Compares a candidate with a key without data-dependent branches or early exits; the time
 * depends only on the lengths. */
bool auth_key_equal(const char *candidate, size_t candidate_len, const char *key, size_t key_len);

/* True when no keys are configured, or when `authorization` is "Bearer <key>" or `x_api_key`
 * is "<key>" for one of the n_keys keys (spaces and tabs around the key are not part of it,
 * RFC 9110 5.5). Either header may be NULL. Every key is compared, so
 * the time does not depend on which key matched. */
bool auth_request_allowed(char *const *keys, int n_keys, const char *authorization,
                          const char *x_api_key);

#endif
