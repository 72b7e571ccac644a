/* accel/cpu/gcm_vaes_kara.h: GHASH's Karatsuba products and their reduction, written once for the
 * xmm and ymm GCM kernels (gcm_vaesx_k.c, gcm_vaesy_k.c; the zmm kernels multiply schoolbook with
 * three-way XORs instead). Each lane of a vector is one block times one power, in gcm_vaes_gf.h's
 * R form; the fold reduces every lane, and the including file sums the lanes it has.
 *
 * The including file defines, before including this file once:
 *   KTGT        its target attribute;
 *   KV          its vector type;
 *   KX(a, b)    XOR;
 *   KCL(a, b, i) carry-less multiply of the qwords i selects, per lane;
 *   KSW(a)      the two qwords of each lane swapped;
 *   KLD(p)      a vector from the key data at p;
 *   KPOLY       the reduction constant 0xc2 << 56 in each lane's low qword. */
#ifndef ACCELAES_GCM_VAES_KARA_H
#define ACCELAES_GCM_VAES_KARA_H

/* lo + mid y^64 + hi y^128 summed over blocks; mid Karatsuba's (a0 + a1)(b0 + b1), corrected by lo
 * and hi once at the fold. */
typedef struct {
    KV lo, mid, hi;
} prod;

/* v times the power at hp (hk: its two qwords XORed, stored with it), added to a (set when first). */
KTGT static inline __attribute__((always_inline)) void kmul(KV v, const void *hp, const void *hk, prod *a, int first)
{
    KV h = KLD(hp);
    KV l = KCL(v, h, 0x00), u = KCL(v, h, 0x11), md = KCL(KX(v, KSW(v)), KLD(hk), 0x00);

    if (first) {
        a->lo = l, a->hi = u, a->mid = md;
        return;
    }
    a->lo = KX(a->lo, l);
    a->hi = KX(a->hi, u);
    a->mid = KX(a->mid, md);
    /* summed here: gcc would otherwise reassociate the XORs into one tree at the end, every
     * product live until then, and spill them */
    __asm__("" : "+x"(a->lo), "+x"(a->mid), "+x"(a->hi));
}

/* Each lane reduced: the low qword of lo folded into mid, then the low qword of mid into hi (the
 * two folds of gcm_vaes_gf.h's reduce1, Karatsuba's correction of mid included). */
KTGT static inline __attribute__((always_inline)) KV kfold(prod a)
{
    const KV p = KPOLY;
    KV mid = KX(a.mid, KX(a.lo, a.hi));

    mid = KX(mid, KX(KSW(a.lo), KCL(a.lo, p, 0x00)));
    return KX(a.hi, KX(KSW(mid), KCL(mid, p, 0x00)));
}

#endif
