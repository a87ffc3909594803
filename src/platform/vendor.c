/* Vendor runtime loading and host facts. */
#include "platform/vendor.h"

#include "platform/detect.h"
#include "util/mem.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static struct vendor_config config = {
    .rkllm_lib = VENDOR_RKLLM_LIB_DEFAULT,
    .rknn_lib = VENDOR_RKNN_LIB_DEFAULT,
    .rknn3_lib = VENDOR_RKNN3_LIB_DEFAULT,
};

void vendor_configure(const struct vendor_config *c)
{
    snprintf(config.sysfs_root, sizeof config.sysfs_root, "%s", c->sysfs_root);
    snprintf(config.rkllm_lib, sizeof config.rkllm_lib, "%s",
             c->rkllm_lib[0] ? c->rkllm_lib : VENDOR_RKLLM_LIB_DEFAULT);
    snprintf(config.rknn_lib, sizeof config.rknn_lib, "%s",
             c->rknn_lib[0] ? c->rknn_lib : VENDOR_RKNN_LIB_DEFAULT);
    snprintf(config.rknn3_lib, sizeof config.rknn3_lib, "%s",
             c->rknn3_lib[0] ? c->rknn3_lib : VENDOR_RKNN3_LIB_DEFAULT);
    snprintf(config.rkllm_abi, sizeof config.rkllm_abi, "%s", c->rkllm_abi);
}

const struct vendor_config *vendor_config_get(void)
{
    return &config;
}

int vendor_lib_open(struct vendor_lib *lib, const char *path, const struct vendor_sym *syms,
                    size_t n_syms, void *fns, size_t fns_size)
{
    memset(lib, 0, sizeof *lib);
    memset(fns, 0, fns_size);
    snprintf(lib->path, sizeof lib->path, "%s", path);
    dlerror();
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *why = dlerror();
        // dlerror names the library already ("librkllmrt.so: cannot open shared object file").
        snprintf(lib->reason, sizeof lib->reason, "%s", why ? why : "cannot open the library");
        return ERR_UNSUPPORTED;
    }
    for (size_t i = 0; i < n_syms; i++) {
        dlerror();
        void *sym = dlsym(dl, syms[i].name);
        if (!sym || syms[i].offset + sizeof(void (*)(void)) > fns_size) {
            snprintf(lib->reason, sizeof lib->reason,
                     "%s does not export %s (not a supported version)", path, syms[i].name);
            memset(fns, 0, fns_size);
            dlclose(dl);
            return ERR_UNSUPPORTED;
        }
        // POSIX guarantees a data pointer from dlsym converts to a function pointer.
        memcpy((char *)fns + syms[i].offset, &sym, sizeof sym);
    }
    lib->dl = dl;
    lib->is_available = true;
    return ERR_OK;
}

bool vendor_lib_has(const struct vendor_lib *lib, const char *name)
{
    if (!lib->dl) return false;
    dlerror();
    return dlsym(lib->dl, name) != NULL;
}

void vendor_lib_refuse(struct vendor_lib *lib, const char *reason)
{
    vendor_lib_close(lib);
    snprintf(lib->reason, sizeof lib->reason, "%s", reason);
}

void vendor_lib_close(struct vendor_lib *lib)
{
    if (lib->dl) dlclose(lib->dl);
    lib->dl = NULL;
    lib->is_available = false;
}

void vendor_host_path(const char *host_path, char *out, size_t cap)
{
    const char *root = config.sysfs_root;
    size_t n = strlen(root);
    while (n > 0 && root[n - 1] == '/')
        n--;
    snprintf(out, cap, "%.*s%s", (int)n, root, host_path);
}

/* Reads up to cap - 1 bytes of a host file (under the root); -1 when unreadable. */
static long read_host_file(const char *host_path, char *buf, size_t cap)
{
    char path[VENDOR_PATH_CAP + 128];
    vendor_host_path(host_path, path, sizeof path);
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (long)n;
}

bool vendor_soc_detect(char *out, size_t cap)
{
    // Longest names first, so "rk3588s" is not read as "rk3588". An RK3582 (an RK3588S with
    // cores fused off) names itself only where its device tree says "rockchip,rk3582"; as that
    // entry is exact it wins over the "rockchip,rk3588s" beside it.
    static const char *const socs[] = {"rk3588s", "rk3588", "rk3582", "rk3576",
                                       "rk3566",  "rk3568", "rk3562", "rv1126b"};
    char buf[4096];
    long n = read_host_file("/proc/device-tree/compatible", buf, sizeof buf);
    if (n < 0) n = read_host_file("/sys/firmware/devicetree/base/compatible", buf, sizeof buf);
    if (n <= 0) return false;
    // NUL-separated entries, board first and SoC last ("rockchip,rk3588s-orangepi-5",
    // "rockchip,rk3588"): an exact SoC entry wins; a board entry named after one is the
    // fallback.
    const char *found = NULL, *board = NULL;
    for (long off = 0; off < n; off += (long)strlen(buf + off) + 1) {
        const char *e = buf + off;
        if (strncmp(e, "rockchip,", 9) != 0) continue;
        for (size_t k = 0; k < sizeof socs / sizeof socs[0]; k++) {
            size_t len = strlen(socs[k]);
            if (strncmp(e + 9, socs[k], len) != 0) continue;
            if (e[9 + len] == '\0') {
                if (!found) found = socs[k]; // the most specific entry comes first
            } else if (e[9 + len] == '-' && !board)
                board = socs[k];
            else
                continue;
            break;
        }
    }
    if (!found) found = board;
    if (!found) return false;
    size_t i = 0;
    for (; found[i] && i + 1 < cap; i++)
        out[i] = (char)toupper((unsigned char)found[i]);
    out[i] = '\0';
    return true;
}

bool vendor_npu_driver_version(char *out, size_t cap)
{
    char buf[256];
    // The module's own version is world-readable; debugfs needs root and /proc/rknpu exists
    // only with ROCKCHIP_RKNPU_PROC_FS (rknpu driver 0.9.8: MODULE_VERSION, rknpu_debugger.c).
    long n = read_host_file("/sys/module/rknpu/version", buf, sizeof buf);
    if (n <= 0) n = read_host_file("/sys/kernel/debug/rknpu/version", buf, sizeof buf);
    if (n <= 0) n = read_host_file("/proc/rknpu/version", buf, sizeof buf);
    if (n <= 0) return false;
    // "RKNPU driver: v0.9.8": the version is the first digit run with its dots.
    const char *p = buf;
    while (*p && !isdigit((unsigned char)*p))
        p++;
    size_t i = 0;
    while ((isdigit((unsigned char)p[i]) || p[i] == '.') && i + 1 < cap) {
        out[i] = p[i];
        i++;
    }
    out[i] = '\0';
    return i > 0;
}

bool vendor_chip_matches(const char *model_chip, const char *host_chip)
{
    if (strcasecmp(model_chip, host_chip) == 0) return true;
    bool model_3588 = strncasecmp(model_chip, "rk3588", 6) == 0;
    bool host_3588 = strncasecmp(host_chip, "rk3588", 6) == 0;
    return model_3588 && host_3588;
}

int vendor_soc_chips(struct platform_chip *out, int max)
{
    char soc[PLATFORM_CHIP_NAME_CAP];
    if (max < 1 || !vendor_soc_detect(soc, sizeof soc)) return 0;
    snprintf(out[0].chip_type, sizeof out[0].chip_type, "%s", soc);
    out[0].count = 1;
    return 1;
}

void vendor_status_fill(const struct vendor_lib *lib, struct platform_status *out)
{
    snprintf(out->reason, sizeof out->reason, "%s", lib->is_available ? "" : lib->reason);
    snprintf(out->library, sizeof out->library, "%s", lib->path);
    if (!vendor_npu_driver_version(out->driver_version, sizeof out->driver_version))
        out->driver_version[0] = '\0';
}

bool vendor_claims(const char *path, const char *id)
{
    struct platform_detection *d = mem_alloc(sizeof *d); // 9 KiB: not on a caller's stack
    if (!d) return false;
    struct errmsg err;
    errmsg_clear(&err);
    bool is_ours =
        platform_detect_model(path, d, &err) == ERR_OK && strcmp(d->platform->id, id) == 0;
    mem_free(d);
    return is_ours;
}

/* Whether a sysfs device directory (host path) is bound to the rknpu driver: its driver link
 * ends in "rknpu", or its uevent says DRIVER=RKNPU (any case). Else the driver's name, when
 * known, goes to other. */
static bool is_rknpu_device(const char *dev_dir, char *other, size_t other_cap)
{
    char path[VENDOR_PATH_CAP + 160], link[VENDOR_PATH_CAP];
    snprintf(other, other_cap, "%s", "");
    char host[160];
    snprintf(host, sizeof host, "%s/driver", dev_dir);
    vendor_host_path(host, path, sizeof path);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n > 0) {
        link[n] = '\0';
        const char *base = strrchr(link, '/');
        base = base ? base + 1 : link;
        if (strcasecmp(base, "rknpu") == 0) return true;
        snprintf(other, other_cap, "%.60s", base); // a driver name, not a path
    }
    char uevent[1024];
    snprintf(host, sizeof host, "%s/uevent", dev_dir);
    if (read_host_file(host, uevent, sizeof uevent) <= 0) return false;
    char *save = NULL;
    for (char *line = strtok_r(uevent, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "DRIVER=", 7) != 0) continue;
        if (strcasecmp(line + 7, "rknpu") == 0) return true;
        snprintf(other, other_cap, "%.60s", line + 7);
    }
    return false;
}

/* Whether host_path exists under the root (as anything). */
static bool host_exists(const char *host_path)
{
    char path[VENDOR_PATH_CAP + 128];
    vendor_host_path(host_path, path, sizeof path);
    struct stat st;
    return stat(path, &st) == 0;
}

/* The node is there: can this process open it? */
static bool check_access(const char *host_path, char *why, size_t why_cap)
{
    char path[VENDOR_PATH_CAP + 128];
    vendor_host_path(host_path, path, sizeof path);
    if (access(path, R_OK | W_OK) == 0) return true;
    snprintf(why, why_cap,
             "the NPU device node %s exists but this user cannot open it (add the user to its "
             "group, usually render or video)",
             host_path);
    return false;
}

bool vendor_npu_node(char *node, size_t cap, char *why, size_t why_cap)
{
    char others[256] = "", other[64];
    // DRM render nodes are renderD128 and up (64 minors); the rknpu DRM-GEM build makes one.
    for (int minor = 128; minor < 192; minor++) {
        char dev[64], sys[64];
        snprintf(dev, sizeof dev, "/dev/dri/renderD%d", minor);
        if (!host_exists(dev)) continue;
        snprintf(sys, sizeof sys, "/sys/class/drm/renderD%d/device", minor);
        if (is_rknpu_device(sys, other, sizeof other)) {
            snprintf(node, cap, "%s", dev);
            return check_access(dev, why, why_cap);
        }
        size_t used = strlen(others);
        snprintf(others + used, sizeof others - used, "%s%s is %s", used ? ", " : "; ", dev,
                 other[0] ? other : "another driver's");
    }
    // The DMA-heap build of the driver makes a misc device of its own name instead.
    if (host_exists("/dev/rknpu")) {
        snprintf(node, cap, "%s", "/dev/rknpu");
        return check_access("/dev/rknpu", why, why_cap);
    }
    snprintf(why, why_cap,
             "no NPU device node: no /dev/dri/renderD* of the rknpu driver and no /dev/rknpu%s "
             "(a kernel without Rockchip's rknpu driver?)",
             others);
    return false;
}
