// The Vercel AI SDK against the gateway, as its users call it: `openai(model)` is the Responses
// API (the SDK's default). Prints what the SDK hands the user: the whole reply's text and
// reasoningText, and a stream's reasoning deltas and text. Arguments: base URL (with /v1), key.
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText } from 'ai';

const [baseURL, apiKey] = process.argv.slice(2);
const openai = createOpenAI({ baseURL, apiKey });

const whole = await generateText({ model: openai('agent-gateway'), prompt: 'What is 6*7?', maxRetries: 0 });
// a stream of the reasoning is asked for as from OpenAI's service: as a summary (the SDK sends
// `reasoning` only for a model it knows to reason, or with forceReasoning)
const stream = streamText({ model: openai('agent-gateway'), prompt: 'What is 6*7?', maxRetries: 0,
  providerOptions: { openai: { forceReasoning: true, reasoningSummary: 'auto' } } });
const reasoningDeltas = [];
const kinds = [];
for await (const part of stream.fullStream) {
  kinds.push(part.type);
  if (part.type === 'reasoning-delta') reasoningDeltas.push(part.text ?? part.delta);
  if (part.type === 'error') throw part.error;
}
console.log(JSON.stringify({
  text: whole.text,
  reasoningText: whole.reasoningText,
  streamedReasoning: reasoningDeltas,
  streamedText: await stream.text,
  streamedReasoningText: await stream.reasoningText,
  kinds,
}));
