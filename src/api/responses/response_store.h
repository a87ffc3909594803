/* The last RESPONSE_STORE_MAX stored Responses-API conversations, kept in memory so a request
 * can continue one with `previous_response_id`. Bounded: the oldest entry is evicted first,
 * and a conversation whose compact JSON exceeds RESPONSE_STORE_ENTRY_MAX bytes is not kept.
 * Nothing survives a restart. Thread-safe (one mutex); one store per server. */
#ifndef API_RESPONSE_STORE_H
#define API_RESPONSE_STORE_H

#include <jansson.h>

#define RESPONSE_STORE_MAX       64        // conversations remembered
#define RESPONSE_STORE_ENTRY_MAX (1 << 20) // bytes of compact JSON per conversation

struct response_store;

/* Creates an empty store; caller frees with response_store_free(). ERR_NOMEM. */
int response_store_new(struct response_store **out);

/* Frees every entry and the store. NULL is a no-op. */
void response_store_free(struct response_store *s);

/* Remembers messages (an array, copied as compact JSON) under id (copied, at most 63 bytes),
 * evicting the oldest entry when full. ERR_LIMIT when the JSON is over
 * RESPONSE_STORE_ENTRY_MAX bytes, ERR_INVALID for an over-long id, ERR_NOMEM. */
int response_store_put(struct response_store *s, const char *id, const json_t *messages);

/* A new array equal to the messages stored under id (the caller releases it with
 * json_decref()), or NULL when the id is unknown, evicted, or memory ran out. */
json_t *response_store_get(struct response_store *s, const char *id);

#endif
