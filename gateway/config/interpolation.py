"""`${VAR}` and `${VAR:-default}` in a config document, and where each value from the environment came from.

Values from the environment are secrets until shown otherwise: every string made from one keeps
the references it was made from (`Interpolated.refs`), so that errors, `check-config` and the
targets' masks show `${VAR}` where the value would be.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from gateway.config.problems import Loc, Problems

_ENV_REF: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
# What YAML reads as a number, a boolean or null rather than as text.
_SCALAR: Final = re.compile(
    r"[-+]?(\d[\d_]*(\.\d*)?|\.\d+)(e[-+]?\d+)?|[-+]?\.?inf|\.?nan|true|false|yes|no|on|off|null|~"
)


class Interpolated(str):
    """A string produced by `${...}`; number and flag fields read it as YAML would.

    `refs` maps each non-empty value the environment gave it to its reference as written.
    """

    refs: Mapping[str, str]


def interpolate(
    value: Any, loc: Loc, env: Mapping[str, str], *, problems: Problems, refs: dict[str, str]
) -> Any:
    """`value` with every `${VAR}` substituted; every value taken from `env` is also added to `refs`."""
    if isinstance(value, str):
        if "${" not in value:
            return value
        taken: dict[str, str] = {}

        def substitute(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            found = env.get(name)
            if found is None or (found == "" and default is not None):
                if default is None:
                    problems.add(loc, f"environment variable {name} is not set")
                    return ""
                return default  # written in the file: not a secret
            if found:
                taken.setdefault(found, match.group(0))
            return found

        result = Interpolated(_ENV_REF.sub(substitute, value))
        result.refs = MappingProxyType(taken)
        for found, reference in taken.items():
            refs.setdefault(found, reference)
        return result
    if isinstance(value, dict):
        return {k: interpolate(v, (*loc, str(k)), env, problems=problems, refs=refs) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, (*loc, i), env, problems=problems, refs=refs) for i, v in enumerate(value)]
    return value


def env_refs(value: Any) -> dict[str, str]:
    """Every value from the environment inside `value` (a string, or a list or mapping of them) → its reference."""
    if isinstance(value, Interpolated):
        return dict(value.refs)
    found: dict[str, str] = {}
    if isinstance(value, dict):
        for key, item in value.items():
            found.update(env_refs(key))
            found.update(env_refs(item))
    elif isinstance(value, list):
        for item in value:
            found.update(env_refs(item))
    return found


def secret_forms(refs: Mapping[str, str]) -> Mapping[str, str]:
    """The forms in which a message may quote each value from the environment → its reference, longest first.

    Numbers and booleans are left out: they are settings, not secrets, and masking them would
    garble every message. A value is also found as repr quotes it (a token read from a file ends
    in an escaped newline).
    """
    return longest_first(
        {form: ref for value, ref in refs.items() if _is_text(value) for form in (value, repr(value)[1:-1])}
    )


def _is_text(value: str) -> bool:
    """Whether `value` reads as text, not as a number, a boolean or null."""
    return not _SCALAR.fullmatch(value.strip().lower())


def longest_first(refs: Mapping[str, str]) -> Mapping[str, str]:
    """`refs` ordered so that a value is replaced before any shorter value inside it."""
    return MappingProxyType(dict(sorted(refs.items(), key=lambda item: len(item[0]), reverse=True)))
