/* Hub HTTP through libcurl (see hub_fetch.h). The hub's listing is JSON (jansson); downloads
 * write straight into the .part file from libcurl's write callback, so a cut transfer leaves
 * exactly the bytes received, which the next request resumes with `Range: bytes=N-`. */
#include "hub/hub_fetch.h"

#include "hub/hub_ref.h"
#include "util/buf.h"
#include "util/checked.h"
#include "util/clock.h"
#include "util/file.h"
#include "util/log.h"
#include "util/mem.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define LISTING_MAX       (64u << 20) // bytes of a listing's JSON
#define URL_CAP           4096
#define LISTING_PAGES_MAX 100 // pages of a listing followed through Link: rel="next"
#define PROGRESS_EVERY_S  0.1

/* Hex digits of an oid: 64 of them, any case. */
static bool is_sha256_hex(const char *s)
{
    size_t n = strlen(s);
    if (n != 64) return false;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i])) return false;
    return true;
}

static void lower_copy(char *dst, const char *src, size_t cap)
{
    size_t i = 0;
    for (; src[i] && i + 1 < cap; i++)
        dst[i] = (char)tolower((unsigned char)src[i]);
    dst[i] = '\0';
}

/* Appends s to url with every byte outside [A-Za-z0-9._~/-] percent-encoded. */
static int url_append_path(struct buf *url, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        int rc = isalnum(c) || strchr("._~/-", c) ? buf_append_byte(url, (char)c)
                                                  : buf_printf(url, "%%%02X", c);
        if (rc != ERR_OK) return rc;
    }
    return ERR_OK;
}

/* The hub address without trailing '/' characters, as printf's "%.*s" arguments. */
static int base_len(const char *url)
{
    size_t n = strlen(url);
    while (n > 0 && url[n - 1] == '/')
        n--;
    return n > 4096 ? 4096 : (int)n;
}

static struct curl_slist *auth_headers(const struct hub_opts *o)
{
    if (!o->token || !o->token[0]) return NULL;
    struct buf h;
    buf_init(&h);
    struct curl_slist *list = NULL;
    // libcurl drops a custom Authorization header when a redirect leaves the host (CDNs)
    if (buf_printf(&h, "Authorization: Bearer %s", o->token) == ERR_OK)
        list = curl_slist_append(NULL, h.data);
    buf_deinit(&h);
    return list;
}

static void set_common(CURL *curl, const char *url, struct curl_slist *headers)
{
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L); // a stalled transfer ends after 60 s
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "llamapi");
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
}

#define ERROR_CODE_CAP 64 // the hub's X-Error-Code value

/* Turns an HTTP error status and the hub's X-Error-Code (or "") into *why and a message about
 * what. The public hub answers 401 RepoNotFound for a repository that does not exist (or is
 * private) when no token is sent, so the code decides before the status. */
static int fail_status(long status, const char *code, const char *what, enum hub_failure *why,
                       struct errmsg *err)
{
    if (strcmp(code, "RepoNotFound") == 0 || strcmp(code, "EntryNotFound") == 0 ||
        strcmp(code, "RevisionNotFound") == 0) {
        *why = HUB_FAIL_NOT_FOUND;
        return errmsg_set(err, ERR_IO, "%s: not found on the hub (%ld%s)", what, status,
                          status == 401 ? "; a private repository needs HF_TOKEN" : "");
    }
    if (strcmp(code, "GatedRepo") == 0) {
        *why = HUB_FAIL_FORBIDDEN;
        return errmsg_set(err, ERR_IO,
                          "%s: a gated model (%ld); accept its terms on the hub and set HF_TOKEN "
                          "to a token of that account",
                          what, status);
    }
    switch (status) {
    case 401:
        *why = HUB_FAIL_AUTH;
        return errmsg_set(err, ERR_IO,
                          "%s: the hub wants a token (401); set HF_TOKEN to a token with access",
                          what);
    case 403:
        *why = HUB_FAIL_FORBIDDEN;
        return errmsg_set(err, ERR_IO,
                          "%s: access denied (403); a gated model needs its terms accepted on the "
                          "hub by the token's account",
                          what);
    case 404:
        *why = HUB_FAIL_NOT_FOUND;
        return errmsg_set(err, ERR_IO, "%s: not found on the hub (404)", what);
    default:
        *why = HUB_FAIL_NETWORK;
        return errmsg_set(err, ERR_IO, "%s: the hub answered HTTP %ld", what, status);
    }
}

static size_t on_list_body(char *data, size_t size, size_t n, void *user)
{
    struct buf *b = user;
    if (b->len + size * n > LISTING_MAX) return 0;
    return buf_append(b, data, size * n) == ERR_OK ? size * n : 0;
}

/* Copies a header's value (after the colon, without quotes and blanks) into out. */
static void header_value(const char *line, size_t len, char *out, size_t cap)
{
    const char *colon = memchr(line, ':', len);
    size_t i = colon ? (size_t)(colon - line) + 1 : len, k = 0;
    while (i < len && (line[i] == ' ' || line[i] == '"'))
        i++;
    while (i < len && line[i] != '"' && line[i] != '\r' && line[i] != '\n' && k + 1 < cap)
        out[k++] = line[i++];
    out[k] = '\0';
}

/* Keeps the last response's X-Error-Code in user (char[ERROR_CODE_CAP]). */
static void note_error_code(const char *line, size_t len, char *code)
{
    if (len >= 5 && memcmp(line, "HTTP/", 5) == 0)
        code[0] = '\0';
    else if (len > 13 && strncasecmp(line, "x-error-code:", 13) == 0)
        header_value(line, len, code, ERROR_CODE_CAP);
}

/* What a listing page's headers say besides its body. */
struct page_headers {
    char code[ERROR_CODE_CAP]; // X-Error-Code
    char next[URL_CAP];        // the Link header's rel="next" URL, or ""
};

static void note_next_link(const char *line, size_t len, char *next)
{
    if (len <= 5 || strncasecmp(line, "link:", 5) != 0) return;
    const char *lt = memchr(line, '<', len);
    const char *gt = lt ? memchr(lt, '>', len - (size_t)(lt - line)) : NULL;
    if (!gt || (size_t)(gt - lt) >= URL_CAP) return;
    char rest[128];
    snprintf(rest, sizeof rest, "%.*s", (int)(len - (size_t)(gt - line)), gt);
    if (!strstr(rest, "rel=\"next\"")) return;
    memcpy(next, lt + 1, (size_t)(gt - lt) - 1);
    next[gt - lt - 1] = '\0';
}

static size_t on_list_header(char *line, size_t size, size_t n, void *user)
{
    struct page_headers *h = user;
    if (size * n >= 5 && memcmp(line, "HTTP/", 5) == 0) h->next[0] = '\0';
    note_error_code(line, size * n, h->code);
    note_next_link(line, size * n, h->next);
    return size * n;
}

static int get_json(const struct hub_opts *o, const char *url, json_t **out, struct page_headers *h,
                    const char *what, enum hub_failure *why, struct errmsg *err)
{
    h->code[0] = h->next[0] = '\0';
    CURL *curl = curl_easy_init();
    if (!curl) return ERR_NOMEM;
    struct curl_slist *headers = auth_headers(o);
    struct buf body;
    buf_init(&body);
    set_common(curl, url, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_list_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_list_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, h);
    CURLcode cc = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    int rc = ERR_OK;
    if (cc != CURLE_OK) {
        *why = HUB_FAIL_NETWORK;
        rc = errmsg_set(err, ERR_IO, "%s: %s (%s)", what, curl_easy_strerror(cc), url);
    } else if (status != 200) {
        rc = fail_status(status, h->code, what, why, err);
    } else {
        *out = json_loadb(body.data ? body.data : "", body.len, 0, NULL);
        if (!*out) {
            *why = HUB_FAIL_NETWORK;
            rc = errmsg_set(err, ERR_FORMAT, "%s: the hub's answer is not JSON", what);
        }
    }
    buf_deinit(&body);
    return rc;
}

/* One listing item into e (a file with a safe path), or false to skip it. */
static bool entry_from_json(const json_t *item, struct hub_entry *e)
{
    const char *type = json_string_value(json_object_get(item, "type"));
    const char *path = json_string_value(json_object_get(item, "path"));
    const json_t *size = json_object_get(item, "size");
    if (!type || strcmp(type, "file") != 0 || !path) return false;
    if (!hub_path_is_safe(path)) {
        log_warn("hub: skipping the unsafe file name '%.200s' in the listing", path);
        return false;
    }
    const json_t *lfs = json_object_get(item, "lfs");
    const char *oid = json_string_value(json_object_get(lfs, "oid"));
    json_int_t bytes = json_is_integer(size) ? json_integer_value(size) : -1;
    const json_t *lfs_size = json_object_get(lfs, "size");
    if (json_is_integer(lfs_size)) bytes = json_integer_value(lfs_size);
    if (bytes < 0) return false;
    e->size = (uint64_t)bytes;
    e->sha256[0] = '\0';
    if (oid && is_sha256_hex(oid)) lower_copy(e->sha256, oid, sizeof e->sha256);
    e->path = mem_strdup(path);
    return e->path != NULL;
}

/* Appends the file entries of one listing page to l. */
static int append_page(struct hub_listing *l, const json_t *page)
{
    size_t n = json_array_size(page), cap;
    if (!size_add((size_t)l->n, n, &cap) || cap > INT32_MAX) return ERR_LIMIT;
    struct hub_entry *e = mem_realloc(l->entries, (cap ? cap : 1) * sizeof *e);
    if (!e) return ERR_NOMEM;
    l->entries = e;
    for (size_t i = 0; i < n; i++)
        if (entry_from_json(json_array_get(page, i), &l->entries[l->n])) l->n++;
    return ERR_OK;
}

/* The next page's URL into url when next is on this hub (absolute or '/'-rooted); false when
 * there is none to follow. */
static bool next_page_url(const struct hub_opts *o, const char *next, struct buf *url)
{
    int base = base_len(o->hub_url);
    bool is_ours = next[0] == '/' || (strncmp(next, o->hub_url, (size_t)base) == 0 &&
                                      (next[base] == '/' || next[base] == '\0'));
    if (!next[0]) return false;
    if (!is_ours) {
        log_warn("hub: not following a listing page on another host: %.200s", next);
        return false;
    }
    buf_clear(url);
    if (next[0] == '/') return buf_printf(url, "%.*s%s", base, o->hub_url, next) == ERR_OK;
    return buf_append_cstr(url, next) == ERR_OK;
}

int hub_fetch_list(const struct hub_opts *o, const char *repo, struct hub_listing *out,
                   enum hub_failure *why, struct errmsg *err)
{
    struct buf url;
    buf_init(&url);
    int rc = buf_printf(&url, "%.*s/api/models/", base_len(o->hub_url), o->hub_url);
    if (rc == ERR_OK) rc = url_append_path(&url, repo);
    if (rc == ERR_OK) rc = buf_append_cstr(&url, "/tree/main?recursive=true");
    struct hub_listing l = {0};
    struct page_headers *h = mem_alloc(sizeof *h);
    if (!h) rc = ERR_NOMEM;
    for (int page = 0; rc == ERR_OK && page < LISTING_PAGES_MAX; page++) {
        json_t *root = NULL;
        rc = get_json(o, url.data, &root, h, repo, why, err);
        if (rc == ERR_OK && !json_is_array(root)) {
            *why = HUB_FAIL_NETWORK;
            rc = errmsg_set(err, ERR_FORMAT, "%s: the hub's listing is not a JSON array", repo);
        }
        if (rc == ERR_OK) rc = append_page(&l, root);
        json_decref(root);
        if (rc != ERR_OK || !next_page_url(o, h->next, &url)) break;
    }
    mem_free(h);
    buf_deinit(&url);
    if (rc != ERR_OK) {
        hub_listing_free(&l);
        return rc;
    }
    *out = l;
    return ERR_OK;
}

void hub_listing_free(struct hub_listing *l)
{
    for (int i = 0; i < l->n; i++)
        mem_free(l->entries[i].path);
    mem_free(l->entries);
    l->entries = NULL;
    l->n = 0;
}

/* Feeds the first limit bytes of the file at path (all of it for UINT64_MAX) into ctx.
 * ERR_IO when it cannot be read or is shorter than a finite limit; ERR_NOMEM. */
static int hash_file_prefix(const char *path, uint64_t limit, struct sha256_ctx *ctx)
{
    enum { CHUNK = 1 << 16 };
    unsigned char *chunk = mem_alloc(CHUNK);
    if (!chunk) return ERR_NOMEM;
    FILE *f = file_fopen_regular(path, NULL); // the models folder may hold anything
    if (!f) {
        mem_free(chunk);
        return ERR_IO;
    }
    uint64_t done = 0;
    size_t n;
    while (done < limit &&
           (n = fread(chunk, 1, limit - done < CHUNK ? (size_t)(limit - done) : CHUNK, f)) > 0) {
        sha256_update(ctx, n, chunk);
        done += n;
    }
    int rc = ferror(f) || (limit != UINT64_MAX && done != limit) ? ERR_IO : ERR_OK;
    fclose(f);
    mem_free(chunk);
    return rc;
}

static void digest_hex(struct sha256_ctx *ctx, char hex[65])
{
    uint8_t digest[SHA256_DIGEST_SIZE];
    sha256_digest(ctx, sizeof digest, digest);
    for (size_t i = 0; i < sizeof digest; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
}

int hub_sha256_file(const char *path, char hex[65])
{
    struct sha256_ctx ctx;
    sha256_init(&ctx);
    int rc = hash_file_prefix(path, UINT64_MAX, &ctx);
    if (rc == ERR_OK) digest_hex(&ctx, hex);
    return rc;
}

/* One HTTP transfer of a file into its .part. */
struct transfer {
    const struct hub_opts *o;
    const struct hub_entry *e;
    CURL *curl;
    FILE *f;                         // the .part, opened for appending
    uint64_t have;                   // bytes in the .part before this transfer's body
    uint64_t resumed;                // bytes there when this hub_fetch_file call started
    uint64_t range_start;            // Content-Range start of the current response
    bool has_range;                  // the current response carried Content-Range
    bool is_started;                 // the final response's body has begun
    bool is_error_body;              // the final response is an error: its body is dropped
    bool is_bad_range;               // 206 for another range than asked
    int write_errno;                 // errno of a failed write, or 0
    char linked_sha256[65];          // X-Linked-Etag when it is a SHA-256
    char error_code[ERROR_CODE_CAP]; // X-Error-Code of the last response
    double t0_ms, last_ms;           // start and last progress report
    struct sha256_ctx sha;           // over the .part's first `hashed` bytes, as written
    uint64_t hashed;                 // bytes sha has seen
};

static size_t on_header(char *line, size_t size, size_t n, void *user)
{
    struct transfer *t = user;
    size_t len = size * n;
    char v[128];
    note_error_code(line, len, t->error_code);
    if (len >= 5 && memcmp(line, "HTTP/", 5) == 0) {
        t->has_range = false; // a new response (after a redirect)
    } else if (len > 14 && strncasecmp(line, "content-range:", 14) == 0) {
        header_value(line, len, v, sizeof v);
        unsigned long long start = 0;
        t->has_range = sscanf(v, "bytes %llu-", &start) == 1;
        t->range_start = start;
    } else if (len > 14 && strncasecmp(line, "x-linked-etag:", 14) == 0) {
        header_value(line, len, v, sizeof v);
        if (is_sha256_hex(v)) lower_copy(t->linked_sha256, v, sizeof t->linked_sha256);
    }
    return len;
}

/* The first body bytes of the final response: append (206 at our offset), start over (200),
 * or drop an error page. */
static bool start_body(struct transfer *t)
{
    long status = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
    t->is_started = true;
    if (status >= 300) {
        t->is_error_body = true;
        return true;
    }
    if (status == 206) {
        if (!t->has_range || t->range_start != t->have) {
            t->is_bad_range = true;
            return false;
        }
        return true;
    }
    if (t->have > 0) { // the server ignored Range: the whole file comes again
        if (ftruncate(fileno(t->f), 0) != 0 || fseek(t->f, 0, SEEK_SET) != 0) {
            t->write_errno = errno;
            return false;
        }
        t->have = 0;
        t->resumed = 0;
        sha256_init(&t->sha);
        t->hashed = 0;
    }
    return true;
}

static size_t on_body(char *data, size_t size, size_t n, void *user)
{
    struct transfer *t = user;
    size_t len = size * n;
    if (!t->is_started && !start_body(t)) return 0;
    if (t->is_error_body) return len;
    if (fwrite(data, 1, len, t->f) != len) {
        t->write_errno = errno ? errno : EIO;
        return 0;
    }
    sha256_update(&t->sha, len, (const uint8_t *)data); // the checksum costs no second read
    t->hashed += len;
    return len;
}

static void report(struct transfer *t, uint64_t done, bool is_done)
{
    if (!t->o->progress) return;
    double now = clock_now_ms();
    if (!is_done && now - t->last_ms < PROGRESS_EVERY_S * 1000) return;
    t->last_ms = now;
    struct hub_progress p = {.file = t->e->path,
                             .sha256 = t->e->sha256[0] ? t->e->sha256 : t->linked_sha256,
                             .done = done,
                             .total = t->e->size,
                             .resumed = t->resumed,
                             .elapsed_s = (now - t->t0_ms) / 1000,
                             .is_done = is_done};
    t->o->progress(t->o->progress_user, &p);
}

static int on_xfer(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                   curl_off_t ulnow)
{
    (void)dltotal, (void)ultotal, (void)ulnow;
    struct transfer *t = user;
    if (t->is_started && !t->is_error_body && dlnow > 0)
        report(t, t->have + (uint64_t)dlnow, false);
    return 0;
}

/* Fails with DISK_FULL when the file system that will hold part has less than need bytes free. */
static int check_space(const char *part, uint64_t need, enum hub_failure *why, struct errmsg *err)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", part);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) *slash = '\0'; // the folder: the .part may not exist yet
    struct statvfs vfs;
    if (statvfs(dir, &vfs) != 0) return ERR_OK; // cannot tell: the writes will
    uint64_t avail = (uint64_t)vfs.f_bavail * (uint64_t)vfs.f_frsize;
    if (avail >= need) return ERR_OK;
    *why = HUB_FAIL_DISK_FULL;
    return errmsg_set(err, ERR_LIMIT,
                      "disk full: %s needs %llu more bytes, %llu are free on its file system", part,
                      (unsigned long long)need, (unsigned long long)avail);
}

/* Creates the folders above path (mode 0755); existing ones are fine. */
static int make_parents(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        int rc = mkdir(path, 0755) == 0 || errno == EEXIST ? ERR_OK : ERR_IO;
        *p = '/';
        if (rc != ERR_OK) return rc;
    }
    return ERR_OK;
}

static int file_url(const struct hub_opts *o, const char *repo, const char *path, struct buf *url)
{
    int rc = buf_printf(url, "%.*s/", base_len(o->hub_url), o->hub_url);
    if (rc == ERR_OK) rc = url_append_path(url, repo);
    if (rc == ERR_OK) rc = buf_append_cstr(url, "/resolve/main/");
    if (rc == ERR_OK) rc = url_append_path(url, path);
    return rc;
}

/* The outcome of one transfer: ERR_OK (status 200/206 and the body written), else a failure
 * with *why; HUB_FAIL_NETWORK means another try may resume. */
static int transfer_result(struct transfer *t, CURLcode cc, const char *part, enum hub_failure *why,
                           struct errmsg *err)
{
    long status = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
    const char *name = t->e->path;
    if (t->write_errno == ENOSPC || t->write_errno == EDQUOT) {
        *why = HUB_FAIL_DISK_FULL;
        return errmsg_set(err, ERR_LIMIT,
                          "disk full writing %s (the partial file is kept: free some space and "
                          "run again to resume)",
                          part);
    }
    if (t->write_errno) {
        *why = HUB_FAIL_IO;
        return errmsg_set(err, ERR_IO, "cannot write %s: %s", part, strerror(t->write_errno));
    }
    if (t->is_bad_range) {
        *why = HUB_FAIL_NETWORK;
        return errmsg_set(err, ERR_IO, "%s: the hub sent another range than asked", name);
    }
    if (status >= 300 && status != 416) return fail_status(status, t->error_code, name, why, err);
    if (cc != CURLE_OK) {
        *why = HUB_FAIL_NETWORK;
        return errmsg_set(err, ERR_IO, "%s: %s", name, curl_easy_strerror(cc));
    }
    return ERR_OK;
}

/* One GET of the rest of the file into part (opened for appending). */
static int transfer_run(struct transfer *t, const char *url, const char *part,
                        enum hub_failure *why, struct errmsg *err)
{
    t->curl = curl_easy_init();
    if (!t->curl) return ERR_NOMEM;
    struct curl_slist *headers = auth_headers(t->o);
    set_common(t->curl, url, headers);
    char range[64];
    if (t->have > 0) {
        snprintf(range, sizeof range, "%llu-", (unsigned long long)t->have);
        curl_easy_setopt(t->curl, CURLOPT_RANGE, range);
    }
    curl_easy_setopt(t->curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(t->curl, CURLOPT_HEADERDATA, t);
    curl_easy_setopt(t->curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(t->curl, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(t->curl, CURLOPT_XFERINFOFUNCTION, on_xfer);
    curl_easy_setopt(t->curl, CURLOPT_XFERINFODATA, t);
    curl_easy_setopt(t->curl, CURLOPT_NOPROGRESS, 0L);
    CURLcode cc = curl_easy_perform(t->curl);
    int rc = transfer_result(t, cc, part, why, err);
    curl_slist_free_all(headers);
    curl_easy_cleanup(t->curl);
    t->curl = NULL;
    return rc;
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
}

/* Runs transfers until part holds e->size bytes or a try fails for good. */
static int fill_part(struct transfer *t, const char *url, const char *part, enum hub_failure *why,
                     struct errmsg *err)
{
    int rc = ERR_OK;
    for (int attempt = 0;; attempt++) {
        t->have = file_size(part);
        if (t->have > t->e->size) { // longer than the file: not ours to resume
            if (truncate(part, 0) != 0) t->write_errno = errno;
            t->have = 0;
        }
        if (t->hashed != t->have) { // a .part from an earlier run, or a failed write: read it
            sha256_init(&t->sha);
            t->hashed = 0;
            if (hash_file_prefix(part, t->have, &t->sha) == ERR_OK) t->hashed = t->have;
        }
        if (t->have == t->e->size) return ERR_OK;
        rc = check_space(part, t->e->size - t->have, why, err);
        if (rc != ERR_OK) return rc;
        t->f = fopen(part, "ab");
        if (!t->f) {
            *why = HUB_FAIL_IO;
            return errmsg_set(err, ERR_IO, "cannot write %s: %s", part, strerror(errno));
        }
        // another process (a pull beside a server) appending to the same .part would mix bytes
        struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fcntl(fileno(t->f), F_SETLK, &lock) != 0) {
            fclose(t->f);
            t->f = NULL;
            *why = HUB_FAIL_IO;
            return errmsg_set(err, ERR_BUSY,
                              "%s is being downloaded by another process; try again when it is "
                              "done",
                              part);
        }
        t->is_started = t->is_error_body = t->is_bad_range = false;
        rc = transfer_run(t, url, part, why, err);
        bool is_flushed = fflush(t->f) == 0 && fsync(fileno(t->f)) == 0;
        fclose(t->f);
        t->f = NULL;
        if (rc == ERR_OK && !is_flushed) {
            *why = HUB_FAIL_IO;
            rc = errmsg_set(err, ERR_IO, "cannot write %s: %s", part, strerror(errno));
        }
        if (rc == ERR_OK && file_size(part) == t->e->size) return ERR_OK;
        if (rc == ERR_OK && file_size(part) > t->e->size) {
            *why = HUB_FAIL_CHECKSUM;
            unlink(part);
            return errmsg_set(err, ERR_FORMAT, "%s: the hub sent more bytes than its size",
                              t->e->path);
        }
        if (rc == ERR_OK) { // the body ended early without a transport error
            *why = HUB_FAIL_NETWORK;
            rc = errmsg_set(err, ERR_IO, "%s: the transfer ended early", t->e->path);
        }
        if (*why != HUB_FAIL_NETWORK || attempt >= t->o->n_retries) return rc;
        log_warn("hub: %s; resuming (try %d of %d)", err->msg, attempt + 2, t->o->n_retries + 1);
        struct timespec ts = {.tv_sec = t->o->retry_delay_ms / 1000,
                              .tv_nsec = (long)(t->o->retry_delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* The .part's SHA-256 against the hub's oid; a mismatch deletes it. */
static int verify_part(struct transfer *t, const char *part, enum hub_failure *why,
                       struct errmsg *err)
{
    const char *want = t->e->sha256[0] ? t->e->sha256 : t->linked_sha256;
    if (!want[0]) {
        log_warn("hub: %s has no SHA-256 on the hub; its size alone was checked", t->e->path);
        return ERR_OK;
    }
    char got[65];
    if (t->hashed == t->e->size) {
        digest_hex(&t->sha, got);
    } else if (hub_sha256_file(part, got) != ERR_OK) {
        *why = HUB_FAIL_IO;
        return errmsg_set(err, ERR_IO, "cannot read %s back: %s", part, strerror(errno));
    }
    if (strcmp(got, want) == 0) return ERR_OK;
    unlink(part);
    *why = HUB_FAIL_CHECKSUM;
    return errmsg_set(err, ERR_FORMAT,
                      "%s: checksum mismatch (SHA-256 %.16s…, the hub says %.16s…); the download "
                      "was deleted, run again to fetch it anew",
                      t->e->path, got, want);
}

int hub_fetch_file(const struct hub_opts *o, const char *repo, const struct hub_entry *e,
                   const char *dest, enum hub_failure *why, struct errmsg *err)
{
    *why = HUB_FAIL_NONE;
    struct buf part, url;
    buf_init(&part);
    buf_init(&url);
    int rc = buf_printf(&part, "%s.part", dest);
    if (rc == ERR_OK) rc = file_url(o, repo, e->path, &url);
    if (rc != ERR_OK) goto out_free;
    if (make_parents(part.data) != ERR_OK) {
        *why = HUB_FAIL_IO;
        rc = errmsg_set(err, ERR_IO, "cannot create the folder of %s: %s", dest, strerror(errno));
        goto out_free;
    }
    struct transfer t = {.o = o, .e = e, .t0_ms = clock_now_ms()};
    sha256_init(&t.sha);
    t.resumed = file_size(part.data) <= e->size ? file_size(part.data) : 0;
    rc = fill_part(&t, url.data, part.data, why, err);
    if (rc == ERR_OK) rc = verify_part(&t, part.data, why, err);
    if (rc == ERR_OK && rename(part.data, dest) != 0) {
        *why = HUB_FAIL_IO;
        rc = errmsg_set(err, ERR_IO, "cannot rename %s into place: %s", part.data, strerror(errno));
    }
    if (rc == ERR_OK) report(&t, e->size, true);
out_free:
    buf_deinit(&url);
    buf_deinit(&part);
    return rc;
}
