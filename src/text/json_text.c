/* Shortest exact reals for JSON text (see json_text.h). */
#include "text/json_text.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

static bool reads_back(double v, int precision)
{
    char s[40];
    snprintf(s, sizeof s, "%.*g", precision, v);
    return strtod(s, NULL) == v;
}

/* Raises *p until v round-trips; false once 17 is needed (nothing can raise it further). */
static bool fit(const json_t *j, int *p)
{
    if (json_is_real(j)) {
        const double v = json_real_value(j);
        while (*p < 17 && !reads_back(v, *p))
            (*p)++;
        return *p < 17;
    }
    size_t i;
    const char *key;
    json_t *child;
    if (json_is_array(j)) {
        json_array_foreach(json_unconst(j), i, child)
        {
            if (!fit(child, p)) return false;
        }
    } else if (json_is_object(j)) {
        json_object_foreach(json_unconst(j), key, child)
        {
            if (!fit(child, p)) return false;
        }
    }
    return true;
}

int json_text_precision(const json_t *j)
{
    int p = 15;
    fit(j, &p);
    return p;
}

char *json_text_dumps(const json_t *j, size_t flags)
{
    return json_dumps(j, flags | JSON_REAL_PRECISION(json_text_precision(j)));
}

size_t json_text_dumpb(const json_t *j, char *buffer, size_t size, size_t flags)
{
    return json_dumpb(j, buffer, size, flags | JSON_REAL_PRECISION(json_text_precision(j)));
}

double json_text_float(float f)
{
    if (!isfinite(f)) return f;
    char s[32];
    for (int p = 1; p < 9; p++) {
        snprintf(s, sizeof s, "%.*g", p, (double)f);
        if (strtof(s, NULL) == f) return strtod(s, NULL);
    }
    snprintf(s, sizeof s, "%.9g", (double)f); // 9 digits always read back as f
    return strtod(s, NULL);
}
