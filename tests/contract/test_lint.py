"""`boundloop lint`: each rule on the code it is for, and never on the near misses of a clean loop."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from boundloop.contract._lint import RULES, Finding, lint_paths, lint_source

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "lint"


def found(source: str) -> list[tuple[str, int]]:
    """The (rule, line) of each finding in `source`, dedented."""
    return [(f.rule, f.line) for f in lint_source(textwrap.dedent(source))]


POSITIVE = [
    pytest.param(
        """
        def ask(client, messages):
            for step in range(10):
                response = client.messages.create(model="m", max_tokens=9, messages=messages)
                text = response.content[0].text
                if "done" in text:
                    break
        """,
        "BL001",
        6,
        id="BL001-in-text-break",
    ),
    pytest.param(
        """
        def ask(client, messages):
            for step in range(10):
                response = client.messages.create(model="m", max_tokens=9, messages=messages)
                if "FINAL ANSWER" in response.content[0].text:
                    return response
        """,
        "BL001",
        5,
        id="BL001-in-content-text-return",
    ),
    pytest.param(
        """
        def ask(client, messages):
            reply = ""
            while "finished" not in reply:
                reply = client.messages.create(model="m", max_tokens=9, messages=messages).content[0].text
        """,
        "BL001",
        4,
        id="BL001-while-condition",
    ),
    pytest.param(
        """
        async def ask(client, messages):
            for turn in range(10):
                response = await client.messages.create(model="m", max_tokens=9, messages=messages)
                answer = response.content[-1].text
                if answer.strip().endswith(("DONE", "FINISHED")):
                    return answer
        """,
        "BL001",
        6,
        id="BL001-endswith",
    ),
    pytest.param(
        """
        import re
        def ask(messages):
            for turn in range(10):
                reply_text = call_model(messages)
                if re.search(r"task complete", reply_text, re.I):
                    break
        """,
        "BL001",
        6,
        id="BL001-re-search",
    ),
    pytest.param(
        """
        def ask(client, messages):
            for step in range(10):
                message = client.messages.create(model="m", max_tokens=9, messages=messages)
                for block in message.content:
                    if block.type == "text" and block.text.lower() == "done":
                        return block.text
        """,
        "BL001",
        6,
        id="BL001-eq-in-nested-loop",
    ),
    pytest.param(
        """
        def ask(client, messages):
            while True:
                response = client.messages.create(model="m", max_tokens=9, messages=messages)
                if response.stop_reason == "end_turn":
                    return response
        """,
        "BL002",
        3,
        id="BL002-while-true",
    ),
    pytest.param(
        """
        async def ask(messages):
            while 1:
                reply = await call_model(messages)
                if not reply.tool_calls:
                    break
        """,
        "BL002",
        3,
        id="BL002-while-1-await",
    ),
    pytest.param(
        """
        def run(name, args):
            try:
                result = TOOLS[name](**args)
            except Exception:
                result = ""
            return result
        """,
        "BL003",
        5,
        id="BL003-assign-empty",
    ),
    pytest.param(
        """
        def run_tool(fn, args):
            try:
                return fn(**args)
            except:
                pass
        """,
        "BL003",
        5,
        id="BL003-bare-except-pass",
    ),
    pytest.param(
        """
        def answer(blocks, results):
            for block in blocks:
                try:
                    results.append(handlers[block.name](**block.input))
                except (ValueError, BaseException):
                    continue
        """,
        "BL003",
        6,
        id="BL003-tuple-continue",
    ),
    pytest.param(
        """
        def dispatch(call):
            try:
                return call.run()
            except Exception as exc:
                return None
        """,
        "BL003",
        5,
        id="BL003-return-none",
    ),
    pytest.param(
        """
        def step(response):
            if response.stop_reason == "tool_use":
                block = response.content[0]
                return block.name
        """,
        "BL004",
        4,
        id="BL004-attribute",
    ),
    pytest.param(
        """
        def step(response):
            first = response["content"][0]
            if first["type"] == "tool_use":
                return first["name"]
        """,
        "BL004",
        3,
        id="BL004-dict-response",
    ),
    pytest.param(
        """
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
            }
        )
        """,
        "BL005",
        4,
        id="BL005-inline",
    ),
    pytest.param(
        """
        def answer(messages, calls):
            results = []
            for call in calls:
                results.append({"type": "tool_result", "tool_use_id": call.id, "content": "ok"})
            messages.append({"role": "assistant", "content": results})
        """,
        "BL005",
        6,
        id="BL005-through-a-list",
    ),
    pytest.param(
        """
        result = {"type": "tool_result", "content": "ok"}
        """,
        "BL006",
        2,
        id="BL006-dict-literal",
    ),
    pytest.param(
        """
        result = dict(type="tool_result", content="ok", is_error=True)
        """,
        "BL006",
        2,
        id="BL006-dict-call",
    ),
    pytest.param(
        """
        def answer(messages, response):
            for block in response.content:
                if block.type == "tool_use":
                    messages.append(
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block.id}]}
                    )
        """,
        "BL007",
        6,
        id="BL007-append-per-block",
    ),
    pytest.param(
        """
        def ask(client, messages):
            for step in range(10):
                response = client.messages.create(model="m", max_tokens=9, messages=messages)
                text = response.content[0].text
                if text.lower().find("done") != -1:
                    break
        """,
        "BL001",
        6,
        id="BL001-find-not-minus-one",
    ),
    pytest.param(
        """
        def ask(messages):
            for turn in range(10):
                reply = call_model(messages)
                if reply.index("FINAL") >= 0:
                    return reply
        """,
        "BL001",
        5,
        id="BL001-index",
    ),
    pytest.param(
        """
        def ask(client, messages):
            for step in range(10):
                answer = client.messages.create(model="m", max_tokens=9, messages=messages).content[0].text
                match answer.strip():
                    case "DONE" | "FINISHED":
                        break
                    case _:
                        messages.append({"role": "user", "content": "go on"})
        """,
        "BL001",
        6,
        id="BL001-match-case",
    ),
    pytest.param(
        """
        def ask(client, messages):
            response = client.messages.create(model="m", max_tokens=9, messages=messages)
            while response.stop_reason == "tool_use":
                messages.append({"role": "user", "content": run_all(response)})
                response = client.messages.create(model="m", max_tokens=9, messages=messages)
            return response
        """,
        "BL002",
        4,
        id="BL002-while-stop-reason-is-tool-use",
    ),
    pytest.param(
        """
        async def ask(client, messages):
            resp = None
            while resp is None or resp.stop_reason != "end_turn":
                resp = await client.messages.create(model="m", max_tokens=9, messages=messages)
                messages.append({"role": "assistant", "content": resp.content})
        """,
        "BL002",
        4,
        id="BL002-while-stop-reason-not-end-turn",
    ),
    pytest.param(
        """
        def ask(messages):
            done = False
            while not done:
                reply = call_model(messages)
                done = "FINAL ANSWER" in reply
        """,
        "BL002",
        4,
        id="BL002-while-not-done-set-from-the-text",
    ),
    pytest.param(
        """
        def ask(client, messages):
            finished = False
            while not finished:
                response = client.messages.create(model="m", max_tokens=9, messages=messages)
                if response.stop_reason == "end_turn":
                    finished = True
        """,
        "BL002",
        4,
        id="BL002-while-not-done-set-under-a-stop-reason-test",
    ),
    pytest.param(
        """
        def step(client, messages):
            response = client.messages.create(model="m", max_tokens=9, messages=messages)
            call = next(b for b in response.content if b.type == "tool_use")
            return run(call.name, call.input)
        """,
        "BL004",
        4,
        id="BL004-next-over-the-tool-use-blocks",
    ),
    pytest.param(
        """
        def step(response):
            call = next((b for b in response["content"] if isinstance(b, ToolUseBlock)), None)
            return call
        """,
        "BL004",
        3,
        id="BL004-next-with-a-default-and-isinstance",
    ),
    pytest.param(
        """
        def step(response):
            call = response.content[-1]
            if call.type == "tool_use":
                return run(call.name, call.input)
        """,
        "BL004",
        3,
        id="BL004-last-block-as-the-tool-call",
    ),
    pytest.param(
        """
        def step(response, messages):
            for message in messages:
                print(message)
            block = response.content[0]
            if response.stop_reason == "tool_use":
                return block.name
        """,
        "BL004",
        5,
        id="BL004-iterating-something-else",
    ),
    pytest.param(
        """
        def answer(messages, call, output):
            res = {"type": "tool_result", "tool_use_id": call.id, "content": output}
            messages.append({"role": "assistant", "content": [res]})
        """,
        "BL005",
        4,
        id="BL005-result-held-in-a-variable",
    ),
    pytest.param(
        """
        def answer(messages, call, output):
            res = {"type": "tool_result", "tool_use_id": call.id, "content": output}
            messages.append(dict(role="assistant", content=[res]))
        """,
        "BL005",
        4,
        id="BL005-dict-call-with-a-variable",
    ),
    pytest.param(
        """
        def answer(messages, response):
            for block in response.content:
                if block.type == "tool_use":
                    result = {"type": "tool_result", "tool_use_id": block.id, "content": "ok"}
                    msg = {"role": "user", "content": [result]}
                    messages.append(msg)
        """,
        "BL007",
        7,
        id="BL007-message-built-in-a-variable",
    ),
    pytest.param(
        """
        def answer(messages, calls):
            for call in calls:
                messages.append(
                    dict(role="user", content=[{"type": "tool_result", "tool_use_id": call.id}])
                )
        """,
        "BL007",
        5,
        id="BL007-dict-call",
    ),
]


@pytest.mark.parametrize(("source", "rule", "line"), POSITIVE)
def test_a_rule_fires_on_its_pattern(source: str, rule: str, line: int) -> None:
    """Each snippet gives exactly one finding: its rule, on the line of the mistake."""
    assert found(source) == [(rule, line)]


NEGATIVE = [
    pytest.param(
        """
        def ask(client, messages):
            for step in range(10):
                response = client.messages.create(model="m", max_tokens=9, messages=messages)
                text = "".join(b.text for b in response.content if b.type == "text")
                if "done" in text:
                    print("the model says it is done")
                if response.stop_reason == "end_turn":
                    return text
        """,
        id="BL001-text-test-that-does-not-leave-the-loop",
    ),
    pytest.param(
        """
        def summary(text):
            if "done" in text:
                return "finished"
            return "pending"
        """,
        id="BL001-text-test-outside-a-loop",
    ),
    pytest.param(
        """
        def scan(lines):
            for line in lines:
                if "END" in line.text:
                    break
        """,
        id="BL001-loop-that-calls-no-model",
    ),
    pytest.param(
        """
        def chat(client, messages):
            for turn in range(100):
                text = input("> ")
                if text.strip() == "quit":
                    break
                messages.append({"role": "user", "content": text})
                response = client.messages.create(model="m", max_tokens=9, messages=messages)
                for block in response.content:
                    if block.type == "text":
                        print(block.text)
                    if block.type == "tool_use":
                        return block
                if response.stop_reason != "end_turn" or text == "":
                    break
        """,
        id="BL001-user-input-type-and-stop-reason",
    ),
    pytest.param(
        """
        def ask(client, messages, max_steps):
            for step in range(max_steps):
                response = client.messages.create(model="m", max_tokens=9, messages=messages)
                if response.stop_reason != "tool_use":
                    return response
                for block in response.content:
                    output = run(block)
                    if "fatal" in output or block.name == "finish":
                        return output
        """,
        id="BL001-tool-output-and-tool-name",
    ),
    pytest.param(
        """
        def ask(client, messages):
            step = 0
            while True:
                step += 1
                response = client.messages.create(model="m", max_tokens=9, messages=messages)
                if response.stop_reason == "end_turn":
                    return response
                if step >= max_steps:
                    break
        """,
        id="BL002-while-true-with-a-step-bound",
    ),
    pytest.param(
        """
        async def ask(client, messages, deadline):
            while True:
                response = await client.messages.create(model="m", max_tokens=9, messages=messages)
                if anyio.current_time() > deadline:
                    raise TimeoutError
        """,
        id="BL002-while-true-with-a-deadline",
    ),
    pytest.param(
        """
        async def ask(client, messages, budget):
            while True:
                response = await client.messages.create(model="m", max_tokens=9, messages=messages)
                budget.charge(response.usage)
        """,
        id="BL002-while-true-charging-a-budget",
    ),
    pytest.param(
        """
        async def ask(client, messages):
            with anyio.fail_after(60):
                while True:
                    response = await client.messages.create(model="m", max_tokens=9, messages=messages)
        """,
        id="BL002-while-true-under-a-deadline-scope",
    ),
    pytest.param(
        """
        async def worker(queue):
            while True:
                item = await queue.get()
                if item is None:
                    break
                await handle(item)
        """,
        id="BL002-worker-loop-that-calls-no-model",
    ),
    pytest.param(
        """
        async def receive(websocket):
            while True:
                event = Event.model_validate(await websocket.receive_json())
                if event.kind == "close":
                    return event
        """,
        id="BL002-pydantic-model-validate-is-no-model-call",
    ),
    pytest.param(
        """
        def run(block, results):
            try:
                output = TOOLS[block.name](**block.input)
            except Exception as exc:
                results.append(error_result(exc))
            else:
                results.append(output)
        """,
        id="BL003-error-turned-into-a-result",
    ),
    pytest.param(
        """
        def run_tool(fn):
            try:
                return fn()
            except Exception:
                logger.exception("tool failed")
                raise
        """,
        id="BL003-re-raised",
    ),
    pytest.param(
        """
        def run_tool(fn):
            try:
                return fn()
            except KeyError:
                return ""
        """,
        id="BL003-narrow-exception",
    ),
    pytest.param(
        """
        def load_settings(path):
            try:
                return json.loads(read(path))
            except Exception:
                return None
        """,
        id="BL003-not-about-tools",
    ),
    pytest.param(
        """
        def save(cursor, rows):
            for row in rows:
                try:
                    cursor.execute("INSERT INTO t VALUES (?)", row)
                except Exception:
                    continue
        """,
        id="BL003-a-database-call-is-no-tool-call",
    ),
    pytest.param(
        """
        def first_text(message):
            return message.content[0].text
        """,
        id="BL004-in-a-function-unrelated-to-tool-use",
    ),
    pytest.param(
        """
        def test_shape(response):
            assert response.stop_reason == "tool_use"
            assert response.content[0].type == "tool_use"
        """,
        id="BL004-in-an-assertion",
    ),
    pytest.param(
        """
        def calls(response):
            if response.stop_reason == "tool_use":
                return [b for b in response.content if b.type == "tool_use"], response.content[-1]
        """,
        id="BL004-every-block",
    ),
    pytest.param(
        """
        messages = [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
        ]
        """,
        id="BL005-results-in-a-user-message",
    ),
    pytest.param(
        """
        def results(base):
            return [{**base, "type": "tool_result", "content": "ok"}, dict(**base, type="tool_result")]
        """,
        id="BL006-unpacking-may-carry-the-id",
    ),
    pytest.param(
        """
        def answer(messages, response):
            results = []
            for block in response.content:
                if block.type == "tool_use":
                    results.append({"type": "tool_result", "tool_use_id": block.id, "content": "ok"})
            messages.append({"role": "user", "content": results})
        """,
        id="BL007-one-message-after-the-loop",
    ),
    pytest.param(
        """
        def ask(client, messages, max_steps):
            for step in range(max_steps):
                response = client.messages.create(model="m", max_tokens=9, messages=messages)
                if response.stop_reason != "tool_use":
                    return response
                (call,) = [b for b in response.content if b.type == "tool_use"]
                result = {"type": "tool_result", "tool_use_id": call.id, "content": "ok"}
                messages.append({"role": "user", "content": [result]})
        """,
        id="BL007-a-loop-over-turns",
    ),
    pytest.param(
        """
        def ask(client, messages):
            for step in range(10):
                response = client.messages.create(model="m", max_tokens=9, messages=messages)
                text = response.content[0].text
                if text.find("done") != -1:
                    print("the model says it is done")
                if path.find("done") != -1 or messages.index(response) > 3:
                    break
        """,
        id="BL001-find-that-does-not-leave-or-not-on-text",
    ),
    pytest.param(
        """
        def ask(client, messages):
            for step in range(10):
                response = client.messages.create(model="m", max_tokens=9, messages=messages)
                command = input("> ")
                match response.stop_reason:
                    case "end_turn":
                        break
                match command:
                    case "quit":
                        return response
        """,
        id="BL001-match-on-stop-reason-and-user-input",
    ),
    pytest.param(
        """
        def ask(client, messages, max_steps):
            for step in range(max_steps):
                response = client.messages.create(model="m", max_tokens=9, messages=messages)
                if response.stop_reason != "tool_use":
                    break
                messages.append({"role": "user", "content": run_all(response)})
        """,
        id="BL002-stop-reason-test-in-a-bounded-for",
    ),
    pytest.param(
        """
        def ask(client, messages, max_steps):
            step, response = 0, client.messages.create(model="m", max_tokens=9, messages=messages)
            while response.stop_reason == "tool_use" and step < max_steps:
                step += 1
                response = client.messages.create(model="m", max_tokens=9, messages=messages)
        """,
        id="BL002-stop-reason-loop-bounded-in-its-condition",
    ),
    pytest.param(
        """
        async def ask(client, messages, budget):
            response = await client.messages.create(model="m", max_tokens=9, messages=messages)
            while response.stop_reason == "tool_use":
                if len(messages) > 40:
                    raise RuntimeError("too many turns")
                response = await client.messages.create(model="m", max_tokens=9, messages=messages)
            with anyio.move_on_after(30):
                while response.stop_reason != "end_turn":
                    response = await client.messages.create(model="m", max_tokens=9, messages=messages)
            done = False
            while not done:
                response = await client.messages.create(model="m", max_tokens=9, messages=messages)
                budget.charge(response.usage)
                done = response.stop_reason == "end_turn"
        """,
        id="BL002-stop-reason-loops-with-a-limit-a-deadline-or-a-budget",
    ),
    pytest.param(
        """
        def ask(client, messages, max_steps):
            step, done = 0, False
            while not done:
                step += 1
                response = client.messages.create(model="m", max_tokens=9, messages=messages)
                done = response.stop_reason == "end_turn" or step >= max_steps
        """,
        id="BL002-flag-set-from-a-limit-too",
    ),
    pytest.param(
        """
        def replay(recorded):
            response = recorded.pop()
            while response.stop_reason == "tool_use":
                response = recorded.pop()
        """,
        id="BL002-stop-reason-loop-that-calls-no-model",
    ),
    pytest.param(
        """
        def step(response):
            if response.stop_reason == "tool_use":
                text = next(b for b in response.content if b.type == "text")
                return text, [b for b in response.content if b.type == "tool_use"]
        """,
        id="BL004-next-over-text-blocks",
    ),
    pytest.param(
        """
        def on_max_tokens(message):
            last = message.content[-1]
            if isinstance(last, ToolUseBlock):
                return "truncated"
            if message.stop_reason == "max_tokens" and message.content[-1].type == "tool_use":
                return "truncated"
        """,
        id="BL004-last-block-checked-for-a-truncated-call",
    ),
    pytest.param(
        """
        def step(r):
            first = r.content[0]
            if first.type == "thinking":
                log(first.thinking)
            for b in r.content:
                if b.type == "tool_use":
                    run(b)
        """,
        id="BL004-first-block-read-where-every-block-is-handled",
    ),
    pytest.param(
        """
        def answer(messages, call, output):
            res = {"type": "tool_result", "tool_use_id": call.id, "content": output}
            use = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
            messages.append({"role": "assistant", "content": [use]})
            messages.append({"role": "user", "content": [res]})
        """,
        id="BL005-result-variable-in-a-user-message",
    ),
    pytest.param(
        """
        def answer(messages, response):
            results = []
            for block in response.content:
                if block.type == "tool_use":
                    note = {"role": "user", "content": "running " + block.name}
                    messages.append(note)
                    results.append({"type": "tool_result", "tool_use_id": block.id, "content": "ok"})
            msg = dict(role="user", content=results)
            messages.append(msg)
        """,
        id="BL007-one-message-in-a-variable-after-the-loop",
    ),
]


@pytest.mark.parametrize("source", NEGATIVE)
def test_a_near_miss_gives_no_finding(source: str) -> None:
    """Code that looks like a rule's pattern but is sound gives no finding."""
    assert found(source) == []


def test_the_naive_example_breaks_every_rule() -> None:
    """examples/lint/naive_loop.py triggers each rule BL001 to BL007, and nothing else."""
    findings = lint_paths([EXAMPLES / "naive_loop.py"])
    assert sorted({f.rule for f in findings}) == [f"BL00{i}" for i in range(1, 8)]
    assert len(findings) == 7


def test_the_clean_example_has_no_finding() -> None:
    """examples/lint/clean_loop.py, the same agent written well, gives no finding."""
    assert lint_paths([EXAMPLES / "clean_loop.py"]) == []


def test_findings_carry_their_rule_name_and_fix() -> None:
    """Every finding names a rule of RULES with its name, and prints as `path:line:col: id name: ...`."""
    findings = lint_paths([EXAMPLES / "naive_loop.py"])
    for finding in findings:
        assert finding.name == RULES[finding.rule][0]
        assert str(finding).startswith(f"{finding.path}:{finding.line}:{finding.column}: {finding.rule} ")
        assert str(finding).endswith(f"(fix: {finding.fix})")
    assert sorted(RULES) == [f"BL00{i}" for i in range(8)]
    assert all(name and description for name, description in RULES.values())


def test_a_finding_prints_on_one_line() -> None:
    """A finding prints as `path:line:col: BL001 control-by-text: message (fix: ...)`."""
    finding = Finding(
        path="a.py", line=3, column=12, rule="BL001", name="control-by-text", message="m", fix="f"
    )
    assert str(finding) == "a.py:3:12: BL001 control-by-text: m (fix: f)"


def test_columns_count_characters_from_one() -> None:
    """The column is 1-based and counts characters, not the UTF-8 bytes `ast` reports."""
    (finding,) = lint_source('label = "ééé"; result = {"type": "tool_result"}\n')
    assert finding.column == len('label = "ééé"; result = ') + 1


@pytest.mark.parametrize(
    ("comment", "rules"),
    [
        pytest.param("# boundloop: ignore[BL001]", [], id="by-id"),
        pytest.param("# boundloop: ignore", [], id="bare"),
        pytest.param("# noqa: E501  # boundloop: ignore[bl002, BL001]", [], id="list-after-another-comment"),
        pytest.param("# boundloop: ignore[BL002]", ["BL001"], id="another-rule"),
    ],
)
def test_an_ignore_comment_silences_its_line(comment: str, rules: list[str]) -> None:
    """`# boundloop: ignore[...]` silences the rules it lists (all, when bare) on its own line only."""
    source = f"""
        def ask(client, messages):
            for step in range(10):
                text = client.messages.create(model="m", max_tokens=9, messages=messages).content[0].text
                if "done" in text:  {comment}
                    break
                if "stop" in text:
                    break
        """
    assert found(source) == [*((rule, 5) for rule in rules), ("BL001", 7)]


def test_a_syntax_error_is_one_finding() -> None:
    """Source that does not parse gives one BL000 finding where the parser stopped, not an exception."""
    (finding,) = lint_source("def broken(:\n    pass\n", "broken.py")
    assert (finding.path, finding.rule, finding.name, finding.line) == (
        "broken.py",
        "BL000",
        "syntax-error",
        1,
    )
    assert finding.message.startswith("cannot parse: ")


def test_an_undecodable_file_is_one_finding(tmp_path: Path) -> None:
    """A file that is not valid UTF-8 (and declares no other encoding) gives a single BL000 finding."""
    (tmp_path / "latin.py").write_bytes(b'name = "\xe9t\xe9"\n')
    assert [(f.rule, f.line) for f in lint_paths([tmp_path])] == [("BL000", 1)]


def test_lint_paths_walks_folders_and_skips_virtualenvs_caches_and_hidden_folders(tmp_path: Path) -> None:
    """A folder's *.py files are linted recursively, skipping .venv, __pycache__ and hidden folders."""
    bad = 'result = {"type": "tool_result", "content": "ok"}\n'
    for name in ("b.py", "a/z.py", "a/y.py", ".venv/lib/x.py", "__pycache__/x.py", ".git/x.py", "notes.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(bad, encoding="utf-8")
    paths = [Path(f.path).relative_to(tmp_path).as_posix() for f in lint_paths([tmp_path])]
    assert paths == ["a/y.py", "a/z.py", "b.py"]
    assert [f.path for f in lint_paths(str(tmp_path / "notes.txt"))] == [str(tmp_path / "notes.txt")]


def test_lint_paths_reads_a_file_once_and_sorts_across_files(tmp_path: Path) -> None:
    """A file given twice (by name and under its folder) is linted once; findings sort by path, line."""
    (tmp_path / "b.py").write_text('x = 1\nresult = {"type": "tool_result"}\n', encoding="utf-8")
    (tmp_path / "a.py").write_text('\n\n\nresult = {"type": "tool_result"}\n', encoding="utf-8")
    findings = lint_paths([tmp_path / "b.py", tmp_path])
    assert [(Path(f.path).name, f.line) for f in findings] == [("a.py", 4), ("b.py", 2)]


def test_a_missing_path_raises_file_not_found(tmp_path: Path) -> None:
    """A path that does not exist raises FileNotFoundError naming it, before anything is linted."""
    missing = tmp_path / "nowhere.py"
    with pytest.raises(FileNotFoundError, match=r"nowhere\.py") as caught:
        lint_paths([tmp_path, missing])
    assert caught.value.filename == str(missing)


def test_a_warning_while_parsing_is_not_a_syntax_error() -> None:
    """An invalid escape only warns when parsed: no BL000, even when warnings are errors."""
    assert found('pattern = "\\d+"\nresult = {"type": "tool_result"}\n') == [("BL006", 2)]


def test_code_too_deep_to_parse_is_one_finding() -> None:
    """Code nested deeper than the parser can go gives one BL000 finding, not a RecursionError."""
    (finding,) = lint_source("x = " + " + ".join(["a"] * 50_000) + "\n")
    assert (finding.rule, finding.message) == ("BL000", "cannot parse: the code is nested too deeply")
