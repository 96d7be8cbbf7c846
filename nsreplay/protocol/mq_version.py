"""RocketMQ's version numbers as they travel in a RemotingCommand's ``version`` field.

The field holds ``MQVersion.Version.<V>.ordinal()``, the position of a release in the enum
``MQVersion.Version`` (``common/.../MQVersion.java``). The enum begins with 3.0.0's pre-releases
and the 3.x releases; from 4.0.0 on it holds, for every major 4 and 5, minor 0–9 and patch 0–9, a
``_SNAPSHOT`` entry and then the release: ``V4_0_0`` is 213, and each later patch adds 2. So
``V4_9_4`` is 401 (the first version that gets standard-JSON routes), ``V5_0_0`` 413 and ``V5_3_3``
479.

A NameServer answers with its own version: ``NamesrvStartup`` sets the system property
``rocketmq.remoting.version`` to ``MQVersion.CURRENT_VERSION`` (4.9.x in ``createNamesrvController``,
5.x in ``parseCommandlineAndConfigFile``), and ``RemotingCommand.createResponseCommand`` stamps every
response with it (``setCmdVersion``). A release's ``CURRENT_VERSION`` is its own entry.

    >>> release_version("4.9.4"), release_version("5.3.3")
    (401, 479)
"""

from __future__ import annotations

import re

__all__ = ["release_version"]

_V4_0_0 = 213  # MQVersion.Version.V4_0_0.ordinal()
_RELEASE = re.compile(r"([45])\.([0-9])\.([0-9])")


def release_version(release: str) -> int:
    """``MQVersion.Version.V<major>_<minor>_<patch>.ordinal()`` of a 4.x or 5.x release written
    ``"major.minor.patch"`` (each of minor and patch one digit, as the enum has them).

    Raises ValueError for any other text (3.x releases, pre-releases and suffixes such as
    ``"-SNAPSHOT"`` are not numbered this way)."""
    match = _RELEASE.fullmatch(release)
    if match is None:
        raise ValueError(f"not a 4.x or 5.x release with one-digit minor and patch: {release!r}")
    major, minor, patch = (int(part) for part in match.groups())
    return _V4_0_0 + 200 * (major - 4) + 20 * minor + 2 * patch
