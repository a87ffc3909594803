/* Grammar matcher over a compiled GBNF grammar. A position is a set of pushdown stacks whose
 * tops are character sets; stacks are hash-consed linked nodes (shared tails), a set of them
 * is interned as one "DFA state", and transitions between DFA states are cached (per ASCII
 * byte, and per class of code points for the rest), so the vocabulary trie walk in
 * grammar_mask mostly costs one array read per trie node. Inside a UTF-8 sequence the position
 * is the dstate plus the bytes so far, checked against the stack tops' ranges.
 * Semantics (stacks, expansion through rule references) follow llama.cpp's llama-grammar. */
#include "text/grammar/grammar.h"
#include "text/grammar/gbnf_internal.h"

#include "util/checked.h"
#include "util/err.h"
#include "util/mem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NONE        UINT32_MAX
#define EMPTY_KEY   UINT64_MAX
#define STACKS_MAX  4096u      // stacks in one position (e.g. x? x? x? ... explodes)
#define WORK_MAX    (1u << 16) // expansion steps for one code point
#define WORK_BUDGET (1u << 23) // stack visits for one public call (a mask walk included)
#define CACHE_SOFT  (1u << 20) // cached entries before the caches are rebuilt between calls
#define CACHE_HARD  (1u << 23) // cached entries no single call may exceed
#define DENSE_AFTER 8          // hashed lookups from one state before it gets a dense table
#define DENSE_MAX   (1u << 21) // dense table entries (4 bytes each) per grammar state
#define UNKNOWN     (NONE - 1) // a dense table entry not computed yet

struct node {
    uint32_t pos;    // element index: a CHARS to match (stack top) or a continuation
    uint32_t parent; // node below, NONE at the bottom
};

/* A DFA state: a set of stacks between code points. The position inside a multi-byte UTF-8
 * sequence is not part of it: a position (struct above, `pos`) is a dstate id plus a partial
 * code (see pcode), so UTF-8 prefixes cost no interning. */
struct dstate {
    uint32_t set_off, set_n; // sorted node ids in set_pool
    bool has_accept;         // some stack is empty: root has matched completely
    uint32_t dense;          // offset of its 256-entry table in dense_tab, or NONE
    uint32_t n_lookups;      // hashed transition lookups from it (promotion to dense)
    uint32_t cls;            // offset of its code point class cache in cls_pool, or NONE
};

struct table {
    uint64_t *key; // cap slots, EMPTY_KEY when unused
    uint32_t *val;
    uint32_t cap, n; // cap is a power of two
};

/* Owned by one thread at a time. */
struct grammar_state {
    const struct gbnf *g; // borrowed
    struct node *nodes;
    uint32_t n_nodes, nodes_cap;
    uint32_t *set_pool;
    uint32_t n_set_pool, set_pool_cap;
    struct dstate *ds;
    uint32_t n_ds, ds_cap;
    struct table node_tab;       // (pos, parent) -> node id
    struct table ds_tab;         // content hash -> dstate id (contents compared on a hit)
    struct table trans_tab;      // (dstate id, byte) -> next dstate id or NONE (dead)
    uint32_t *dense_tab;         // tables of 256 entries by byte: for ASCII the next dstate, for a
                                 // UTF-8 lead byte 0 (some stack can take such a code point); NONE
                                 // for a rejected byte, UNKNOWN before the first lookup
    uint32_t n_dense, dense_cap; // entries
    uint32_t *cls_pool;          // per dstate: n_b, n_b sorted boundaries of the code point classes
        // its stack tops tell apart, then n_b + 1 next dstates (or UNKNOWN)
    uint32_t n_cls, cls_cap;
    uint64_t cur;       // current position: dstate id | partial code << 32
    uint32_t work_left; // stack visits left in this call (WORK_BUDGET per call)
    uint32_t *work;     // scratch: (pos, parent) pairs to expand
    uint32_t work_cap;
    uint32_t *out; // scratch: node ids of a new set
    uint32_t out_cap;
    uint64_t depth_pos[GRAMMAR_PIECE_LEN_MAX + 1]; // mask walk: position at each trie depth
};

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static int grow_array(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap) return ERR_OK;
    if (need > CACHE_HARD * 4u) return ERR_LIMIT;
    uint32_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = mem_realloc(*p, (size_t)c * elem);
    if (!q) return ERR_NOMEM;
    *p = q;
    *cap = c;
    return ERR_OK;
}

static void table_deinit(struct table *t)
{
    mem_free(t->key);
    mem_free(t->val);
    *t = (struct table){0};
}

/* Index of key's slot, or of the empty slot where it would go. cap must be non-zero. */
static uint32_t table_probe(const struct table *t, uint64_t key)
{
    uint32_t i = (uint32_t)mix64(key) & (t->cap - 1);
    while (t->key[i] != key && t->key[i] != EMPTY_KEY)
        i = (i + 1) & (t->cap - 1);
    return i;
}

/* Keeps the load factor at or below 1/2. For ds_tab, keys repeat (hash collisions), which
 * plain reinsertion handles. */
static int table_reserve(struct table *t)
{
    if (t->cap && (t->n + 1) * 2 <= t->cap) return ERR_OK;
    if (t->n >= CACHE_HARD) return ERR_LIMIT;
    uint32_t cap = t->cap ? t->cap * 2 : 256;
    struct table nt = {mem_alloc((size_t)cap * sizeof(uint64_t)),
                       mem_alloc((size_t)cap * sizeof(uint32_t)), cap, t->n};
    if (!nt.key || !nt.val) {
        table_deinit(&nt);
        return ERR_NOMEM;
    }
    memset(nt.key, 0xFF, (size_t)cap * sizeof(uint64_t));
    for (uint32_t i = 0; i < t->cap; i++) {
        if (t->key[i] == EMPTY_KEY) continue;
        uint32_t j = (uint32_t)mix64(t->key[i]) & (cap - 1);
        while (nt.key[j] != EMPTY_KEY)
            j = (j + 1) & (cap - 1);
        nt.key[j] = t->key[i];
        nt.val[j] = t->val[i];
    }
    table_deinit(t);
    *t = nt;
    return ERR_OK;
}

static int intern_node(struct grammar_state *st, uint32_t pos, uint32_t parent, uint32_t *id)
{
    int rc = table_reserve(&st->node_tab);
    if (rc != ERR_OK) return rc;
    uint64_t key = (uint64_t)pos << 32 | parent;
    uint32_t i = table_probe(&st->node_tab, key);
    if (st->node_tab.key[i] == key) {
        *id = st->node_tab.val[i];
        return ERR_OK;
    }
    rc = grow_array((void **)&st->nodes, &st->nodes_cap, st->n_nodes + 1, sizeof *st->nodes);
    if (rc != ERR_OK) return rc;
    st->nodes[st->n_nodes] = (struct node){pos, parent};
    st->node_tab.key[i] = key;
    st->node_tab.val[i] = st->n_nodes;
    st->node_tab.n++;
    *id = st->n_nodes++;
    return ERR_OK;
}

static uint64_t dstate_hash(const struct dstate *d, const uint32_t *set)
{
    uint64_t h = mix64((uint64_t)d->has_accept << 40 | d->set_n);
    for (uint32_t i = 0; i < d->set_n; i++)
        h = mix64(h ^ set[i]);
    return h == EMPTY_KEY ? 0 : h;
}

static bool dstate_equal(const struct grammar_state *st, const struct dstate *a,
                         const struct dstate *b, const uint32_t *b_set)
{
    return a->has_accept == b->has_accept && a->set_n == b->set_n &&
           (a->set_n == 0 || !memcmp(st->set_pool + a->set_off, b_set, a->set_n * sizeof *b_set));
}

/* Finds or adds the dstate d whose sorted node set is set[0..d->set_n). */
static int intern_dstate(struct grammar_state *st, struct dstate d, const uint32_t *set,
                         uint32_t *id)
{
    int rc = table_reserve(&st->ds_tab);
    if (rc != ERR_OK) return rc;
    uint64_t h = dstate_hash(&d, set);
    struct table *t = &st->ds_tab;
    uint32_t i = (uint32_t)mix64(h) & (t->cap - 1);
    for (; t->key[i] != EMPTY_KEY; i = (i + 1) & (t->cap - 1)) {
        if (t->key[i] == h && dstate_equal(st, &st->ds[t->val[i]], &d, set)) {
            *id = t->val[i];
            return ERR_OK;
        }
    }
    rc = grow_array((void **)&st->ds, &st->ds_cap, st->n_ds + 1, sizeof *st->ds);
    if (rc == ERR_OK) {
        rc = grow_array((void **)&st->set_pool, &st->set_pool_cap, st->n_set_pool + d.set_n,
                        sizeof *st->set_pool);
        if (rc == ERR_OK && d.set_n > 0) {
            memcpy(st->set_pool + st->n_set_pool, set, d.set_n * sizeof *set);
            d.set_off = st->n_set_pool;
            st->n_set_pool += d.set_n;
        }
    }
    if (rc != ERR_OK) return rc;
    d.dense = NONE;
    d.n_lookups = 0;
    d.cls = NONE;
    st->ds[st->n_ds] = d;
    t->key[i] = h;
    t->val[i] = st->n_ds;
    t->n++;
    *id = st->n_ds++;
    return ERR_OK;
}

static int push_work(struct grammar_state *st, uint32_t *n_work, uint32_t pos, uint32_t parent)
{
    int rc = grow_array((void **)&st->work, &st->work_cap, (*n_work + 1) * 2, sizeof *st->work);
    if (rc != ERR_OK) return rc;
    st->work[(*n_work) * 2] = pos;
    st->work[(*n_work) * 2 + 1] = parent;
    (*n_work)++;
    return ERR_OK;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Expands the queued (pos, parent) items until every stack top is a character set (or the
 * stack is empty), and interns the resulting set as a full dstate (*id = NONE when no stack
 * survives). */
static int expand(struct grammar_state *st, uint32_t n_work, uint32_t *id)
{
    const struct gbnf *g = st->g;
    uint32_t n_out = 0, n_steps = 0;
    bool has_accept = false;
    int rc = ERR_OK;
    while (rc == ERR_OK && n_work > 0) {
        if (++n_steps > WORK_MAX || st->work_left == 0) return ERR_LIMIT;
        st->work_left--;
        n_work--;
        uint32_t pos = st->work[n_work * 2], parent = st->work[n_work * 2 + 1];
        const struct gbnf_elem *e = &g->elems[pos];
        if (e->op == GBNF_OP_END || e->op == GBNF_OP_ALT) {
            if (parent == NONE)
                has_accept = true;
            else
                rc = push_work(st, &n_work, st->nodes[parent].pos, st->nodes[parent].parent);
        } else if (e->op == GBNF_OP_REF) {
            uint32_t op_next = g->elems[pos + 1].op, up = parent;
            if (op_next != GBNF_OP_END && op_next != GBNF_OP_ALT) // else a tail call
                rc = intern_node(st, pos + 1, parent, &up);
            for (uint32_t i = g->rule_start[e->a]; rc == ERR_OK; i++) {
                if (i == g->rule_start[e->a] || g->elems[i - 1].op == GBNF_OP_ALT)
                    rc = push_work(st, &n_work, i, up);
                if (g->elems[i].op == GBNF_OP_END) break;
            }
        } else {
            uint32_t nid = 0;
            rc = intern_node(st, pos, parent, &nid);
            if (rc == ERR_OK && n_out >= STACKS_MAX) rc = ERR_LIMIT;
            if (rc == ERR_OK)
                rc = grow_array((void **)&st->out, &st->out_cap, n_out + 1, sizeof *st->out);
            if (rc == ERR_OK) st->out[n_out++] = nid;
        }
    }
    if (rc != ERR_OK) return rc;
    if (n_out == 0 && !has_accept) {
        *id = NONE;
        return ERR_OK;
    }
    if (n_out > 1) qsort(st->out, n_out, sizeof *st->out, cmp_u32);
    uint32_t m = 0;
    for (uint32_t i = 0; i < n_out; i++)
        if (m == 0 || st->out[m - 1] != st->out[i]) st->out[m++] = st->out[i];
    struct dstate d = {.set_n = m, .has_accept = has_accept};
    return intern_dstate(st, d, st->out, id);
}

static bool chars_match(const struct gbnf *g, const struct gbnf_elem *e, uint32_t cp)
{
    if (e->b == 0) return false; // an empty class ("[]"); a grammar may have no ranges at all
    const struct gbnf_range *r = g->ranges + e->a;
    for (uint32_t i = 0; i < e->b && r[i].lo <= cp; i++)
        if (cp <= r[i].hi) return true;
    return false;
}

static bool chars_overlap(const struct gbnf *g, const struct gbnf_elem *e, uint32_t lo, uint32_t hi)
{
    if (e->b == 0) return false;
    const struct gbnf_range *r = g->ranges + e->a;
    for (uint32_t i = 0; i < e->b && r[i].lo <= hi; i++)
        if (r[i].hi >= lo) return true;
    return false;
}

/* Full dstate after the code point cp from full dstate sid. */
/* Takes n from the call's work budget: a hostile grammar (thousands of stacks per position)
 * makes one call fail with ERR_LIMIT instead of running for minutes. */
static int charge(struct grammar_state *st, uint32_t n)
{
    if (st->work_left < n) {
        st->work_left = 0;
        return ERR_LIMIT;
    }
    st->work_left -= n;
    return ERR_OK;
}

static int advance_cp(struct grammar_state *st, uint32_t sid, uint32_t cp, uint32_t *id)
{
    uint32_t n_work = 0;
    if (charge(st, st->ds[sid].set_n) != ERR_OK) return ERR_LIMIT;
    for (uint32_t i = 0; i < st->ds[sid].set_n; i++) {
        const struct node *nd = &st->nodes[st->set_pool[st->ds[sid].set_off + i]];
        if (!chars_match(st->g, &st->g->elems[nd->pos], cp)) continue;
        int rc = push_work(st, &n_work, nd->pos + 1, nd->parent);
        if (rc != ERR_OK) return rc;
    }
    if (n_work == 0) {
        *id = NONE;
        return ERR_OK;
    }
    return expand(st, n_work, id);
}

static const uint32_t min_cp_of_len[5] = {0, 0, 0x80, 0x800, 0x10000};

/* A partial code: a UTF-8 sequence of len bytes with need still to come, value the bits so
 * far. Never 0 (len >= 2), so 0 means "between code points". */
static inline uint32_t pcode(uint32_t value, uint32_t need, uint32_t len)
{
    return len << 28 | need << 24 | value;
}

#define POS_DEAD ((uint64_t)NONE)

/* Whether some stack top of sid accepts a code point the prefix (value, need more bytes) can
 * still become, so a token ending mid-code-point is allowed only when it is completable. */
static int prefix_viable(struct grammar_state *st, uint32_t sid, uint32_t value, uint32_t need,
                         uint32_t len, bool *out)
{
    *out = false;
    if (charge(st, st->ds[sid].set_n) != ERR_OK) return ERR_LIMIT;
    uint32_t lo = value << (6 * need), hi = lo | ((1u << (6 * need)) - 1);
    if (lo < min_cp_of_len[len]) lo = min_cp_of_len[len];
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    // Surrogates (U+D800..U+DFFF) are not characters: a prefix such as ED A5 can never
    // complete, so test the parts of [lo, hi] on either side of them.
    uint32_t part_lo[2] = {lo, lo > 0xE000 ? lo : 0xE000};
    uint32_t part_hi[2] = {hi < 0xD7FF ? hi : 0xD7FF, hi};
    const struct dstate *d = &st->ds[sid];
    for (int k = 0; k < 2 && !*out; k++) {
        if (part_lo[k] > part_hi[k]) continue;
        for (uint32_t i = 0; i < d->set_n; i++) {
            const struct node *nd = &st->nodes[st->set_pool[d->set_off + i]];
            if (chars_overlap(st->g, &st->g->elems[nd->pos], part_lo[k], part_hi[k])) {
                *out = true;
                break;
            }
        }
    }
    return ERR_OK;
}

/* Builds sid's class cache: code points between two consecutive boundaries of its stack tops'
 * ranges match the same tops, hence lead to the same next dstate. */
static int cls_build(struct grammar_state *st, uint32_t sid)
{
    const struct dstate *d = &st->ds[sid];
    uint32_t n_b = 0;
    for (uint32_t i = 0; i < d->set_n; i++)
        n_b += 2 * st->g->elems[st->nodes[st->set_pool[d->set_off + i]].pos].b;
    uint32_t off = st->n_cls;
    int rc =
        grow_array((void **)&st->cls_pool, &st->cls_cap, off + 2 * n_b + 2, sizeof *st->cls_pool);
    if (rc != ERR_OK) return rc;
    uint32_t *b = st->cls_pool + off + 1, m = 0;
    for (uint32_t i = 0; i < d->set_n; i++) {
        const struct gbnf_elem *e = &st->g->elems[st->nodes[st->set_pool[d->set_off + i]].pos];
        for (uint32_t k = 0; k < e->b; k++) {
            b[m++] = st->g->ranges[e->a + k].lo;
            if (st->g->ranges[e->a + k].hi < 0x10FFFF) b[m++] = st->g->ranges[e->a + k].hi + 1;
        }
    }
    if (m > 1) qsort(b, m, sizeof *b, cmp_u32);
    uint32_t u = 0;
    for (uint32_t i = 0; i < m; i++)
        if (u == 0 || b[u - 1] != b[i]) b[u++] = b[i];
    st->cls_pool[off] = u;
    for (uint32_t k = 0; k <= u; k++)
        b[u + k] = UNKNOWN;
    st->n_cls = off + 2 * u + 2;
    st->ds[sid].cls = off;
    return ERR_OK;
}

/* Full dstate after the non-ASCII code point cp from sid, through the class cache. */
static int complete_cp(struct grammar_state *st, uint32_t sid, uint32_t cp, uint32_t *id)
{
    if (st->ds[sid].cls == NONE) {
        int rc = cls_build(st, sid);
        if (rc != ERR_OK) return rc;
    }
    uint32_t off = st->ds[sid].cls, n_b = st->cls_pool[off], lo = 0, hi = n_b;
    const uint32_t *b = st->cls_pool + off + 1;
    while (lo < hi) { // k = number of boundaries <= cp
        uint32_t mid = (lo + hi) / 2;
        if (b[mid] <= cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint32_t slot = off + 1 + n_b + lo;
    if (st->cls_pool[slot] != UNKNOWN) {
        *id = st->cls_pool[slot];
        return ERR_OK;
    }
    int rc = advance_cp(st, sid, cp, id);
    if (rc == ERR_OK) st->cls_pool[slot] = *id;
    return rc;
}

/* Gives a state that is stepped from often a direct transition table, so the trie walk mostly
 * costs one array read per trie node. Failing to allocate one only costs speed. */
static void densify(struct grammar_state *st, uint32_t sid)
{
    if (st->n_dense + 256 > DENSE_MAX) return;
    if (st->n_dense + 256 > st->dense_cap &&
        grow_array((void **)&st->dense_tab, &st->dense_cap, st->n_dense + 256,
                   sizeof *st->dense_tab) != ERR_OK)
        return;
    for (uint32_t b = 0; b < 256; b++)
        st->dense_tab[st->n_dense + b] = UNKNOWN;
    st->ds[sid].dense = st->n_dense;
    st->n_dense += 256;
}

/* Next dstate of sid over an ASCII byte, through the hash cache. */
static int step_ascii_slow(struct grammar_state *st, uint32_t sid, uint8_t byte, uint32_t *id)
{
    uint64_t key = (uint64_t)sid << 8 | byte;
    struct table *t = &st->trans_tab;
    uint32_t i = t->cap ? table_probe(t, key) : 0;
    if (t->cap && t->key[i] == key) {
        *id = t->val[i];
    } else {
        int rc = advance_cp(st, sid, byte, id);
        if (rc == ERR_OK) rc = table_reserve(t);
        if (rc != ERR_OK) return rc;
        i = table_probe(t, key);
        t->key[i] = key;
        t->val[i] = *id;
        t->n++;
    }
    struct dstate *d = &st->ds[sid];
    if (d->dense == NONE && ++d->n_lookups >= DENSE_AFTER) densify(st, sid);
    if (d->dense != NONE) st->dense_tab[d->dense + byte] = *id;
    return ERR_OK;
}

/* A UTF-8 lead byte from sid: the partial position, or dead. */
static int step_lead(struct grammar_state *st, uint32_t sid, uint8_t byte, uint64_t *out)
{
    uint32_t len = byte >= 0xC2 && byte <= 0xDF   ? 2
                   : byte >= 0xE0 && byte <= 0xEF ? 3
                   : byte >= 0xF0 && byte <= 0xF4 ? 4
                                                  : 0;
    uint32_t value = byte & (0x7Fu >> len), dn = st->ds[sid].dense;
    uint32_t viable = dn != NONE ? st->dense_tab[dn + byte] : UNKNOWN;
    if (viable == UNKNOWN) {
        bool ok = false;
        if (len && prefix_viable(st, sid, value, len - 1, len, &ok) != ERR_OK) return ERR_LIMIT;
        viable = ok ? 0 : NONE;
        if (dn != NONE) st->dense_tab[dn + byte] = viable;
    }
    *out = viable == NONE ? POS_DEAD : (uint64_t)pcode(value, len - 1, len) << 32 | sid;
    return ERR_OK;
}

/* A continuation byte inside a UTF-8 sequence. */
static int step_cont(struct grammar_state *st, uint64_t pos, uint8_t byte, uint64_t *out)
{
    uint32_t sid = (uint32_t)pos, pc = (uint32_t)(pos >> 32);
    uint32_t len = pc >> 28, need = (pc >> 24) & 3, value = pc & 0xFFFFFFu;
    *out = POS_DEAD;
    if ((byte & 0xC0) != 0x80) return ERR_OK;
    value = value << 6 | (byte & 0x3Fu);
    if (need > 1) {
        bool ok;
        int rc = prefix_viable(st, sid, value, need - 1, len, &ok);
        if (rc == ERR_OK && ok) *out = (uint64_t)pcode(value, need - 1, len) << 32 | sid;
        return rc;
    }
    if (value < min_cp_of_len[len] || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF))
        return ERR_OK;
    uint32_t id;
    int rc = complete_cp(st, sid, value, &id);
    if (rc == ERR_OK && id != NONE) *out = id;
    return rc;
}

/* The position after one byte; *out = POS_DEAD when the byte is rejected. */
static inline int step(struct grammar_state *st, uint64_t pos, uint8_t byte, uint64_t *out)
{
    uint32_t sid = (uint32_t)pos;
    if (pos >> 32) return step_cont(st, pos, byte, out);
    if (byte >= 0x80) return step_lead(st, sid, byte, out);
    uint32_t dn = st->ds[sid].dense, id = NONE;
    if (dn != NONE && (id = st->dense_tab[dn + byte]) != UNKNOWN) {
        *out = id == NONE ? POS_DEAD : id;
        return ERR_OK;
    }
    int rc = step_ascii_slow(st, sid, byte, &id);
    *out = id == NONE ? POS_DEAD : id;
    return rc;
}

static void state_deinit(struct grammar_state *st)
{
    mem_free(st->nodes);
    mem_free(st->set_pool);
    mem_free(st->ds);
    table_deinit(&st->node_tab);
    table_deinit(&st->ds_tab);
    table_deinit(&st->trans_tab);
    mem_free(st->work);
    mem_free(st->out);
    mem_free(st->dense_tab);
    mem_free(st->cls_pool);
}

void grammar_state_free(struct grammar_state *st)
{
    if (!st) return;
    state_deinit(st);
    mem_free(st);
}

static int state_alloc(const struct gbnf *g, struct grammar_state **out)
{
    struct grammar_state *st = mem_calloc(1, sizeof *st);
    if (!st) return ERR_NOMEM;
    st->g = g;
    st->work_left = WORK_BUDGET;
    *out = st;
    return ERR_OK;
}

int grammar_state_new(const struct gbnf *g, struct grammar_state **out)
{
    struct grammar_state *st;
    int rc = state_alloc(g, &st);
    if (rc != ERR_OK) return rc;
    uint32_t n_work = 0;
    for (uint32_t i = g->rule_start[g->root]; rc == ERR_OK; i++) {
        if (i == g->rule_start[g->root] || g->elems[i - 1].op == GBNF_OP_ALT)
            rc = push_work(st, &n_work, i, NONE);
        if (g->elems[i].op == GBNF_OP_END) break;
    }
    uint32_t sid = NONE;
    if (rc == ERR_OK) rc = expand(st, n_work, &sid);
    if (rc == ERR_OK && sid == NONE)
        rc = ERR_INVALID; // cannot happen for a grammar gbnf_compile accepted
    st->cur = sid;
    if (rc != ERR_OK) {
        grammar_state_free(st);
        return rc;
    }
    *out = st;
    return ERR_OK;
}

/* Re-creates node id of src (its whole stack) in dst; *out gets the new id. */
static int copy_stack(struct grammar_state *dst, const struct grammar_state *src, uint32_t id,
                      uint32_t *out)
{
    uint32_t n = 0;
    for (uint32_t k = id; k != NONE; k = src->nodes[k].parent) {
        int rc = grow_array((void **)&dst->work, &dst->work_cap, n + 1, sizeof *dst->work);
        if (rc != ERR_OK) return rc;
        dst->work[n++] = src->nodes[k].pos;
    }
    uint32_t parent = NONE;
    while (n > 0) {
        int rc = intern_node(dst, dst->work[--n], parent, &parent);
        if (rc != ERR_OK) return rc;
    }
    *out = parent;
    return ERR_OK;
}

int grammar_state_clone(const struct grammar_state *src, struct grammar_state **out)
{
    struct grammar_state *st;
    int rc = state_alloc(src->g, &st);
    if (rc != ERR_OK) return rc;
    const struct dstate *d = &src->ds[(uint32_t)src->cur];
    uint32_t *set = mem_alloc((d->set_n + 1) * sizeof *set), sid = NONE;
    if (!set) rc = ERR_NOMEM;
    for (uint32_t i = 0; rc == ERR_OK && i < d->set_n; i++)
        rc = copy_stack(st, src, src->set_pool[d->set_off + i], &set[i]);
    if (rc == ERR_OK) {
        // New ids keep the order only by luck; the set must be sorted to be interned.
        if (d->set_n > 1) qsort(set, d->set_n, sizeof *set, cmp_u32);
        struct dstate nd = {.set_n = d->set_n, .has_accept = d->has_accept};
        rc = intern_dstate(st, nd, set, &sid);
    }
    st->cur = (src->cur >> 32) << 32 | sid; // the partial code carries over as is
    mem_free(set);
    if (rc != ERR_OK) {
        grammar_state_free(st);
        return rc;
    }
    *out = st;
    return ERR_OK;
}

/* Between calls, drops caches that grew past CACHE_SOFT by rebuilding from the position. A
 * failure here is harmless: the old caches stay. */
static void maybe_flush(struct grammar_state *st)
{
    st->work_left = WORK_BUDGET; // every public call that steps starts here
    bool is_dense_full = st->n_dense + 256 > DENSE_MAX;
    if (!is_dense_full && st->n_nodes + st->n_ds + st->trans_tab.n + st->n_cls / 4 < CACHE_SOFT)
        return;
    struct grammar_state *fresh;
    if (grammar_state_clone(st, &fresh) != ERR_OK) return;
    struct grammar_state tmp = *st;
    *st = *fresh;
    *fresh = tmp;
    grammar_state_free(fresh);
}

int grammar_state_accept_bytes(struct grammar_state *st, const void *bytes, size_t len)
{
    const uint8_t *b = bytes;
    maybe_flush(st);
    uint64_t pos = st->cur;
    for (size_t i = 0; i < len; i++) {
        int rc = step(st, pos, b[i], &pos);
        if (rc != ERR_OK) return rc;
        if (pos == POS_DEAD) return ERR_INVALID;
    }
    st->cur = pos;
    return ERR_OK;
}

bool grammar_state_can_end(const struct grammar_state *st)
{
    return (st->cur >> 32) == 0 && st->ds[(uint32_t)st->cur].has_accept;
}

bool grammar_state_is_done(const struct grammar_state *st)
{
    return (st->cur >> 32) == 0 && st->ds[(uint32_t)st->cur].set_n == 0;
}

/* ---- vocabulary trie ---- */

struct tnode {
    uint32_t subtree_end; // index after the last node of this node's subtree (pre-order)
    uint32_t tok_start;   // first entry in sorted_ids of the tokens whose piece ends here
    uint32_t tok_n;
    uint16_t depth; // bytes from the root, >= 1
    uint8_t byte;
};

/* Immutable after grammar_vocab_new. */
struct grammar_vocab {
    size_t n_tokens;
    struct tnode *nodes; // n_nodes, pre-order
    uint32_t n_nodes;
    uint32_t *sorted_ids; // token ids in piece order, grouped per trie node
    uint32_t *eog;        // n_eog ids
    size_t n_eog;
    uint32_t *is_eog;  // bitmask, n_tokens bits
    char *blob;        // every piece's bytes
    size_t *piece_off; // n_tokens + 1 offsets into blob
};

struct piece_ref {
    const uint8_t *bytes;
    uint32_t len, id;
};

static int cmp_piece(const void *a, const void *b)
{
    const struct piece_ref *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->bytes, y->bytes, n);
    if (c != 0) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

void grammar_vocab_free(struct grammar_vocab *gv)
{
    if (!gv) return;
    mem_free(gv->nodes);
    mem_free(gv->sorted_ids);
    mem_free(gv->eog);
    mem_free(gv->is_eog);
    mem_free(gv->blob);
    mem_free(gv->piece_off);
    mem_free(gv);
}

static int copy_pieces(struct grammar_vocab *gv, const struct grammar_vocab_params *vp)
{
    size_t total = 0;
    for (size_t i = 0; i < vp->n_tokens; i++) {
        size_t n = vp->piece[i] ? vp->piece_len[i] : 0;
        if (!size_add(total, n, &total)) return ERR_LIMIT;
    }
    gv->blob = mem_alloc(total ? total : 1);
    gv->piece_off = mem_alloc((vp->n_tokens + 1) * sizeof *gv->piece_off);
    if (!gv->blob || !gv->piece_off) return ERR_NOMEM;
    size_t off = 0;
    for (size_t i = 0; i < vp->n_tokens; i++) {
        size_t n = vp->piece[i] ? vp->piece_len[i] : 0;
        gv->piece_off[i] = off;
        if (n) memcpy(gv->blob + off, vp->piece[i], n);
        off += n;
    }
    gv->piece_off[vp->n_tokens] = off;
    return ERR_OK;
}

/* Builds the pre-order trie from the pieces sorted bytewise: consecutive pieces share their
 * common prefix's path, so each piece adds nodes only for the bytes after that prefix. */
static int build_trie(struct grammar_vocab *gv, struct piece_ref *refs, uint32_t n_refs)
{
    size_t n_bytes = 0;
    for (uint32_t k = 0; k < n_refs; k++)
        n_bytes += refs[k].len;
    gv->nodes = mem_alloc((n_bytes ? n_bytes : 1) * sizeof *gv->nodes);
    gv->sorted_ids = mem_alloc((n_refs ? n_refs : 1) * sizeof *gv->sorted_ids);
    if (!gv->nodes || !gv->sorted_ids) return ERR_NOMEM;
    uint32_t path[GRAMMAR_PIECE_LEN_MAX + 1], depth = 0, n = 0;
    for (uint32_t k = 0; k < n_refs; k++) {
        const struct piece_ref *r = &refs[k];
        uint32_t lcp = 0;
        if (k > 0) {
            const struct piece_ref *q = &refs[k - 1];
            while (lcp < q->len && lcp < r->len && q->bytes[lcp] == r->bytes[lcp])
                lcp++;
        }
        for (; depth > lcp; depth--)
            gv->nodes[path[depth - 1]].subtree_end = n;
        for (; depth < r->len; depth++) {
            gv->nodes[n] = (struct tnode){0, k, 0, (uint16_t)(depth + 1), r->bytes[depth]};
            path[depth] = n++;
        }
        struct tnode *t = &gv->nodes[path[depth - 1]];
        if (t->tok_n == 0) t->tok_start = k;
        t->tok_n++;
        gv->sorted_ids[k] = r->id;
    }
    for (; depth > 0; depth--)
        gv->nodes[path[depth - 1]].subtree_end = n;
    gv->n_nodes = n;
    return ERR_OK;
}

static int vocab_fill(struct grammar_vocab *gv, const struct grammar_vocab_params *vp)
{
    size_t words = (vp->n_tokens + 31) / 32;
    gv->is_eog = mem_calloc(words ? words : 1, sizeof *gv->is_eog);
    gv->eog = mem_alloc((vp->n_eog ? vp->n_eog : 1) * sizeof *gv->eog);
    if (!gv->is_eog || !gv->eog) return ERR_NOMEM;
    for (size_t i = 0; i < vp->n_eog; i++) {
        if (vp->eog[i] < 0 || (size_t)vp->eog[i] >= vp->n_tokens) return ERR_INVALID;
        gv->eog[i] = (uint32_t)vp->eog[i];
        gv->is_eog[gv->eog[i] / 32] |= 1u << (gv->eog[i] % 32);
    }
    gv->n_eog = vp->n_eog;
    int rc = copy_pieces(gv, vp);
    if (rc != ERR_OK) return rc;
    struct piece_ref *refs = mem_alloc((vp->n_tokens ? vp->n_tokens : 1) * sizeof *refs);
    if (!refs) return ERR_NOMEM;
    uint32_t n_refs = 0;
    for (uint32_t i = 0; i < vp->n_tokens; i++) {
        size_t len = gv->piece_off[i + 1] - gv->piece_off[i];
        if (len == 0 || len > GRAMMAR_PIECE_LEN_MAX || (gv->is_eog[i / 32] >> (i % 32) & 1))
            continue;
        refs[n_refs++] =
            (struct piece_ref){(const uint8_t *)gv->blob + gv->piece_off[i], (uint32_t)len, i};
    }
    qsort(refs, n_refs, sizeof *refs, cmp_piece);
    rc = build_trie(gv, refs, n_refs);
    mem_free(refs);
    return rc;
}

int grammar_vocab_new(const struct grammar_vocab_params *vp, struct grammar_vocab **out)
{
    if (vp->n_tokens > GRAMMAR_N_TOKENS_MAX) return ERR_LIMIT;
    struct grammar_vocab *gv = mem_calloc(1, sizeof *gv);
    if (!gv) return ERR_NOMEM;
    gv->n_tokens = vp->n_tokens;
    int rc = vocab_fill(gv, vp);
    if (rc != ERR_OK) {
        grammar_vocab_free(gv);
        return rc;
    }
    *out = gv;
    return ERR_OK;
}

size_t grammar_vocab_n_tokens(const struct grammar_vocab *gv)
{
    return gv->n_tokens;
}

size_t grammar_vocab_mask_words(const struct grammar_vocab *gv)
{
    return (gv->n_tokens + 31) / 32;
}

int grammar_mask(struct grammar_state *st, const struct grammar_vocab *gv, uint32_t *allowed)
{
    maybe_flush(st);
    memset(allowed, 0, grammar_vocab_mask_words(gv) * sizeof *allowed);
    const struct tnode *nodes = gv->nodes;
    uint64_t *pos_at = st->depth_pos;
    pos_at[0] = st->cur;
    for (uint32_t i = 0; i < gv->n_nodes;) {
        const struct tnode *t = &nodes[i];
        uint64_t pos;
        int rc = step(st, pos_at[t->depth - 1], t->byte, &pos);
        if (rc != ERR_OK) return rc;
        if (pos == POS_DEAD) {
            i = t->subtree_end;
            continue;
        }
        pos_at[t->depth] = pos;
        for (uint32_t k = 0; k < t->tok_n; k++) {
            uint32_t id = gv->sorted_ids[t->tok_start + k];
            allowed[id / 32] |= 1u << (id % 32);
        }
        i++;
    }
    if (grammar_state_can_end(st))
        for (size_t k = 0; k < gv->n_eog; k++)
            allowed[gv->eog[k] / 32] |= 1u << (gv->eog[k] % 32);
    return ERR_OK;
}

void grammar_mask_apply(const uint32_t *allowed, size_t n_tokens, float *logits)
{
    for (size_t i = 0; i < n_tokens; i++)
        if (!(allowed[i / 32] >> (i % 32) & 1)) logits[i] = -INFINITY;
}

int grammar_state_allows_token(struct grammar_state *st, const struct grammar_vocab *gv, int32_t id,
                               bool *out)
{
    if (id < 0 || (size_t)id >= gv->n_tokens) return ERR_INVALID;
    if (gv->is_eog[id / 32] >> (id % 32) & 1) {
        *out = grammar_state_can_end(st);
        return ERR_OK;
    }
    size_t off = gv->piece_off[id], len = gv->piece_off[id + 1] - off;
    if (len == 0 || len > GRAMMAR_PIECE_LEN_MAX) {
        *out = false;
        return ERR_OK;
    }
    maybe_flush(st);
    uint64_t pos = st->cur;
    for (size_t i = 0; i < len && pos != POS_DEAD; i++) {
        int rc = step(st, pos, (uint8_t)gv->blob[off + i], &pos);
        if (rc != ERR_OK) return rc;
    }
    *out = pos != POS_DEAD;
    return ERR_OK;
}

int grammar_state_accept_token(struct grammar_state *st, const struct grammar_vocab *gv, int32_t id)
{
    if (id < 0 || (size_t)id >= gv->n_tokens) return ERR_INVALID;
    if (gv->is_eog[id / 32] >> (id % 32) & 1)
        return grammar_state_can_end(st) ? ERR_OK : ERR_INVALID;
    size_t off = gv->piece_off[id], len = gv->piece_off[id + 1] - off;
    if (len == 0 || len > GRAMMAR_PIECE_LEN_MAX) return ERR_INVALID;
    return grammar_state_accept_bytes(st, gv->blob + off, len);
}
