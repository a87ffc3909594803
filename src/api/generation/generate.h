/* A generation session: submits a tokenized prompt to a model's pool and turns the token
 * stream into text deltas — detokenized (never half a UTF-8 character), cut at stop strings
 * (held back until decided, never emitted), split into reasoning and content, and parsed for
 * tool calls. Every generating endpoint (chat, completions, Anthropic, Responses) drives one
 * and formats the deltas its own way. Owned by one HTTP thread. */
#ifndef API_GENERATE_H
#define API_GENERATE_H

#include "api/generation/chat_prompt.h"
#include "api/validate.h"
#include "core/model.h"
#include "platform/request.h"
#include "text/reasoning.h"
#include "text/toolcall/toolcall.h"
#include "util/buf.h"

#include <stdbool.h>

struct metrics;

struct gen_options {
    const char *const *stops; // stop strings (borrowed for gen_session_start)
    int n_stops;
    bool parse_tools; // run the tool-call parser on the content
    enum toolcall_format tool_format;
    enum reasoning_format reasoning; // REASONING_FORMAT_NONE: everything is content
    bool reasoning_starts_inside;    // the prompt opened a reasoning block
    struct metrics *metrics;         // counters to update (borrowed; outlives the session) or NULL
    bool has_slot;                   // run on instance `slot` when it is idle (id_slot)
    int slot;
    // Text-IO models (platform_model_desc.is_text_io): the prompt as text instead of tokens.
    const char *prompt_text; // borrowed for gen_session_start
    size_t prompt_text_len;
    const char *prompt_role; // the role it is sent as (NULL: "user")
    int enable_thinking;     // -1 unset, 0, 1
    // Images of the prompt (models with a projector): their pixels move to the request, so
    // each rgb is set to NULL once taken (also when the start fails).
    struct chat_image *images;
    int n_images;
};

#define GEN_DELTA_MAX_CALLS    16
#define GEN_DELTA_MAX_PROGRESS 8

/* One step's output. Slices are borrowed until the next gen_session_next(). */
struct gen_delta {
    struct str content;
    struct str reasoning;
    int n_calls;                                // complete tool calls found in this step
    struct toolcall calls[GEN_DELTA_MAX_CALLS]; // strings borrowed until gen_session_end
    int call_index[GEN_DELTA_MAX_CALLS];        // position among the output's calls
    int n_progress; // prompt progress points (params.is_return_progress), before the text
    struct request_progress progress[GEN_DELTA_MAX_PROGRESS];
    bool is_done;
    const char *finish_reason; // when done: "stop", "length", "tool_calls", or NULL on error
    bool is_stop_string;       // finished on a stop string (index in stop_index)
    int stop_index;
    int error_status; // when done with an error: HTTP status
    char error_message[512];
};

struct gen_session;

/* Submits the prompt (tokens; for a text-IO model opt->prompt_text, and prompt is empty). On success *out is the caller's (end it with gen_session_end()).
 * Failures fill f: 429 rate_limit_exceeded/queue_full (f->retry_after set by the caller),
 * 404 model_not_found while unloading, 500 on allocation failure. The model reference is
 * borrowed: the caller keeps its own until gen_session_end. */
int gen_session_start(struct model *m, const int32_t *prompt, int n_prompt,
                      const struct gen_params *params, const struct gen_options *opt,
                      struct gen_session **out, struct api_fail *f);

/* Waits up to timeout_ms (-1: no limit) for output. Returns true when *d holds something new
 * (possibly only is_done, or only progress points), false on timeout (nothing happened). */
bool gen_session_next(struct gen_session *s, int timeout_ms, struct gen_delta *d);

/* Token counts and timings, valid once done. */
int gen_session_n_prompt(const struct gen_session *s);
/* The prompt's tokens (*n of them); borrowed, valid until gen_session_end(). Cannot fail. */
const int32_t *gen_session_prompt(const struct gen_session *s, int *n);
int gen_session_n_completion(const struct gen_session *s);
/* The instance the request ran on; call once gen_session_next reported is_done. */
int gen_session_instance(const struct gen_session *s);
void gen_session_timings(struct gen_session *s, struct request_timings *out);
/* The token events the last gen_session_next() consumed (ids, and log-probabilities when
 * params.n_probs > 0), in order. Borrowed until the next gen_session_next(). Cannot fail. */
const struct gen_event *gen_session_events(const struct gen_session *s, int *n);

/* Tool calls found so far (borrowed). */
const struct toolcall *gen_session_calls(const struct gen_session *s, int *n);

/* What the request asked for that the platform does not apply (for an x-llamapi-warning
 * header), or NULL when nothing. Borrowed until gen_session_end(). Cannot fail. */
const char *gen_session_warning(const struct gen_session *s);

/* Sets that warning (copied, truncated to 255 bytes). Cannot fail. */
void gen_session_set_warning(struct gen_session *s, const char *warning);

/* Cancels the request if it is still running (client gone) and frees the session. NULL is a
 * no-op. */
void gen_session_end(struct gen_session *s);

#endif
