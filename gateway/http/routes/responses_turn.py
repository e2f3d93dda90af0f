"""What a Responses turn continues and the agent request it makes: shared by a create
(routes/responses.py) and a queued background response a replica starts later
(routes/responses_queue.py), which has no HTTP request of its own by then."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from gateway.agent.loop import AgentRequest
from gateway.config.routes import RESEARCH_SUFFIX
from gateway.errors import InvalidRequestError, NotFoundError, echo
from gateway.files.parts import ReadFile, cut_files, has_files, read_file_parts
from gateway.http import access, appkeys
from gateway.http.client_notes import images_not_shown
from gateway.http.model_routes import context_window, route_turn
from gateway.http.research import research_base, research_options
from gateway.http.routes.files import sources_for
from gateway.http.routes.responses_reply import Continuation as _Continuation
from gateway.store.api import ResponseStore, UnknownConversationError
from gateway.upstream.routes import RouteTurn
from gateway.wire import context_budget, mcp_approvals, mcp_tool, responses_request_tools
from gateway.wire.conversations import is_conversation_id, transcript
from gateway.wire.images import without_images
from gateway.wire.responses_request import ResponsesRequest


@dataclass
class PreparedTurn:
    agent_request: AgentRequest
    continuation: _Continuation
    turn: RouteTurn | None
    #: the response's `model`, and whether its reasoning is shown
    model: str
    reasoning: bool


async def prepare_turn(app: web.Application, store: ResponseStore, parsed: ResponsesRequest) -> PreparedTurn:
    """The route `parsed.model` names, what the turn continues (cut to the context window), and
    the agent request; the 4xx of a bad model, a previous response or conversation not found."""
    settings = app[appkeys.SETTINGS]
    # the model the client names now, whatever a previous response used (as OpenAI does)
    # a research id ends with its suffix: tested here, so that other ids make no coroutine for it
    asked = parsed.model
    base = (await research_base(app, asked)
            if settings.research and asked and asked.endswith(RESEARCH_SUFFIX) else None)
    turn = await route_turn(app, base or parsed.model) if settings.llm_models is not None else None
    access.check_model(settings.model_name if turn is None else turn.route.id, parsed.model,
                       research=base is not None)
    if turn is not None and turn.route.vision:
        parsed.show_tool_images()
    elif turn is not None:  # a text-only route: its images become notes, the client is told (client_notes.py)
        parsed.messages, replaced = without_images(parsed.messages)
        if replaced:
            images_not_shown(replaced, turn.route.id)
    read: list[ReadFile] = []
    if has_files(parsed.messages):  # read into text before the estimate (and stored as text)
        parsed.messages, read = await read_file_parts(parsed.messages, param="input", sources=sources_for(app, store))
    continuation, history = await _within_window(app, store, parsed, turn, read)
    if has_files(history):  # a conversation's items hold their files as sent
        history, _ = await read_file_parts(history, param="conversation", sources=sources_for(app, store))
    if turn is not None and not turn.route.vision:  # earlier turns' images, kept as sent
        history, replaced = without_images(history)
        if replaced:
            images_not_shown(replaced, turn.route.id)
    agent_request = AgentRequest(
        messages=[*history, *parsed.messages], client_tools=parsed.chat_tools,
        # a background run streams from upstream even unstreamed: a resumed stream gets every delta
        params=parsed.upstream_params(), stream=parsed.stream or parsed.background, instructions=parsed.instructions,
        web=parsed.web, replayed=parsed.replayed, own_calls_beside_client_calls=True,
        mcp=parsed.mcp, max_tool_calls=parsed.max_tool_calls, approvals_possible=True,
        mcp_choice=responses_request_tools.mcp_choice(parsed.tool_choice, parsed.mcp),
    )
    access.limit_tools(agent_request, "tools")
    if any(item["type"] == mcp_approvals.RESPONSE for item in parsed.input_items):
        labels = [server.label for server in parsed.mcp] + [spec.label for spec in settings.mcp_servers]
        agent_request.approvals = mcp_approvals.resolve(parsed.input_items, parsed.earlier_items, labels)
    if base is not None:
        agent_request.research = await research_options(app, turn, parsed.max_tool_calls, parsed.max_output_tokens)
    if turn is None:
        model, reasoning = parsed.model or settings.model_name, settings.reasoning
    else:
        agent_request.opener, agent_request.web_tools = turn.open, turn.route.web_tools
        agent_request.vision = turn.route.vision
        model, reasoning = turn.model_id, turn.route.reasoning
    return PreparedTurn(agent_request, continuation, turn, model, reasoning == "show")


async def _continuation(store: ResponseStore, parsed: ResponsesRequest, budget: int) -> _Continuation:
    """What the turn continues, read newest first within `budget` bytes (context_budget.py)."""
    if parsed.previous_response_id is not None:
        previous = await store.chain(parsed.previous_response_id, max_bytes=budget)
        if previous is None:
            raise NotFoundError(
                f"Previous response with id '{echo(parsed.previous_response_id)}' not found.",
                param="previous_response_id", code="previous_response_not_found",
            )
        if previous.records and previous.records[0].response.get("status") in ("queued", "in_progress"):
            # a background response still running has no turn to continue from yet
            raise InvalidRequestError(f"Response '{echo(parsed.previous_response_id)}' is still in progress; "
                                      "continue from it once it has ended.", param="previous_response_id")
        answers = any(item["type"] == mcp_approvals.RESPONSE for item in parsed.input_items)
        if parsed.mcp or answers:
            output = [item for record in reversed(previous.records) for item in record.response.get("output") or ()]
            parsed.earlier_items = output  # its approval requests are what the input may answer
            # the chain's mcp_list_tools items stand for the lists: no second tools/list
            parsed.mcp = mcp_tool.with_known(parsed.mcp, mcp_tool.listed_tools([*output, *parsed.input_items]))
        return _Continuation(previous.transcript(), previous.complete, parent_id=parsed.previous_response_id)
    if parsed.conversation is None:
        return _Continuation()
    if is_conversation_id(parsed.conversation):
        return await _conversation_object(store, parsed, parsed.conversation, budget)
    head = await store.conversation_head(parsed.conversation, touch=False)
    chain = await store.chain(head.id, max_bytes=budget) if head is not None else None
    if head is None or chain is None:  # no head, or evicted between the two reads: a fresh start
        return _Continuation(expected_head="")
    return _Continuation(chain.transcript(), chain.complete, parent_id=head.id, expected_head=head.id)


async def _conversation_object(store: ResponseStore, parsed: ResponsesRequest, conversation_id: str,
                               budget: int) -> _Continuation:
    try:
        tail = await store.conversation_tail(conversation_id, max_bytes=budget,
                                             check_ids=[given["id"] for given in parsed.input_items])
    except UnknownConversationError:
        raise UnknownConversationError.on(conversation_id, param="conversation") from None
    if any(item["type"] == mcp_approvals.RESPONSE for item in parsed.input_items):
        parsed.earlier_items = [item.item for item in tail.items]  # the approval requests answered
    for index, given in enumerate(parsed.input_items):
        if given["id"] in tail.taken:  # refused now, not after the model ran: the append would be
            raise InvalidRequestError(f"An item with id '{echo(given['id'])}' is already in conversation "
                                      f"'{conversation_id}'; send only the new items.", param=f"input[{index}].id")
    return _Continuation(transcript([(item.item, item.model) for item in tail.items], parsed.client_tools.flat_name),
                         tail.complete,
                         conversation_id=conversation_id, expected_last=tail.last_id)


async def _within_window(app: web.Application, store: ResponseStore, parsed: ResponsesRequest,
                         turn: RouteTurn | None, read: list[ReadFile]) -> tuple[_Continuation, list[Any]]:
    """The continuation, its history cut to the context window (or a 400, see context_budget.py).
    Under `truncation: "auto"` the files read into the turn's input are cut too, with a note, when
    the input alone is over the window."""
    instructions = [{"role": "system", "content": parsed.instructions}] if parsed.instructions else []
    fixed = context_budget.fixed_tokens([*instructions, *parsed.messages, *parsed.chat_tools],
                                        parsed.max_output_tokens)
    if parsed.previous_response_id is None and parsed.conversation is None \
            and fixed <= context_budget.SMALLEST_WINDOW:
        return _Continuation(), []  # fits any model: no window to look up
    window = await context_window(app, turn)
    if fixed > window and read and parsed.truncation == "auto" and cut_files(read, fixed - window):
        fixed = context_budget.fixed_tokens([*instructions, *parsed.messages, *parsed.chat_tools],
                                            parsed.max_output_tokens)
    continuation = await _continuation(store, parsed, context_budget.history_bytes(window, fixed))
    history = context_budget.fit(continuation.transcript, complete=continuation.complete, window=window,
                                 fixed=fixed, truncation=parsed.truncation)
    return continuation, history
