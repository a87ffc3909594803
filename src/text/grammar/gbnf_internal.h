/* The compiled form of a GBNF grammar, shared by text/grammar/gbnf.c (which builds it) and
 * text/grammar/grammar.c (which matches against it). Not for use outside text/. */
#ifndef TEXT_GBNF_INTERNAL_H
#define TEXT_GBNF_INTERNAL_H

#include <stdint.h>

#include "text/grammar/gbnf.h"

enum gbnf_op {
    GBNF_OP_END = 0, // ends the last alternate of a rule
    GBNF_OP_ALT,     // ends an alternate; another one starts at the next element
    GBNF_OP_REF,     // a = rule id
    GBNF_OP_CHARS,   // a = first range in ranges[], b = number of ranges; matches one code point
};

struct gbnf_elem {
    uint32_t op; // enum gbnf_op
    uint32_t a;
    uint32_t b;
};

struct gbnf_range {
    uint32_t lo, hi; // inclusive code points, sorted, disjoint and non-adjacent within a set
};

/* Immutable after gbnf_compile. */
struct gbnf {
    struct gbnf_elem *elems; // n_elems; every rule's alternates, each ended by ALT or END
    uint32_t n_elems;
    uint32_t *rule_start; // n_rules; index of each rule's first element
    uint32_t n_rules;
    struct gbnf_range *ranges; // n_ranges; the character sets of CHARS elements
    uint32_t n_ranges;
    uint32_t root; // id of the rule named root
};

#endif
