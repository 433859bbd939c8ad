"""/learning in Slack, end to end: signed requests through slack-bolt's Starlette adapter, the
bus and a real database; Slack's side is the local fake Web API."""

from __future__ import annotations

import time

from learning_bot.app import App
from learning_bot.engine import Arm, Phase, ReportedArm, RunReport, ToolCall

from .conftest import (
    DASHBOARD,
    SECRET,
    DriverFactory,
    SlackDriver,
    buttons,
    observe,
    pulls,
    signed_headers,
    texts,
)
from .fake_slack import FakeSlack


def seed(core: App) -> None:
    for i in range(12):
        observe(core, f"r{i}", [f"T{i % 8}", "WebSearch"], is_baseline=i % 3 == 0)


async def test_status_is_answered_in_the_acknowledgement(
    core: App, slack: SlackDriver, fake_slack: FakeSlack
) -> None:
    seed(core)
    response, key = await slack.command("status")
    assert response.status_code == 200
    message = response.json()
    assert message["response_type"] == "ephemeral"
    blocks = message["blocks"]
    assert blocks[0]["type"] == "header"
    assert blocks[0]["text"]["text"] == "Learning status — default  [ACTIVE]"
    shown = texts(message)
    assert blocks[1]["text"]["text"].startswith("*Phase* ACTIVE · *Traces* 12")  # numbers first
    best = shown.split("*Best arms*\n", 1)[1].splitlines()
    assert best[0].startswith("WebSearch · 0.")  # used in every run: the best mean
    assert "Candidates for exclusion" in shown
    assert "table" not in [b["type"] for b in blocks], "the full tables are for status top N"
    assert "12" in message["text"]  # the fallback carries the content too
    await_nothing = fake_slack.posts(key)
    assert await_nothing == []  # nothing deferred
    assert fake_slack.api("users.info") == []  # reading needs no admin check


async def test_status_public_goes_to_the_channel(core: App, slack: SlackDriver) -> None:
    seed(core)
    response, _ = await slack.command("status top 3 public")
    message = response.json()
    assert message["response_type"] == "in_channel"
    shown = texts(message)
    for label in ("Token budget", "Baseline rate", "Traces", "Date range", "Baseline runs"):
        assert label in shown
    codes = shown.split("```")[1::2]
    assert len(codes) == 2, "both tables in one style"
    header, _rule, *rows = codes[0].strip().splitlines()
    assert header.split()[:2] == ["Arm", "Mean"] and len(rows) == 3
    assert rows[0].startswith("tool:web:WebSearch")


async def test_empty_status_says_so(slack: SlackDriver) -> None:
    response, _ = await slack.command("")
    assert "No traces recorded yet" in texts(response.json())


async def test_help(slack: SlackDriver) -> None:
    response, _ = await slack.command("help")
    message = response.json()
    assert message["response_type"] == "ephemeral"
    assert "/learning reward [<arm-id-or-label>]" in texts(message)
    response, _ = await slack.command("help reward")
    assert "lagged" in texts(response.json())


async def test_a_bad_command_is_one_private_line_naming_the_bad_word(
    core: App, slack: SlackDriver
) -> None:
    seed(core)
    before = pulls(core)
    response, _ = await slack.command("reward T1 2 public")
    message = response.json()
    assert message["response_type"] == "ephemeral"
    first = message["blocks"][0]
    assert first["type"] == "section"
    assert "reward value '2' is not 1, 0, good or bad" in first["text"]["text"]
    assert "\n" not in first["text"]["text"]
    assert message["blocks"][1]["type"] == "context"  # the usage line
    assert "Usage: /learning reward" in texts(message)
    response, _ = await slack.command("frobnicate")
    assert "unknown command 'frobnicate'" in texts(response.json())
    assert pulls(core) == before


async def test_reward_with_an_arm_acknowledges_then_answers(
    core: App, slack: SlackDriver, fake_slack: FakeSlack
) -> None:
    seed(core)
    before = pulls(core)
    response, key = await slack.command("reward WebSearch good great answer", user="U-member")
    assert response.status_code == 200
    assert response.json()["text"] == "Working on it..."
    post = await fake_slack.next_post(key)
    assert post.body["response_type"] == "ephemeral"
    shown = texts(post.body)
    assert "Recorded a good reward (1) for tool:web:WebSearch." in shown
    assert "Reason: great answer" in shown
    assert "Lagged feedback from Max" in shown
    after = pulls(core)
    assert after["tool:web:WebSearch"] == before["tool:web:WebSearch"] + 1
    assert {a: n for a, n in after.items() if a != "tool:web:WebSearch"} == {
        a: n for a, n in before.items() if a != "tool:web:WebSearch"
    }
    [lookup] = fake_slack.api("users.info")
    assert lookup.params["user"] == "U-member"
    assert lookup.token == "xoxb-test"


async def test_reward_without_an_arm_credits_the_latest_run_in_this_channel(
    core: App, slack: SlackDriver, fake_slack: FakeSlack
) -> None:
    observe(core, "old", ["T2"], channel="C7", timestamp=1)
    observe(core, "new", ["T3", "WebFetch"], channel="C7", timestamp=2)
    observe(core, "elsewhere", ["T5"], channel="C8", timestamp=3)
    before = pulls(core)
    _, key = await slack.command("reward", user="U-member", channel="C7")
    post = await fake_slack.next_post(key)
    assert "Recorded a good reward (1) for 2 arm(s) the latest run here used." in texts(post.body)
    after = pulls(core)
    changed = {a for a in after if after[a] != before[a]}
    assert changed == {"tool:t:T3", "tool:web:WebFetch"}
    _, key = await slack.command("reward", user="U-member", channel="C-quiet")
    post = await fake_slack.next_post(key)
    assert "no run has been recorded in this conversation" in texts(post.body)


async def test_reset_asks_then_the_confirm_click_replaces_the_prompt(
    core: App, slack: SlackDriver, fake_slack: FakeSlack
) -> None:
    seed(core)
    before = pulls(core)
    _, key = await slack.command("reset")
    prompt = (await fake_slack.next_post(key)).body
    assert prompt["response_type"] == "ephemeral"
    assert "Reset all 10 arms of learner 'default'" in texts(prompt)
    found = buttons(prompt)
    confirm, cancel = found["learning_confirm"], found["learning_cancel"]
    assert confirm["style"] == "danger"
    assert confirm["confirm"]["style"] == "danger"
    dialog = confirm["confirm"]
    assert dialog["title"]["text"] == "Are you sure?"
    assert dialog["text"]["type"] == "plain_text"
    assert dialog["text"]["text"].strip()
    assert dialog["confirm"]["text"] == "Yes, confirm"
    assert "style" not in cancel
    assert pulls(core) == before  # nothing happened yet

    response, click = await slack.click(confirm)
    assert response.status_code == 200
    assert response.content == b""  # acknowledged at once
    outcome = (await fake_slack.next_post(click)).body
    assert outcome["replace_original"] is True
    shown = texts(outcome)
    assert "Reset every arm (10 arm(s), reset #1)" in shown
    assert "Confirmed by Ada." in shown
    assert set(pulls(core).values()) == {0}

    _, again = await slack.click(confirm)
    spent = (await fake_slack.next_post(again)).body
    assert spent["replace_original"] is False
    assert spent["response_type"] == "ephemeral"
    assert texts(spent).startswith("Already done: Reset every arm")
    last = core.service().last_reset()
    assert last is not None
    assert last.reset_id == 1


async def test_cancel_changes_nothing(core: App, slack: SlackDriver, fake_slack: FakeSlack) -> None:
    seed(core)
    _, key = await slack.command("phase passive", user="U-owner")
    prompt = (await fake_slack.next_post(key)).body
    assert "Switch learner 'default' from active to passive?" in texts(prompt)
    _, click = await slack.click(buttons(prompt)["learning_cancel"], user="U-owner")
    outcome = (await fake_slack.next_post(click)).body
    assert outcome["replace_original"] is True
    assert "Cancelled by olga; nothing changed." in texts(outcome)
    assert core.service().phase() is Phase.ACTIVE


async def test_only_the_asker_can_confirm(
    core: App, slack: SlackDriver, fake_slack: FakeSlack
) -> None:
    seed(core)
    _, key = await slack.command("reset")
    prompt = (await fake_slack.next_post(key)).body
    _, click = await slack.click(buttons(prompt)["learning_confirm"], user="U-owner")
    refused = (await fake_slack.next_post(click)).body
    assert refused["replace_original"] is False
    assert "Only the person who asked can confirm or cancel this." in texts(refused)
    assert core.service().last_reset() is None


async def test_phase_shows_and_changes(
    core: App, slack: SlackDriver, fake_slack: FakeSlack
) -> None:
    seed(core)
    response, _ = await slack.command("phase", user="U-member")
    assert "Phase: ACTIVE" in texts(response.json())
    _, key = await slack.command("phase passive confirm", user="U-owner")
    post = await fake_slack.next_post(key)
    assert "Phase is now PASSIVE (was active)." in texts(post.body)
    assert core.service().phase() is Phase.PASSIVE


async def test_members_cannot_reset_or_change_the_phase(
    core: App, slack: SlackDriver, fake_slack: FakeSlack
) -> None:
    seed(core)
    before = pulls(core)
    for text in ("reset all confirm", "reset", "phase passive confirm"):
        _, key = await slack.command(text, user="U-member")
        post = (await fake_slack.next_post(key)).body
        assert post["response_type"] == "ephemeral"
        assert texts(post).startswith("\u26a0\ufe0f Only admins can")
        assert len(post["blocks"]) == 1
    assert pulls(core) == before
    assert core.service().phase() is Phase.ACTIVE
    assert len(fake_slack.api("users.info")) == 1  # cached after the first lookup


async def test_the_allow_list_vouches_for_a_member(
    core: App, slack: SlackDriver, fake_slack: FakeSlack
) -> None:
    seed(core)
    _, key = await slack.command("reset all confirm", user="U-listed")
    post = (await fake_slack.next_post(key)).body
    assert "Reset every arm" in texts(post)
    assert set(pulls(core).values()) == {0}


async def test_guests_are_refused_politely(
    core: App, slack: SlackDriver, fake_slack: FakeSlack
) -> None:
    seed(core)
    before = pulls(core)
    _, key = await slack.command("reward T1 good", user="U-guest")
    post = (await fake_slack.next_post(key)).body
    assert "Guests can look at status, but cannot change the learning layer." in texts(post)
    assert pulls(core) == before
    response, _ = await slack.command("status", user="U-guest")
    assert response.json()["blocks"][0]["type"] == "header"


async def test_without_users_info_only_the_allow_list_gets_through(
    core: App, slack: SlackDriver, fake_slack: FakeSlack
) -> None:
    seed(core)
    fake_slack.users_info_error = "missing_scope"
    before = pulls(core)
    _, key = await slack.command("reward T1 good", user="U-member")
    post = (await fake_slack.next_post(key)).body
    assert "Could not check your Slack account (users.info: missing_scope)" in texts(post)
    assert pulls(core) == before
    _, key = await slack.command("reward T1 good", user="U-listed")
    post = (await fake_slack.next_post(key)).body
    assert "Recorded a good reward" in texts(post)


async def test_a_bad_signature_is_refused(
    core: App, slack: SlackDriver, fake_slack: FakeSlack
) -> None:
    seed(core)
    before = pulls(core)
    response, key = await slack.command("reward T1 good", secret="not-the-secret")
    assert response.status_code == 401
    unsigned = await slack.http.post(
        "/slack/events",
        content="command=%2Flearning&text=reset+all+confirm&user_id=U-admin",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert unsigned.status_code == 401
    assert pulls(core) == before
    assert fake_slack.posts(key) == []
    assert fake_slack.calls == []


async def test_a_stale_timestamp_is_refused(
    core: App, slack: SlackDriver, fake_slack: FakeSlack
) -> None:
    seed(core)
    before = pulls(core)
    stale = int(time.time()) - 6 * 60
    response, key = await slack.command("reward T1 good", timestamp=stale)
    assert response.status_code == 401
    assert pulls(core) == before
    assert fake_slack.posts(key) == []
    fresh, _ = await slack.command("status", timestamp=int(time.time()) - 60)
    assert fresh.status_code == 200


async def test_a_malformed_timestamp_or_body_is_refused_without_a_server_error(
    core: App, slack: SlackDriver, fake_slack: FakeSlack
) -> None:
    seed(core)
    before = pulls(core)
    form = "command=%2Flearning&text=reset+all+confirm&user_id=U-admin"
    for stamp in ("abc", "", "1e9", "\u00b2"):
        answer = await slack.http.post(
            "/slack/events",
            content=form,
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "X-Slack-Request-Timestamp": stamp.encode(),
                "X-Slack-Signature": "v0=00",
            },
        )
        assert answer.status_code == 401, (stamp, answer.text)
    for body, kind in (
        ("{not json", "application/json"),
        ("payload=%7Bbad", "application/x-www-form-urlencoded"),
    ):
        headers = {**signed_headers(body), "Content-Type": kind}
        answer = await slack.http.post("/slack/events", content=body, headers=headers)
        assert answer.status_code == 400, (body, answer.text)
    assert pulls(core) == before
    assert fake_slack.calls == []


async def test_the_same_trigger_twice_counts_once(
    core: App, slack: SlackDriver, fake_slack: FakeSlack
) -> None:
    seed(core)
    before = pulls(core)
    trigger = "13345224609.738474920.8088930838d88f008e0"
    _, first = await slack.command("reward T1 good", user="U-member", trigger=trigger)
    one = (await fake_slack.next_post(first)).body
    _, second = await slack.command("reward T1 good", user="U-member", trigger=trigger)
    two = (await fake_slack.next_post(second)).body
    assert texts(one) == texts(two)
    assert pulls(core)["tool:t:T1"] == before["tool:t:T1"] + 1
    _, third = await slack.command("reward T1 good", user="U-member")
    await fake_slack.next_post(third)
    assert pulls(core)["tool:t:T1"] == before["tool:t:T1"] + 2


async def test_the_same_click_twice_confirms_once(
    core: App, slack: SlackDriver, fake_slack: FakeSlack
) -> None:
    seed(core)
    _, key = await slack.command("reset")
    confirm = buttons((await fake_slack.next_post(key)).body)["learning_confirm"]
    _, one = await slack.click(confirm, trigger="777.888.abc")
    _, two = await slack.click(confirm, trigger="777.888.abc")
    first, second = (await fake_slack.next_post(one)).body, (await fake_slack.next_post(two)).body
    assert texts(first) == texts(second)
    assert "Confirmed by Ada." in texts(first)
    last = core.service().last_reset()
    assert last is not None
    assert last.reset_id == 1


async def test_a_slow_read_moves_to_response_url(
    core: App, make_driver: DriverFactory, fake_slack: FakeSlack
) -> None:
    seed(core)
    slack = await make_driver(inline_seconds=0.0)  # no time to answer inline
    response, key = await slack.command("status")
    assert response.json()["text"] == "Working on it..."
    post = (await fake_slack.next_post(key)).body
    assert post["blocks"][0]["type"] == "header"


async def test_confirmed_changes_are_announced(
    core: App, make_driver: DriverFactory, fake_slack: FakeSlack
) -> None:
    seed(core)
    slack = await make_driver(announce_channel="C-ops")
    _, key = await slack.command("reset")
    confirm = buttons((await fake_slack.next_post(key)).body)["learning_confirm"]
    _, click = await slack.click(confirm)
    await fake_slack.next_post(click)
    await fake_slack.wait_until(lambda: bool(fake_slack.api("chat.postMessage")))
    [post] = fake_slack.api("chat.postMessage")
    assert post.params["channel"] == "C-ops"
    assert post.token == "xoxb-test"
    assert "Reset every arm" in texts(post.params)
    assert "By Ada, from Slack." in texts(post.params)
    trigger = "42.42.typed"
    for _ in range(2):  # a typed confirmation, delivered twice, is announced once
        _, key = await slack.command("phase passive confirm", trigger=trigger)
        await fake_slack.next_post(key)
    await fake_slack.wait_until(lambda: len(fake_slack.api("chat.postMessage")) == 2)
    assert "Phase is now PASSIVE" in texts(fake_slack.api("chat.postMessage")[1].params)


async def test_a_long_table_is_cut_with_a_hint(
    core: App, slack: SlackDriver, fake_slack: FakeSlack
) -> None:
    many = [Arm(f"tool:bulk:B{i:03d}", 10) for i in range(150)]
    core.service().observe(
        RunReport(
            "big",
            tuple(ReportedArm(a) for a in many),
            tool_calls=tuple(ToolCall(a.id.rsplit(":", 1)[1]) for a in many),
            channel="C9",
        )
    )
    _, key = await slack.command("reward", user="U-member", channel="C9")
    post = (await fake_slack.next_post(key)).body
    table = next(b for b in post["blocks"] if b["type"] == "table")
    assert len(table["rows"]) == 100  # the header and 99 arms
    shown = texts(post)
    assert "...and 51 more rows." in shown
    assert f"<{DASHBOARD}|dashboard>" in shown
    assert "/learning status top N" in shown
    assert set(pulls(core).values()) == {2}  # observed, then rewarded: all 150 counted


async def test_secret_is_not_a_signature(slack: SlackDriver) -> None:
    body = "command=%2Flearning&text=status"
    response = await slack.http.post(
        "/slack/events",
        content=body,
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Request-Timestamp": str(int(time.time())),
            "X-Slack-Signature": SECRET,
        },
    )
    assert response.status_code == 401


async def test_arm_text_never_becomes_markup(
    core: App, slack: SlackDriver, fake_slack: FakeSlack
) -> None:
    name = "*bold*_<!channel>_`x`&"
    nasty = Arm(f"tool:x:{name}", 10)
    core.service().observe(
        RunReport("n1", (ReportedArm(nasty),), tool_calls=(ToolCall(name),), channel="C1")
    )
    response, _ = await slack.command("status top 6")
    message = response.json()
    assert f"tool:x:{name}" in texts(message)  # shown exactly as written...
    compact = (await slack.command("status"))[0].json()
    assert f"{name} · 0.80" in texts(compact)  # the label, in plain text
    assert "<!channel>" not in "".join(
        o["text"] for b in compact["blocks"] for o in _text_objects(b) if o["type"] == "mrkdwn"
    )
    for block in message["blocks"]:
        for obj in _text_objects(block):
            if obj["type"] == "mrkdwn":  # ...but never inside mrkdwn
                assert "<!channel>" not in obj["text"]
                assert "*bold*" not in obj["text"]
    assert "<!channel>" not in message["text"]
    # Slack sends `<`, `>` and `&` in a command's text as entities.
    escaped = f"status arm tool:x:{name}".replace("&", "&amp;").replace("<", "&lt;")
    response, _ = await slack.command(escaped.replace(">", "&gt;"))
    detail = response.json()
    assert detail["blocks"][0] == {
        "type": "header",
        "text": {"type": "plain_text", "text": f"tool:x:{name}", "emoji": False},
    }


def _text_objects(value: object) -> list[dict[str, str]]:
    if isinstance(value, dict):
        if value.get("type") in ("plain_text", "mrkdwn", "raw_text"):
            return [value]
        return [o for v in value.values() for o in _text_objects(v)]
    if isinstance(value, list):
        return [o for v in value for o in _text_objects(v)]
    return []


async def test_the_dashboard_button_is_acknowledged(core: App, slack: SlackDriver) -> None:
    """Slack opens a link button's URL itself but still posts the click: it is acknowledged
    (no warning sign beside the button) and changes nothing."""
    seed(core)
    before = pulls(core)
    response, _ = await slack.command("status")
    link = buttons(response.json())["learning_dashboard"]
    assert link["url"].startswith(DASHBOARD.split("?")[0])
    clicked, _ = await slack.click({**link, "value": ""})
    assert clicked.status_code == 200
    assert pulls(core) == before
