// Reads boundloop's chat endpoint with the `ai` package's own client pieces: `DefaultChatTransport`
// (what `useChat` sends and how it parses and validates each part against `uiMessageChunkSchema`)
// and `readUIMessageStream` (how it assembles the assistant message). Prints JSON on stdout.
//
//   node read.mjs chat BASE_URL CHAT_ID TEXT       one turn; approves every call the run asks
//                                                  about, then sends the approvals back
//   node read.mjs reconnect BASE_URL CHAT_ID TEXT  hangs up once a call's input is available,
//                                                  then reconnects (GET CHAT_ID/stream)
//   node read.mjs question BASE_URL CHAT_ID TEXT TOOL REPLY
//                                                  a chat (`AbstractChat`, what `useChat` runs)
//                                                  answers the model's question (the call of
//                                                  TOOL) with `addToolOutput`, which sends it
//                                                  back by itself (sendAutomaticallyWhen)
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithToolCalls,
  readUIMessageStream,
} from 'ai';

const [scenario, baseUrl, chatId, text, askTool, reply] = process.argv.slice(2);
const transport = new DefaultChatTransport({ api: `${baseUrl}/chat/` });
const user = { id: 'u1', role: 'user', parts: [{ type: 'text', text }] };

async function assemble(stream, message) {
  let last;
  let failure;
  for await (const snapshot of readUIMessageStream({
    stream,
    message,
    onError: error => {
      failure = String(error);
    },
    terminateOnError: true,
  })) {
    last = snapshot;
  }
  if (failure !== undefined) throw new Error(failure);
  return last;
}

function send(messages, abortSignal) {
  return transport.sendMessages({
    chatId,
    messages,
    trigger: 'submit-message',
    messageId: undefined,
    abortSignal,
  });
}

async function chat() {
  const first = await assemble(await send([user]));
  const waiting = first.parts.filter(part => part.state === 'approval-requested');
  if (waiting.length === 0) return { first };
  // What `addToolApprovalResponse({ id, approved: true })` does to the message before useChat
  // sends it back (sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses).
  const decided = structuredClone(first);
  for (const part of decided.parts) {
    if (part.state === 'approval-requested') {
      part.state = 'approval-responded';
      part.approval = { ...part.approval, approved: true };
    }
  }
  const final = await assemble(await send([user, decided]), structuredClone(decided));
  return { first, final };
}

async function reconnect() {
  const hangUp = new AbortController();
  const reader = (await send([user], hangUp.signal)).getReader();
  const before = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error('the stream ended before any call input was available');
    before.push(value);
    if (value.type === 'tool-input-available') break;
  }
  hangUp.abort();
  await reader.cancel().catch(() => {});
  const replay = await transport.reconnectToStream({ chatId });
  if (replay === null) throw new Error('no stream to reconnect to (204)');
  const final = await assemble(replay);
  return { before: before.map(part => part.type), final };
}

// The chat state a framework keeps (React's, Vue's): the messages and the status, in memory.
class State {
  status = 'ready';
  error = undefined;
  messages = [];
  pushMessage = message => {
    this.messages = [...this.messages, message];
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index, message) => {
    this.messages = this.messages.map((old, at) => (at === index ? message : old));
  };
  snapshot = thing => structuredClone(thing);
}

class Chat extends AbstractChat {
  constructor(init) {
    super({ ...init, state: new State() });
  }
}

async function question() {
  const waiting = [];
  const errors = [];
  const finished = () => new Promise(resolve => waiting.push(resolve));
  const chat = new Chat({
    id: chatId,
    transport,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    onFinish: ({ message, finishReason, isError }) => waiting.shift()?.({ message, finishReason, isError }),
    onError: error => errors.push(String(error)),
  });
  const firstDone = finished();
  await chat.sendMessage({ text });
  await firstDone;
  const first = structuredClone(chat.lastMessage);
  const asked = first.parts.find(part => part.type === `tool-${askTool}` && part.state === 'input-available');
  if (asked === undefined) return { first, errors };
  const finalDone = finished();
  await chat.addToolOutput({ tool: askTool, toolCallId: asked.toolCallId, output: reply });
  const end = await finalDone;
  return { first, final: chat.lastMessage, messages: chat.messages.length, end, errors };
}

const scenarios = { chat, reconnect, question };
process.stdout.write(JSON.stringify(await scenarios[scenario]()));
