#!/usr/bin/env python3
"""fuzz/make_corpus.py: writes the hand-made seeds of fuzz/corpus/ (named seed-*): short programs in
fuzz_diff.c's input format that reach each area the fuzzer should explore (every cipher streamed,
round trips, TLS records with every version, copies mid-stream, the dispatch layer's wrong lengths and
output sizes, hostile parameters, the split and GPU paths). The encoding below mirrors the reads in
fuzz/fuzz_diff.c and fuzz/fuzz_params.c field for field; change both together.

    python3 fuzz/make_corpus.py [DIR]      (default: fuzz/corpus)
"""
import struct
import sys
from pathlib import Path

CIPHERS = ["aes128ecb", "aes192ecb", "aes256ecb", "aes128cbc", "aes192cbc", "aes256cbc",
           "aes128ctr", "aes192ctr", "aes256ctr", "aes128gcm", "aes192gcm", "aes256gcm", "aes128xts", "aes256xts",
           "aes128ccm", "aes192ccm", "aes256ccm"]
KEYLEN = [16, 24, 32] * 4 + [32, 64] + [16, 24, 32]
GCM, XTS, CCM = (9, 10, 11), (12, 13), (14, 15, 16)
OP_INIT, OP_UPDATE, OP_FINAL, OP_CIPHER, OP_COPY, OP_SET, OP_GET, OP_RESET, OP_ASYNC = 0, 1, 3, 4, 5, 6, 7, 8, 10
OP_AEAD = 9          # GCM and CCM only (fuzz_aead.c); on the other ciphers a second init
XKEY = bytes(range(1, 65))   # XTS: distinct key halves (b"K" repeated would be refused on encryption)
# set-params keys and types (fuzz_params.c: set_keys, fz_params_build)
PADDING, NUM, KEYLEN_P, IVLEN, TLS_VERSION, TLS_MAC_SIZE, USE_BITS, UNKNOWN = range(8)
T_U32, T_U64, T_I32, T_I64, T_OCTET, T_UTF8, T_REAL, T_ODD = range(8)
NOTABLE = [0x0300, 0x0301, 0x0302, 0x0303, 0xFEFF, 0xFEFD, 0x0100, 0x0304, 0x0200,
           0, 1, 15, 16, 17, 20, 32, 48, 64, 65, 255, 256]


def header(cipher, raw=0, inst=0):
    """the cipher byte: the nine as 0-8, GCM and XTS as 0x80 + 0..4, CCM as 0xE0.. with byte % 3 picking the
    key size (fuzz_diff.c)"""
    if cipher in CCM:
        return bytes([raw | (inst << 1), 0xE0 + (cipher - 13) % 3])
    return bytes([raw | (inst << 1), cipher if cipher < 9 else 0x80 + cipher - 9])


def value(v):
    """pick_value: a small value in one byte, a notable one by index, or eight raw bytes."""
    if v in NOTABLE:
        return bytes([2, NOTABLE.index(v)])
    if v < 256:
        return bytes([0, v])
    return bytes([7]) + struct.pack("<Q", v & (2**64 - 1))


def params(*items):
    """items: (key, type, value) or (key, type, value, extra type bits)."""
    out = bytes([len(items) - 1])
    for it in items:
        key, typ, v = it[:3]
        extra = it[3] if len(it) > 3 else 0
        out += bytes([key, typ | (extra << 3)]) + value(v)
    return out


class Prog:
    def __init__(self, cipher, raw=0, inst=0):
        self.cipher, self.raw = cipher, raw
        self.b = bytearray(header(cipher, raw, inst))

    def init(self, slot=0, enc=1, key=b"K", iv=b"I", with_cipher=1, prm=None, lens=None):
        """enc: 1, 0, 'keep' or 'flip'; key/iv: bytes (padded), None (NULL) or 'same' (tracked);
        lens (dispatch layer only): (keylen or None, ivlen or None) passed instead of the right ones."""
        f = {1: 0, 0: 1, "keep": 2, "flip": 3}[enc]
        f |= {None: 1, "same": 2}.get(key if not isinstance(key, bytes) else "x", 0) << 2
        f |= {None: 1, "same": 2}.get(iv if not isinstance(iv, bytes) else "x", 0) << 4
        f |= with_cipher << 6
        f |= (prm is not None) << 7
        self.b += bytes([OP_INIT, slot, f])
        keylen = KEYLEN[self.cipher]
        if self.raw:
            g, extra = 0, b""
            if lens and lens[0] is not None and lens[1] is not None:
                g, extra = 7, bytes([lens[0], lens[1]])
            elif lens and lens[0] is not None:
                g, extra = 5, bytes([lens[0]])
            elif lens and lens[1] is not None:
                g, extra = 6, bytes([lens[1]])
            self.b += bytes([g]) + extra
            if lens and lens[0] is not None:
                keylen = lens[0]
        if isinstance(key, bytes):
            self.b += (key * 64)[:keylen]
        if isinstance(iv, bytes):
            self.b += (iv * 16)[:16]
        if prm is not None:
            self.b += prm
        return self

    def data(self, op, slot, size, src="prng", inplace=0, align=None, hostile=None, seed=1, raw_bytes=b""):
        """size: int (encoded with the smallest class that holds it) or 'last' (src last);
        align: (input offset, output offset); hostile: (byte, bytes that follow the seed)."""
        srcs = {"prng": 0, "last": 1, "input": 2, "zero": 3}
        if size == "last":
            cls, sbytes = 0, b""
        elif size == 0:
            cls, sbytes = 0, b""
        elif size <= 63:
            cls, sbytes = 2, bytes([size])
        elif size < 4096:
            cls, sbytes = 4, struct.pack("<H", size)
        elif size % 16 == 0 and size // 16 < 4376:
            cls, sbytes = 6, struct.pack("<H", size // 16)
        elif size >= 65536:
            cls, sbytes = 7, struct.pack("<H", size - 65536)
        else:
            cls, sbytes = 5, struct.pack("<H", size & 0xFFFF) + bytes([size >> 16])
        f = cls | srcs[src] << 3 | inplace << 5 | (align is not None) << 6 | (hostile is not None) << 7
        self.b += bytes([op, slot, f]) + sbytes
        if align is not None:
            self.b += bytes([align[0] | align[1] << 4])
        if hostile is not None:
            self.b += bytes([hostile[0]])
        self.b += struct.pack("<H", seed)
        if hostile is not None and len(hostile) > 1:
            self.b += hostile[1]
        if src == "input":
            self.b += raw_bytes
        return self

    def update(self, slot=0, size=0, **kw):
        return self.data(OP_UPDATE, slot, size, **kw)

    def cipher_call(self, slot=0, size=0, **kw):
        return self.data(OP_CIPHER, slot, size, **kw)

    def final(self, slot=0, outsize=None, null_out=False, off=0):
        f = off << 4
        if null_out:
            f |= 0xC
        if outsize == "max":
            f |= 2
        elif outsize is not None:
            f |= 1
        self.b += bytes([OP_FINAL, slot, f])
        if outsize is not None and outsize != "max":
            self.b += bytes([outsize])
        return self

    def copy(self, src, dst):
        k = (dst - src - 1) % 3      # fuzz_diff.c: src = f % 3, dst = src + 1 + (f >> 4) % 2
        self.b += bytes([OP_COPY, next(f for f in range(256) if f % 3 == src and (f >> 4) % 2 == k)])
        return self

    def set(self, slot, prm):
        self.b += bytes([OP_SET, slot]) + prm
        return self

    def get(self, slot, *items):
        self.b += bytes([OP_GET, slot, len(items) - 1])
        for key, typ in items:
            self.b += bytes([key, typ])
        return self

    def async_updates(self, sizes, partial=(0, 0, 0), seed=1):
        """One update per pair, accelaes's in ASYNC jobs: size = 768 + 16 * k (+ a partial block)."""
        f = partial[0] | partial[1] << 1 | partial[2] << 2
        self.b += bytes([OP_ASYNC, f]) + struct.pack("<H", seed)
        for i, k in enumerate(sizes):
            self.b += bytes([k]) + (bytes([5 + i]) if partial[i] else b"")
        return self

    def reset(self, slot):
        self.b += bytes([OP_RESET, slot])
        return self

    # GCM (fuzz_aead.c: f & 3 picks the operation)
    def ivlen(self, slot, n):
        """n in 1..128"""
        self.b += bytes([OP_AEAD, slot, 0, n - 1])
        return self

    def nonce_len(self, slot, n):
        """CCM: n in 6..14 (fuzz_aead.c's pick_ivlen)"""
        self.b += bytes([OP_AEAD, slot, 0, n - 6])
        return self

    def length(self, slot, size):
        """CCM: the message length first (an AAD operation with the zeros source), size < 5000"""
        return self.aad(slot, size, src="zero")

    def tag_len(self, slot, n):
        """CCM: the tag length alone (a tag set with the zeros source: a NULL buffer)"""
        return self.tag_set(slot, n=n, src="zero")

    def aad(self, slot, size, seed=1, src="prng", raw_bytes=b""):
        srcs = {"prng": 0, "last": 1, "input": 2, "zero": 3}
        big = size >= 80
        self.b += bytes([OP_AEAD, slot, 1 | big << 4 | srcs[src] << 5])
        self.b += struct.pack("<H", size) if big else bytes([size])
        self.b += struct.pack("<H", seed) + (raw_bytes if src == "input" else b"")
        return self

    def tag_get(self, slot, n=16):
        self.b += bytes([OP_AEAD, slot, 2, n])
        return self

    def tag_set(self, slot, n=16, src="got", flip=None, raw_bytes=b""):
        """src: 'got' (the default's last tag got), 'flip' (it with bit flip[1] of byte flip[0]),
        'input' (raw_bytes), 'zero'"""
        f = 3 | {"got": 0, "flip": 1, "input": 2, "zero": 3}[src] << 4 | ((flip[1] if flip else 0) << 6)
        self.b += bytes([OP_AEAD, slot, f, n])
        if src == "flip":
            self.b += bytes([flip[0]])
        elif src == "input":
            self.b += raw_bytes[:n].ljust(n, b"\0")
        return self


def seeds():
    out = {}
    # every cipher: a plain stream, uneven updates, then Final; decrypt of garbage too
    for c in range(9):
        p = Prog(c).init().update(size=100).update(size=37, inplace=1).update(size=5000).final()
        p.init(enc=0, key="same", iv="same", with_cipher=0).update(size="last", src="last").final()
        out[f"evp-{CIPHERS[c]}-stream"] = p
    # dispatch layer, every mode: wrong key and IV lengths, tight and short outputs, NULL buffers
    for c in (0, 4, 8):
        p = Prog(c, raw=1).init(lens=(KEYLEN[c] + 1, None)).init(lens=(None, 12)).init()
        # hostile byte: bits 0-1 output (0 tight, 1 a size that follows, 2 SIZE_MAX, 3 NULL), bit 2 NULL
        # input, bit 3 a length near SIZE_MAX (its byte follows the output size's)
        p.update(size=33, hostile=(0,)).update(size=40, hostile=(1, b"\x05\x00"), seed=3)
        p.update(size=20, hostile=(2,)).update(size=7, hostile=(3,)).update(size=9, hostile=(4,))
        p.update(size=5).update(size=3, hostile=(8, b"\x00")).update(size=4, hostile=(9, b"\x07\x00\x02"))
        p.final(outsize=3).init().update(size=31).final(outsize="max").final(null_out=True)
        out[f"raw-{CIPHERS[c]}-lengths"] = p
    # EVP with a negative length (the provider sees SIZE_MAX - k) after bytes were held back, and
    # with a NULL output
    for c in (3, 0, 7):
        p = Prog(c).init().update(size=5).update(size=3, hostile=(8, b"\x00")).update(size=20)
        p.update(size=4, hostile=(3,)).cipher_call(size=16, hostile=(8, b"\x04")).final()
        out[f"evp-{CIPHERS[c]}-negative-length"] = p
    # a copy mid-stream, then both halves go on; reset and use-before-init
    for c in (3, 7):
        p = Prog(c).init().update(size=21).copy(0, 1).update(slot=1, size=30).update(slot=0, size=30)
        p.final(slot=1).final(slot=0).reset(0).update(slot=0, size=16).final(slot=0)
        out[f"evp-{CIPHERS[c]}-copy"] = p
    # direction changes with a NULL key (accelaes rebuilds the decryption schedule)
    for c in (1, 5):
        p = Prog(c).init(enc=1).update(size=64).init(enc="flip", key=None, iv=None, with_cipher=0)
        p.update(size=64).set(0, params((PADDING, T_U32, 0))).update(size=48).final()
        p.init(enc="flip", key=None, iv="same", with_cipher=0).update(size=64).final()
        out[f"evp-{CIPHERS[c]}-flip-null-key"] = p
    # TLS records: encrypt in place, decrypt the record back with the same key, MAC out, copy
    for c, ver, mac in ((3, 0x0303, 20), (5, 0x0302, 32), (3, 0x0301, 0), (5, 0x0300, 20),
                        (4, 0xFEFD, 48), (3, 0x0100, 32)):
        tls = params((TLS_VERSION, T_U32, ver), (TLS_MAC_SIZE, T_U64, mac))
        p = Prog(c).init(prm=tls).update(size=200, inplace=1)
        p.init(enc=0, key="same", iv="same", with_cipher=0).update(size="last", src="last", inplace=1)
        p.get(0, (0, 0), (2, 3)).copy(0, 2).update(slot=2, size=64, inplace=1).final(slot=2)
        out[f"evp-{CIPHERS[c]}-tls-{ver:04x}-mac{mac}"] = p
    # TLS on ECB (accelaes refuses: documented) and a record not in place
    p = Prog(0).init(prm=params((TLS_VERSION, T_U32, 0x0303))).update(size=48, inplace=1).update(size=48)
    out["evp-aes128ecb-tls"] = p
    # hostile parameters: num past the keystream block, odd types and widths, unknown versions
    p = Prog(6).init().update(size=5).set(0, params((NUM, T_U32, 9))).update(size=20)
    p.set(0, params((NUM, T_U64, 20))).set(0, params((NUM, T_REAL, 3))).update(size=7)
    p.set(0, params((NUM, T_ODD, 15, 1))).update(size=3).get(0, (2, 3), (1, 0), (0, 2)).final()
    out["evp-aes128ctr-num"] = p
    p = Prog(3).init().set(0, params((PADDING, T_UTF8, 0), (NUM, T_U32, 20)))
    p.set(0, params((TLS_VERSION, T_U32, 0x0304))).set(0, params((TLS_MAC_SIZE, T_U64, 65)))
    p.set(0, params((KEYLEN_P, T_U64, 24), (IVLEN, T_I32, 0xFFFFFFFF), (USE_BITS, T_OCTET, 1, 4)))
    p.set(0, params((PADDING, T_I64, 2**64 - 1), (UNKNOWN, T_U32, 1))).update(size=40).final()
    p.get(0, (0, 2 | 16 << 3), (1, 0 | 8 << 3), (4, 4), (5, 6 | 8 << 3))
    out["evp-aes128cbc-params"] = p
    p = Prog(7, raw=1).init(prm=params((NUM, T_U32, 16))).init(prm=params((NUM, T_U32, 4))).update(size=30).final()
    out["raw-aes192ctr-init-params"] = p
    # EVP_Cipher: whole blocks, a partial block (accelaes refuses: documented), CTR with num
    for c in (0, 3, 6):
        p = Prog(c).init().cipher_call(size=64).cipher_call(size=17).cipher_call(size=0)
        p.cipher_call(size=4096, inplace=1, align=(3, 3)).update(size=10).final()
        out[f"evp-{CIPHERS[c]}-cipher"] = p
    # ASYNC jobs on three pairs: CBC-encrypt is batched in multi-buffer lanes; other modes inline
    for c, enc in ((3, 1), (5, 1), (4, 0), (6, 1), (0, 1)):
        p = Prog(c).init(slot=0, enc=enc).init(slot=1, enc=enc, key=b"L").init(slot=2, enc=enc, key=b"M", iv=b"J")
        p.async_updates((0, 7, 63)).async_updates((20, 20, 20), partial=(1, 0, 1), seed=9)
        p.final(slot=0).final(slot=1).final(slot=2)
        out[f"evp-{CIPHERS[c]}-async"] = p
    p = Prog(3, raw=1).init(slot=0).init(slot=1, key=b"L").init(slot=2, key=b"M")
    p.async_updates((1, 2, 3)).async_updates((40, 0, 40), partial=(0, 1, 0)).final(slot=1)
    out["raw-aes128cbc-async"] = p
    # large and misaligned: the split path (instance 1) and the GPU path (instance 2)
    for c, inst in ((6, 1), (4, 1), (2, 1), (8, 2), (5, 2), (3, 2)):
        p = Prog(c, inst=inst).init(enc=0 if c in (4, 5) else 1).update(size=70000, align=(1, 7))
        p.update(size=65536 + 16 * 200, inplace=1).update(size=16 * 4375, align=(0, 9)).final()
        out[f"evp-{CIPHERS[c]}-inst{inst}-large"] = p
    out.update(gcm_xts_seeds())
    out.update(ccm_seeds())
    return out


def ccm_seeds():
    out = {}
    # CCM as applications drive it: nonce and tag lengths, then key and nonce, the length, AAD, the data in
    # one update, final, the tag; then the decryption with that tag (passes) and with a flipped one
    for c, n, m in zip(CCM, (7, 11, 13), (4, 12, 16)):
        p = Prog(c).init(key=None, iv=None).nonce_len(0, n).tag_len(0, m).init(with_cipher=0)
        p.length(0, 3000).aad(0, 20, seed=3).update(size=3000).final().tag_get(0, m)
        p.init(slot=1, enc=0, key=None, iv=None).nonce_len(1, n).tag_set(1, n=m).init(slot=1, enc=0, with_cipher=0)
        p.length(1, 3000).aad(1, 20, seed=3).update(slot=1, size="last", src="last").final(slot=1)
        p.init(slot=2, enc=0, key=None, iv=None).nonce_len(2, n).tag_set(2, n=m, src="flip", flip=(1, 2))
        p.init(slot=2, enc=0, with_cipher=0).length(2, 3000).aad(2, 20, seed=3).update(slot=2, size="last", src="last")
        out[f"evp-{CIPHERS[c]}-stream"] = p
    # the wrong order: AAD before the length, data twice, another length than announced, a tag on
    # encryption, tag get before final, odd tag and nonce lengths, a copy in the middle, EVP_Cipher
    p = Prog(14).init().aad(0, 10).length(0, 5).aad(0, 10).copy(0, 1).update(size=5).update(size=5).tag_get(0, 12)
    p.update(slot=1, size=6).final(slot=1).tag_set(0, n=8).tag_len(0, 5).tag_len(0, 18).nonce_len(0, 6)
    p.nonce_len(0, 14).init(with_cipher=0, key=None).cipher_call(size=0).cipher_call(size=33).final().tag_get(0, 12)
    p.init(slot=2).update(slot=2, size=40).final(slot=2).tag_get(2, 16).tag_get(2, 12)
    out["evp-aes128ccm-order"] = p
    # the dispatch layer: nonce lengths at init, NULL buffers (length, AAD), tight outputs
    p = Prog(16, raw=1).init(lens=(None, 7)).init(lens=(None, 13)).init(lens=(None, 12)).length(0, 40)
    p.update(size=40, hostile=(1, b"\x05\x00")).init(lens=(None, 7)).update(size=9, hostile=(3,))
    p.update(size=40, hostile=(0,)).final(outsize="max").tag_get(0, 12)
    out["raw-aes256ccm-lengths"] = p
    # large messages on the split and GPU instances (no AAD: the data's update gives the length, which an
    # AAD operation cannot: at most 4999)
    for c, inst in ((14, 1), (16, 2)):
        p = Prog(c, inst=inst).init().update(size=70000, align=(1, 7)).final().tag_get(0, 12)
        out[f"evp-{CIPHERS[c]}-inst{inst}-large"] = p
    return out


def gcm_xts_seeds():
    out = {}
    # GCM: AAD in pieces, data in pieces, final, tag; then the decryption of it with the tag (passes)
    for c in GCM:
        p = Prog(c).init().aad(0, 20, seed=3).aad(0, 45, seed=4).aad(0, 0).update(size=3000).final().tag_get(0)
        p.init(enc=0, key="same", iv="same", with_cipher=0).aad(0, 20, seed=3).aad(0, 45, seed=4)
        p.update(size="last", src="last").tag_set(0).final().get(0, (0, 0 | 16 << 3), (1, 0 | 12 << 3))
        out[f"evp-{CIPHERS[c]}-stream"] = p
    # a flipped tag, a short tag, no tag, a tag on encryption, tag get before final and of odd sizes
    p = Prog(9).init().aad(0, 7).update(size=33).tag_get(0).final().tag_get(0, 0).tag_get(0, 17).tag_get(0, 4)
    p.tag_get(0).tag_set(0).init(enc=0, key="same", iv="same", with_cipher=0).aad(0, 7)
    p.update(size="last", src="last").copy(0, 1).copy(0, 2).tag_set(0, src="flip", flip=(5, 3)).final(slot=0)
    p.tag_set(1, n=12).final(slot=1).final(slot=2).tag_set(2, n=17).update(slot=2, size=5)
    out["evp-aes128gcm-tags"] = p
    # IV lengths: 1, 60, 128 set before the IV; a change after the IV drops it; the dispatch layer's
    # lengths; an encryption with no IV (a random one: lengths only)
    p = Prog(10).init(iv=None).ivlen(0, 60).init(with_cipher=0, key=None).aad(0, 90).update(size=70).final().tag_get(0)
    p.ivlen(0, 1).init(with_cipher=0, key=None).update(size=17).final().tag_get(0, 8).ivlen(0, 128)
    p.init(with_cipher=0, key=None).update(size=16).ivlen(0, 13).update(size=5).final().tag_get(0)
    p.init(iv=None).aad(0, 3).update(size=40).final().tag_get(0)
    out["evp-aes192gcm-ivlen"] = p
    p = Prog(9, raw=1).init(lens=(None, 12)).aad(0, 11).update(size=21, hostile=(1, b"\x05\x00"))
    p.init(lens=(None, 0)).init(lens=(17, None)).init(lens=(None, 32)).update(size=40, hostile=(2,))
    p.update(size=9, hostile=(3,)).update(size=3, hostile=(4,)).cipher_call(size=30).final(outsize="max").tag_get(0)
    out["raw-aes128gcm-lengths"] = p
    # a key given again while the message is open (documented difference: the IV is given again);
    # EVP_Cipher as AAD and data; a copy mid-message; ASYNC updates
    p = Prog(11).init().aad(0, 10).update(size=30).init(with_cipher=0, key=b"Q", iv=None).update(size=20)
    p.final().tag_get(0).cipher_call(size=48).init(with_cipher=0, key=None, iv="same").cipher_call(size=64)
    p.update(size=31).copy(0, 1).update(slot=1, size=9).final(slot=1).tag_get(1).update(slot=0, size=9).final()
    p.tag_get(0).init(slot=1).init(slot=2, key=b"L").async_updates((4, 9, 1), partial=(1, 1, 0)).final(slot=2)
    out["evp-aes256gcm-rekey-copy"] = p
    # AAD only (GMAC): no data, so only the tag can show a difference (the self-test's tag flip)
    p = Prog(11).init().aad(0, 50).aad(0, 200, src="zero").final().tag_get(0).tag_get(0, 12)
    p.init(enc=0, key="same", iv="same", with_cipher=0).aad(0, 50).aad(0, 200, src="zero").tag_set(0).final()
    out["evp-aes256gcm-gmac-tag"] = p
    for c, inst in ((9, 1), (11, 2)):
        p = Prog(c, inst=inst).init().aad(0, 300).update(size=70000, align=(1, 7))
        p.update(size=65536 + 16 * 200 + 5, inplace=1).final().tag_get(0)
        out[f"evp-{CIPHERS[c]}-inst{inst}-large"] = p
    # XTS: one update is one data unit (stealing for a partial block, < 16 bytes refused by both)
    for c in XTS:
        p = Prog(c).init(key=XKEY).update(size=100).update(size=37, inplace=1).update(size=5000).update(size=15)
        p.final().init(enc=0, key="same", iv="same", with_cipher=0).update(size="last", src="last").final()
        out[f"evp-{CIPHERS[c]}-stream"] = p
    # duplicate key halves (refused on encryption, taken on decryption), EVP_Cipher, direction changes
    p = Prog(12).init(key=b"\x11").update(size=32).init(enc=0, key=b"\x11").update(size=32).final()
    p.init(key=XKEY).cipher_call(size=17).cipher_call(size=15).cipher_call(size=4096, inplace=1, align=(3, 3))
    p.init(enc="flip", key=None, iv=None, with_cipher=0).update(size=64).copy(0, 1).update(slot=1, size=64)
    out["evp-aes128xts-keys"] = p
    p = Prog(13, raw=1).init(key=XKEY, lens=(32, None)).init(key=XKEY, lens=(None, 12)).init(key=XKEY)
    p.update(size=33, hostile=(0,)).update(size=40, hostile=(1, b"\x05\x00"), seed=3).update(size=20, hostile=(3,))
    p.update(size=16).final(outsize=3).get(0, (3, 4), (0, 0 | 16 << 3))
    out["raw-aes256xts-lengths"] = p
    for c, inst in ((12, 1), (13, 2)):
        p = Prog(c, inst=inst).init(key=XKEY).update(size=70000, align=(1, 7)).update(size=65536 + 16 * 200 + 5, inplace=1)
        out[f"evp-{CIPHERS[c]}-inst{inst}-large"] = p
    return out


def main():
    d = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent / "corpus")
    d.mkdir(parents=True, exist_ok=True)
    for name, prog in seeds().items():
        (d / f"seed-{name}").write_bytes(bytes(prog.b))
    print(f"{len(seeds())} seeds written to {d}")


if __name__ == "__main__":
    main()
