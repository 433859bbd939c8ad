"""SLACK_* settings: read once, validated with errors that name the variable."""

from __future__ import annotations

import pytest

from learning_bot.adapters.slack.settings import SlackSettings, slack_settings_from_env
from learning_bot.engine.errors import InvalidConfig

BASE = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s3cret"}


def test_http_mode_from_the_environment() -> None:
    settings = slack_settings_from_env(
        {
            **BASE,
            "SLACK_API_URL": "http://127.0.0.1:9000/api",
            "SLACK_USER_CACHE_SECONDS": "60",
            "SLACK_TABLE_BLOCKS": "off",
            "SLACK_ANNOUNCE_CHANNEL": "C-ops",
        }
    )
    assert settings.api_url == "http://127.0.0.1:9000/api/"
    assert settings.user_cache_seconds == 60
    assert settings.table_blocks is False
    assert settings.announce_channel == "C-ops"
    assert not settings.socket_mode
    assert not settings.oauth
    assert settings.command == "/learning"


def test_socket_mode_needs_no_signing_secret() -> None:
    settings = slack_settings_from_env({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"})
    assert settings.socket_mode


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"SLACK_SIGNING_SECRET": "s"}, "SLACK_BOT_TOKEN"),
        ({"SLACK_BOT_TOKEN": "xoxb-1"}, "SLACK_SIGNING_SECRET"),
        ({**BASE, "SLACK_APP_TOKEN": "xoxb-wrong"}, "SLACK_APP_TOKEN"),
        ({**BASE, "SLACK_API_URL": "slack.com/api"}, "SLACK_API_URL"),
        ({**BASE, "SLACK_CLIENT_ID": "1.2"}, "SLACK_CLIENT_SECRET"),
        ({**BASE, "SLACK_INLINE_SECONDS": "5"}, "SLACK_INLINE_SECONDS"),
        ({**BASE, "SLACK_USER_CACHE_SECONDS": "soon"}, "SLACK_USER_CACHE_SECONDS"),
        ({**BASE, "SLACK_TABLE_BLOCKS": "maybe"}, "SLACK_TABLE_BLOCKS"),
        ({**BASE, "SLACK_COMMAND": "learning"}, "SLACK_COMMAND"),
    ],
)
def test_bad_settings_name_the_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(InvalidConfig) as caught:
        slack_settings_from_env(env)
    assert caught.value.field == variable


def test_oauth_needs_no_bot_token() -> None:
    settings = SlackSettings(client_id="1.2", client_secret="x", signing_secret="s")
    assert settings.oauth


def test_starting_with_the_token_in_the_environment_warns_of_nothing_untrue(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """slack-bolt reads SLACK_BOT_TOKEN itself and warned at every start that it "will be
    unused": the client it is handed holds that very token. Its other warnings still show."""
    import logging

    from slack_bolt.async_app import AsyncApp
    from slack_bolt.logger import get_bolt_logger

    from learning_bot.adapters.slack.app import create_app
    from learning_bot.app import build_app
    from learning_bot.settings import Settings

    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    made = build_app(Settings(database_url="sqlite://"), spool=False)
    try:
        with caplog.at_level(logging.WARNING):
            app = create_app(SlackSettings(bot_token="xoxb-1", signing_secret="s3cret"), made.bus)
            get_bolt_logger(AsyncApp).warning("another warning")
        assert app.client.token == "xoxb-1"
        said = [r.getMessage() for r in caplog.records]
        assert not any("will be unused" in m for m in said), said
        assert "another warning" in said
    finally:
        made.close()
