/* Work tracked per HTTP request, ended when its client leaves or the server stops. */
#include "api/client_watch.h"

#include "core/model.h"
#include "platform/request.h"
#include "util/mem.h"
#include "util/thread.h"

#include <stdio.h>

struct tracked {
    struct model *model; // retained
    struct request *req; // retained
};

struct client_watch {
    struct mutex mu;
    struct tracked *items; // (n_items, items_cap); guarded by mu
    int n_items;
    int items_cap;
    bool is_abandoned; // guarded by mu
    int status;        // of the abandon: 0 cancel, else the failure's HTTP status
    char msg[200];
};

static _Thread_local struct client_watch *bound;

int client_watch_new(struct client_watch **out)
{
    struct client_watch *w = mem_calloc(1, sizeof *w);
    if (!w) return ERR_NOMEM;
    if (mutex_init(&w->mu) != ERR_OK) {
        mem_free(w);
        return ERR_NOMEM;
    }
    *out = w;
    return ERR_OK;
}

void client_watch_free(struct client_watch *w)
{
    if (!w) return;
    for (int i = 0; i < w->n_items; i++) {
        request_release(w->items[i].req);
        model_release(w->items[i].model);
    }
    mem_free(w->items);
    mutex_deinit(&w->mu);
    mem_free(w);
}

void client_watch_bind(struct client_watch *w)
{
    bound = w;
}

/* Ends one request as the abandon says. A failure is recorded before the request leaves its
 * queue or is cancelled, so its reader sees the failure, not a bare cancellation. */
static void end_request(const struct client_watch *w, struct model *m, struct request *r)
{
    if (w->status >= 400) request_finish(r, FINISH_ERROR, w->status, w->msg);
    model_abandon(m, r);
}

void client_watch_track(struct model *m, struct request *r)
{
    struct client_watch *w = bound;
    if (!w) return;
    mutex_lock(&w->mu);
    if (w->is_abandoned) {
        end_request(w, m, r);
        mutex_unlock(&w->mu);
        return;
    }
    if (w->n_items == w->items_cap) {
        int cap = w->items_cap ? w->items_cap * 2 : 4;
        struct tracked *grown = mem_realloc(w->items, (size_t)cap * sizeof *grown);
        if (!grown) {
            mutex_unlock(&w->mu);
            return;
        }
        w->items = grown;
        w->items_cap = cap;
    }
    model_retain(m);
    request_retain(r);
    w->items[w->n_items++] = (struct tracked){m, r};
    mutex_unlock(&w->mu);
}

void client_watch_abandon(struct client_watch *w, int status, const char *msg)
{
    mutex_lock(&w->mu);
    if (!w->is_abandoned) {
        w->is_abandoned = true;
        w->status = status;
        snprintf(w->msg, sizeof w->msg, "%s", msg ? msg : "");
        for (int i = 0; i < w->n_items; i++)
            end_request(w, w->items[i].model, w->items[i].req);
    }
    mutex_unlock(&w->mu);
}

bool client_watch_is_abandoned(void)
{
    struct client_watch *w = bound;
    if (!w) return false;
    mutex_lock(&w->mu);
    bool is = w->is_abandoned;
    mutex_unlock(&w->mu);
    return is;
}
