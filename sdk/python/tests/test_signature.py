"""Unit tests of dispatch signatures (protocol.md, "Verifying the signature")."""

import unittest
from typing import Optional

from tests import support  # noqa: F401  (puts the SDK's source on sys.path)
from ax_executor import SignatureError, sign, verify

SECRET = "a-secret-of-16-chars"
BODY = b'{"a":1}'
TS = 1700000000
# Computed apart from the SDK: printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac SECRET
KNOWN = "v1=966dfd9e7287134bae9078b9ca8cad81556798be645cd07bef60884b917d8d01"


class SignatureTest(unittest.TestCase):
    def test_sign_matches_an_independent_hmac(self) -> None:
        self.assertEqual(sign(SECRET, TS, BODY), KNOWN)
        self.assertEqual(sign(SECRET.encode(), TS, BODY), KNOWN)

    def test_a_good_signature_passes_within_five_minutes_either_way(self) -> None:
        for now in (TS, TS + 300, TS - 300):
            verify(SECRET, str(TS), KNOWN, BODY, now=now)

    def refused(self, because: str, secret: str = SECRET, timestamp: Optional[str] = str(TS),
                signature: Optional[str] = KNOWN, body: bytes = BODY, now: float = TS) -> None:
        with self.assertRaises(SignatureError) as refused:
            verify(secret, timestamp, signature, body, now=now)
        self.assertIn(because, str(refused.exception))

    def test_refusals(self) -> None:
        self.refused("bad signature", secret="another-secret-of-16")
        self.refused("bad signature", body=b'{"a":2}')
        self.refused("bad signature", timestamp=str(TS + 1))  # the time is signed too
        self.refused("bad signature", signature=KNOWN.upper())
        self.refused("bad signature", signature=KNOWN[3:])  # without its v1=
        self.refused("bad signature", signature="v1=")
        self.refused("missing", signature=None)
        self.refused("missing", timestamp=None)
        self.refused("missing", timestamp="")
        self.refused("not an integer", timestamp="17e8")
        self.refused("stale", now=TS + 301)
        self.refused("stale", now=TS - 301)  # from the future, as far off

    def test_a_forged_signature_with_a_fresh_time_is_refused_before_the_time_is_read(self) -> None:
        # A stale dispatch says "bad signature" when its signature is wrong: the time of an
        # unauthenticated request means nothing.
        self.refused("bad signature", signature="v1=" + "0" * 64, now=TS + 3600)


if __name__ == "__main__":
    unittest.main()
