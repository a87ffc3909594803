/* pull / ls / rm: flag parsing, the progress display and listings around hub/hub.h. */
#include "cli/cmd_pull.h"

#include "hub/hub.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DIR_CAP 1024

struct pull_args {
    char models_dir[DIR_CAP];
    char hub_url[DIR_CAP];
    bool is_offline;
    const char *ref; // the positional argument
};

/* Flags shared by the three commands; false on a usage error. */
static bool parse_args(int argc, char **argv, struct pull_args *a, bool is_ref_needed)
{
    const char *env_dir = getenv("LLAMAPI_MODELS_DIR");
    if (env_dir && *env_dir)
        snprintf(a->models_dir, sizeof a->models_dir, "%s", env_dir);
    else
        hub_default_models_dir(a->models_dir, sizeof a->models_dir);
    hub_default_url(a->hub_url, sizeof a->hub_url);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--models-dir") == 0 && i + 1 < argc)
            snprintf(a->models_dir, sizeof a->models_dir, "%s", argv[++i]);
        else if (strcmp(argv[i], "--hub-url") == 0 && i + 1 < argc)
            snprintf(a->hub_url, sizeof a->hub_url, "%s", argv[++i]);
        else if (strcmp(argv[i], "--offline") == 0)
            a->is_offline = true;
        else if (argv[i][0] == '-' || a->ref)
            return false;
        else
            a->ref = argv[i];
    }
    size_t n = strlen(a->hub_url);
    while (n > 0 && a->hub_url[n - 1] == '/')
        a->hub_url[--n] = '\0';
    return is_ref_needed == (a->ref != NULL);
}

static void human_bytes(double b, char *out, size_t cap)
{
    static const char *const units[] = {"B", "kB", "MB", "GB", "TB"};
    int u = 0;
    while (b >= 1000 && u < 4) {
        b /= 1000;
        u++;
    }
    snprintf(out, cap, u ? "%.1f %s" : "%.0f %s", b, units[u]);
}

struct display {
    bool is_tty;
    double last_line_s; // elapsed_s of the last non-terminal line
    const char *last_file;
};

static void show_progress(void *user, const struct hub_progress *p)
{
    struct display *d = user;
    if (d->last_file != p->file) { // a new file
        d->last_file = p->file;
        d->last_line_s = -1;
    }
    if (!d->is_tty && !p->is_done && p->elapsed_s - d->last_line_s < 1.0) return;
    d->last_line_s = p->elapsed_s;
    double fresh = (double)(p->done - (p->done >= p->resumed ? p->resumed : p->done));
    double rate = p->elapsed_s > 0 ? fresh / p->elapsed_s : 0;
    double pct = p->total ? 100.0 * (double)p->done / (double)p->total : 100;
    char done[32], total[32], speed[32], eta[32] = "--";
    human_bytes((double)p->done, done, sizeof done);
    human_bytes((double)p->total, total, sizeof total);
    human_bytes(rate, speed, sizeof speed);
    if (rate > 0 && p->total >= p->done) {
        long s = (long)((double)(p->total - p->done) / rate);
        snprintf(eta, sizeof eta, "%ld:%02ld", s / 60, s % 60);
    }
    if (d->is_tty) {
        char bar[31];
        int fill = (int)(pct * 30 / 100);
        for (int i = 0; i < 30; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[30] = '\0';
        fprintf(stderr, "\r\033[K%.40s [%s] %3.0f%% %s/%s %s/s ETA %s%s", p->file, bar, pct, done,
                total, speed, eta, p->is_done ? "\n" : "");
    } else {
        fprintf(stderr, "%s: %.0f%% %s of %s, %s/s, ETA %s%s\n", p->file, pct, done, total, speed,
                eta, p->is_done ? " (done)" : "");
    }
    fflush(stderr);
}

static const char pull_usage[] =
    "usage: llamapi pull [--hub-url URL] [--models-dir DIR] [--offline] org/repo[:QUANT] |\n"
    "                    org/repo/path/file.gguf\n"
    "Downloads a GGUF model (its split parts and the repository's mmproj too) into\n"
    "DIR/org/repo/ unless it is there, checks its SHA-256, and prints its path. QUANT is\n"
    "matched in any case (default Q4_K_M, then Q8_0, then the first model file). HF_TOKEN is\n"
    "sent to the hub for gated and private models. DIR: --models-dir, LLAMAPI_MODELS_DIR, or\n"
    "~/.cache/llamapi/models (/var/lib/llamapi/models for root). URL: --hub-url,\n"
    "LLAMAPI_HUB_URL, HF_ENDPOINT or https://huggingface.co.\n";

static bool wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return true;
    return false;
}

static int usage_pull(void)
{
    fputs(pull_usage, stderr);
    return 2;
}

int cli_cmd_pull(int argc, char **argv)
{
    struct pull_args a = {0};
    if (wants_help(argc, argv)) {
        fputs(pull_usage, stdout);
        return 0;
    }
    if (!parse_args(argc, argv, &a, true)) return usage_pull();
    struct display d = {.is_tty = isatty(STDERR_FILENO) == 1};
    const char *token = getenv("HF_TOKEN");
    struct hub_opts o = {.hub_url = a.hub_url,
                         .token = token && *token ? token : NULL,
                         .models_dir = a.models_dir,
                         .is_offline = a.is_offline,
                         .n_retries = 3,
                         .retry_delay_ms = 1000,
                         .progress = show_progress,
                         .progress_user = &d};
    char path[4096];
    enum hub_failure why;
    struct errmsg err;
    errmsg_clear(&err);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = hub_resolve(&o, a.ref, path, sizeof path, &why, &err);
    curl_global_cleanup();
    if (rc != ERR_OK) {
        fprintf(stderr, "llamapi pull: %s\n", err.msg[0] ? err.msg : err_str(rc));
        return 1;
    }
    printf("%s\n", path);
    return 0;
}

int cli_cmd_ls(int argc, char **argv)
{
    struct pull_args a = {0};
    if (!parse_args(argc, argv, &a, false)) {
        fprintf(stderr, "usage: llamapi ls [--models-dir DIR]\n");
        return 2;
    }
    struct hub_listing l = {0};
    if (hub_local_list(a.models_dir, true, &l) != ERR_OK) {
        fprintf(stderr, "llamapi ls: cannot read %s\n", a.models_dir);
        return 1;
    }
    for (int i = 0; i < l.n; i++) {
        const char *p = l.entries[i].path;
        const char *s1 = strchr(p, '/'), *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
        char size[32];
        human_bytes((double)l.entries[i].size, size, sizeof size);
        size_t n = strlen(p);
        bool is_part = n > 5 && strcmp(p + n - 5, ".part") == 0;
        if (s2)
            printf("%-40.*s %-50.*s %10s%s\n", (int)(s2 - p), p,
                   (int)(n - (size_t)(s2 - p) - 1 - (is_part ? 5 : 0)), s2 + 1, size,
                   is_part ? "  (unfinished)" : "");
        else
            printf("%-40s %-50s %10s%s\n", "-", p, size, is_part ? "  (unfinished)" : "");
    }
    hub_listing_free(&l);
    return 0;
}

int cli_cmd_rm(int argc, char **argv)
{
    struct pull_args a = {0};
    if (!parse_args(argc, argv, &a, true)) {
        fprintf(stderr,
                "usage: llamapi rm [--models-dir DIR] org/repo[:QUANT] | org/repo/file.gguf\n");
        return 2;
    }
    int n = 0;
    struct errmsg err;
    errmsg_clear(&err);
    int rc = hub_remove(a.models_dir, a.ref, &n, &err);
    if (rc != ERR_OK) {
        fprintf(stderr, "llamapi rm: %s\n", err.msg[0] ? err.msg : err_str(rc));
        return 1;
    }
    printf("removed %d file%s of %s\n", n, n == 1 ? "" : "s", a.ref);
    return 0;
}
