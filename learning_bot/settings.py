"""Settings from defaults < config file < environment < command-line flags, validated once at
start-up with errors that name the setting."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from learning_bot.engine.bounds import check_json, check_learner_name, check_text
from learning_bot.engine.config import LearningConfig
from learning_bot.engine.cost import PriceTable
from learning_bot.engine.errors import InvalidConfig, InvalidInput
from learning_bot.storage.pooling import PoolSettings, pool_settings

ENV_PREFIX = "LEARNING_BOT_"
# environment variable -> LearningConfig key
_CONFIG_ENV = {
    "ENABLED": "enabled",
    "PHASE": "phase",
    "STRATEGY": "strategy",
    "TOKEN_BUDGET": "tokenBudget",
    "BASELINE_RATE": "baselineRate",
    "MIN_PULLS": "minPulls",
    "SEED_ARM_IDS": "seedArmIds",
    "META_TOOLS": "metaTools",
    "POLICY": "policy",
    "HALF_LIFE": "halfLife",
    "RECALL_TARGET": "recallTarget",
    "PROVIDER": "provider",
    "MODEL": "model",
}


@dataclass(frozen=True)
class Settings:
    database_url: str | None = None
    learner: str = "default"
    config: LearningConfig = field(default_factory=LearningConfig)
    admins: frozenset[str] = frozenset()
    reward_admins_only: bool = False
    learners: Mapping[str, str] = field(default_factory=dict)
    dashboard_url: str | None = None
    """The dashboard's address for links in replies: from LEARNING_BOT_PUBLIC_URL (or the older
    LEARNING_BOT_DASHBOARD_URL, a full dashboard address)."""
    public_url: str | None = None
    """Where users reach the server (LEARNING_BOT_PUBLIC_URL), e.g. https://learning.example.com."""
    cache_ttl: float = 0.5
    rate_limit: int = 20
    command_lease: float = 60.0
    """Seconds an idempotency claim or a used confirmation without a reply is held for its
    process (LEARNING_BOT_COMMAND_LEASE); past it, a retry takes it over and runs once."""
    spool_max_mb: float = 256.0
    """Bound of the local spool (LEARNING_BOT_SPOOL_MAX_MB); beyond it observe refuses loudly."""
    prices: PriceTable = field(default_factory=PriceTable)
    """Token prices per provider and model (engine.cost), with the config file's `prices` on
    top of the built-in ones: what the measured cost saving is priced with."""
    pool: PoolSettings = field(default_factory=PoolSettings)
    """PostgreSQL pool sizes and pooler (LEARNING_BOT_DB_POOLER, _POOL_SIZE, _MAX_OVERFLOW)."""
    spool_adopt_seconds: float = 5.0
    """How often a serving process looks for spools of dead processes in its spool directory
    (LEARNING_BOT_SPOOL_ADOPT_SECONDS; 0: never)."""


DASHBOARD_PATH = "/__openclaw__/api/learning/dashboard"


def _public_url(raw: str) -> str | None:
    """LEARNING_BOT_PUBLIC_URL: an http(s) address with a host, without a trailing slash."""
    from urllib.parse import urlsplit

    value = raw.strip().rstrip("/")
    if not value:
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or any(c in value for c in " <>|"):
        raise InvalidConfig(
            f"{ENV_PREFIX}PUBLIC_URL",
            f"must be an http:// or https:// address such as https://learning.example.com, "
            f"got {raw[:80]!r}",
        )
    return value


_NUMBERS: dict[str, tuple[Callable[[str], float], str]] = {
    "tokenBudget": (int, "must be a whole number"),
    "minPulls": (int, "must be a whole number"),
    "baselineRate": (float, "must be a number in [0, 1]"),
    "recallTarget": (float, "must be a number in (0, 1] or null"),
    "halfLife": (float, "must be a number of observations >= 0"),
}
"""The numeric learning options an environment variable may set: how each is read, and what
it must be."""


def _env_value(key: str, raw: str) -> Any:
    if key in ("enabled",):
        lowered = raw.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise InvalidConfig(f"{ENV_PREFIX}ENABLED", f"must be true or false, got {raw!r}")
    if key == "recallTarget" and raw.strip().lower() in ("", "none", "null", "off"):
        return None
    if key in _NUMBERS:
        parse, must = _NUMBERS[key]
        try:
            return parse(raw)
        except ValueError:
            raise InvalidConfig(key, f"{must}, got {raw!r}") from None
    if key in ("seedArmIds", "metaTools"):
        return [part.strip() for part in raw.split(",") if part.strip()]
    return raw.strip()


def _text_url(url: str | None) -> str | None:
    """The database URL, refused when it holds bytes that are not text (a command line or an
    environment in another encoding: Python keeps them as lone surrogates)."""
    if url is not None:
        try:
            url.encode("utf-8")
        except UnicodeEncodeError:
            shown = url.encode("utf-8", "replace").decode()
            raise InvalidConfig(
                "database URL", f"{shown!r} holds bytes that are not UTF-8"
            ) from None
    return url


def _read_file(path: Path) -> tuple[dict[str, Any], Any]:
    """The file's learning settings and its `prices` (None when it has none)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidConfig("config file", f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise InvalidConfig(
            "config file", f"{path} is not UTF-8 text (byte {exc.start}: {exc.reason})"
        ) from None
    try:
        if path.suffix == ".toml":
            import tomllib  # only for a TOML file

            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    except ValueError as exc:  # tomllib.TOMLDecodeError is one
        raise InvalidConfig("config file", f"{path} is not valid: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidConfig("config file", f"{path} must hold an object")
    try:
        check_json("", data)
    except InvalidInput as exc:
        raise InvalidConfig("config file", f"{path}: {exc}") from None
    learning = data.get("learning", data)
    if not isinstance(learning, dict):
        raise InvalidConfig("config file", "the `learning` section must be an object")
    return learning, data.get("prices", learning.get("prices"))


def _pairs(name: str, raw: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        if "=" not in item:
            raise InvalidConfig(name, f"expected scope=learner pairs, got {item!r}")
        scope, learner = (part.strip() for part in item.split("=", 1))
        if not scope or not learner:
            raise InvalidConfig(name, f"expected scope=learner pairs, got {item!r}")
        try:
            out[scope] = check_learner_name(learner)
        except InvalidInput as exc:
            raise InvalidConfig(name, f"{exc} (in {item[:120]!r})") from None
    return out


def _env_number(
    env: Mapping[str, str], key: str, default: float, must: str, *, zero: bool = False
) -> float:
    """The number in the variable `key`, `default` when it is unset or blank: finite and
    above 0, or at least 0 with `zero`; else InvalidConfig with `must`."""
    raw = env.get(key, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        raise InvalidConfig(key, f"{must}, got {raw!r}")
    return value


def _check_env(env: Mapping[str, str]) -> None:
    """Each LEARNING_BOT_* variable is text every backend stores (engine.bounds.check_text: a
    value that is not valid UTF-8 reaches Python as lone surrogates), named when it is not."""
    for name, value in env.items():
        if name.startswith(ENV_PREFIX):
            try:
                check_text(name, value)
            except InvalidInput as exc:
                raise InvalidConfig(name, str(exc).removeprefix(f"{name} ")) from None


def load_settings(
    env: Mapping[str, str] | None = None,
    *,
    database_url: str | None = None,
    learner: str | None = None,
    config_path: str | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Defaults, then the config file (LEARNING_BOT_CONFIG or `config_path`, JSON or TOML),
    then LEARNING_BOT_* variables, then the explicit arguments (command-line flags)."""
    env = os.environ if env is None else env
    _check_env(env)
    config = LearningConfig()
    path = config_path or env.get(f"{ENV_PREFIX}CONFIG")
    prices = PriceTable()
    if path:
        learning, raw_prices = _read_file(Path(path))
        config = config.merged({k: v for k, v in learning.items() if k != "prices"})
        if raw_prices is not None:
            prices = PriceTable.from_json(raw_prices)
    try:
        from_env = {
            key: _env_value(key, env[f"{ENV_PREFIX}{name}"])
            for name, key in _CONFIG_ENV.items()
            if env.get(f"{ENV_PREFIX}{name}", "").strip()
        }
        if from_env:
            config = config.merged(from_env)
    except InvalidConfig as exc:
        if exc.field.startswith(ENV_PREFIX):
            raise
        name = next((n for n, k in _CONFIG_ENV.items() if k == exc.field), exc.field)
        raise InvalidConfig(f"{ENV_PREFIX}{name}", exc.detail) from None
    if overrides:
        config = config.merged(overrides)
    admins = frozenset(
        a.strip() for a in env.get(f"{ENV_PREFIX}ADMINS", "").split(",") if a.strip()
    )
    reward_admins = env.get(f"{ENV_PREFIX}REWARD_ADMINS_ONLY", "").strip().lower()
    ttl_raw = env.get(f"{ENV_PREFIX}CACHE_TTL", "").strip()
    try:
        ttl = float(ttl_raw) if ttl_raw else 0.5
    except ValueError:
        raise InvalidConfig(f"{ENV_PREFIX}CACHE_TTL", f"must be seconds, got {ttl_raw!r}") from None
    rate_raw = env.get(f"{ENV_PREFIX}RATE_LIMIT", "").strip()
    try:
        rate_limit = int(rate_raw) if rate_raw else 20
    except ValueError:
        raise InvalidConfig(
            f"{ENV_PREFIX}RATE_LIMIT", f"must be a whole number of commands, got {rate_raw!r}"
        ) from None
    if rate_limit < 0:
        raise InvalidConfig(f"{ENV_PREFIX}RATE_LIMIT", "must be >= 0 (0 turns it off)")
    command_lease = _env_number(
        env, "LEARNING_BOT_COMMAND_LEASE", 60.0, "must be a positive number of seconds"
    )
    spool_max_mb = _env_number(
        env, "LEARNING_BOT_SPOOL_MAX_MB", 256.0, "must be a positive number of MiB"
    )
    adopt_seconds = _env_number(
        env,
        "LEARNING_BOT_SPOOL_ADOPT_SECONDS",
        5.0,
        "must be a number of seconds >= 0 (0: never)",
        zero=True,
    )
    public_url = _public_url(env.get(f"{ENV_PREFIX}PUBLIC_URL", ""))
    dashboard_url = (
        f"{public_url}{DASHBOARD_PATH}"
        if public_url
        else env.get(f"{ENV_PREFIX}DASHBOARD_URL", "").strip() or None
    )
    default_learner = learner or env.get(f"{ENV_PREFIX}LEARNER") or "default"
    try:
        check_learner_name(default_learner)
    except InvalidInput as exc:
        raise InvalidConfig("--learner" if learner else f"{ENV_PREFIX}LEARNER", str(exc)) from None
    return Settings(
        database_url=_text_url(database_url or env.get(f"{ENV_PREFIX}DATABASE_URL") or None),
        learner=default_learner,
        config=config,
        admins=admins,
        reward_admins_only=reward_admins in ("1", "true", "yes", "on"),
        learners=_pairs(f"{ENV_PREFIX}LEARNERS", env.get(f"{ENV_PREFIX}LEARNERS", "")),
        dashboard_url=dashboard_url,
        public_url=public_url,
        cache_ttl=ttl,
        rate_limit=rate_limit,
        command_lease=command_lease,
        spool_max_mb=spool_max_mb,
        prices=prices,
        pool=pool_settings(env),
        spool_adopt_seconds=adopt_seconds,
    )
