"""Streamed chat completions (pegasus.llm.stream) against the local OpenAI-compatible server:
the chunks add up to the same Completion, text is handed on, a refusing server is asked again
without streaming, a closed sink ends the stream, and text is batched."""

from __future__ import annotations

import threading

import pytest

from pegasus.config import LLMSettings
from pegasus.llm.client import ChatClient, LLMError
from pegasus.llm.stream import FLUSH_CHARS, FLUSH_S, DeltaSink, StreamAccumulator, StreamCanceled, TextBuffer, listening
from tests.support.fake_openai import FakeOpenAI, completion, stream_chunks, tool_call
from tests.support.waiting import wait_for


def settings(server: FakeOpenAI, **extra: object) -> LLMSettings:
    return LLMSettings(provider="openai", base_url=server.url, model="m", api_key_env="", max_retries=0, **extra)


def test_the_accumulator_assembles_content_tool_calls_finish_reason_and_usage() -> None:
    """OpenAI's chunks of a reply with content and two tool calls give what the whole reply says."""
    body = completion("thinking...", [tool_call("calc", {"expression": "6 * 7"}, "call_a"),
                                      tool_call("echo", {"text": "hi"}, "call_b")],
                      prompt_tokens=5, completion_tokens=9)["body"]
    body.update(id="c1", model="served-model")
    from openai.types.chat import ChatCompletionChunk  # here: the SDK is no cost of collecting the suite

    accumulator = StreamAccumulator("m")
    texts = [accumulator.add(ChatCompletionChunk.model_validate(chunk))
             for chunk in stream_chunks(body, chunk_chars=3)]
    reply = accumulator.completion()
    assert "".join(texts) == reply.content == "thinking..."
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_a", "calc", '{"expression": "6 * 7"}'), ("call_b", "echo", '{"text": "hi"}')]
    assert reply.usage == {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}
    assert (reply.finish_reason, reply.model) == ("tool_calls", "served-model")


def test_an_empty_stream_is_an_error() -> None:
    with pytest.raises(LLMError, match="before its first chunk"):
        StreamAccumulator("m").completion()


def test_a_listened_call_streams_and_hands_its_text_on() -> None:
    got: list[str] = []
    with FakeOpenAI([completion({"answer": "hello"}), completion("plain")]) as server:
        client = ChatClient(settings(server))
        with listening(DeltaSink(got.append)):
            reply = client.complete([{"role": "user", "content": "hi"}])
        assert reply.content == '{"answer": "hello"}' and "".join(got) == reply.content
        assert reply.usage["total_tokens"] == 18
        assert client.complete([{"role": "user", "content": "hi"}]).content == "plain"  # nobody listens
        assert [r.get("stream") for r in server.requests] == [True, None]
        wait_for(lambda: server.stream_ends, timeout=10, what="the server's record of the stream's end")  # its thread
        assert server.stream_ends == ["done"]  # records it after the last chunk the client may already have read


def test_stream_false_never_streams() -> None:
    with FakeOpenAI([completion("x")]) as server, listening(DeltaSink(lambda text: None)):
        assert ChatClient(settings(server, stream=False)).complete([{"role": "user", "content": "hi"}]).content == "x"
        assert "stream" not in server.requests[0]


def test_a_server_refusing_to_stream_is_asked_without_it_from_then_on() -> None:
    with FakeOpenAI([completion("one"), completion("two")], refuse_stream=True) as server:
        client = ChatClient(settings(server))
        with listening(DeltaSink(lambda text: None)):
            assert [client.complete([{"role": "user", "content": "q"}]).content for _ in range(2)] == ["one", "two"]
        assert [bool(r.get("stream")) for r in server.requests] == [True, False, False]


def test_a_stream_cut_before_its_finish_reason_is_asked_again_without_streaming() -> None:
    """llama-cpp-python's server ends a stream with [DONE] mid-reply when another request waits
    (interrupt_requests, its default): no finish_reason came, so the reply is incomplete; the same
    request is sent again without streaming.  The client streams again after (its pool now sends that
    server one request at a time: the next test)."""
    with FakeOpenAI([completion("the whole answer"), completion("the whole answer"), completion("next")],
                    cut_streams=1) as server:
        client = ChatClient(settings(server))
        with listening(DeltaSink(lambda text: None)):
            assert client.complete([{"role": "user", "content": "q"}]).content == "the whole answer"
            assert client.complete([{"role": "user", "content": "q"}]).content == "next"
        assert [bool(r.get("stream")) for r in server.requests] == [True, False, True] and client.serial


def test_closing_the_sink_from_another_thread_ends_a_held_stream() -> None:
    """The server holds its stream after the first piece; the sink is closed meanwhile: the call
    raises StreamCanceled (no half reply), and the server sees the client hang up."""
    hold = threading.Event()
    first = threading.Event()
    sink = DeltaSink(lambda text: first.set())
    with FakeOpenAI([completion({"answer": "never finished"}, hold=hold)]) as server:
        client = ChatClient(settings(server))
        threading.Thread(target=lambda: first.wait(10) and sink.close(), daemon=True).start()
        try:
            with listening(sink), pytest.raises(StreamCanceled):
                client.complete([{"role": "user", "content": "q"}])
            deadline = threading.Event()
            for _ in range(250):
                if server.stream_ends:
                    break
                deadline.wait(0.02)
            assert server.stream_ends == ["client closed"]
        finally:
            hold.set()


def test_text_is_batched_by_time_and_size_the_first_piece_at_once() -> None:
    now = [0.0]
    buffer = TextBuffer(clock=lambda: now[0])
    assert buffer.add("a") is True  # the first piece: at once
    assert buffer.take() == (1, 1, "a")
    assert buffer.add("b") is False and buffer.add("c") is False
    assert buffer.due_in() == pytest.approx(FLUSH_S)
    now[0] += FLUSH_S
    assert buffer.add("d") is True and buffer.take() == (2, 1, "bcd")
    assert buffer.add("x" * FLUSH_CHARS) is True  # enough gathered, however soon
    assert buffer.take() == (3, 1, "x" * FLUSH_CHARS) and buffer.take() is None and buffer.due_in() is None


def test_the_text_of_two_model_calls_never_shares_a_message() -> None:
    """A reply fed back and asked again: the second call's first piece is due at once, and each
    call's text is taken apart, in order."""
    buffer = TextBuffer(clock=lambda: 0.0)
    buffer.add("first")
    buffer.take()
    assert buffer.add(" reply") is False
    assert buffer.add("second", call=2) is True
    assert [buffer.take(), buffer.take(), buffer.take()] == [(2, 1, " reply"), (3, 2, "second"), None]


def test_a_stream_one_client_saw_cut_tells_every_worker_the_server_decodes_one_request_at_a_time(monkeypatch) -> None:
    """What one worker learns of an endpoint, its pool knows (pegasus.llm.ladder): measured on SmolLM2
    through llama-cpp-python, each of the three llm workers had its first stream cut and asked again.  The
    cut says the server is serial: the pool then sends it one request at a time (pegasus.pool.endpoints),
    so its streams are not cut again and stay on (a stream given up on stops the server's decoding)."""
    from pegasus.llm import ladder  # noqa: PLC0415

    monkeypatch.setattr(ladder, "KNOWN", {})
    monkeypatch.setattr(ladder, "_LEARNED", {})
    with FakeOpenAI([completion("cut"), completion("cut"), completion("other worker")], cut_streams=1) as server:
        first, second = ChatClient(settings(server)), ChatClient(settings(server))
        with listening(DeltaSink(lambda text: None)):
            assert ladder.complete(first, lambda shape: [{"role": "user", "content": "q"}])[0].content == "cut"
            assert ladder.complete(second, lambda shape: [{"role": "user", "content": "q"}])[0].content \
                == "other worker"
        assert second.serial  # one request at a time: a timed-out call is not sent again (test_llm_deadline)
        assert [bool(r.get("stream")) for r in server.requests] == [True, False, True]
    assert [(fields["stream"], fields["serial"]) for _, fields in ladder.learned()] == [(True, True)]  # to the pool


def test_a_reply_that_loops_is_stopped_after_its_third_copy(monkeypatch) -> None:
    """SmolLM2-135M copied one block until max_tokens (1,023 tokens, 50 s of the server's time): the stream
    is closed once the reply ends in one passage written three times (llm.loop_repeats), the reply read as
    run to the token cap, and the stage's usage says so; with loop_repeats = 0 it is read to its end."""
    from pegasus.llm import usage  # noqa: PLC0415

    block = "".join(f"line {n}: the same block of text, written once more by a model that loops.\n" for n in range(3))
    looping = "Some prose first.\n" + block * 40
    with FakeOpenAI([completion(looping, chunk_delay_s=0.001), completion(looping)]) as server:
        client = ChatClient(settings(server))
        with listening(DeltaSink(lambda text: None)), usage.metering() as meter:
            stopped = client.complete([{"role": "user", "content": "echo pegasus"}])
        assert stopped.finish_reason == "length" and stopped.content is not None
        assert stopped.content.startswith("Some prose first.\n" + block * 3)
        assert len(stopped.content) < len("Some prose first.\n" + block * 4)
        assert meter.degraded and "3 times in a row" in meter.degraded[0]
        for _ in range(250):
            if server.stream_ends:
                break
            threading.Event().wait(0.02)
        assert server.stream_ends == ["client closed"]
        whole = ChatClient(settings(server, loop_repeats=0))
        with listening(DeltaSink(lambda text: None)):
            assert whole.complete([{"role": "user", "content": "echo pegasus"}]).content == looping
