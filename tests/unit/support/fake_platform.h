/* A deterministic platform for core tests: requests run only when the test says so. */
#ifndef TESTS_FAKE_PLATFORM_H
#define TESTS_FAKE_PLATFORM_H

#include "platform/platform.h"

extern const struct platform fake_platform;

/* Behaviour knobs and observations (single test thread unless a test says otherwise). */
struct fake_state {
    int fail_load;                 // load returns ERR_FORMAT
    int max_instances;             // add_instance fails beyond this many live instances
    uint64_t instance_bytes;       // reported by describe
    const char *chat_template_src; // reported by describe (borrowed; NULL: no template)
    int live_instances;
    int n_loaded, n_unloaded;
    struct request *running[64]; // submitted and not yet completed, by instance
    int32_t cache[64][8];        // by instance: the first tokens of the last prompt it ran
    int n_cache[64];
};

extern struct fake_state fake;

void fake_reset(void);
/* Finishes the request on instance with reason and tells the core; the instance's cache then
 * holds (the start of) that request's prompt, as a real platform's would. */
void fake_complete(int instance, enum finish_reason reason);

#endif
