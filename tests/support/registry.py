"""What a package registry's answer means, for tests that install or look up packages.

Two outcomes must not be confused: the registry answered (a release, or "no such release": a wrong pin
fails the test) and the registry could not be reached (nothing is known: the test is skipped, naming
the address and the error). pip tells them apart only in its own words, read here.
"""
from __future__ import annotations

import re
from typing import Optional

# pip's words for a registry it could not reach (its urllib3 and socket errors, and its retries of them).
_UNREACHED = re.compile(r"Could not fetch URL \S+: connection error[^\n]*|Retrying \(Retry\([^\n]*|"
                        r"Temporary failure in name resolution|Name or service not known|Network is unreachable|"
                        r"Connection (?:refused|reset|aborted)|Max retries exceeded[^\n]*|Read timed out[^\n]*")


def unreached(pip_output: str) -> Optional[str]:
    """pip's line saying a registry could not be reached, or None when every registry it asked answered."""
    found = _UNREACHED.search(pip_output)
    return found.group(0)[:300] if found else None
