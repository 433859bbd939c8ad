"""Socket Mode: the same app, fed envelopes over the WebSocket the fake Slack hands out."""

from __future__ import annotations

from typing import Any

from learning_bot.adapters.slack import create_app, start_socket_mode
from learning_bot.app import App

from .conftest import slack_settings, texts, validate_message
from .fake_slack import FakeSlack
from .test_commands import seed


def envelope(fake: FakeSlack, n: int, text: str, user: str = "U-admin") -> dict[str, Any]:
    return {
        "envelope_id": f"env-{n}",
        "type": "slash_commands",
        "accepts_response_payload": True,
        "payload": {
            "token": "gIkuvaNzQIHg97ATvDxqgjtO",
            "team_id": "T1",
            "team_domain": "example",
            "channel_id": "C1",
            "channel_name": "general",
            "user_id": user,
            "user_name": "someone",
            "command": "/learning",
            "text": text,
            "api_app_id": "A-app",
            "is_enterprise_install": "false",
            "response_url": fake.response_url(f"sock-{n}"),
            "trigger_id": f"{n}.4242.socket",
        },
    }


async def test_commands_arrive_over_socket_mode(core: App, fake_slack: FakeSlack) -> None:
    seed(core)
    settings = slack_settings(fake_slack, app_token="xapp-1-test", signing_secret=None)
    app = create_app(settings, core.bus)
    handler = await start_socket_mode(app, "xapp-1-test")
    try:
        [opened] = fake_slack.api("apps.connections.open")
        assert opened.token == "xapp-1-test"
        await fake_slack.send_envelope(envelope(fake_slack, 1, "status"))
        await fake_slack.wait_until(lambda: bool(fake_slack.socket_replies))
        [reply] = fake_slack.socket_replies
        assert reply["envelope_id"] == "env-1"
        validate_message(reply["payload"])
        assert reply["payload"]["blocks"][0]["text"]["text"].startswith("Learning status")

        before = core.service().posteriors()
        await fake_slack.send_envelope(envelope(fake_slack, 2, "reward T1 good", "U-member"))
        post = await fake_slack.next_post("sock-2")
        validate_message(post.body)
        assert "Recorded a good reward (1) for tool:t:T1." in texts(post.body)
        ack = next(r for r in fake_slack.socket_replies if r["envelope_id"] == "env-2")
        assert ack["payload"]["text"] == "Working on it..."
        core.service().refresh(force=True)
        after = {v.arm_id: v.posterior.pulls for v in core.service().posteriors()}
        assert after["tool:t:T1"] == {v.arm_id: v.posterior.pulls for v in before}["tool:t:T1"] + 1
    finally:
        await handler.close_async()  # type: ignore[no-untyped-call]
