/* /proc/cpuinfo parsing. The file is a sequence of blank-line-separated blocks, one per
 * logical CPU, of "key<TAB>: value" lines (Linux arch/x86/kernel/cpu/proc.c and
 * arch/arm64/kernel/cpuinfo.c). */
#include "platform/cpuinfo.h"

#include "util/mem.h"
#include "util/thread.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ARM Ltd (implementer 0x41) part numbers, from the cores' technical reference manuals. */
static const struct {
    unsigned part;
    const char *name;
} arm_parts[] = {
    {0xd03, "Cortex-A53"},  {0xd04, "Cortex-A35"},  {0xd05, "Cortex-A55"},  {0xd07, "Cortex-A57"},
    {0xd08, "Cortex-A72"},  {0xd09, "Cortex-A73"},  {0xd0a, "Cortex-A75"},  {0xd0b, "Cortex-A76"},
    {0xd0c, "Neoverse-N1"}, {0xd0d, "Cortex-A77"},  {0xd40, "Neoverse-V1"}, {0xd41, "Cortex-A78"},
    {0xd44, "Cortex-X1"},   {0xd46, "Cortex-A510"}, {0xd47, "Cortex-A710"}, {0xd48, "Cortex-X2"},
    {0xd49, "Neoverse-N2"}, {0xd4d, "Cortex-A715"}, {0xd4e, "Cortex-X3"},   {0xd80, "Cortex-A520"},
    {0xd81, "Cortex-A720"}, {0xd82, "Cortex-X4"},
};

struct block {
    char model_name[PLATFORM_CHIP_NAME_CAP];
    unsigned implementer, part;
    int is_cpu; // saw a "processor" line
};

static void add_chip(struct platform_chip *out, int max, int *n, const char *name)
{
    for (int i = 0; i < *n; i++) {
        if (strcmp(out[i].chip_type, name) == 0) {
            out[i].count++;
            return;
        }
    }
    if (*n >= max) return;
    snprintf(out[*n].chip_type, sizeof out[*n].chip_type, "%s", name);
    out[*n].count = 1;
    (*n)++;
}

static void block_name(const struct block *b, char *name, size_t cap)
{
    if (b->implementer == 0x41) {
        for (size_t i = 0; i < sizeof arm_parts / sizeof arm_parts[0]; i++) {
            if (arm_parts[i].part == b->part) {
                snprintf(name, cap, "%s", arm_parts[i].name);
                return;
            }
        }
    }
    if (b->model_name[0])
        snprintf(name, cap, "%s", b->model_name);
    else if (b->implementer || b->part)
        snprintf(name, cap, "ARM implementer 0x%02x part 0x%03x", b->implementer, b->part);
    else
        snprintf(name, cap, "unknown");
}

static void flush_block(struct block *b, struct platform_chip *out, int max, int *n)
{
    if (b->is_cpu) {
        char name[PLATFORM_CHIP_NAME_CAP];
        block_name(b, name, sizeof name);
        add_chip(out, max, n, name);
    }
    memset(b, 0, sizeof *b);
}

/* Splits "key : value" into trimmed key and value; false when the line has no colon. */
static bool split_line(const char *line, size_t len, char *key, size_t key_cap, char *value,
                       size_t value_cap)
{
    const char *colon = memchr(line, ':', len);
    if (!colon) return false;
    size_t klen = (size_t)(colon - line);
    while (klen && (line[klen - 1] == ' ' || line[klen - 1] == '\t'))
        klen--;
    const char *v = colon + 1;
    size_t vlen = len - (size_t)(v - line);
    while (vlen && (*v == ' ' || *v == '\t')) {
        v++;
        vlen--;
    }
    while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\r'))
        vlen--;
    snprintf(key, key_cap, "%.*s", (int)klen, line);
    snprintf(value, value_cap, "%.*s", (int)vlen, v);
    return true;
}

int cpuinfo_parse(const char *text, size_t len, struct platform_chip *out, int max)
{
    struct block b = {{0}, 0, 0, 0};
    int n = 0;
    size_t pos = 0;
    while (pos < len) {
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t line_len = nl ? (size_t)(nl - line) : len - pos;
        pos += line_len + (nl ? 1 : 0);
        char key[64], value[PLATFORM_CHIP_NAME_CAP];
        if (!split_line(line, line_len, key, sizeof key, value, sizeof value)) continue;
        if (strcmp(key, "processor") == 0) {
            flush_block(&b, out, max, &n);
            b.is_cpu = 1;
        } else if (strcmp(key, "model name") == 0) {
            snprintf(b.model_name, sizeof b.model_name, "%s", value);
        } else if (strcmp(key, "CPU implementer") == 0) {
            b.implementer = (unsigned)strtoul(value, NULL, 0);
        } else if (strcmp(key, "CPU part") == 0) {
            b.part = (unsigned)strtoul(value, NULL, 0);
        }
    }
    flush_block(&b, out, max, &n);
    return n;
}

int cpuinfo_detect(struct platform_chip *out, int max)
{
    if (max <= 0) return 0;
    enum { CPUINFO_CAP = 1 << 20 }; // a 512-core machine's cpuinfo is ~600 KiB
    int n = 0;
    char *text = mem_alloc(CPUINFO_CAP);
    FILE *f = text ? fopen("/proc/cpuinfo", "r") : NULL;
    if (f) {
        size_t len = fread(text, 1, CPUINFO_CAP, f);
        fclose(f);
        n = cpuinfo_parse(text, len, out, max);
    }
    mem_free(text);
    if (n == 0) {
        snprintf(out[0].chip_type, sizeof out[0].chip_type, "unknown");
        out[0].count = thread_cpu_count();
        n = 1;
    }
    return n;
}
