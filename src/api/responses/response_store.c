/* Response store: a ring of RESPONSE_STORE_MAX (id, JSON text) pairs. Text rather than
 * jansson objects so an entry is immutable, its size known, and no reference is shared
 * between threads. */
#include "api/responses/response_store.h"

#include "util/err.h"
#include "util/mem.h"
#include "util/thread.h"

#include <stdlib.h>
#include <string.h>

struct entry {
    char id[64]; // "" when the slot is empty
    char *json;  // owned, compact JSON array
};

/* Guarded by mu. */
struct response_store {
    struct mutex mu;
    struct entry ring[RESPONSE_STORE_MAX];
    int next; // slot written next (the oldest once the ring is full)
};

int response_store_new(struct response_store **out)
{
    struct response_store *s = mem_calloc(1, sizeof *s);
    if (!s) return ERR_NOMEM;
    if (mutex_init(&s->mu) != ERR_OK) {
        mem_free(s);
        return ERR_NOMEM;
    }
    *out = s;
    return ERR_OK;
}

void response_store_free(struct response_store *s)
{
    if (!s) return;
    for (int i = 0; i < RESPONSE_STORE_MAX; i++)
        mem_free(s->ring[i].json);
    mutex_deinit(&s->mu);
    mem_free(s);
}

/* Frees text from json_dumps with jansson's own deallocator (tests route it through mem_). */
static void dumps_free(char *text)
{
    json_free_t jfree = free;
    json_get_alloc_funcs(NULL, &jfree);
    jfree(text);
}

int response_store_put(struct response_store *s, const char *id, const json_t *messages)
{
    size_t id_len = strlen(id);
    if (id_len == 0 || id_len >= sizeof s->ring[0].id) return ERR_INVALID;
    char *text = json_dumps(messages, JSON_COMPACT);
    if (!text) return ERR_NOMEM;
    size_t len = strlen(text);
    if (len > RESPONSE_STORE_ENTRY_MAX) {
        dumps_free(text);
        return ERR_LIMIT;
    }
    char *copy = mem_alloc(len + 1); // jansson allocates with malloc; ours go through mem_
    if (copy) memcpy(copy, text, len + 1);
    dumps_free(text);
    if (!copy) return ERR_NOMEM;
    mutex_lock(&s->mu);
    struct entry *e = &s->ring[s->next];
    char *old = e->json;
    memcpy(e->id, id, id_len + 1);
    e->json = copy;
    s->next = (s->next + 1) % RESPONSE_STORE_MAX;
    mutex_unlock(&s->mu);
    mem_free(old);
    return ERR_OK;
}

json_t *response_store_get(struct response_store *s, const char *id)
{
    json_t *j = NULL;
    mutex_lock(&s->mu);
    for (int i = 0; i < RESPONSE_STORE_MAX && !j; i++) {
        const struct entry *e = &s->ring[i];
        if (e->json && strcmp(e->id, id) == 0) j = json_loads(e->json, 0, NULL);
    }
    mutex_unlock(&s->mu);
    if (j && !json_is_array(j)) {
        json_decref(j);
        j = NULL;
    }
    return j;
}
