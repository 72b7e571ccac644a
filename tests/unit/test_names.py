"""Every AES algorithm name the provider layer spells is in provider/base/names.h (issue 28: "all names in
names.h"): the registration table and provider/base/compat.c's questions to the default provider use its
macros, so a name is fixed in one place. accel/ sits below provider/ and may not include it (test_layers.py):
its two nested-EVP engines fetch the default's implementations by their own literals, which this test leaves
alone."""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAMES_H = "provider/base/names.h"
# An AES cipher name as OpenSSL spells one (AES-128-GCM, id-aes256-CCM, aes-128-cbc-hmac-sha1, ...).
NAME = re.compile(r'"((?:AES|aes)-(?:128|192|256)-[A-Za-z0-9-]+|id-aes(?:128|192|256)-[A-Za-z]+)"')
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def literals(text):
    """The cipher-name string literals of C source text, comments left out."""
    return NAME.findall(COMMENT.sub("", text))


def offenders(root):
    found = []
    for path in sorted((root / "provider").rglob("*.[ch]")):
        rel = path.relative_to(root).as_posix()
        if rel != NAMES_H:
            found += [f"{rel}: {name}" for name in literals(path.read_text(errors="replace"))]
    return found


def test_provider_spells_names_only_in_names_h():
    assert offenders(ROOT) == []


def test_names_h_has_the_names():
    text = (ROOT / NAMES_H).read_text()
    assert len(literals(text)) >= 21, "names.h lost its cipher names: the scan above would pass for nothing"


@pytest.mark.parametrize("line, found", [
    ('f = find("AES-128-GCM");', True),
    ('f = find("id-aes256-CCM");', True),
    ('/* "AES-128-GCM" in a comment */ f = find(ACC_NAME_AES_128_GCM);', False),
    ('f = find(ACC_NAME_AES_128_GCM); // "AES-256-XTS"', False),
    ('ok = strncasecmp(s, "AES", 3) == 0;', False),
])
def test_planted_name_is_found(tmp_path, line, found):
    (tmp_path / "provider" / "base").mkdir(parents=True)
    (tmp_path / "provider" / "base" / "names.h").write_text('#define ACC_NAME_AES_128_GCM "AES-128-GCM"\n')
    (tmp_path / "provider" / "base" / "victim.c").write_text(line + "\n")
    assert bool(offenders(tmp_path)) == found
