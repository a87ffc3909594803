/* api/generation/generate: a session's deltas against a request the fake platform fills by
 * hand, so the order in which the platform wrote progress points, tokens and the outcome is
 * fixed before the reader looks. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/generation/generate.h"
#include "core/model.h"
#include "fake_platform.h"

#include <string.h>

static struct budget budget;

/* A prompt's whole prefill reported (more points than one delta holds), then its answer and
 * its end, all before the reader's first call: every point comes out, in order, and all of
 * them before the first text. */
static void test_every_progress_point_precedes_the_text(void **state)
{
    (void)state;
    fake_reset();
    budget_init(&budget, 1ull << 40);
    struct model_params mp = {
        .id = "m", .path = "/fake", .platform = &fake_platform, .queue_cap = 4, .budget = &budget};
    struct model *m;
    assert_int_equal(model_new(&mp, &m), ERR_OK);
    struct errmsg err;
    int n_instances;
    assert_int_equal(model_load(m, 1, &n_instances, &err), ERR_OK);
    assert_int_equal(n_instances, 1);
    struct gen_params gp;
    gen_params_defaults(&gp);
    gp.is_return_progress = true;
    const int32_t prompt[3] = {1, 2, 3};
    struct gen_options opt = {0};
    struct api_fail f;
    struct gen_session *s;
    assert_int_equal(gen_session_start(m, prompt, 3, &gp, &opt, &s, &f), ERR_OK);
    struct request *r = fake.running[0];
    assert_non_null(r);
    enum { N_POINTS = 3 * GEN_DELTA_MAX_PROGRESS + 1 };
    for (int k = 1; k <= N_POINTS; k++)
        request_push_progress(r, &(struct request_progress){.total = N_POINTS, .processed = k});
    assert_int_equal(request_push_text(r, "hi", 2), ERR_OK);
    fake_complete(0, FINISH_STOP);

    int n_points = 0, last = 0;
    char text[16] = "";
    struct gen_delta d;
    do {
        assert_true(gen_session_next(s, 1000, &d));
        for (int i = 0; i < d.n_progress; i++) {
            assert_int_equal(text[0], '\0'); // no point after text
            assert_int_equal(d.progress[i].processed, last + 1);
            last = d.progress[i].processed;
            n_points++;
        }
        strncat(text, d.content.ptr, d.content.len < 8 ? d.content.len : 8);
    } while (!d.is_done);
    assert_int_equal(n_points, N_POINTS);
    assert_string_equal(text, "hi");
    gen_session_end(s);
    model_release(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_progress_point_precedes_the_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
