"""The serving shim's settings, as data: the ``[serve]`` section of the layered configuration
(``conf/base/nsreplay.toml`` overlaid with ``conf/<env>/nsreplay.toml``, read by
:func:`nsreplay.config.load_section`).

    config = load_serve_config()                 # ServeConfig(history_max_changes=1000, ...)

Contract:

* Every key of :class:`ServeConfig` must be present (the defaults live in ``conf/base``, not in code):
  a missing section or key, a malformed file or a value out of range raises
  :class:`~nsreplay.config.ConfigError` naming the key, so ``nsreplay serve`` refuses to start with a
  one-line reason instead of serving with a limit nobody chose.
* Only ``[serve]`` is read: a shim does not depend on the pipeline's sections being valid.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from nsreplay.config import ConfigError, load_section

__all__ = ["ServeConfig", "load_serve_config"]

_SECTION = "serve"


@dataclass(frozen=True)
class ServeConfig:
    """The ``[serve]`` settings (``conf/base/nsreplay.toml`` says what each one bounds).

    ``history_max_changes``: the most route changes one ``/v1/history/route`` answer holds (also the
    largest ``limit`` a page may ask for). ``history_max_examined``: the most instants at which the
    topic's route may change that one answer examines (each costs a render of the route)."""

    history_max_changes: int
    history_max_examined: int

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"[{_SECTION}] {f.name} must be a positive integer, not {value!r}")
        if self.history_max_examined < self.history_max_changes:
            raise ConfigError(
                f"[{_SECTION}] history_max_examined ({self.history_max_examined}) must be at least history_max_changes "
                f"({self.history_max_changes}): every change is found at an examined instant"
            )


def load_serve_config(env: str | None = None, conf_dir: Path | None = None) -> ServeConfig:
    """The validated ``[serve]`` settings for ``env`` (default ``$NSREPLAY_ENV`` or ``local``) from
    ``conf_dir`` (default ``$NSREPLAY_CONF_DIR`` or the project's ``conf``). Raises ConfigError."""
    return load_section(ServeConfig, _SECTION, env, conf_dir)
