// Drives boundloop's AG-UI endpoint with the official @ag-ui/client HttpAgent and prints, as one
// JSON line, what the agent assembled: its messages, its pending interrupts and each run's
// result. tests/test_agui_client.py serves the endpoint under uvicorn and reads this output.
//
//   node agent.mjs '{"url": "http://127.0.0.1:PORT/agui", "threadId": "t", "scenario": "run", ...}'
//
// Scenarios:
//   run        one run on the conversation `messages`.
//   approve    a run that stops waiting for approvals, then a run answering every interrupt with
//              `payload` (buildResumeArray), as a front end's Approve button does.
//   reconnect  a run whose connection is cut (the request aborted) after the first event of
//              type `cutAfter`; then the same run again with `Last-Event-ID`: the id of the last
//              event received, read from the stream's `id:` lines by the agent's own `fetch`.
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const config = JSON.parse(process.argv[2]);
const decoder = new TextDecoder();
const encoder = new TextEncoder();
let lastId = null;
let cutDone = false;
let errored = false;

// The agent's fetch: reads each server-sent event's `id:` as it passes (HttpAgent's parser
// ignores ids), and in the reconnect scenario cuts the connection after the chosen event.
async function recordingFetch(url, init) {
  const inner = new AbortController();
  init.signal?.addEventListener("abort", () => inner.abort());
  const response = await fetch(url, { ...init, signal: inner.signal });
  if (!response.ok || !response.body) return response;
  const reader = response.body.getReader();
  let buffer = "";
  const body = new ReadableStream({
    async pull(controller) {
      if (cutDone && !errored) {
        // After the events before the cut were read (erroring at once would drop them).
        errored = true;
        controller.error(new DOMException("the connection was cut", "AbortError"));
        return;
      }
      const { value, done } = await reader.read();
      if (done) {
        controller.close();
        return;
      }
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const chunk = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        controller.enqueue(encoder.encode(chunk + "\n\n"));
        let type = null;
        for (const line of chunk.split("\n")) {
          if (line.startsWith("id: ")) lastId = line.slice(4);
          if (line.startsWith("data: ")) type = JSON.parse(line.slice(6)).type;
        }
        if (config.scenario === "reconnect" && !cutDone && type === config.cutAfter) {
          cutDone = true;
          inner.abort(); // the server sees the client go away
          return;
        }
      }
    },
  });
  return new Response(body, { status: response.status, headers: response.headers });
}

const agent = new HttpAgent({
  url: config.url,
  threadId: config.threadId,
  initialMessages: config.messages,
  headers: config.headers ?? {},
  fetch: recordingFetch,
});
const results = [];
const errors = [];
agent.subscribe({
  onRunErrorEvent: ({ event }) => {
    errors.push({ message: event.message, code: event.code });
  },
});

async function run(parameters) {
  const { result } = await agent.runAgent(parameters);
  results.push(result ?? null);
}

await run({ runId: config.runId });
if (config.scenario === "approve") {
  const responses = Object.fromEntries(
    agent.pendingInterrupts.map((interrupt) => [interrupt.id, { status: "resolved", payload: config.payload }]),
  );
  results.push({ interrupts: agent.pendingInterrupts });
  await run({ runId: config.secondRunId, resume: buildResumeArray(agent.pendingInterrupts, responses) });
} else if (config.scenario === "reconnect") {
  results.push({ cutAt: lastId, messagesAtCut: structuredClone(agent.messages) });
  agent.headers = { ...agent.headers, "Last-Event-ID": lastId };
  await run({ runId: config.runId });
}
process.stdout.write(
  JSON.stringify({ messages: agent.messages, pendingInterrupts: agent.pendingInterrupts, results, errors }) + "\n",
);
