/* Chip detection from /proc/cpuinfo text: one entry per distinct CPU model with its count.
 * x86 reports "model name"; ARM reports implementer/part codes, mapped to core names
 * (Cortex-A55, Cortex-A76, …) so big.LITTLE SoCs such as the RK3588 list both clusters. */
#ifndef PLATFORM_CPUINFO_H
#define PLATFORM_CPUINFO_H

#include "platform/platform.h"

#include <stddef.h>

/* Parses cpuinfo text (need not be NUL-terminated). Writes up to max entries in order of first
 * appearance and returns how many. Cannot fail; unrecognised text gives 0 entries. */
int cpuinfo_parse(const char *text, size_t len, struct platform_chip *out, int max);

/* Reads /proc/cpuinfo and parses it; falls back to one "unknown" entry with the online CPU
 * count when the file is missing or unrecognised. */
int cpuinfo_detect(struct platform_chip *out, int max);

#endif
