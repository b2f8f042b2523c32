/* The baseline Huffman decoder that takes libjpeg-turbo's place (data/jpeg_huffman.h says why).
 *
 * The bit buffer holds up to 64 bits, the next ones at the top. A look-up of its top FAST_BITS
 * bits gives, for every code of at most that length, either the whole coefficient (its run, its
 * value and the bits it takes, code and value together) or, where the value's bits do not fit in
 * the look-up, the code's symbol and length; longer codes are decoded from the canonical code's
 * limits (JPEG, ITU T.81 F.2.2.3). */
#include "data/jpeg_huffman.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>

/* libjpeg's entropy-decoder interface (jpegint.h, not installed with the library), as the
 * libjpeg-turbo this is built against lays it out; jpeglib.h declares it incomplete. */
#if !defined(LIBJPEG_TURBO_VERSION_NUMBER)
#error "cutrain's JPEG Huffman decoder needs libjpeg-turbo (LIBJPEG_TURBO_VERSION_NUMBER in jconfig.h)"
#elif LIBJPEG_TURBO_VERSION_NUMBER < 3000000
struct jpeg_entropy_decoder {
    void (*start_pass)(j_decompress_ptr cinfo);
    boolean (*decode_mcu)(j_decompress_ptr cinfo, JBLOCKROW *MCU_data);
    boolean insufficient_data;
};
#else
struct jpeg_entropy_decoder {
    void (*start_pass)(j_decompress_ptr cinfo);
    boolean (*decode_mcu)(j_decompress_ptr cinfo, JBLOCKROW *MCU_data);
    void *decode_mcus;       /* lossless JPEG's (3.0 on): never set here, only laid out */
    void *process_restart;
    boolean insufficient_data;
};
#endif

/* The start of libjpeg's marker reader (jpegint.h): its restart-marker reader, which checks the
 * RSTn marker between two intervals and resynchronises after a damaged one. The same in 2.x and
 * 3.x; only this method is used. */
struct jpeg_marker_reader {
    void (*reset_marker_reader)(j_decompress_ptr cinfo);
    int (*read_markers)(j_decompress_ptr cinfo);
    jpeg_marker_parser_method read_restart_marker;
};

/* libjpeg 7's and 8's API (libjpeg-turbo built to emulate them) names the DCT sizes per axis */
#if JPEG_LIB_VERSION >= 70
#define SCALED_SIZE(c) ((c)->DCT_h_scaled_size)
#define MIN_SCALED_SIZE(d) ((d)->min_DCT_h_scaled_size)
#else
#define SCALED_SIZE(c) ((c)->DCT_scaled_size)
#define MIN_SCALED_SIZE(d) ((d)->min_DCT_scaled_size)
#endif

#define FAST_BITS 10
#define ENTRY_WHOLE 0x80   /* in entry.len: the value is in the entry */
#define RUN_END 64         /* an entry's run for end-of-block: takes k past the block */

/* One look-up: whole (len & ENTRY_WHOLE): take len & 31 bits, advance `run` places and store
 * `value` (AC; end-of-block has run RUN_END), or for DC the difference `value`. Else, when len
 * is not 0: a code of len bits whose symbol is `sym` (its value bits follow). len 0: a code longer
 * than FAST_BITS. */
typedef struct entry {
    int16_t value;
    uint8_t len;
    uint8_t sym;   /* whole AC entries: the run */
} entry;

typedef struct table {
    entry fast[1 << FAST_BITS];
    int32_t maxcode[18];    /* the largest code of each length, -1 where none; maxcode[17] ends the search */
    int32_t valoffset[17];  /* symbol index = code + valoffset[length] */
    uint8_t raw[17 + 256];  /* the table as the file gives it: counts by length, then the symbols */
    int built;
} table;

#define MAX_BLOCKS 10   /* D_MAX_BLOCKS_IN_MCU */

struct ct_jpeg_huffman {
    struct jpeg_entropy_decoder pub;   /* first: libjpeg's entropy pointer is cast back to this */
    table dc[NUM_HUFF_TBLS], ac[NUM_HUFF_TBLS];
    const table *dc_of[MAX_BLOCKS], *ac_of[MAX_BLOCKS];   /* per block of the MCU */
    int comp_of[MAX_BLOCKS];
    int ac_used[MAX_BLOCKS];   /* 0 at 1/8 scale: libjpeg's IDCT then reads the DC alone */
    int blocks;
    int pred[MAX_COMPS_IN_SCAN];   /* the DC predictions */
    /* bit buffer: nbits valid bits at the top of acc, zeros below them; after a marker (or the end
     * of the data) zeros are fed, `padded` of the nbits being such zeros */
    uint64_t acc;
    int nbits, padded;
    /* MCU position, and the columns whose coefficients libjpeg transforms */
    unsigned col, cols, first_col, last_col;
    unsigned restarts_to_go;   /* MCUs left in this restart interval (with restart markers) */
    /* With restart markers, rows skipped above the region are not decoded: an interval whose MCUs
     * libjpeg only asks to discard is passed over to its marker. `fresh`: nothing of the interval
     * decoded yet; `lazy`: how many of its MCUs were passed over (decoded after all, to carry the DC
     * predictions, if a later MCU of the same interval is wanted). */
    int fresh;
    unsigned lazy;
};

/* Natural (row-major) order of the k-th coefficient in zigzag order; past 63 (a corrupt run)
 * everything lands on 63, as libjpeg's table does. */
static const uint8_t natural[64 + 16] = {
    0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13,
    6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31,
    39, 46, 53, 60, 61, 54, 47, 55, 62, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63};

/* The signed value of `bits`, s of them (F.2.2.1's EXTEND). */
static inline int extend(int bits, int s)
{
    return bits < (1 << (s - 1)) ? bits - (1 << s) + 1 : bits;
}

/* The symbols a file's table holds (at most 256: libjpeg refused larger tables already; the bound
 * only keeps the copies below in range). */
static int symbol_count(const JHUFF_TBL *src)
{
    int count = 0;
    for (int l = 1; l <= 16; l++)
        count += src->bits[l];
    return count < 256 ? count : 256;
}

static void build_table(table *t, const JHUFF_TBL *src, int is_dc)
{
    int count = symbol_count(src);
    memcpy(t->raw, src->bits, 17);
    memcpy(t->raw + 17, src->huffval, (size_t)count);
    memset(t->fast, 0, sizeof t->fast);

    int code = 0, p = 0;
    for (int l = 1; l <= 16; l++) {
        int n = src->bits[l];
        t->valoffset[l] = p - code;
        for (int i = 0; i < n && p < count; i++, p++, code++) {
            if (l > FAST_BITS)
                continue;
            int sym = src->huffval[p];
            int run = is_dc ? 0 : sym >> 4, s = is_dc ? sym : sym & 15;
            if (!is_dc && s == 0)
                run = run == 15 ? 15 : RUN_END;   /* ZRL stores a zero 15 places on; else end-of-block */
            int spare = FAST_BITS - l;   /* look-up bits after the code */
            int base = code << spare;
            for (int j = 0; j < 1 << spare; j++) {
                entry *e = &t->fast[base + j];
                if (s <= spare) {   /* the value's bits are in the look-up too */
                    e->value = (int16_t)(s ? extend((j >> (spare - s)) & ((1 << s) - 1), s) : 0);
                    e->len = (uint8_t)(ENTRY_WHOLE | (l + s));
                    e->sym = (uint8_t)run;
                } else {
                    e->len = (uint8_t)l;
                    e->sym = (uint8_t)sym;
                }
            }
        }
        t->maxcode[l] = n ? code - 1 : -1;
        code <<= 1;
    }
    t->maxcode[17] = 0x7fffffff;   /* no code is longer than 16 bits: the search stops here */
    t->built = 1;
}

/* Builds t from src unless it already holds it (most files of a collection share their tables). */
static void use_table(table *t, const JHUFF_TBL *src, int is_dc)
{
    if (t->built && memcmp(t->raw, src->bits, 17) == 0 &&
        memcmp(t->raw + 17, src->huffval, (size_t)symbol_count(src)) == 0)
        return;
    build_table(t, src, is_dc);
}

/* ---- the bit reader: works on locals, which decode_mcu loads and saves ---- */

typedef struct bits {
    uint64_t acc;
    int nbits, padded;
    const JOCTET *p, *end;
    int at_marker;   /* the data has ended at a marker: only zeros follow, never the bytes after it */
} bits;

/* 8 bytes without a 0xFF among them (where a marker or a stuffed byte could be) */
static inline int no_ff(uint64_t w)
{
    uint64_t v = ~w;
    return ((v - 0x0101010101010101ull) & ~v & 0x8080808080808080ull) == 0;
}

/* Byte by byte, for the bytes near a 0xFF or the end of the data: FF 00 is a data byte FF, FF then
 * anything else a marker (after any FF fill bytes), which ends the data: libjpeg reads it next,
 * and zeros are fed from here on. */
static void refill_slow(bits *b, j_decompress_ptr d)
{
    while (b->nbits <= 56) {
        if (d->unread_marker) {
            b->at_marker = 1;
            b->padded += 64 - b->nbits;
            b->nbits = 64;
            return;
        }
        if (b->p == b->end) {
            d->src->next_input_byte = b->p;
            d->src->bytes_in_buffer = 0;
            if (!(*d->src->fill_input_buffer)(d) || d->src->bytes_in_buffer == 0) {
                d->unread_marker = JPEG_EOI;   /* a suspending source: this decoder does not suspend */
                continue;
            }
            b->p = d->src->next_input_byte;
            b->end = b->p + d->src->bytes_in_buffer;
        }
        unsigned c = *b->p++;
        if (c == 0xFF) {
            unsigned next;
            do {
                if (b->p == b->end) {
                    d->src->next_input_byte = b->p;
                    d->src->bytes_in_buffer = 0;
                    if (!(*d->src->fill_input_buffer)(d) || d->src->bytes_in_buffer == 0) {
                        d->unread_marker = JPEG_EOI;
                        break;
                    }
                    b->p = d->src->next_input_byte;
                    b->end = b->p + d->src->bytes_in_buffer;
                }
                next = *b->p++;
            } while (next == 0xFF);
            if (d->unread_marker)
                continue;
            if (next != 0) {
                d->unread_marker = (int)next;
                continue;
            }
        }
        b->acc |= (uint64_t)c << (56 - b->nbits);
        b->nbits += 8;
    }
}

/* Tops the buffer up to at least 57 bits. */
static inline void refill(bits *b, j_decompress_ptr d)
{
    if (b->end - b->p >= 8 && !b->at_marker) {
        uint64_t w;
        memcpy(&w, b->p, 8);
        if (no_ff(w)) {
            int take = (63 - b->nbits) >> 3;
            b->acc |= __builtin_bswap64(w) >> b->nbits;
            b->nbits += take * 8;
            b->acc &= ~(~0ull >> b->nbits);   /* keep the invariant: zeros below the valid bits */
            b->p += take;
            return;
        }
    }
    refill_slow(b, d);
}

static inline void drop(bits *b, int n)
{
    b->acc <<= n;
    b->nbits -= n;
}

/* The next n (1..16) bits as a number. */
static inline int take_bits(bits *b, int n)
{
    int v = (int)(b->acc >> (64 - n));
    drop(b, n);
    return v;
}

/* A code not whole in the look-up: its symbol. Needs 16 bits in the buffer. */
static int slow_symbol(bits *b, const table *t, entry e, j_decompress_ptr d)
{
    if (e.len) {
        drop(b, e.len);
        return e.sym;
    }
    for (int l = FAST_BITS + 1;; l++) {
        int code = (int)(b->acc >> (64 - l));
        if (code <= t->maxcode[l]) {
            if (l > 16)
                break;
            drop(b, l);
            return t->raw[17 + ((code + t->valoffset[l]) & 0xFF)];
        }
    }
    WARNMS(d, JWRN_HUFF_BAD_CODE);   /* as libjpeg: warn, take 16 bits, and go on with a zero */
    drop(b, 16);
    return 0;
}

#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

/* A block's AC coefficients, stored into block when `store`: a constant at each call, so that each
 * call compiles to a loop of its own, the one that skips storing nothing else.
 * block: (64,) coefficients in natural order, zeroed by the caller */
static ALWAYS_INLINE void decode_ac(bits *b, const table *ac, JCOEF *block, int store, j_decompress_ptr d)
{
    for (int k = 1; k < 64;) {
        if (b->nbits < 32)
            refill(b, d);
        entry e = ac->fast[b->acc >> (64 - FAST_BITS)];
        if (e.len & ENTRY_WHOLE) {
            drop(b, e.len & 31);
            k += e.sym;   /* end-of-block takes k past 63 */
            if (store && k <= 63)
                block[natural[k]] = e.value;
            k++;
            continue;
        }
        int rs = slow_symbol(b, ac, e, d), r = rs >> 4, s = rs & 15;
        if (s) {
            k += r;
            int bits = take_bits(b, s);
            if (store)
                block[natural[k < 79 ? k : 79]] = (JCOEF)extend(bits, s);
            k++;
        } else if (r == 15) {
            k += 16;
        } else {
            break;
        }
    }
}

/* One block: the DC difference, then the AC coefficients, into block when it is not NULL.
 * block: (64,) coefficients in natural order, zeroed by the caller */
static ALWAYS_INLINE void decode_block(bits *b, const table *dc, const table *ac, int *pred, JCOEF *block,
                                       int ac_used, j_decompress_ptr d)
{
    if (b->nbits < 32)
        refill(b, d);
    entry e = dc->fast[b->acc >> (64 - FAST_BITS)];
    int diff;
    if (e.len & ENTRY_WHOLE) {
        drop(b, e.len & 31);
        diff = e.value;
    } else {
        int s = slow_symbol(b, dc, e, d);
        diff = 0;
        if (s) {
            if (s > 16)
                s = 16;   /* a corrupt DC table libjpeg let through: keep the shift in range */
            diff = extend(take_bits(b, s), s);
        }
    }
    /* wrapping, as libjpeg lets it: a corrupt file's differences can run the sum out of range */
    *pred = (int)((unsigned)*pred + (unsigned)diff);
    if (block)
        block[0] = (JCOEF)*pred;
    if (block && ac_used)
        decode_ac(b, ac, block, 1, d);
    else
        decode_ac(b, ac, NULL, 0, d);
}

/* Between two restart intervals: the bits left are the last interval's padding; libjpeg's marker
 * reader takes the RSTn marker (which the bit reader stopped at, or which comes next), and the DC
 * predictions start again from zero. */
/* An interval passed over whole ends at the next marker, where libjpeg's marker reader takes over:
 * its entropy-coded data holds 0xFF only as FF 00. Not found (a truncated file), the marker reader
 * meets the end of the data and says so. */
static void skip_to_marker(j_decompress_ptr d)
{
    const JOCTET *p = d->src->next_input_byte, *end = p + d->src->bytes_in_buffer;
    while (p < end) {
        const JOCTET *ff = memchr(p, 0xFF, (size_t)(end - p));
        if (!ff) {
            p = end;
            break;
        }
        const JOCTET *q = ff + 1;
        while (q < end && *q == 0xFF)   /* fill bytes before a marker */
            q++;
        if (q < end && *q != 0x00) {
            p = ff;
            break;
        }
        p = q < end ? q + 1 : end;
    }
    d->src->next_input_byte = p;
    d->src->bytes_in_buffer = (size_t)(end - p);
}

static boolean next_interval(j_decompress_ptr d, ct_jpeg_huffman *h)
{
    if (h->lazy)
        skip_to_marker(d);
    h->lazy = 0;
    h->fresh = 1;
    h->acc = 0;
    h->nbits = h->padded = 0;
    if (!(*d->marker->read_restart_marker)(d))
        return FALSE;
    memset(h->pred, 0, sizeof h->pred);
    h->restarts_to_go = d->restart_interval;
    if (d->unread_marker == 0)
        h->pub.insufficient_data = FALSE;   /* a damaged interval does not spoil the next one */
    return TRUE;
}

static boolean decode_mcu(j_decompress_ptr d, JBLOCKROW *mcu)
{
    ct_jpeg_huffman *h = (ct_jpeg_huffman *)d->entropy;
    if (d->restart_interval && h->restarts_to_go == 0 && !next_interval(d, h))
        return FALSE;
    unsigned col = h->col;
    h->col = col + 1 == h->cols ? 0 : col + 1;
    if (d->restart_interval)
        h->restarts_to_go--;
    if (h->pub.insufficient_data)
        return TRUE;   /* as libjpeg: the rest of the interval stays zero (grey) */
    if (!mcu && d->restart_interval && h->fresh) {
        h->lazy++;   /* discarded, and the interval not started: perhaps it is passed over whole */
        return TRUE;
    }
    int keep = mcu && col >= h->first_col && col <= h->last_col;

    bits b = {h->acc, h->nbits, h->padded, d->src->next_input_byte,
              d->src->next_input_byte + d->src->bytes_in_buffer, d->unread_marker != 0};
    for (; h->lazy; h->lazy--)   /* the interval is wanted after all: decode what was passed over */
        for (int i = 0; i < h->blocks; i++)
            decode_block(&b, h->dc_of[i], h->ac_of[i], &h->pred[h->comp_of[i]], NULL, 0, d);
    h->fresh = 0;
    for (int i = 0; i < h->blocks; i++)
        decode_block(&b, h->dc_of[i], h->ac_of[i], &h->pred[h->comp_of[i]], keep ? mcu[i][0] : NULL, h->ac_used[i],
                     d);
    h->acc = b.acc;
    h->nbits = b.nbits;
    h->padded = b.padded;
    d->src->next_input_byte = b.p;
    d->src->bytes_in_buffer = (size_t)(b.end - b.p);
    if (b.nbits < b.padded) {   /* bits past the end of the data were used */
        WARNMS(d, JWRN_HIT_MARKER);
        h->pub.insufficient_data = TRUE;
    }
    return TRUE;
}

/* libjpeg calls this at the start of a scan; install has already done it for the one scan. */
static void start_pass(j_decompress_ptr d)
{
    ct_jpeg_huffman *h = (ct_jpeg_huffman *)d->entropy;
    memset(h->pred, 0, sizeof h->pred);
    h->acc = 0;
    h->nbits = h->padded = 0;
    h->col = 0;
    h->restarts_to_go = d->restart_interval;
    h->fresh = 1;
    h->lazy = 0;
    h->pub.insufficient_data = FALSE;
}

ct_status ct_jpeg_huffman_new(ct_jpeg_huffman **out, ct_err *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for a JPEG Huffman decoder");
    return CT_OK;
}

void ct_jpeg_huffman_free(ct_jpeg_huffman *h)
{
    free(h);
}

int ct_jpeg_huffman_suits(const struct jpeg_decompress_struct *d)
{
    if (d->progressive_mode || d->arith_code || d->data_precision != 8)
        return 0;
    if (d->comps_in_scan != d->num_components || d->blocks_in_MCU > MAX_BLOCKS || d->comps_in_scan > MAX_COMPS_IN_SCAN)
        return 0;
    if (d->Ss != 0 || d->Se != DCTSIZE2 - 1 || d->Ah != 0 || d->Al != 0)
        return 0;
    for (int i = 0; i < d->comps_in_scan; i++) {
        const jpeg_component_info *c = d->cur_comp_info[i];
        if (c->dc_tbl_no < 0 || c->dc_tbl_no >= NUM_HUFF_TBLS || c->ac_tbl_no < 0 || c->ac_tbl_no >= NUM_HUFF_TBLS)
            return 0;
        if (!d->dc_huff_tbl_ptrs[c->dc_tbl_no] || !d->ac_huff_tbl_ptrs[c->ac_tbl_no])
            return 0;
    }
    return 1;
}

void ct_jpeg_huffman_install(ct_jpeg_huffman *h, struct jpeg_decompress_struct *d, unsigned xoffset)
{
    for (int i = 0; i < d->comps_in_scan; i++) {
        const jpeg_component_info *c = d->cur_comp_info[i];
        use_table(&h->dc[c->dc_tbl_no], d->dc_huff_tbl_ptrs[c->dc_tbl_no], 1);
        use_table(&h->ac[c->ac_tbl_no], d->ac_huff_tbl_ptrs[c->ac_tbl_no], 0);
    }
    h->blocks = d->blocks_in_MCU;
    for (int i = 0; i < h->blocks; i++) {
        int ci = d->MCU_membership[i];
        const jpeg_component_info *c = d->cur_comp_info[ci];
        h->comp_of[i] = ci;
        h->dc_of[i] = &h->dc[c->dc_tbl_no];
        h->ac_of[i] = &h->ac[c->ac_tbl_no];
        h->ac_used[i] = SCALED_SIZE(c) > 1;
    }
    /* the iMCU columns libjpeg transforms, as jpeg_crop_scanline sets them (one MCU is one iMCU
     * column in a single interleaved scan) */
    unsigned align = (unsigned)MIN_SCALED_SIZE(d);
    if (!(d->comps_in_scan == 1 && d->num_components == 1))
        align *= (unsigned)d->max_h_samp_factor;
    h->cols = d->MCUs_per_row;
    h->first_col = xoffset / align;
    h->last_col = (xoffset + d->output_width + align - 1) / align - 1;
    h->pub.start_pass = start_pass;
    h->pub.decode_mcu = decode_mcu;
    d->entropy = &h->pub;
    start_pass(d);
}
