"""The Slack surface as a server runs it: its routes under a real uvicorn on a free port (HTTP
mode), or its Socket Mode connection; and its stop."""

from __future__ import annotations

import asyncio
import contextlib

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Route

from learning_bot.adapters.slack import slack_configured, slack_surface
from learning_bot.app import App

from .conftest import SECRET, SlackDriver, texts, validate_message
from .fake_slack import FakeSlack
from .test_commands import seed
from .test_socket_mode import envelope


def test_configured_by_any_slack_credential() -> None:
    assert not slack_configured({})
    assert not slack_configured({"SLACK_SIGNING_SECRET": "s"})
    assert slack_configured({"SLACK_BOT_TOKEN": "xoxb-1"})
    assert slack_configured({"SLACK_CLIENT_ID": "1.2"})


async def test_http_mode_under_uvicorn(core: App, fake_slack: FakeSlack) -> None:
    seed(core)
    env = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": SECRET}
    env["SLACK_API_URL"] = fake_slack.api_url
    service = slack_surface(core.bus, env, installation_engine=core.engine)
    assert [r.path for r in service.routes if isinstance(r, Route)] == ["/slack/events"]
    running = asyncio.create_task(service.run())  # HTTP mode: lasts until stop()
    server = uvicorn.Server(
        uvicorn.Config(Starlette(routes=service.routes), host="127.0.0.1", port=0, lifespan="off")
    )
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            slack = SlackDriver(http, fake_slack)
            response, _ = await slack.command("status")
            assert response.status_code == 200
            assert texts(response.json()).startswith("Learning status")
            _, key = await slack.command("reward T1 good", user="U-member")
            post = await fake_slack.next_post(key)
            assert "Recorded a good reward" in texts(post.body)
            bad, _ = await slack.command("status", secret="wrong")
            assert bad.status_code == 401
            for message in slack.every_message():
                validate_message(message)
    finally:
        server.should_exit = True
        await serving
        assert not running.done()
        await service.stop()
        await asyncio.wait_for(running, 120)


async def test_socket_mode_service(core: App, fake_slack: FakeSlack) -> None:
    seed(core)
    env = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_APP_TOKEN": "xapp-1-test"}
    env["SLACK_API_URL"] = fake_slack.api_url
    service = slack_surface(core.bus, env, installation_engine=core.engine)
    assert service.routes == []  # nothing is posted to us, and there is no secret to check
    running = asyncio.create_task(service.run())
    try:
        await fake_slack.send_envelope(envelope(fake_slack, 7, "help"))
        await fake_slack.wait_until(lambda: bool(fake_slack.socket_replies))
        payload = fake_slack.socket_replies[0]["payload"]
        validate_message(payload)
        assert "/learning reward" in texts(payload)
    finally:
        await service.stop()
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
