// openai-node as a client of the gateway: one scenario per run, its outcome printed as JSON.
//   node client.mjs SCENARIO     env: GATEWAY_URL (…/v1), GATEWAY_KEY, MODEL, MEMORY_ID (optional)
// An error the SDK throws is an outcome too: {"thrown": {name, status, error, message}}.
import OpenAI from "openai";

const scenario = process.argv[2];
const model = process.env.MODEL;
const client = new OpenAI({
  baseURL: process.env.GATEWAY_URL,
  apiKey: process.env.GATEWAY_KEY,
  maxRetries: 0,
  timeout: 20_000,
  defaultHeaders: process.env.MEMORY_ID ? { memoryId: process.env.MEMORY_ID } : {},
});

async function streamed(options) {
  const stream = await client.chat.completions.create({ model, stream: true, ...options });
  let content = "";
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks += 1;
    content += chunk.choices[0]?.delta?.content ?? "";
    if (chunk.usage) usage = chunk.usage;
  }
  return { content, usage, chunks };
}

const scenarios = {
  async chat() {
    const { data, response } = await client.chat.completions
      .create({ model, messages: [{ role: "user", content: "Hello?" }] })
      .withResponse();
    return { content: data.choices[0].message.content, usage: data.usage, requestId: response.headers.get("x-request-id") };
  },
  async stream() {
    return streamed({ messages: [{ role: "user", content: "Hello?" }] });
  },
  async streamUsage() {
    return streamed({ messages: [{ role: "user", content: "Hello?" }], stream_options: { include_usage: true } });
  },
  async abort() {
    // the client walks away after the first chunk: the AbortController ends the connection
    const controller = new AbortController();
    const stream = await client.chat.completions.create(
      { model, stream: true, messages: [{ role: "user", content: "Hello?" }] },
      { signal: controller.signal },
    );
    for await (const chunk of stream) {
      controller.abort();
      return { first: chunk.choices[0]?.delta ?? null };
    }
    return { first: null };
  },
  async responses() {
    const response = await client.responses.create({ model, input: "Hello?" });
    return { text: response.output_text, status: response.status };
  },
  async responsesStream() {
    const stream = await client.responses.create({ model, input: "Hello?", stream: true });
    const types = [];
    let text = "";
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === "response.output_text.delta") text += event.delta;
    }
    return { text, types };
  },
  async embeddings() {
    // openai-node asks for base64 by default and decodes it to floats itself
    const result = await client.embeddings.create({ model, input: ["one", "two"] });
    return { count: result.data.length, dimensions: result.data[0].embedding.length, first: result.data[0].embedding.slice(0, 3) };
  },
  async models() {
    const names = [];
    for await (const entry of client.models.list()) names.push(entry.id);
    return { names };
  },
};

let outcome;
try {
  outcome = await scenarios[scenario]();
} catch (error) {
  outcome = {
    thrown: { name: error.constructor.name, status: error.status ?? null, error: error.error ?? null, message: String(error.message) },
  };
}
process.stdout.write(JSON.stringify(outcome));
