"""tests/conformance/test_gcm_engines.py: every GCM engine this machine has (accel/gcm.h: accelaes's engine on
zmm, ymm or xmm, intel-ipsec-mb, the nested default provider; ACCELAES_GCM_ENGINE=vaes|vaesy|vaesx|imb|evp picks one), through
tests/c/test_gcm_engines.c: encrypt on one engine and decrypt on another (every pair, random key sizes, IV and
AAD lengths, data sizes and update splits, in place), the 2^32 counter wrap on each VAES engine against
intel-ipsec-mb, and each VAES engine's split hooks against its own update. The GCM tests of the suite run on each
engine through the `engine` fixture (tests/engines.py: gcm-vaes, gcm-vaesy, gcm-vaesx, gcm-imb, gcm-evp)."""

from conftest import run_c_test


def test_gcm_engines_cross_c(openssl_env, seed):
    """Cross-engine encryption and decryption, the counter wrap, the split hooks (the C test)."""
    run_c_test("test_gcm_engines", dict(openssl_env, ACCELAES_TEST_SEED=str(seed)), timeout=300)
