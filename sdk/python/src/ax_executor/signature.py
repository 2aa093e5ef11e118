"""Dispatch signatures (protocol.md, "Verifying the signature").

ax signs every dispatch with the shared secret: ``X-Ax-Signature: v1=<hex>``, the
HMAC-SHA256 of ``"{X-Ax-Timestamp}.{body}"``. Checking it, and the timestamp's age, is what
stops an executor from running whatever anyone POSTs, or a captured dispatch replayed later.
"""

import hashlib
import hmac
import time
from typing import Optional, Union

#: How far a dispatch's timestamp may be from this clock, either way.
TOLERANCE_SECS = 300

_PREFIX = "v1="


class SignatureError(ValueError):
    """A dispatch whose signature or timestamp does not hold; the text says which."""


def _key(secret: Union[str, bytes]) -> bytes:
    return secret.encode() if isinstance(secret, str) else secret


def sign(secret: Union[str, bytes], timestamp: int, body: bytes) -> str:
    """The ``X-Ax-Signature`` value ax sends for ``body`` signed at ``timestamp``."""
    mac = hmac.new(_key(secret), f"{timestamp}.".encode() + body, hashlib.sha256)
    return _PREFIX + mac.hexdigest()


def verify(
    secret: Union[str, bytes],
    timestamp: Optional[str],
    signature: Optional[str],
    body: bytes,
    *,
    now: Optional[float] = None,
    tolerance: float = TOLERANCE_SECS,
) -> None:
    """Raises :class:`SignatureError` unless ``signature`` signs ``body`` at ``timestamp``
    (the two headers as received) and ``timestamp`` is within ``tolerance`` of ``now``."""
    if not timestamp or not signature:
        raise SignatureError("missing X-Ax-Timestamp or X-Ax-Signature")
    try:
        signed_at = int(timestamp)
    except ValueError:
        raise SignatureError("X-Ax-Timestamp is not an integer") from None
    # Compared in constant time, so the answer's timing tells nothing of the right signature.
    if not hmac.compare_digest(sign(secret, signed_at, body).encode(), signature.encode()):
        raise SignatureError("bad signature")
    # Checked after the signature: the timestamp means something only once it is authentic.
    if abs((time.time() if now is None else now) - signed_at) > tolerance:
        raise SignatureError("stale timestamp")
