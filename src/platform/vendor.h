/* Plumbing shared by the vendor platforms (rkllm, rknn2, rknn3): the start-up settings
 * (library paths, --sysfs-root, the rkllm ABI), opening a vendor runtime with dlopen and
 * resolving its symbol table, and reading the host's facts (SoC, NPU driver version) under
 * the sysfs root so tests can lay out a fake board. Nothing links against a vendor library at
 * build time. */
#ifndef PLATFORM_VENDOR_H
#define PLATFORM_VENDOR_H

#include "platform/platform.h"

#include <stdbool.h>
#include <stddef.h>

#define VENDOR_PATH_CAP   1024
#define VENDOR_REASON_CAP 512

/* One symbol a platform needs: where its resolved address goes in the platform's function
 * table (offset of a function-pointer field). Every listed symbol is required. */
struct vendor_sym {
    const char *name;
    size_t offset;
};

/* An opened (or failed) vendor runtime. Written once at start-up, read-only afterwards. */
struct vendor_lib {
    void *dl; // dlopen handle, NULL when unavailable
    bool is_available;
    char path[VENDOR_PATH_CAP];     // what was opened (a path or a bare name)
    char reason[VENDOR_REASON_CAP]; // why it is unavailable ("" when available)
};

/* Opens path (RTLD_NOW | RTLD_LOCAL; a bare name is searched as the dynamic loader does) and
 * resolves every symbol of syms into fns (a struct of function pointers). On any failure the
 * library is closed, fns is left zeroed and lib->reason says what is missing. ERR_OK or
 * ERR_UNSUPPORTED. */
int vendor_lib_open(struct vendor_lib *lib, const char *path, const struct vendor_sym *syms,
                    size_t n_syms, void *fns, size_t fns_size);

/* Whether the opened library exports name (an optional symbol; false when not open). */
bool vendor_lib_has(const struct vendor_lib *lib, const char *name);

/* Closes an opened library that turned out unusable and records why (copied, truncated). */
void vendor_lib_refuse(struct vendor_lib *lib, const char *reason);

/* Closes the library (a no-op when it is not open). */
void vendor_lib_close(struct vendor_lib *lib);

/* The vendor settings, from the server's flags. */
struct vendor_config {
    char sysfs_root[VENDOR_PATH_CAP]; // host files are read under this ("" or "/": the host)
    char rkllm_lib[VENDOR_PATH_CAP];  // --rkllm-lib ("": librkllmrt.so)
    char rknn_lib[VENDOR_PATH_CAP];   // --rknn-lib ("": librknnrt.so)
    char rknn3_lib[VENDOR_PATH_CAP];  // --rknn3-lib ("": librknn3_api.so)
    char rkllm_abi[8];                // --rkllm-abi: "1.2" or "1.3" ("": detected)
};

#define VENDOR_RKLLM_LIB_DEFAULT "librkllmrt.so"
#define VENDOR_RKNN_LIB_DEFAULT  "librknnrt.so"
#define VENDOR_RKNN3_LIB_DEFAULT "librknn3_api.so"

/* Stores the settings (copied) for the platforms' start hooks; call before platform_start. */
void vendor_configure(const struct vendor_config *c);

/* The settings (defaults filled in). Valid for the process's lifetime. */
const struct vendor_config *vendor_config_get(void);

/* host_path under the sysfs root ("/proc/device-tree/compatible" →
 * "<root>/proc/device-tree/compatible"). Truncated to cap. */
void vendor_host_path(const char *host_path, char *out, size_t cap);

/* The Rockchip SoC from <root>/proc/device-tree/compatible (or
 * <root>/sys/firmware/devicetree/base/compatible): "RK3588", "RK3588S", "RK3582", "RK3576",
 * "RK3566", "RK3568", "RK3562" or "RV1126B"; false when none is named (not a Rockchip board). */
bool vendor_soc_detect(char *out, size_t cap);

/* The NPU driver version ("0.9.8") from <root>/sys/module/rknpu/version, else
 * <root>/sys/kernel/debug/rknpu/version or <root>/proc/rknpu/version; false when none is
 * readable. */
bool vendor_npu_driver_version(char *out, size_t cap);

/* The NPU's device node (host path, e.g. "/dev/dri/renderD129") into node: a DRM render node
 * under <root>/dev/dri whose sysfs device (<root>/sys/class/drm/renderDN/device) is bound to the
 * rknpu driver (its driver link, or DRIVER= in its uevent), else <root>/dev/rknpu. False with
 * why naming what is missing (and the render nodes of other drivers), or the node this process
 * may not open. Cannot fail otherwise. */
bool vendor_npu_node(char *node, size_t cap, char *why, size_t why_cap);

/* Whether a model built for model_chip (any case, "rk3588") can run on host_chip ("RK3588S"):
 * the same chip, or the RK3588/RK3588S pair, which share the NPU. */
bool vendor_chip_matches(const char *model_chip, const char *host_chip);

/* Fills a platform status from lib: the reason when unavailable, the library, the NPU
 * driver version when readable. */
void vendor_status_fill(const struct vendor_lib *lib, struct platform_status *out);

/* Whether platform_detect_model gives the platform id for path (a vendor platform's claims). */
bool vendor_claims(const char *path, const char *id);

/* The SoC as a platform_chip list (count 1), for detect_chips of the SoC platforms (rkllm,
 * rknn2). Returns 0 or 1. */
int vendor_soc_chips(struct platform_chip *out, int max);

#endif
