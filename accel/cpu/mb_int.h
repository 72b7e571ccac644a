/* accel/cpu/mb_int.h: what mb.c shares with mb_hmac.c: the per-thread intel-ipsec-mb managers.
 * Include after <intel-ipsec-mb.h>. */
#ifndef ACCELAES_MB_INT_H
#define ACCELAES_MB_INT_H

enum { ACC_MB_MGR_AES, ACC_MB_MGR_HMAC, ACC_MB_NMGR };

/* This thread's manager of the given kind, made by make() on first use (NULL: none can be made
 * here; make is tried again next time) and freed when the thread exits or the module unloads. */
IMB_MGR *acc_mb_mgr(int kind, IMB_MGR *(*make)(void));

/* This thread's cipher manager (hardware AES only: NULL where ipsec-mb would emulate it), which
 * the lanes use and the GCM engine (gcm_imb.c) takes its function pointers from. */
IMB_MGR *acc_mb_aes_mgr(void);

#endif
