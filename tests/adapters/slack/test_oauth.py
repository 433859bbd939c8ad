"""The multi-workspace install: GET /slack/install, Slack's redirect back with a code, the
installation stored with slack_sdk's SQLAlchemy stores in our database, then that workspace's
commands answered with its own bot token."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from learning_bot.adapters.slack.app import NOT_INSTALLED_TEXT
from learning_bot.app import App

from .conftest import DriverFactory, texts
from .fake_slack import FakeSlack
from .test_commands import seed

# slack_sdk passes the client secret to oauth.v2.access with aiohttp's BasicAuth.
pytestmark = pytest.mark.filterwarnings("ignore:BasicAuth is deprecated:DeprecationWarning")


async def test_install_then_serve_the_new_workspace(
    core: App, make_driver: DriverFactory, fake_slack: FakeSlack
) -> None:
    seed(core)
    slack = await make_driver(bot_token=None, client_id="111.222", client_secret="shh")
    page = await slack.http.get("/slack/install")
    assert page.status_code == 200
    link = re.search(r'href="(https://slack\.com/oauth/v2/authorize\?[^"]+)"', page.text)
    assert link is not None
    url = link.group(1).replace("&amp;", "&")
    assert "client_id=111.222" in url
    assert "scope=commands,chat:write,files:write,users:read" in url
    state = re.search(r"state=([^&]+)", url)
    assert state is not None

    done = await slack.http.get(
        "/slack/oauth_redirect", params={"code": "c0de", "state": state.group(1)}
    )
    assert done.status_code == 200
    again = await slack.http.get(  # a state is good for one install
        "/slack/oauth_redirect", params={"code": "c0de", "state": state.group(1)}
    )
    assert again.status_code >= 400
    [exchange] = fake_slack.api("oauth.v2.access")
    assert exchange.params["code"] == "c0de"
    engine = getattr(core.store, "engine")  # noqa: B009
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT team_id, bot_token FROM slack_bots")).all()
    assert [tuple(r) for r in rows] == [("T-new", "xoxb-installed")]

    response, _ = await slack.command("status", team="T-new")
    assert response.status_code == 200
    assert texts(response.json()).startswith("Learning status")
    _, key = await slack.command("reward T1 good", team="T-new", user="U-member")
    post = await fake_slack.next_post(key)
    assert "Recorded a good reward" in texts(post.body)
    [lookup] = fake_slack.api("users.info")
    assert lookup.token == "xoxb-installed"

    unknown, key = await slack.command("status", team="T-other")
    assert unknown.status_code == 200
    refusal = await fake_slack.next_post(key)
    assert refusal.body == {"text": NOT_INSTALLED_TEXT}  # bolt's own answer, without blocks
    fake_slack.posted.remove(refusal)
